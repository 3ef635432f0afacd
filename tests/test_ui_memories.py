"""The memory list's sorting, dates and bulk actions, and a memory's history (before and
after, readable times, revert, a deleted memory's page), through Django's test client."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from memory.memories import memory_create, memory_delete, memory_expire, memory_update
from memory.models import LongTermMemory, LongTermMemoryHistory
from tests.test_permissions import signed_in

HTMX = {"HX-Request": "true"}

pytestmark = pytest.mark.django_db


def listed(client, **query) -> list[int]:
    response = client.get(reverse("memories"), query, headers=HTMX)
    assert response.status_code == 200
    return [m.pk for m in response.context["page"]]


def actions(pk: int) -> list[tuple[str, str]]:
    history = LongTermMemoryHistory.objects.filter(memory_id=pk).order_by("id")
    return [(h.action, h.actor) for h in history]


def test_it_sorts_the_list_by_a_whitelisted_field(admin_client, conversation):
    tea, deploy = conversation.tea, conversation.deploy  # confidence 0.7 and 0.5
    LongTermMemory.objects.filter(pk=tea.pk).update(
        access_count=3, last_accessed=timezone.now() - timedelta(days=2)
    )
    assert listed(admin_client) == [deploy.pk, tea.pk]  # newest first
    assert listed(admin_client, sort="created") == [tea.pk, deploy.pk]
    assert listed(admin_client, sort="-confidence") == [tea.pk, deploy.pk]
    assert listed(admin_client, sort="confidence") == [deploy.pk, tea.pk]
    assert listed(admin_client, sort="-uses") == [tea.pk, deploy.pk]
    # Never used sorts last among the recently used, first among the longest unused.
    assert listed(admin_client, sort="-last_used") == [tea.pk, deploy.pk]
    assert listed(admin_client, sort="last_used") == [deploy.pk, tea.pk]

    page = admin_client.get(reverse("memories"), {"sort": "-confidence"}).content.decode()
    assert '<option value="-confidence" selected>' in page  # the URL's sort, kept in the form


def test_an_unknown_sort_is_a_400_that_names_the_sorts(admin_client, conversation):
    response = admin_client.get(reverse("memories"), {"sort": "content; drop"})
    assert response.status_code == 400
    body = response.content.decode()
    assert "Unknown sort “content; drop”." in body and "<code>-confidence</code>" in body
    assert [m.pk for m in response.context["page"]] == [conversation.deploy.pk, conversation.tea.pk]


def test_the_list_shows_dates_source_session_and_extractions(admin_client, conversation):
    made = memory_create(
        agent_id="agent-a",
        content="The user works in Lisbon.",
        memory_type="fact",
        source_session="s-1",
        actor="consolidation",
    )
    used = datetime(2026, 11, 30, 9, 15, 42, 123456, tzinfo=UTC)
    LongTermMemory.objects.filter(pk=conversation.tea.pk).update(access_count=2, last_accessed=used)
    body = admin_client.get(reverse("memories")).content.decode()

    extracted = body[
        body.index(f'id="memory-{made.pk}"') : body.index(f'id="memory-{conversation.deploy.pk}"')
    ]
    assert "seen in 1 extraction" in extracted
    assert (
        f'from session <a href="{reverse("session", args=["agent-a", "s-1"])}">s-1</a>' in extracted
    )
    # A memory a person wrote was seen in no extraction.
    assert body.count("seen in") == 1
    assert (
        '<time datetime="2026-11-30T09:15:42.123456+00:00" title="2026-11-30T09:15:42.123456+00:00">'
        "2026-11-30 09:15 UTC</time>"
    ) in body
    assert "created <time" in body


def test_a_consolidation_merge_into_a_persons_memory_counts_one_extraction(conversation):
    tea = conversation.tea
    memory_update(tea, actor="consolidation", action="merge", source_count=2)
    assert LongTermMemory.objects.get(pk=tea.pk).extractions == 1


def test_the_list_page_stays_a_few_queries_at_10000_memories(
    admin_client, django_assert_max_num_queries
):
    LongTermMemory.objects.bulk_create(
        LongTermMemory(agent_id=f"agent-{i % 7}", content=f"memory {i}", memory_type="fact")
        for i in range(10_000)
    )
    for query in ({}, {"sort": "-last_used"}, {"sort": "-confidence", "state": "active"}):
        with django_assert_max_num_queries(12):
            response = admin_client.get(reverse("memories"), query)
        assert response.status_code == 200
        assert response.content.decode().count('class="memory card') == 25
    assert response.context["page"].paginator.count == 10_000


def bulk(client, action: str, ids: list[int], **extra):
    data = {"action": action, "memory": ids, "next": reverse("memories") + "?state=active", **extra}
    return client.post(reverse("memories_bulk"), data)


def test_a_bulk_expire_asks_first_then_expires_each_with_its_history(admin_client, conversation):
    ids = [conversation.tea.pk, conversation.deploy.pk]
    confirm = bulk(admin_client, "expire", ids)
    assert confirm.status_code == 200
    body = confirm.content.decode()
    assert "Expire 2 memories?" in body and "The user prefers green tea." in body
    assert '<input type="hidden" name="confirmed" value="1">' in body
    assert not LongTermMemory.objects.expired(timezone.now()).exists()  # nothing yet

    done = bulk(admin_client, "expire", ids, confirmed="1")
    assert done.status_code == 302
    assert done["Location"] == reverse("memories") + "?state=active"
    assert LongTermMemory.objects.expired(timezone.now()).count() == 2
    for pk in ids:
        assert actions(pk) == [("create", "api"), ("expire", "ui:admin")]
    page = admin_client.get(done["Location"]).content.decode()
    assert "2 memories expired." in page and "0 memories" in page  # the count is true

    restored = bulk(admin_client, "restore", [conversation.tea.pk], confirmed="1")
    assert restored.status_code == 302
    assert LongTermMemory.objects.get(pk=conversation.tea.pk).expires_at is None
    assert actions(conversation.tea.pk)[-1] == ("restore", "ui:admin")


def test_a_bulk_delete_keeps_each_history_and_says_what_needed_nothing(admin_client, conversation):
    memory_expire(conversation.deploy, actor="api")
    again = bulk(
        admin_client, "expire", [conversation.tea.pk, conversation.deploy.pk], confirmed="1"
    )
    follow = admin_client.get(again["Location"]).content.decode()
    assert "1 memory expired (1 needed nothing)." in follow
    assert actions(conversation.deploy.pk) == [("create", "api"), ("expire", "api")]

    done = bulk(
        admin_client, "delete", [conversation.tea.pk, conversation.deploy.pk], confirmed="1"
    )
    assert done.status_code == 302
    assert not LongTermMemory.objects.exists()
    deletion = LongTermMemoryHistory.objects.get(memory_id=conversation.tea.pk, action="delete")
    assert deletion.old_content == "The user prefers green tea."
    assert deletion.old_values["confidence"] == 0.7
    assert LongTermMemoryHistory.objects.filter(memory_id=conversation.deploy.pk).count() == 3


def test_bulk_actions_need_the_single_actions_permissions(conversation):
    ids = [conversation.tea.pk]
    viewer = signed_in("vera", groups=("orca viewers",))
    editor = signed_in(
        "edith", perms=("memory.view_longtermmemory", "memory.change_longtermmemory")
    )
    curator = signed_in("cora", groups=("orca curators",))

    assert bulk(viewer, "expire", ids, confirmed="1").status_code == 403
    assert bulk(editor, "delete", ids).status_code == 403
    assert bulk(editor, "delete", ids, confirmed="1").status_code == 403
    assert LongTermMemory.objects.filter(pk=conversation.tea.pk, expires_at=None).exists()
    assert bulk(curator, "delete", ids, confirmed="1").status_code == 302
    assert actions(conversation.tea.pk)[-1] == ("delete", "ui:cora")


def test_a_bulk_action_without_a_selection_changes_nothing(admin_client, conversation):
    response = bulk(admin_client, "delete", [], confirmed="1")
    assert response.status_code == 400
    assert "Select at least one memory." in response.content.decode()
    assert LongTermMemory.objects.count() == 2
    outside = bulk(admin_client, "expire", [conversation.tea.pk], next="https://evil.example/")
    assert 'href="/memories/"' in outside.content.decode()  # never back to another site


def test_the_list_has_the_bulk_form_and_reloads_itself(admin_client, conversation):
    body = admin_client.get(reverse("memories"), {"agent": "agent-a"}).content.decode()
    assert f'<input type="checkbox" form="bulk" name="memory" value="{conversation.tea.pk}"' in body
    assert 'hx-get="/memories/?agent=agent-a" hx-trigger="memories-changed from:body"' in body


def test_the_history_shows_before_and_after_and_old_values(admin_client, conversation):
    tea = conversation.tea
    memory_update(tea, actor="ui:admin", content="The user prefers oolong tea.", confidence=0.9)
    body = admin_client.get(reverse("memory", args=[tea.pk])).content.decode()
    assert "<strong>edited</strong> by admin (dashboard)" in body
    assert "before:</span>" in body and "after:</span>" in body
    assert "confidence: <del>0.70</del> → <ins>0.90</ins>" in body
    assert "version 2" in body


def revert(client, pk: int, version: int | str):
    return client.post(reverse("memory_revert", args=[pk]), {"version": version})


def test_it_reverts_to_an_earlier_version_as_a_new_history_row(admin_client, conversation):
    tea = conversation.tea
    memory_update(tea, actor="ui:admin", content="The user prefers oolong tea.", confidence=0.9)
    memory_expire(tea, actor="ui:admin")
    page = admin_client.get(reverse("memory", args=[tea.pk])).content.decode()
    assert page.count("Revert to version") == 2  # versions 1 and 2, not the current one

    response = revert(admin_client, tea.pk, 1)

    assert response.status_code == 302
    assert response["Location"] == reverse("memory", args=[tea.pk])
    memory = LongTermMemory.objects.get(pk=tea.pk)
    assert (memory.content, memory.confidence, memory.expires_at) == (
        "The user prefers green tea.",
        0.7,
        None,
    )
    assert memory.curated  # a person's choice of text
    row = LongTermMemoryHistory.objects.filter(memory_id=tea.pk).latest("id")
    assert (row.action, row.actor, row.changes["reverted_to"]) == ("revert", "ui:admin", 1)
    assert (row.old_content, row.new_content) == ("The user prefers oolong tea.", memory.content)
    assert row.old_values["confidence"] == 0.9
    body = admin_client.get(response["Location"]).content.decode()
    assert "reverted to version 1</strong> by admin (dashboard)" in body
    assert "Memory #1 reverted to version 1." in body.replace(f"#{tea.pk}", "#1")


def test_a_revert_refuses_what_it_cannot_restore(admin_client, conversation):
    tea = conversation.tea
    # A change recorded before the history kept old values.
    LongTermMemoryHistory.objects.create(
        memory_id=tea.pk,
        agent_id="agent-a",
        action="update",
        actor="api",
        changes={"confidence": 0.2},
    )
    LongTermMemory.objects.filter(pk=tea.pk).update(confidence=0.2)
    assert (
        "Revert to version"
        not in admin_client.get(reverse("memory", args=[tea.pk])).content.decode()
    )
    for version in (1, 2, 9, "x"):
        response = revert(admin_client, tea.pk, version)
        assert response.status_code == 400, version
    assert (
        "did not record the values it replaced" in revert(admin_client, tea.pk, 1).content.decode()
    )
    assert LongTermMemory.objects.get(pk=tea.pk).confidence == 0.2
    assert LongTermMemoryHistory.objects.filter(memory_id=tea.pk).count() == 2


def test_a_deleted_memory_keeps_a_page_with_its_history(admin_client, conversation):
    tea = conversation.tea
    memory_update(tea, actor="ui:admin", confidence=0.9)
    memory_delete(LongTermMemory.objects.get(pk=tea.pk), actor="ui:admin")

    page = admin_client.get(reverse("memory", args=[tea.pk]))
    assert page.status_code == 200
    body = page.content.decode()
    assert "This memory was deleted by admin (dashboard)" in body
    assert "The user prefers green tea." in body
    assert (
        "<strong>deleted</strong> by admin (dashboard)" in body
        and "<strong>created</strong>" in body
    )
    assert "Revert to version" not in body
    fragment = admin_client.get(reverse("memory_history", args=[tea.pk]), headers=HTMX)
    assert fragment.status_code == 200 and "<html" not in fragment.content.decode()
    assert "deleted</strong>" in fragment.content.decode()
    assert admin_client.get(reverse("memory", args=[999])).status_code == 404


def test_deleting_on_the_memorys_page_reloads_it_as_deleted(admin_client, conversation):
    url = reverse("memory", args=[conversation.tea.pk])
    response = admin_client.post(
        reverse("memory_delete", args=[conversation.tea.pk]),
        headers={**HTMX, "HX-Current-URL": f"http://testserver{url}"},
    )
    assert response["HX-Redirect"] == url
    assert not LongTermMemory.objects.filter(pk=conversation.tea.pk).exists()
