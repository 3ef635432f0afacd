"""A superseded memory in Chromium, in English and Chinese: its chain with dates and links,
and undoing the supersession.

Screenshots land in test-results/ (supersession_*.png).
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memory.memories import memory_create, memory_supersede
from memory.models import LongTermMemory
from tests.test_ui_browser import (  # noqa: F401 (fixtures)
    BROWSER_TESTS,
    SIZES,
    browser,
    page,
    shoot,
)

pytestmark = BROWSER_TESTS


def said(content: str, when: datetime) -> LongTermMemory:
    memory = memory_create(
        agent_id="agent-a", content=content, memory_type="fact", actor="consolidation"
    )
    LongTermMemory.objects.filter(pk=memory.pk).update(valid_from=when)
    memory.refresh_from_db()
    return memory


@pytest.fixture
def chain(db):
    """Three values of one subject, in English and in Chinese: the middle one is looked at."""
    paris = said("I live in Paris", datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    berlin = said("I moved to Berlin", datetime(2026, 6, 15, 18, 30, tzinfo=UTC))
    rome = said("I moved to Rome", datetime(2026, 9, 1, 8, 0, tzinfo=UTC))
    memory_supersede(paris, berlin, actor="consolidation")
    memory_supersede(berlin, rome, actor="consolidation")
    shanghai = said("我住在上海", datetime(2026, 3, 2, 9, 0, tzinfo=UTC))
    shenzhen = said("我搬到深圳了", datetime(2026, 6, 15, 18, 30, tzinfo=UTC))
    memory_supersede(shanghai, shenzhen, actor="consolidation")
    return berlin, rome, shanghai


def test_the_chain_shows_every_value_and_undo_makes_one_current(chain, page, live_server):  # noqa: F811
    from playwright.sync_api import expect

    berlin, rome, _ = chain
    page.goto(f"{live_server.url}/memories/{berlin.pk}/")
    links = page.locator(".chain-list > li")
    expect(links).to_have_count(3)
    expect(links.nth(0)).to_contain_text("I live in Paris")
    expect(links.nth(1)).to_contain_text("(this memory)")
    expect(links.nth(2)).to_contain_text("current")
    expect(page.locator(f"#memory-{berlin.pk} .badge.warn")).to_have_text("superseded")
    shoot(page, "supersession_chain")

    page.click("button:has-text('Undo the supersession')")

    expect(page.locator(".flash")).to_contain_text(f"Memory #{berlin.pk} is current again.")
    expect(page.locator(f"#memory-{berlin.pk} .badge.warn")).to_have_count(0)
    expect(page.locator(".history-list > li").first).to_contain_text("supersession undone")
    shoot(page, "supersession_undone")
    berlin.refresh_from_db()
    assert (berlin.valid_until, berlin.superseded_by_id) == (None, None)
    page.goto(f"{live_server.url}/memories/?state=superseded")
    expect(page.locator("#memory-list article")).to_have_count(2)  # Paris and 上海
    shoot(page, "supersession_list")


def test_the_chain_in_chinese(chain, browser, live_server, admin_user):  # noqa: F811
    from playwright.sync_api import expect

    _, _, shanghai = chain
    context = browser.new_context(viewport=SIZES[0], locale="zh-CN")
    context.set_default_timeout(5000)
    page = context.new_page()  # noqa: F811
    page.goto(live_server.url + "/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "password")
    page.click("main button:has-text('登录')")
    page.wait_for_url(live_server.url + "/")

    page.goto(f"{live_server.url}/memories/{shanghai.pk}/")

    expect(page.locator(".chain h2")).to_have_text("取代链")
    expect(page.locator(".chain-list > li").nth(1)).to_contain_text("当前")
    expect(page.locator(".chain button")).to_have_text("撤销取代")
    shoot(page, "supersession_chain_zh")
    page.goto(f"{live_server.url}/memories/?state=superseded")
    shoot(page, "supersession_list_zh")
    context.close()
