"""What a viewer, a user without permissions and a throttled sign-in see, in Chromium.

Screenshots land in test-results/ (roles_*.png).
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

from django.apps import apps
from django.contrib.auth.models import Group, User
from django.db import connection

from memory.models import LongTermMemory
from tests.test_ui_browser import BROWSER_TESTS, SIZES, browser, shoot  # noqa: F401 (the fixture)

pytestmark = BROWSER_TESTS


def dashboard_group(name: str) -> Group:
    """The group the migration made; a transactional test's flush empties the tables, so the
    migration's own function makes it again."""
    migration = importlib.import_module("memory.migrations.0010_dashboard_groups")
    # It writes through the schema editor's connection: only that attribute is read.
    migration.create_groups(apps, SimpleNamespace(connection=connection))
    return Group.objects.get(name=name)


def new_page(browser, live_server):  # noqa: F811
    context = browser.new_context(viewport=SIZES[0])
    context.set_default_timeout(5000)
    page = context.new_page()
    page.goto(live_server.url + "/login/")
    return context, page


def sign_in(page, username: str, password: str) -> None:
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("button:has-text('Sign in')")


def test_a_viewer_reads_memories_without_curation_buttons(browser, live_server, conversation):  # noqa: F811
    from playwright.sync_api import expect

    viewers = dashboard_group("orca viewers")
    vera = User.objects.create_user("vera", password="pw")
    vera.groups.add(viewers)
    context, page = new_page(browser, live_server)
    sign_in(page, "vera", "pw")
    page.wait_for_url(live_server.url + "/")

    page.click("nav >> text=Memories")
    card = page.locator(f"#memory-{conversation.tea.pk}")
    expect(card).to_contain_text("The user prefers green tea.")
    expect(card.locator("text=Edit")).to_have_count(0)
    expect(card.locator("button:has-text('Expire')")).to_have_count(0)
    expect(card.locator("text=Delete")).to_have_count(0)
    card.locator("details.history > summary").click()
    expect(card.locator(".history-list")).to_contain_text("created by API")
    expect(page.locator("#bulk")).to_have_count(0)
    expect(page.locator("input[type=checkbox]")).to_have_count(0)
    expect(card.locator(".revert")).to_have_count(0)
    shoot(page, "roles_viewer_memories")
    context.close()
    assert LongTermMemory.objects.get(pk=conversation.tea.pk).expires_at is None


def test_a_user_without_permissions_is_told_how_to_get_them(browser, live_server, db):  # noqa: F811
    from playwright.sync_api import expect

    User.objects.create_user("nobody", password="pw")
    context, page = new_page(browser, live_server)
    sign_in(page, "nobody", "pw")
    page.wait_for_url(live_server.url + "/")

    expect(page.locator("h1")).to_have_text("Not allowed")
    expect(page.locator("main")).to_contain_text("orca viewers")
    expect(page.locator("nav a")).to_have_count(0)
    shoot(page, "roles_forbidden")
    context.close()


def test_five_wrong_passwords_show_the_lockout_page(browser, live_server, db):  # noqa: F811
    from playwright.sync_api import expect

    User.objects.create_user("ann", password="right-password")
    context, page = new_page(browser, live_server)
    for _ in range(5):
        sign_in(page, "ann", "guess")
    expect(page.locator("h1")).to_have_text("Too many failed sign-ins")  # the 5th says so
    page.click("text=Back to sign-in")
    sign_in(page, "ann", "right-password")

    expect(page.locator("h1")).to_have_text("Too many failed sign-ins")
    expect(page.locator("main")).to_contain_text("refused for 15 minutes")
    shoot(page, "roles_locked_out")
    page.goto(live_server.url + "/")
    assert "/login/" in page.url
    context.close()
