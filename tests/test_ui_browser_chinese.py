"""Every page of the dashboard and the admin, rendered in Chinese in Chromium, shows no English:
no msgid of the catalogue (a string someone forgot to translate) and no other English word (a
value shown as the code holds it: True, user, preference, done, a context reason...).

The store is all Chinese, ids and names included, so any Latin word on a page is the
dashboard's own; the few that belong in Chinese text too (the brand, UTC, JSON...) are listed.
"""

from __future__ import annotations

import re
from datetime import timedelta

from babel.messages.pofile import read_po
from django.contrib.auth import get_user_model
from django.utils import timezone

from memory.auth import api_key_create
from memory.consolidation import request_consolidation, run_consolidation
from memory.memories import (
    memory_create,
    memory_delete,
    memory_expire,
    memory_supersede,
    memory_update,
)
from memory.models import ShortTermMemory
from subagents.runs import subagent_finish, subagent_record
from tests.factories import add_message
from tests.test_i18n import CATALOGUE
from tests.test_ui_browser import BROWSER_TESTS, SIZES, browser  # noqa: F401 (fixtures)

pytestmark = BROWSER_TESTS

AGENT, SESSION = "旅行助手", "成都之行"
# Latin words a Chinese page may show: the product's name, names of formats and standards,
# the switch's "English", the config syntax a degraded-service note quotes, and an API key's
# prefix (random letters, "orca_x-bu3k": read as a word, "bu" failed the test by chance).
ALLOWED = re.compile(
    r"orca-memory|UTC|JSON|API|MCP|HTTP|English|Django|\[embedding\] provider = none|"
    r"Bearer|Authorization|ID|PostgreSQL|SQLite|(?i:token)|orca_[\w-]{6}"
)
# The day consolidation's rules write at the start of a memory's text ("[3 December 2026]"):
# the memory's content, which the page shows as it is.
DAY_LABEL = re.compile(r"\[\d{1,2} [A-Z][a-z]+ \d{4}\]")
LATIN_WORD = re.compile(r"\b[A-Za-z][A-Za-z']+\b")
# What a person reads: the text, and (on the dashboard's pages) tooltips, placeholders,
# labels and confirmations. The admin's attributes are Django's own, some of them not in its
# Chinese catalogue (its calendar's "Today (date)", a boolean icon's alt "True").
PAGE_TEXT = """(attributes) => {
  const parts = [document.title, document.body.innerText];
  for (const el of attributes ? document.querySelectorAll('*') : []) {
    for (const name of ['title', 'placeholder', 'aria-label', 'alt', 'hx-confirm']) {
      const value = el.getAttribute(name);
      if (value) parts.push(value);
    }
    if (el.tagName === 'INPUT' && ['submit', 'button'].includes(el.type)) parts.push(el.value);
  }
  return parts.join('\\n');
}"""


def english_phrases() -> list[str]:
    """The catalogue's msgids cut at their placeholders and markup: each piece with an English
    word of three letters or more, as a page would show it."""
    with CATALOGUE.open("rb") as f:
        catalogue = read_po(f, locale="zh_Hans")
    phrases = set()
    for message in catalogue:
        for msgid in message.id if isinstance(message.id, tuple) else (message.id,):
            for piece in re.split(r"%\(\w+\)[sd]|%[sd]|<[^>]+>|\{\{[^}]*\}\}", msgid or ""):
                piece = " ".join(piece.split()).strip(" .,:;()·“”\"'")
                if re.search(r"[A-Za-z]{3,}", piece):
                    phrases.add(piece)
    return sorted(phrases, key=len, reverse=True)


def english_on(text: str, phrases: list[str]) -> list[str]:
    text = " ".join(ALLOWED.sub(" ", DAY_LABEL.sub(" ", text)).split())
    found = [p for p in phrases if re.search(rf"(?<![A-Za-z]){re.escape(p)}(?![A-Za-z])", text)]
    found += [f"word: {w}" for w in LATIN_WORD.findall(text)]
    return sorted(set(found))


