"""Feedback on the dashboard's htmx requests and the site around its pages, in Chromium:
progress while a request is in flight, an error that says why when one fails, no late
answer overwriting a newer one; error pages, the current page, the favicon.

Screenshots land in test-results/ (feedback_*.png).
"""

from __future__ import annotations

import contextlib
import re

import pytest

from memory import views
from memory.messages import message_add
from memory.models import LongTermMemory
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


def hold(tab, pattern: re.Pattern[str]) -> list:
    """Requests matching `pattern` wait, unanswered, in the returned list until a test lets
    each go (`route.continue_()`); the others pass."""
    held: list = []
    tab.route(pattern, lambda route: held.append(route))
    return held


def release(route) -> None:
    """Let a held request go; one htmx has cancelled meanwhile is gone already."""
    from playwright.sync_api import Error

    with contextlib.suppress(Error):
        route.continue_()


def test_it_shows_progress_and_disables_the_button_while_a_preview_runs(
    conversation, tab, live_server
):
    from playwright.sync_api import expect

    tab.goto(f"{live_server.url}/sessions/agent-a/s-1/")
    held = hold(tab, re.compile(r"/context/$"))
    tab.fill("input[name=query]", "green tea")
    button = tab.locator("#context button[type=submit]")
    button.click()

    progress = tab.locator("#request-progress")
    expect(progress).to_have_class(re.compile(r"\bhtmx-request\b"))
    expect(progress).to_have_css("opacity", "1")
    expect(button).to_be_disabled()
    expect(tab.locator("#context")).to_have_attribute("aria-busy", "true")
    assert len(held) == 1
    shoot(tab, "feedback_in_flight")

    held[0].continue_()
    expect(tab.locator(".layer-long_term")).to_contain_text("The user prefers green tea.")
    expect(button).to_be_enabled()
    expect(progress).to_have_css("opacity", "0")
    expect(tab.locator("#context")).not_to_have_attribute("aria-busy", "true")
    assert LongTermMemory.objects.get(pk=conversation.tea.pk).access_count == 1


def test_it_says_why_when_an_htmx_request_fails(conversation, tab, live_server, monkeypatch):
    from playwright.sync_api import expect

    def fail(**kwargs) -> None:
        raise RuntimeError("the index is gone")

    monkeypatch.setattr(views, "context_build", fail)
    tab.goto(f"{live_server.url}/sessions/agent-a/s-1/")
    tab.fill("input[name=query]", "green tea")
    tab.click("button:has-text('Preview')")
    error = tab.locator("#request-errors .request-error")
    expect(error).to_have_count(1)
    expect(error).to_contain_text(
        "500 Internal Server Error: The server failed on this request; its log says why."
    )
    expect(error).to_contain_text("POST /sessions/agent-a/s-1/context/")
    expect(tab.locator("#request-errors")).to_have_attribute("aria-live", "assertive")
    expect(tab.locator("#context .preview")).to_have_count(0)  # nothing was swapped in
    expect(tab.locator("#context button[type=submit]")).to_be_enabled()
    shoot(tab, "feedback_error", full_page=False)
    error.locator("button.dismiss").click()
    expect(error).to_have_count(0)

    # A memory deleted since the page was shown: the 404 page's reason.
    tab.goto(f"{live_server.url}/memories/")
    LongTermMemory.objects.filter(pk=conversation.tea.pk).delete()
    tab.locator(f"#memory-{conversation.tea.pk} >> text=Edit").click()
    expect(error).to_contain_text(
        f"404 Not Found: No memory #{conversation.tea.pk}: it was deleted, or never existed."
    )
    expect(error).to_contain_text(f"GET /memories/{conversation.tea.pk}/edit/")

    # No answer at all: a filter while the server cannot be reached.
    tab.route(re.compile(r"/memories/\?"), lambda route: route.abort())
    tab.select_option("select[name=agent]", "agent-b")
    expect(error.filter(has_text="No answer")).to_contain_text("the server could not be reached")
    expect(error).to_have_count(2)  # one per region, each until dismissed
    tab.unroute(re.compile(r"/memories/\?"))
    tab.select_option("select[name=agent]", "")  # the list's next answer clears its error
    expect(error).to_have_count(1)
    expect(tab.locator("#memory-list")).to_contain_text("Deploys run on Fridays.")


def test_a_superseded_request_never_overwrites_a_newer_answer(conversation, tab, live_server):
    from playwright.sync_api import expect

    for n in range(25):  # a second page of sessions
        message_add(agent_id="agent-b", session_id=f"b-{n:02}", role="user", content="hi")
    message_add(agent_id="agent-b", session_id="b-tea", role="user", content="I like oolong")
    tab.goto(f"{live_server.url}/sessions/")
    sessions = tab.locator("#session-list")

    # A search typed on while the first is unanswered: the newer answer shows at once.
    held = hold(tab, re.compile(r"q=gunicorn"))
    tab.fill("input[name=q]", "gunicorn")
    expect(sessions).to_have_attribute("aria-busy", "true")  # the old rows read as stale
    expect(tab.locator("#request-progress")).to_have_css("opacity", "1")
    shoot(tab, "feedback_stale", full_page=False)
    tab.fill("input[name=q]", "oolong")
    expect(sessions).to_contain_text("1 session")
    expect(sessions).to_contain_text("b-tea")
    # The second tab, asked for before a search: the search's answer stays.
    held_pages = hold(tab, re.compile(r"page=2"))
    tab.fill("input[name=q]", "")
    expect(sessions).to_contain_text("27 sessions")
    sessions.locator("text=Next →").click()
    expect(sessions).to_have_attribute("aria-busy", "true")
    tab.fill("input[name=q]", "Django")
    expect(sessions).to_contain_text("1 session")

    for route in held + held_pages:
        release(route)
    tab.wait_for_timeout(300)  # time for a late answer to land, were it not cancelled
    expect(sessions).to_contain_text("s-1")
    expect(sessions).not_to_contain_text("b-tea")
    expect(sessions).not_to_have_attribute("aria-busy", "true")
    expect(tab).to_have_url(re.compile(r"q=Django"))
    expect(tab.locator("#request-errors .request-error")).to_have_count(0)  # cancelled, not failed

    # Back: htmx's copy of the page was taken mid-request; nothing is in flight on it.
    tab.go_back()
    expect(tab).not_to_have_url(re.compile(r"q=Django"))
    expect(tab.locator("[aria-busy]")).to_have_count(0)
    button = tab.locator("form.filters button")
    expect(button).to_be_enabled()
    assert button.evaluate("b => getComputedStyle(b, '::after').content") == "none"  # no spinner


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
    expect(card.locator(".history-list")).to_contain_text("created by API")
    tab.click("header.site nav >> text=Sessions")
    expect(current).to_have_text("Sessions")
    tab.click("#session-list >> text=s-1")
    expect(tab.locator("header.site nav a[aria-current=true]")).to_have_text("Sessions")
    assert failures == []
