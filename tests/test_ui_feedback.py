"""The site around the dashboard's pages, in Chromium: error pages, the current page, the
dashboard's links, the favicon.

Screenshots land in test-results/ (feedback_*.png).
"""

from __future__ import annotations

import re

import pytest

from memory import views
from tests.test_ui_browser import BROWSER_TESTS, browser, page, shoot  # noqa: F401 (fixtures)

pytestmark = BROWSER_TESTS

# base.css: the status colours of variables.css, as Chromium computes them.
STATUS_COLOURS = {
    "ok": "rgb(26, 127, 55)",
    "degraded": "rgb(154, 103, 0)",
    "error": "rgb(207, 34, 46)",
}


@pytest.fixture
def tab(page):  # noqa: F811
    """A signed-in page: test_ui_browser's `page`."""
    return page


def test_error_pages_keep_the_site_navigation(conversation, tab, live_server, monkeypatch):
    from playwright.sync_api import expect

    response = tab.goto(f"{live_server.url}/sessions/agent-a/nope/")
    assert response.status == 404
    expect(tab.locator("h1")).to_have_text("Not found")
    expect(tab.locator("main")).to_contain_text("Agent agent-a has no session nope.")
    expect(tab.locator("header.site nav a[aria-current]")).to_have_text("Sessions")
    shoot(tab, "feedback_404")
    tab.click("header.site nav >> text=Memories")
    expect(tab.locator("h1")).to_have_text("Long-term memories")

    def fail() -> None:
        raise RuntimeError("the health check broke")

    monkeypatch.setattr(views, "service_health", fail)
    response = tab.goto(f"{live_server.url}/")
    assert response.status == 500
    expect(tab.locator("h1")).to_have_text("Something went wrong on the server")
    expect(tab.locator("header.site nav")).to_contain_text("Sessions")
    shoot(tab, "feedback_500")


def test_the_nav_marks_the_current_page_and_the_dashboard_links_its_counts(
    conversation,
    tab,
    live_server,
):
    from playwright.sync_api import expect

    failures: list[str] = []
    tab.on("console", lambda m: failures.append(m.text) if m.type == "error" else None)
    tab.on(
        "response", lambda r: failures.append(f"{r.status} {r.url}") if r.status >= 400 else None
    )
    tab.goto(f"{live_server.url}/")

    current = tab.locator("header.site nav a[aria-current=page]")
    expect(current).to_have_text("Dashboard")
    expect(current).to_have_css("font-weight", "700")
    status = tab.locator(".status .badge")
    expect(status).to_have_css("color", STATUS_COLOURS[status.inner_text()])
    icon = tab.locator("link[rel=icon]").get_attribute("href")
    assert tab.request.get(live_server.url + icon).headers["content-type"] == "image/svg+xml"
    favicon = tab.request.get(f"{live_server.url}/favicon.ico")
    assert (favicon.status, favicon.url) == (200, live_server.url + icon)

    tab.click("text=active preference memory")
    expect(tab).to_have_url(re.compile(r"/memories/\?memory_type=preference&state=active$"))
    expect(current).to_have_text("Memories")
    expect(tab.locator("#memory-list article")).to_have_count(1)
    # An htmx request from an element without a button (htmx would log a selector error).
    card = tab.locator(f"#memory-{conversation.tea.pk}")
    card.locator("details.history > summary").click()
    expect(card.locator(".history-list")).to_contain_text("create by api")
    tab.click("header.site nav >> text=Sessions")
    expect(current).to_have_text("Sessions")
    tab.click("#session-list >> text=s-1")
    expect(tab.locator("header.site nav a[aria-current=true]")).to_have_text("Sessions")
    assert failures == []
