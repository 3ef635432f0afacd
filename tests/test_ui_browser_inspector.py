"""The inspector's session page in Chromium: the context preview's explanation, the
consolidation panel, sub-agent markers, reading a long session; and how fast its pages load
at 10,000 memories and a 1,000-message session.

Screenshots land in test-results/ (inspector_*.png).
"""

from __future__ import annotations

import json
import re

from memory.memories import memory_create
from memory.messages import message_add
from tests.test_ui_browser import BROWSER_TESTS, browser, page, shoot  # noqa: F401 (fixtures)

pytestmark = BROWSER_TESTS


def test_the_preview_leads_with_its_explanation_and_the_json_as_sent(
    conversation,
    page,  # noqa: F811
    live_server,
):
    from playwright.sync_api import expect

    earlier = message_add(
        agent_id="agent-a", session_id="s-0", role="user", content="I brew green tea at seven."
    )
    for n in range(2):
        memory_create(
            agent_id="agent-a",
            content=f"note {n}: the office kitchen stocks green tea among many other drinks",
            memory_type="fact",
            actor="api",
        )
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"{live_server.url}/sessions/agent-a/s-1/")
    page.fill("input[name=query]", "green tea")
    page.click("button:has-text('Preview')")

    overview = page.locator("table.layers")
    expect(overview.locator("tbody tr")).to_have_count(4)
    expect(overview.locator("tbody tr").first).to_contain_text("Long-term")
    expect(overview.locator("tbody tr").first).to_contain_text("+1 out")
    long_term = page.locator(".layer-long_term")
    expect(long_term.locator(".items")).to_contain_text("score 1.000")
    expect(long_term.locator(".left-out")).to_contain_text("ranked below the 2 chosen")
    shoot(page, "inspector_preview")

    # Copy puts the JSON on the clipboard; it is what the page shows.
    page.locator("details.sent > summary").click()
    page.locator("button.copy").click()
    expect(page.locator("button.copy")).to_have_text("Copied")
    copied = page.evaluate("navigator.clipboard.readText()")
    sent = json.loads(copied)
    assert sent[0]["role"] == "system" and "green tea" in sent[0]["content"]
    assert json.loads(page.locator("#messages-json").inner_text()) == sent

    # A recalled message's link opens its session at that message.
    page.locator(f".layer-recall a:has-text('#{earlier.pk}')").click()
    page.wait_for_url(f"**/sessions/agent-a/s-0/?at={earlier.pk}#message-{earlier.pk}")
    expect(page.locator(f"#message-{earlier.pk}")).to_be_visible()


def test_a_built_preview_takes_half_the_page_and_an_empty_layer_says_nothing(
    conversation,
    page,  # noqa: F811
    live_server,
):
    """At 1440 px the preview had the side column's 24rem (~350 px of text); at 390 px it
    takes the screen's width as before. A layer with no item says "nothing" without a number
    in front of it."""
    from playwright.sync_api import expect

    page.goto(f"{live_server.url}/sessions/agent-a/s-1/")
    side = page.locator("#context-preview").bounding_box()["width"]
    assert side < 420  # before a preview: the side column
    page.fill("input[name=query]", "green tea")
    page.click("button:has-text('Preview')")
    expect(page.locator("table.layers")).to_be_visible()
    assert page.locator("#context-preview").bounding_box()["width"] > 540
    recall = page.locator(".layer-recall")  # nothing recalled: no earlier session
    expect(recall.locator("ol.items")).to_have_count(0)
    expect(recall.locator("p.muted.small").last).to_have_text("nothing")
    shoot(page, "inspector_preview_wide")
    page.set_viewport_size({"width": 390, "height": 844})
    assert page.locator("#context-preview").bounding_box()["width"] <= 390


