"""A memory's sources in Chromium: each message linked to its place in its session, the
person who reworded it, in English and in Chinese.

Screenshots land in test-results/ (provenance_*.png).
"""

from __future__ import annotations

from datetime import UTC, datetime

from memory.memories import memory_update
from memory.models import ConsolidationRun, LongTermMemory
from tests.factories import add_message, consolidate_session
from tests.test_ui_browser import BROWSER_TESTS, browser, page, shoot  # noqa: F401 (fixtures)

pytestmark = BROWSER_TESTS


def test_a_memorys_sources_link_to_their_messages(page, live_server):  # noqa: F811
    from playwright.sync_api import expect

    first = add_message(
        "I prefer tabs over spaces, always have.",
        agent_id="agent-a",
        session_id="editor-setup",
        timestamp=datetime(2026, 3, 2, 9, 30, tzinfo=UTC),
        summarize=False,
    )
    consolidate_session(agent_id="agent-a", session_id="editor-setup")
    ConsolidationRun.objects.update(started_at=datetime(2026, 1, 1, tzinfo=UTC))
    second = add_message(
        "我写代码一直用 tab 缩进。I prefer tabs over spaces, always have.",
        agent_id="agent-a",
        session_id="新项目",
        summarize=False,
    )
    consolidate_session(agent_id="agent-a", session_id="新项目")
    memory = LongTermMemory.objects.get()
    memory_update(memory, actor="ui:admin", content="Prefers tabs over spaces (always).")

    page.goto(f"{live_server.url}/memories/{memory.pk}/")
    listed = page.locator(".source-list > li")
    expect(listed).to_have_count(3)
    expect(listed.nth(0)).to_contain_text(f"message #{first.pk}")
    expect(listed.nth(0)).to_contain_text("editor-setup")
    expect(listed.nth(1)).to_contain_text("我写代码一直用 tab 缩进。")
    expect(listed.nth(2)).to_have_text("written by admin (dashboard)")
    expect(page.locator(".sources")).to_contain_text("first said")
    shoot(page, "provenance_memory")

    page.click(f"text=message #{second.pk}")
    expect(page).to_have_url(
        f"{live_server.url}/sessions/agent-a/%E6%96%B0%E9%A1%B9%E7%9B%AE/?at={second.pk}#message-{second.pk}"
    )
    expect(page.locator(f"#message-{second.pk}")).to_be_in_viewport()

    page.context.add_cookies(
        [{"name": "django_language", "value": "zh-hans", "url": live_server.url}]
    )
    page.goto(f"{live_server.url}/memories/{memory.pk}/")
    expect(page.locator(".sources h2")).to_have_text("来源")
    expect(listed.nth(0)).to_contain_text(f"消息 #{first.pk}")
    expect(listed.nth(2)).to_have_text("由 admin（仪表盘） 撰写")
    expect(page.locator(".sources")).to_contain_text("最早提及于")
    shoot(page, "provenance_memory_zh")
