"""Forgetting in Chromium, in English and Chinese: a query's preview with its matches marked,
the confirmation, the receipt listed. Screenshots land in test-results/ (forget_*.png)."""

from __future__ import annotations

import pytest

from memory.models import ForgetReceipt, MainMessage
from tests.factories import add_message
from tests.test_ui_browser import BROWSER_TESTS, SIZES, browser, page, shoot  # noqa: F401 (fixtures)

pytestmark = BROWSER_TESTS


@pytest.mark.parametrize("language, confirm", [("en", "Forget for good"), ("zh-hans", "永久遗忘")])
def test_it_previews_then_forgets_a_query(page, live_server, language, confirm):  # noqa: F811
    from playwright.sync_api import expect

    add_message("My old flat was on Rua Garrett 14, in Lisbon.", agent_id="agent-a")
    add_message("I still like the tram.", agent_id="agent-a")
    add_message("我以前住在里斯本。", agent_id="agent-a")
    page.context.add_cookies(
        [{"name": "django_language", "value": language, "url": live_server.url}]
    )

    page.goto(f"{live_server.url}/forget/")
    page.select_option("select[name=scope]", "query")
    page.fill("input[name=agent_id]", "agent-a")
    page.fill("input[name=query]", "Lisbon" if language == "en" else "里斯本")
    page.locator("form.filters button[type=submit]").click()

    preview = page.locator("#forget-preview")
    expect(preview.locator("mark").first).to_be_visible()
    shoot(page, f"forget_preview_{language}")
    assert MainMessage.objects.count() == 3

    preview.locator(f"button:has-text('{confirm}')").click()

    expect(page.locator(".flash")).to_contain_text("#")
    shoot(page, f"forget_done_{language}")
    assert MainMessage.objects.count() == 2
    assert ForgetReceipt.objects.get().actor == "ui:admin"


def test_the_forget_forms_button_sits_level_with_its_fields(page, live_server):  # noqa: F811
    """The form was Django's as_p: each field in a paragraph with its margins, and the
    Preview button stretched to twice an input's height beside them. A field's error
    shows on a line of its own."""
    from playwright.sync_api import expect

    page.goto(f"{live_server.url}/forget/")
    form = page.locator("form.forget-form")
    for size in SIZES:
        page.set_viewport_size(size)
        button = form.locator("button[type=submit]").bounding_box()
        query = form.locator("input[name=query]").bounding_box()
        assert abs(button["height"] - query["height"]) <= 4, (size, button, query)
        if button["x"] > query["x"]:  # beside the last field, not wrapped onto a line of its own
            middle = button["y"] + button["height"] / 2
            assert query["y"] <= middle <= query["y"] + query["height"], (size, button, query)
    page.set_viewport_size(SIZES[0])  # at 1440 px: two rows of fields, no margins between
    row = form.locator("input[name=query]").bounding_box()["height"]
    assert form.bounding_box()["height"] < 2.5 * row, (form.bounding_box(), row)

    page.fill("input[name=agent_id]", "agent-a")  # a session's scope, with no session named
    form.locator("button[type=submit]").click()
    error = page.locator("form.forget-form .errorlist")
    expect(error).to_contain_text("Name the session to forget.")
    assert error.bounding_box()["width"] > form.bounding_box()["width"] * 0.9