def test_the_copy_button_is_hidden_without_javascript(
    browser,  # noqa: F811
    live_server,
    admin_user,
    conversation,
):
    from playwright.sync_api import expect

    context = browser.new_context(java_script_enabled=False)
    context.set_default_timeout(5000)
    page = context.new_page()  # noqa: F811
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "password")
    page.click("button:has-text('Sign in')")
    page.goto(f"{live_server.url}/sessions/agent-a/s-1/")
    page.fill("input[name=query]", "green tea")
    page.click("button:has-text('Preview')")
    expect(page.locator("table.layers")).to_be_visible()
    page.locator("details.sent > summary").click()
    expect(page.locator("#messages-json")).to_contain_text('"role": "system"')
    expect(page.locator("button.copy")).to_be_hidden()
    context.close()


def test_the_consolidation_panel_links_each_runs_memories(
    conversation,
    page,  # noqa: F811
    live_server,
):
    from playwright.sync_api import expect

    from memory.models import ConsolidationRun, LongTermMemory
    from tests.factories import consolidate_session

    message_add(
        agent_id="agent-a", session_id="s-1", role="user", content="I am allergic to peanuts."
    )
    run = consolidate_session(agent_id="agent-a", session_id="s-1")
    ConsolidationRun.objects.create(
        agent_id="agent-a",
        session_id="s-1",
        trigger="turns",
        status="failed",
        reason="the chat model's answer was not valid JSON, twice",
    )
    made = LongTermMemory.objects.get(source_session="s-1")

    page.goto(f"{live_server.url}/sessions/agent-a/s-1/")
    panel = page.locator("#consolidation")
    expect(panel.locator(".consolidation-run")).to_have_count(2)
    expect(panel.locator(f"#run-{run.pk}")).to_contain_text("1 created · 0 merged")
    expect(panel.locator(".badge.status-failed")).to_have_text("failed")
    expect(panel).to_contain_text("not valid JSON")
    shoot(page, "inspector_consolidation")
    panel.locator(f"a:has-text('#{made.pk}')").click()
    page.wait_for_url(f"**/memories/{made.pk}/")
    expect(page.locator(f"#memory-{made.pk}")).to_contain_text("allergic to peanuts")


def test_runs_are_flagged_in_the_list_and_marked_on_the_message_that_started_them(
    conversation,
    page,  # noqa: F811
    live_server,
):
    from playwright.sync_api import expect

    from subagents.runs import subagent_record

    subagent_record(
        parent=conversation.ask, agent_name="checker", role="assistant", content="Still checking."
    )
    page.goto(f"{live_server.url}/sessions/")
    row = page.locator("#session-list tr", has_text="s-1")
    expect(row.locator(".run-marker")).to_have_text("2 sub-agent runs")
    shoot(page, "inspector_sessions_runs")

    row.locator("a", has_text="s-1").click()
    marker = page.locator(f"#message-{conversation.ask.pk} .started-runs")
    expect(marker).to_contain_text("started 2 sub-agent runs")
    expect(marker).to_contain_text("checker running")
    expect(marker).to_contain_text("researcher finished")
    shoot(page, "inspector_session_runs", full_page=False)
    marker.locator("a", has_text="checker").click()
    page.wait_for_url(f"**/messages/{conversation.ask.pk}/subagent/?agent=checker")
    expect(page.locator(".run")).to_contain_text("Still checking.")
    expect(page.locator(".run .badge.wait")).to_have_text("running")


def test_a_long_session_is_read_newest_first_filtered_and_paged(
    page,  # noqa: F811
    live_server,
):
    from playwright.sync_api import expect

    rows = [
        message_add(
            agent_id="agent-a",
            session_id="long",
            role="user" if n % 2 == 0 else "assistant",
            content=f"line {n}" + (" about kayaks" if n % 25 == 3 else ""),
            summarize=False,
        )
        for n in range(230)
    ]
    page.goto(f"{live_server.url}/sessions/agent-a/long/")
    top = page.locator("nav[aria-label='top pages']")
    expect(top.locator(".current")).to_have_text("1")
    expect(page.locator("nav[aria-label='bottom pages'] .current")).to_have_text("1")
    shoot(page, "inspector_long_session", full_page=False)

    top.locator("text=Newest ⇥").click()
    expect(page).to_have_url(re.compile(r"page=3$"))
    expect(page.locator(f"#message-{rows[-1].pk}")).to_be_in_viewport()
    page.select_option("select[name=order]", "newest")
    expect(page).to_have_url(re.compile(r"order=newest"))
    expect(page.locator("#timeline article").first).to_have_id(f"message-{rows[-1].pk}")
    page.fill("input[name=q]", "kayaks")
    expect(page.locator("#timeline h2")).to_contain_text("10 of 230 messages match, newest first")
    expect(page).to_have_url(re.compile(r"q=kayaks"))
    page.select_option("select[name=role]", "assistant")
    expect(page.locator("#timeline article")).to_have_count(5)
    shoot(page, "inspector_long_session_filtered", full_page=False)
    # The URL keeps the state: reloading shows the same.
    page.reload()
    expect(page.locator("#timeline article")).to_have_count(5)
    expect(page.locator("input[name=q]")).to_have_value("kayaks")


