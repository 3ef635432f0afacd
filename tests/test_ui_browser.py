"""The dashboard in a real browser: Debian's Chromium driven by Playwright against a live server.

Screenshots of every page, at desktop (1440x900) and phone (390x844) sizes, land in test-results/.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings

from memory.messages import message_add
from memory.models import LongTermMemory, LongTermMemoryHistory

CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = settings.BASE_DIR / "test-results"
SIZES = ({"width": 1440, "height": 900}, {"width": 390, "height": 844})

# Playwright's sync API runs an event loop in this thread; the ORM calls the tests make
# between browser steps are still plain synchronous code.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

# The marks of every browser test module (`pytestmark = BROWSER_TESTS`).
BROWSER_TESTS = pytestmark = [
    pytest.mark.slow,  # Playwright starts its driver and Chromium
    pytest.mark.django_db(transaction=True),
    # `make test` installs Chromium first (make browser); only a bare pytest run can lack it.
    pytest.mark.skipif(
        not CHROMIUM.exists(), reason="no /usr/bin/chromium: run `make browser` first"
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def page(browser, live_server, admin_user):
    """A signed-in page of a fresh browser context."""
    context = browser.new_context(viewport=SIZES[0])
    context.set_default_timeout(5000)
    page = context.new_page()
    page.goto(live_server.url + "/")
    assert "/login/" in page.url
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", "password")
    page.click("button:has-text('Sign in')")
    page.wait_for_url(live_server.url + "/")
    yield page
    context.close()


def shoot(page, name: str, *, full_page: bool = True) -> None:
    """Screenshots (full-page unless told) at each size, then back to the desktop size."""
    SCREENSHOTS.mkdir(exist_ok=True)
    for size in SIZES:
        page.set_viewport_size(size)
        page.screenshot(path=SCREENSHOTS / f"{name}-{size['width']}.png", full_page=full_page)
    page.set_viewport_size(SIZES[0])


def test_it_inspects_a_session(conversation, page, live_server):
    from playwright.sync_api import expect

    expect(page.locator("h1")).to_have_text("Dashboard")
    expect(page.locator(".counts")).to_contain_text("3 messages")
    shoot(page, "dashboard")

    page.click("nav >> text=Sessions")
    expect(page.locator("#session-list")).to_contain_text("s-1")
    shoot(page, "sessions")

    page.click("#session-list >> text=s-1")
    expect(page.locator("h1")).to_have_text("s-1")
    tool = page.locator(f"#message-{conversation.result.pk}")
    tool.locator("details.subagent > summary").click()
    expect(tool.locator(".transcript")).to_contain_text("Reading gunicorn docs.")
    expect(tool.locator(".transcript")).to_contain_text("result truncated from 13500 tokens")

    # An earlier session of the agent: the preview recalls it.
    earlier = message_add(
        agent_id="agent-a", session_id="s-0", role="user", content="I brew green tea at seven."
    )
    page.fill("input[name=query]", "green tea")
    page.click("button:has-text('Preview')")
    long_term = page.locator(".layer-long_term")
    expect(long_term).to_contain_text("The user prefers green tea.")
    expect(long_term).to_contain_text("score 1.000")
    expect(page.locator(".layer .bar")).to_have_count(4)
    recall = page.locator(".layer-recall")
    expect(recall).to_contain_text("I brew green tea at seven.")
    expect(recall).to_contain_text(f"#{earlier.pk} · session s-0 · user")
    shoot(page, "session")
    assert LongTermMemory.objects.get(pk=conversation.tea.pk).access_count == 1

    page.goto(f"{live_server.url}/messages/{conversation.ask.pk}/subagent/")
    expect(page.locator(".run")).to_contain_text("[内容已截断]")
    shoot(page, "subagent_run")


def test_it_curates_a_memory(conversation, page, live_server):
    from playwright.sync_api import expect

    page.click("nav >> text=Memories")
    card = page.locator(f"#memory-{conversation.tea.pk}")
    expect(card).to_contain_text("The user prefers green tea.")
    shoot(page, "memories")

    card.locator("text=Edit").click()
    expect(card.locator("textarea")).to_be_visible()
    card.locator("textarea").fill("The user prefers oolong tea.")
    card.locator("input[name=confidence]").fill("0.9")
    shoot(page, "memory_edit")
    card.locator("button:has-text('Save')").click()
    expect(card).to_contain_text("The user prefers oolong tea.")
    expect(card).to_contain_text("confidence 0.90")

    card.locator("button:has-text('Expire')").click()
    expect(card.locator(".badge.warn")).to_have_text("expired")
    card.locator("button:has-text('Restore')").click()
    expect(card.locator("button:has-text('Expire')")).to_be_visible()
    assert LongTermMemory.objects.get(pk=conversation.tea.pk).expires_at is None

    card.locator("details.history > summary").click()
    expect(card.locator(".history-list")).to_contain_text("expired by admin (dashboard)")
    shoot(page, "memories_history")
    actions = LongTermMemoryHistory.objects.filter(memory_id=conversation.tea.pk).order_by("id")
    assert [(h.action, h.actor) for h in actions] == [
        ("create", "api"),
        ("update", "ui:admin"),
        ("expire", "ui:admin"),
        ("restore", "ui:admin"),
    ]

    page.goto(f"{live_server.url}/memories/{conversation.tea.pk}/")
    expect(page.locator(".history-list > li")).to_have_count(4)
    shoot(page, "memory")

    page.goto(f"{live_server.url}/memories/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#memory-{conversation.deploy.pk} >> text=Delete").click()
    expect(page.locator(f"#memory-{conversation.deploy.pk}")).to_have_count(0)
    assert not LongTermMemory.objects.filter(pk=conversation.deploy.pk).exists()

    page.select_option("select[name=agent]", "agent-a")
    expect(page).to_have_url(re.compile(r"agent=agent-a"))
    expect(page.locator("#memory-list article")).to_have_count(1)


def test_at_phone_width_no_nav_link_is_alone_on_a_line_and_agent_names_keep_whole(
    page, live_server
):
    """At 390 px the page links wrapped unevenly (a lone "Admin" on its own line, or four
    and two); an agent's name in the session list broke inside ("newcom/er-agent"). In both
    languages."""
    from memory.messages import message_add

    for n in range(3):
        message_add(
            agent_id="newcomer-agent", session_id=f"first-steps-{n}", role="user", content="hi"
        )
    page.set_viewport_size(SIZES[1])
    for language in ("English", "简体中文"):
        if language != "English":
            page.click(f"header.site form.language button:has-text('{language}')")
        page.goto(live_server.url + "/sessions/")
        tops = page.locator("header.site nav a").evaluate_all(
            "links => links.map(a => Math.round(a.getBoundingClientRect().top))"
        )
        rows = [tops.count(top) for top in sorted(set(tops))]
        # Evenly over their lines: 3 and 3, never 4 and 2 or 5 and 1.
        assert len(tops) == 6 and max(rows) - min(rows) <= 1, (language, rows)
        lines = page.locator("table.sessions tbody td:nth-child(2)").first.evaluate(
            """cell => {
              const range = document.createRange();
              range.selectNodeContents(cell);
              return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
            }"""
        )
        assert lines == 1, language
        shoot(page, f"phone_nav_{'en' if language == 'English' else 'zh'}", full_page=False)
