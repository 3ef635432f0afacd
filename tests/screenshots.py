"""`make screenshots`: every dashboard page at 1440x900 and 390x844, in English and Chinese,
into screenshots/<language>/ (git-ignored), for a reviewer to see the whole inspector at once.

Not a test module (its name does not start with test_: `make test` never collects it); `make
screenshots` runs it through pytest for the browser tests' fixtures (Chromium, a live server
over a throwaway ORCA_HOME and database) and fills a small demo store first.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from memory.auth import api_key_create
from memory.memories import (
    memory_create,
    memory_delete,
    memory_expire,
    memory_supersede,
    memory_update,
)
from memory.models import MainMessage, ShortTermMemory
from subagents.runs import subagent_finish, subagent_record
from tests.factories import add_message, consolidate_session
from tests.test_ui_browser import BROWSER_TESTS, SIZES, browser  # noqa: F401 (fixtures)

pytestmark = BROWSER_TESTS
FOLDER = settings.BASE_DIR / "screenshots"
LANGUAGES = {"en": "en-US", "zh-hans": "zh-CN"}  # the folder, and the browser's locale


def demo_store() -> dict[str, str]:
    """Two agents' sessions in English and Chinese (one of 240 messages), a sub-agent run,
    summaries, a consolidation, memories with a history, an expired, a superseded and a
    deleted one, and an API key. Returns the addresses of the pages that show them (the
    admin's too), and of a search and a filter that find nothing."""
    start = timezone.now() - timedelta(days=2)

    def at(minutes: int) -> object:
        return start + timedelta(minutes=minutes)

    turns = [
        ("user", "我在准备下个月去成都的旅行，想住在离地铁站近的地方。"),
        ("assistant", "好的，我会优先推荐地铁站步行十分钟以内的酒店。你对预算有要求吗？"),
        ("user", "每晚不超过五百元。另外我不吃辣，餐厅推荐请注意这一点。"),
        ("assistant", "明白：预算每晚 500 元以内，餐厅避开辣菜。我先整理几家酒店给你。"),
    ]
    for n, (role, text) in enumerate(turns):
        add_message(
            text, role=role, agent_id="travel-agent", session_id="trip-chengdu", timestamp=at(n)
        )
    ask = add_message(
        "Find three hotels near a metro station in Chengdu under 500 CNY a night.",
        agent_id="travel-agent",
        session_id="trip-chengdu",
        timestamp=at(5),
    )
    subagent_record(
        parent=ask,
        agent_name="hotel-search",
        role="assistant",
        content="Searching hotels near Chunxi Road and Tianfu Square.",
    )
    subagent_record(
        parent=ask,
        agent_name="hotel-search",
        role="assistant",
        content="12 hotels found; 3 under 500 CNY within 800 m of a metro station.",
    )
    subagent_finish(
        parent=ask,
        agent_name="hotel-search",
        content="1. Chunxi Inn (420 CNY, 300 m to line 2)\n2. Tianfu Garden Hotel (480 CNY)\n3. Kuanzhai Courtyard (390 CNY)",
    )
    add_message(
        "我更喜欢安静的酒店，最好有早餐。",
        agent_id="travel-agent",
        session_id="trip-chengdu",
        timestamp=at(8),
    )
    ShortTermMemory.objects.create(
        agent_id="travel-agent",
        session_id="trip-chengdu",
        content="用户计划下个月去成都，预算每晚 500 元以内，不吃辣，偏好安静、含早餐的酒店。",
    )
    consolidate_session(agent_id="travel-agent", session_id="trip-chengdu")

    for n in range(240):  # a long session: three pages of the timeline
        role = "user" if n % 2 == 0 else "assistant"
        text = (
            f"Step {n // 2 + 1}: the migration of table orders_{n // 2} ran in {n * 7 % 90 + 5} s."
            if role == "assistant"
            else f"Please run migration step {n // 2 + 1} and tell me how long it took."
        )
        add_message(
            text,
            role=role,
            agent_id="ops-agent",
            session_id="db-migration",
            timestamp=at(60 + n),
            summarize=False,
        )
    for n in range(6):
        add_message(
            f"Is the backup of night {n + 1} complete?",
            agent_id="ops-agent",
            session_id=f"backup-check-{n + 1}",
            timestamp=at(400 + n * 30),
        )

    prefers = memory_create(
        agent_id="travel-agent",
        content="用户不吃辣，推荐餐厅时避开川菜中的辣菜。",
        memory_type="preference",
        actor="api",
        confidence=0.8,
        source_session="trip-chengdu",
    )
    memory_update(
        prefers,
        actor="ui:admin",
        content="用户不吃辣：推荐餐厅时避开辣菜，可推荐清淡的粤菜或本地面馆。",
        confidence=0.9,
    )
    memory_update(prefers, actor="ui:admin", expires_at=timezone.now() + timedelta(days=90))
    memory_create(
        agent_id="ops-agent",
        content="Migrations run on Sunday nights, never during business hours.",
        memory_type="decision",
        actor="api",
    )
    memory_create(
        agent_id="ops-agent",
        content="The orders database is PostgreSQL 18 with pgvector.",
        memory_type="fact",
        actor="api",
        confidence=0.95,
    )
    gone = memory_create(
        agent_id="ops-agent",
        content="The old backup server is backup-01.",
        memory_type="fact",
        actor="api",
    )
    memory_delete(gone, actor="ui:admin")
    moved = memory_create(
        agent_id="travel-agent",
        content="用户住在北京。",
        memory_type="fact",
        actor="api",
    )
    moves = memory_create(
        agent_id="travel-agent",
        content="用户搬到了上海。",
        memory_type="fact",
        actor="consolidation",
    )
    memory_update(moves, actor="ui:admin", content="用户搬到了上海浦东。")  # now curated
    memory_supersede(moved, moves, actor="consolidation")
    memory_expire(
        memory_create(
            agent_id="ops-agent",
            content="Backups run at 02:00 UTC until the new server is ready.",
            memory_type="project",
            actor="api",
        ),
        actor="ui:admin",
    )
    key, _secret = api_key_create(agent_id="travel-agent", name="phone")

    parent = MainMessage.objects.get(pk=ask.pk)
    return {
        "dashboard": "/",
        "sessions": "/sessions/",
        "session": "/sessions/travel-agent/trip-chengdu/",
        "long-session": "/sessions/ops-agent/db-migration/?page=2",
        "subagent-run": f"/messages/{parent.pk}/subagent/",
        "memories": "/memories/",
        "memory-history": f"/memories/{prefers.pk}/",
        "memory-deleted": f"/memories/{gone.pk}/",
        "memory-superseded": f"/memories/{moved.pk}/",
        "memory-curated": f"/memories/{moves.pk}/",
        "memory-edit": f"/memories/{moves.pk}/edit/",
        "memories-all": "/memories/?state=all",
        "memories-none": "/memories/?q=nowhere",
        "search": "/search/?q=酒店",
        "search-none": "/search/?q=nowhere",
        "forget": "/forget/",
        "not-found": "/sessions/travel-agent/no-such-session/",
        "admin": "/admin/",
        "admin-memories": "/admin/memory/longtermmemory/",
        "admin-memory": f"/admin/memory/longtermmemory/{prefers.pk}/change/",
        "admin-keys": "/admin/memory/apikey/",
        "admin-key": f"/admin/memory/apikey/{key.pk}/change/",
        "admin-key-add": "/admin/memory/apikey/add/",
    }


def shoot(page, folder: Path, name: str) -> None:
    for size in SIZES:
        page.set_viewport_size(size)
        page.screenshot(path=folder / f"{name}-{size['width']}.png", full_page=True)


@pytest.mark.parametrize("language", LANGUAGES)
def test_screenshots(browser, live_server, admin_user, language):  # noqa: F811
    pages = demo_store()
    folder = FOLDER / language
    folder.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport=SIZES[0], locale=LANGUAGES[language])
    context.set_default_timeout(10000)
    page = context.new_page()
    page.goto(live_server.url + "/login/")
    shoot(page, folder, "login")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "password")
    page.click("main button[type=submit]")
    page.wait_for_url(live_server.url + "/")
    for name, url in pages.items():
        page.goto(live_server.url + url)
        shoot(page, folder, name)
    # The context preview: the session page after Preview, the explanation unfolded.
    page.goto(live_server.url + pages["session"])
    page.fill("input[name=query]", "成都 酒店")
    page.click("#context button[type=submit]")
    page.locator("table.layers").wait_for()
    shoot(page, folder, "context-preview")
    # Forget: the preview of a session's deletion, then the receipt it leaves.
    page.goto(live_server.url + pages["forget"])
    page.select_option("select[name=scope]", "session")
    page.fill("input[name=agent_id]", "ops-agent")
    page.fill("input[name=session_id]", "backup-check-6")
    page.click("main form button[type=submit]")
    page.locator("#forget-preview").wait_for()
    shoot(page, folder, "forget-preview")
    page.click("#forget-preview button[name=confirm]")
    page.locator("#forget-preview").wait_for(state="detached")
    shoot(page, folder, "forget-receipt")
    context.close()
