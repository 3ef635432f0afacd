"""Curating memories in Chromium: sorting, bulk actions with their confirmation, the count
after a delete, reverting to an earlier version, a deleted memory's page.

Screenshots land in test-results/ (memories_*.png).
"""

from __future__ import annotations

import re

from memory.memories import memory_create, memory_update
from memory.models import LongTermMemory, LongTermMemoryHistory
from tests.test_ui_browser import BROWSER_TESTS, SIZES, browser, page, shoot  # noqa: F401 (fixtures)

pytestmark = BROWSER_TESTS


def test_revert_restores_an_earlier_text_and_adds_a_history_row(conversation, page, live_server):  # noqa: F811
    from playwright.sync_api import expect

    tea = conversation.tea
    memory_update(tea, actor="ui:admin", content="The user prefers oolong tea.", confidence=0.9)
    page.goto(f"{live_server.url}/memories/{tea.pk}/")
    history = page.locator(".history-list > li")
    expect(history).to_have_count(2)
    expect(history.first).to_contain_text("confidence: 0.70 → 0.90")
    expect(history.first.locator("time")).to_have_attribute("datetime", re.compile(r"^\d{4}-"))
    shoot(page, "memories_history_before_revert")

    page.locator("#version-1 button:has-text('Revert to version 1')").click()

    expect(page.locator(f"#memory-{tea.pk} .text")).to_have_text("The user prefers green tea.")
    expect(page.locator(".flash")).to_contain_text("reverted to version 1")
    expect(history).to_have_count(3)
    expect(history.first).to_contain_text("reverted to version 1 by admin (dashboard)")
    expect(history.first).to_contain_text("confidence: 0.90 → 0.70")
    shoot(page, "memories_reverted")
    memory = LongTermMemory.objects.get(pk=tea.pk)
    assert (memory.content, memory.confidence) == ("The user prefers green tea.", 0.7)
    latest = LongTermMemoryHistory.objects.filter(memory_id=tea.pk).latest("id")
    assert (latest.action, latest.changes["reverted_to"]) == ("revert", 1)


def test_it_sorts_and_bulk_expires_through_the_list(conversation, page, live_server):  # noqa: F811
    from playwright.sync_api import expect

    lisbon = memory_create(
        agent_id="agent-a",
        content="The user works in Lisbon.",
        memory_type="fact",
        source_session="s-1",
        confidence=0.95,
        actor="consolidation",
    )
    page.goto(f"{live_server.url}/memories/")
    page.select_option("select[name=sort]", "-confidence")
    expect(page).to_have_url(re.compile(r"sort=-confidence"))
    cards = page.locator("#memory-list article")
    expect(cards.first).to_have_id(f"memory-{lisbon.pk}")
    expect(cards.first).to_contain_text("seen in 1 extraction")
    expect(page.locator(f"#memory-{conversation.tea.pk}")).not_to_contain_text("extraction")
    shoot(page, "memories_sorted")

    for memory in (lisbon, conversation.tea):
        page.check(f"#memory-{memory.pk} input[type=checkbox]")
    page.click("#bulk button:has-text('Expire')")
    expect(page.locator("h1")).to_have_text("Expire 2 memories?")
    expect(page.locator(".bulk-selection li")).to_have_count(2)
    shoot(page, "memories_bulk_confirm")
    assert not LongTermMemory.objects.filter(expires_at__isnull=False).exists()

    page.click("button:has-text('Expire 2 memories')")
    expect(page).to_have_url(re.compile(r"/memories/\?.*sort=-confidence"))
    expect(page.locator(".flash")).to_contain_text("2 memories expired.")
    expect(page.locator("#memory-list .badge.warn")).to_have_count(2)
    shoot(page, "memories_bulk_done")
    assert LongTermMemory.objects.filter(expires_at__isnull=False).count() == 2
    for memory in (lisbon, conversation.tea):
        assert LongTermMemoryHistory.objects.filter(memory_id=memory.pk, action="expire").exists()


def test_a_delete_updates_the_count_and_leaves_a_readable_page(conversation, page, live_server):  # noqa: F811
    from playwright.sync_api import expect

    page.goto(f"{live_server.url}/memories/")
    expect(page.locator("#memory-list .count")).to_have_text("2 memories")
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator(f"#memory-{conversation.deploy.pk} >> text=Delete").click()
    expect(page.locator("#memory-list .count")).to_have_text("1 memory")
    expect(page.locator("#memory-list article")).to_have_count(1)

    page.goto(f"{live_server.url}/memories/{conversation.deploy.pk}/")
    expect(page.locator(".memory.deleted")).to_contain_text(
        "This memory was deleted by admin (dashboard)"
    )
    expect(page.locator(".history-list > li")).to_have_count(2)
    shoot(page, "memories_deleted")
    assert not LongTermMemory.objects.filter(pk=conversation.deploy.pk).exists()


def test_an_edit_on_the_memorys_page_updates_its_history_and_sources_in_place(
    conversation,
    page,  # noqa: F811
    live_server,
):
    """Edit -> Save and Expire swap the card in place; the history and sources under it
    follow (they were left at version 1, and the card grew a second, folded history)."""
    from playwright.sync_api import expect

    tea = conversation.tea
    page.goto(f"{live_server.url}/memories/{tea.pk}/")
    history = page.locator("#memory-history .history-list > li")
    expect(history).to_have_count(1)
    card = page.locator(f"#memory-{tea.pk}")

    card.locator("a:has-text('Edit')").click()
    page.fill("textarea[name=content]", "The user prefers oolong tea.")
    page.click("button:has-text('Save')")
    expect(card.locator(".text")).to_have_text("The user prefers oolong tea.")
    expect(history).to_have_count(2)
    expect(history.first).to_contain_text("edited by admin (dashboard)")
    expect(page.locator("#memory-sources")).to_contain_text("written by admin (dashboard)")

    card.locator("button:has-text('Expire')").click()
    expect(card.locator(".badge.warn")).to_contain_text("expired")
    expect(history).to_have_count(3)
    expect(history.first).to_contain_text("expired by admin (dashboard)")
    # One history on the page, none folded inside the card.
    expect(page.locator(".history-list")).to_have_count(1)
    expect(card.locator("details.history")).to_have_count(0)
    shoot(page, "memories_edited_in_place")


def test_the_edit_forms_save_and_cancel_sit_level(conversation, page, live_server):  # noqa: F811
    """Save took the stacked form's top margin meant for a lone button, Cancel did not: Save
    sat lower than Cancel beside it."""
    page.goto(f"{live_server.url}/memories/{conversation.tea.pk}/edit/")
    actions = page.locator("form.stacked .actions")
    for size in SIZES:
        page.set_viewport_size(size)
        save = actions.locator("button[type=submit]").bounding_box()
        cancel = actions.locator("a.button").bounding_box()
        assert abs(save["y"] - cancel["y"]) <= 1 and abs(save["height"] - cancel["height"]) <= 1, (
            size,
            save,
            cancel,
        )