def test_a_long_session_reads_without_javascript(
    browser,  # noqa: F811
    live_server,
    admin_user,
):
    from playwright.sync_api import expect

    rows = [
        message_add(agent_id="agent-a", session_id="long", role="user", content=f"line {n}")
        for n in range(150)
    ]
    context = browser.new_context(java_script_enabled=False)
    context.set_default_timeout(5000)
    page = context.new_page()  # noqa: F811
    page.goto(live_server.url + "/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "password")
    page.click("button:has-text('Sign in')")
    page.goto(f"{live_server.url}/sessions/agent-a/long/")
    page.locator("nav[aria-label='bottom pages'] >> text=Newest ⇥").click()
    expect(page).to_have_url(re.compile(r"\?page=2#timeline-end$"))
    expect(page.locator(f"#message-{rows[-1].pk}")).to_be_visible()
    page.select_option("select[name=order]", "newest")
    page.fill("input[name=q]", "line 14")
    page.click("button:has-text('Show')")
    expect(page).to_have_url(re.compile(r"q=line\+14.*order=newest|order=newest.*q=line\+14"))
    first = page.locator("#timeline article").first
    expect(first).to_have_id(f"message-{rows[149].pk}")
    expect(page.locator("#timeline h2")).to_contain_text("11 of 150 messages match")
    context.close()


def test_page_loads_at_10000_memories_and_a_1000_message_session(
    page,  # noqa: F811
    live_server,
):
    """Measured, not asserted (timings depend on the machine): each page's median of 5
    loads, printed and written to test-results/inspector_timings.json for
    docs/BENCHMARKS.md."""
    import statistics
    import time

    from django.conf import settings

    from memory.models import LongTermMemory
    from subagents.runs import subagent_record

    rows = [
        message_add(
            agent_id="agent-a",
            session_id="big",
            role=("user", "assistant")[n % 2],
            content=f"message {n} of a long session" + (" about kayaks" if n % 37 == 0 else ""),
            summarize=False,
        )
        for n in range(1000)
    ]
    subagent_record(parent=rows[500], agent_name="helper", role="assistant", content="working")
    LongTermMemory.objects.bulk_create(
        LongTermMemory(agent_id="agent-a", content=f"memory {i} about kayaks", memory_type="fact")
        for i in range(10_000)
    )
    session = f"{live_server.url}/sessions/agent-a/big/"
    pages = {
        "dashboard": "/",
        "sessions": "/sessions/",
        "sessions, ?sort=-duration": "/sessions/?sort=-duration",
        "search, ?q=kayaks (all agents)": "/search/?q=kayaks",
        "session, oldest first": session,
        "session, newest first": f"{session}?order=newest",
        "session, ?q=kayaks": f"{session}?q=kayaks",
        "session, ?at= a message on page 6": f"{session}?at={rows[555].pk}",
        "memories": "/memories/",
        "memories, ?sort=-uses": "/memories/?sort=-uses",
    }
    timings = {}
    for name, url in pages.items():
        loads = []
        for _ in range(5):
            page.goto(url if url.startswith("http") else live_server.url + url)
            loads.append(
                page.evaluate(
                    "(() => { const n = performance.getEntriesByType('navigation')[0];"
                    " return [n.responseEnd - n.requestStart, n.loadEventEnd - n.startTime]; })()"
                )
            )
        timings[name] = {
            "response_ms": round(statistics.median(load[0] for load in loads)),
            "load_ms": round(statistics.median(load[1] for load in loads)),
        }
    previews = []
    for _ in range(5):
        page.goto(session)
        page.fill("input[name=query]", "kayaks")
        started = time.perf_counter()
        page.click("button:has-text('Preview')")
        page.locator("table.layers").wait_for()
        previews.append((time.perf_counter() - started) * 1000)
    timings["context preview (htmx, click to shown)"] = {
        "load_ms": round(statistics.median(previews))
    }
    out = settings.BASE_DIR / "test-results" / "inspector_timings.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(timings, indent=2))
    print(json.dumps(timings, indent=2))
    assert set(timings) == {*pages, "context preview (htmx, click to shown)"}


def test_a_search_hit_links_to_its_message_in_its_session(
    conversation,
    page,  # noqa: F811
    live_server,
):
    from playwright.sync_api import expect

    for n in range(120):
        message_add(agent_id="agent-b", session_id="b-1", role="user", content=f"filler {n}")
    target = message_add(
        agent_id="agent-b", session_id="b-1", role="user", content="Our kayak trip is in June."
    )
    message_add(agent_id="agent-b", session_id="b-2", role="user", content="unrelated")

    page.click("nav >> text=Search")
    page.fill("input[name=q]", "kayak")
    page.click("button:has-text('Search')")
    expect(page).to_have_url(re.compile(r"/search/\?q=kayak"))
    hit = page.locator(".hit").first
    expect(hit.locator(".snippet mark")).to_have_text("kayak")
    expect(hit.locator(".why")).to_have_text("its words: kayak")
    expect(hit).to_contain_text("agent-b / b-1")
    shoot(page, "inspector_search")

    hit.locator("a").first.click()
    page.wait_for_url(f"**/sessions/agent-b/b-1/?at={target.pk}#message-{target.pk}")
    expect(page.locator(f"#message-{target.pk}")).to_be_in_viewport()
    expect(page.locator("nav[aria-label='top pages'] .current")).to_have_text("2")
    shoot(page, "inspector_search_hit_opened", full_page=False)

    # The filters live in the URL: a reload shows the same hits, one agent's only.
    page.goto(f"{live_server.url}/search/?q=gunicorn&agent=agent-b")
    expect(page.locator(".hit")).to_have_count(0)
    expect(page.locator("#results")).to_contain_text("No message matches.")
    page.goto(f"{live_server.url}/search/?q=gunicorn&agent=agent-a&role=user")
    expect(page.locator(".hit")).to_have_count(1)
    expect(page.locator(".hit .snippet mark").first).to_have_text("gunicorn")


def test_a_search_hit_says_why_it_matched_its_words_or_the_messages_before_it(
    page,  # noqa: F811
    live_server,
):
    """ "花生" found "我喜欢喝乌龙茶" (the message after one that says 花生: the index reads the
    two before with each message) above "我对花生过敏", and nothing said why. The order is the
    search's; each hit now says what matched."""
    from playwright.sync_api import expect

    message_add(agent_id="agent-c", session_id="c-1", role="user", content="我对花生过敏。")
    message_add(agent_id="agent-c", session_id="c-2", role="assistant", content="花生酱可以吗？")
    message_add(agent_id="agent-c", session_id="c-2", role="user", content="我喜欢喝乌龙茶。")

    page.goto(f"{live_server.url}/search/?q=花生")
    hits = page.locator(".hit")
    expect(hits).to_have_count(3)
    tea = hits.filter(has_text="乌龙茶")
    expect(tea.locator(".why")).to_have_text(
        "matched through the messages before it: its own text has none of the query's words"
    )
    expect(hits.filter(has_text="过敏").locator(".why")).to_have_text("its words: 花生")
    shoot(page, "inspector_search_why")
    page.click("header.site form.language button:has-text('简体中文')")
    expect(tea.locator(".why")).to_have_text("通过它之前的消息匹配：它本身的文本不含查询中的任何词")
    expect(hits.filter(has_text="过敏").locator(".why")).to_have_text("它说到的词： 花生")
    shoot(page, "inspector_search_why_zh")


def test_a_search_hit_raised_by_a_memory_says_so(page, live_server):  # noqa: F811
    """ "What do I do for a living?" shares no word with "I work as a paramedic": the search
    finds it through the memory made of it, and the hit says so in the reader's language."""
    from playwright.sync_api import expect

    said = message_add(
        agent_id="agent-d", session_id="d-1", role="user", content="I work as a paramedic."
    )
    memory_create(
        agent_id="agent-d",
        content="I work as a paramedic.",
        memory_type="fact",
        actor="consolidation",
        source_messages=[said.pk],
    )

    page.goto(f"{live_server.url}/search/?q=What+do+I+do+for+a+living%3F&agent=agent-d")
    hit = page.locator(".hit").first
    expect(hit).to_contain_text("I work as a paramedic.")
    expect(hit.locator(".why")).to_have_text(
        "the person's words that answer it, known from a memory"
    )
    shoot(page, "inspector_search_raised")
    page.click("header.site form.language button:has-text('简体中文')")
    expect(page.locator(".hit").first.locator(".why")).to_have_text(
        "本人说过、能回答问题的话（来自长期记忆）"
    )
    shoot(page, "inspector_search_raised_zh")


def test_the_session_list_filters_sorts_and_shows_its_columns(
    conversation,
    page,  # noqa: F811
    live_server,
):
    from datetime import datetime, timedelta

    from django.utils import timezone

    from tests.factories import consolidate_session

    may = timezone.make_aware(datetime(2026, 5, 8, 9, 0))
    for minute in (0, 30, 125):
        message_add(
            agent_id="agent-b",
            session_id="may-talk",
            role="user",
            content="I am allergic to peanuts.",
            timestamp=may + timedelta(minutes=minute),
        )
    consolidate_session(agent_id="agent-b", session_id="may-talk")

    page.goto(f"{live_server.url}/sessions/")
    table = page.locator("#session-list table.sessions")
    expect_rows = table.locator("tbody tr")
    from playwright.sync_api import expect

    expect(expect_rows).to_have_count(2)
    may_row = table.locator("tr", has_text="may-talk")
    expect(may_row).to_contain_text("2\xa0hours, 5\xa0minutes")
    expect(may_row.locator(".badge.ok")).to_have_text("consolidated")
    expect(may_row.locator(".badge", has_text="ended")).to_have_count(1)
    shoot(page, "inspector_sessions")

    page.select_option("select[name=sort]", "-duration")
    expect(page).to_have_url(re.compile(r"sort=-duration"))
    expect(expect_rows.first).to_contain_text("may-talk")
    page.fill("input[name=since]", "2026-05-08")
    page.fill("input[name=until]", "2026-05-08")
    page.click("button:has-text('Search')")
    expect(page).to_have_url(re.compile(r"since=2026-05-08.*until=2026-05-08"))
    expect(expect_rows).to_have_count(1)
    page.reload()
    expect(expect_rows).to_have_count(1)
    expect(page.locator("input[name=since]")).to_have_value("2026-05-08")


def test_a_search_hit_has_its_roles_colour_as_in_the_timeline(page, live_server):  # noqa: F811
    """A tool's result showed grey in the search and amber in its session's timeline."""
    message_add(agent_id="agent-d", session_id="d-1", role="user", content="Find a quiet hotel.")
    message_add(agent_id="agent-d", session_id="d-1", role="tool", content="Quiet hotel: Inn 7.")

    def left_border(selector: str) -> dict[str, str]:
        colours = page.eval_on_selector_all(
            selector,
            "els => els.map(e => [e.className, getComputedStyle(e).borderLeftColor])",
        )
        return {
            next(c for c in name.split() if c.startswith("role-")): colour
            for name, colour in colours
        }

    page.goto(f"{live_server.url}/search/?q=hotel")
    in_search = left_border(".hit")
    page.goto(f"{live_server.url}/sessions/agent-d/d-1/")
    in_timeline = left_border(".message")
    assert in_search == in_timeline, (in_search, in_timeline)
    assert in_search["role-tool"] != in_search["role-user"]