def chinese_store() -> dict[str, str]:
    """An agent's two sessions, a sub-agent run, a summary, a consolidation, memories with a
    history of every kind of change (edit, expiry, supersession, deletion) and an API key."""
    start = timezone.now() - timedelta(days=2)
    earlier = add_message(
        "我对花生过敏，吃饭时请提醒我。",
        agent_id=AGENT,
        session_id="上周",
        timestamp=start,
        summarize=False,
    )
    add_message(
        "好的，我会记住你对花生过敏。",
        role="assistant",
        agent_id=AGENT,
        session_id="上周",
        timestamp=start + timedelta(minutes=1),
        summarize=False,
    )
    turns = [
        ("user", "我下个月去成都，想住在离地铁站近的地方。"),
        ("assistant", "好的，我会优先推荐地铁站步行十分钟以内的酒店。你对预算有要求吗？"),
        ("user", "每晚不超过五百元。我不吃辣，也对花生过敏。"),
        ("assistant", "明白：预算每晚五百元以内，餐厅避开辣菜和花生。"),
    ]
    for n, (role, text) in enumerate(turns):
        ask = add_message(
            text,
            role=role,
            agent_id=AGENT,
            session_id=SESSION,
            timestamp=start + timedelta(days=1, minutes=n),
            summarize=False,  # the rules' summaries say "user:" and "assistant:" (their text)
        )
    subagent_record(parent=ask, agent_name="酒店搜索", role="assistant", content="正在搜索酒店。")
    subagent_finish(parent=ask, agent_name="酒店搜索", content="找到三家五百元以内的酒店。")
    ShortTermMemory.objects.create(
        agent_id=AGENT, session_id=SESSION, content="用户下个月去成都，预算每晚五百元以内。"
    )
    run = request_consolidation(agent_id=AGENT, session_id=SESSION, trigger="session_end")
    run_consolidation(run.pk)

    tea = memory_create(
        agent_id=AGENT,
        content="用户喜欢喝绿茶。",
        memory_type="preference",
        actor="api",
        confidence=0.7,
        source_messages=[earlier.pk],
    )
    memory_update(tea, actor="ui:管理员", content="用户喜欢喝乌龙茶。", confidence=0.9)
    memory_expire(tea, actor="ui:管理员")
    older = memory_create(agent_id=AGENT, content="用户住在北京。", memory_type="fact", actor="api")
    newer = memory_create(
        agent_id=AGENT, content="用户搬到了上海。", memory_type="fact", actor="consolidation"
    )
    memory_update(newer, actor="ui:管理员", content="用户搬到了上海浦东。")  # now curated
    memory_supersede(older, newer, actor="consolidation")
    gone = memory_create(
        agent_id=AGENT, content="旧的酒店清单。", memory_type="project", actor="api"
    )
    memory_delete(gone, actor="ui:管理员")
    key, _secret = api_key_create(agent_id=AGENT, name="手机")
    session = f"/sessions/{AGENT}/{SESSION}/"
    return {
        "dashboard": "/",
        "sessions": "/sessions/",
        "session": session,
        "subagent-run": f"/messages/{ask.pk}/subagent/",
        "search": "/search/?q=花生",
        "memories": "/memories/",
        "memories-all": "/memories/?state=all",
        "memory": f"/memories/{tea.pk}/",
        "memory-superseded": f"/memories/{older.pk}/",
        "memory-curated": f"/memories/{newer.pk}/",
        "memory-edit": f"/memories/{newer.pk}/edit/",
        "memory-deleted": f"/memories/{gone.pk}/",
        "forget": "/forget/",
        "not-found": "/sessions/无此代理/无此会话/",
        "admin": "/admin/",
        "admin-messages": "/admin/memory/mainmessage/",
        "admin-summaries": "/admin/memory/shorttermmemory/",
        "admin-memories": "/admin/memory/longtermmemory/",
        "admin-memory": f"/admin/memory/longtermmemory/{tea.pk}/change/",
        "admin-history": "/admin/memory/longtermmemoryhistory/",
        "admin-runs": "/admin/memory/consolidationrun/",
        "admin-keys": "/admin/memory/apikey/",
        "admin-key": f"/admin/memory/apikey/{key.pk}/change/",
        "admin-key-add": "/admin/memory/apikey/add/",
        "admin-subagents": "/admin/subagents/subagentmessage/",
    }


def test_no_chinese_page_shows_english(browser, live_server):  # noqa: F811
    get_user_model().objects.create_superuser("管理员", password="password")
    pages = chinese_store()
    phrases = english_phrases()
    context = browser.new_context(viewport=SIZES[0], locale="zh-CN")
    context.set_default_timeout(10000)
    page = context.new_page()
    page.goto(live_server.url + "/login/")
    page.add_style_tag(content="pre, code { display: none }")
    found = {"login": english_on(page.evaluate(PAGE_TEXT, True), phrases)}
    page.fill("input[name=username]", "管理员")
    page.fill("input[name=password]", "password")
    page.click("main button[type=submit]")
    page.wait_for_url(live_server.url + "/")
    shown: dict[str, str] = {}

    def read(name: str) -> None:
        # Folded parts open (a memory's history, a transcript: htmx loads them on toggle);
        # the JSON sent to the model and the commands in <code> are not the page's words.
        page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
        page.wait_for_load_state("networkidle")
        page.add_style_tag(content="pre, code { display: none }")
        shown[name] = page.evaluate(PAGE_TEXT, not name.startswith("admin"))
        found[name] = english_on(shown[name], phrases)

    for name, url in pages.items():
        page.goto(live_server.url + url)
        read(name)
    page.goto(live_server.url + pages["session"])
    page.fill("input[name=query]", "花生过敏")
    page.click("#context button[type=submit]")
    page.locator("table.layers").wait_for()
    read("context-preview")
    context.close()
    # The values in words: a context's reasons from the memory package, a history's booleans.
    assert re.search(r"#\d+: 与消息 #\d+ 说的相同", shown["context-preview"])
    assert "匹配了查询的 3 个双字词中的 3 个" in shown["context-preview"]
    assert "向量搜索不可用：没有配置嵌入服务" in shown["search"]
    assert "人工整理: 否 → 是" in shown["memory-curated"]
    found = {name: words for name, words in found.items() if words}
    report = "\n".join(f"{name}: {', '.join(words)}" for name, words in found.items())
    assert found == {}, f"English on Chinese pages:\n{report}"
