"""The dashboard's side of supersession: a memory's chain with dates and links, the undo
button, and the list's superseded state and "as of" filter, through Django's test client."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from memory.memories import memory_create, memory_supersede
from memory.models import LongTermMemory, LongTermMemoryHistory
from tests.test_permissions import signed_in

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
MARCH = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
JUNE = datetime(2026, 6, 15, 18, 30, tzinfo=UTC)


def said(content: str, when: datetime) -> LongTermMemory:
    memory = memory_create(
        agent_id="agent-a", content=content, memory_type="fact", actor="consolidation"
    )
    LongTermMemory.objects.filter(pk=memory.pk).update(valid_from=when)
    memory.refresh_from_db()
    return memory


@pytest.fixture
def chain(db):
    paris = said("I live in Paris", MARCH)
    berlin = said("I moved to Berlin", JUNE)
    memory_supersede(paris, berlin, actor="consolidation")
    return paris, berlin


def test_a_superseded_memorys_page_shows_its_chain_and_the_undo(admin_client, chain):
    paris, berlin = chain

    body = admin_client.get(reverse("memory", args=[paris.pk])).content.decode()

    section = body[body.index("Supersession chain") :]
    assert section.index(f"#{paris.pk}</a> <span") < section.index(f"#{berlin.pk}</a>")
    assert f'<a href="{reverse("memory", args=[berlin.pk])}">#{berlin.pk}</a>' in section
    assert '<time datetime="2026-06-15T18:30:00+00:00"' in section  # until, and since
    assert "<strong>current</strong>" in section  # the newer one
    assert f'action="{reverse("memory_unsupersede", args=[paris.pk])}"' in section
    card = body[: body.index("Supersession chain")]
    assert ">superseded</span>" in card and "superseded <time" in card
    # The newer one shows the chain without an undo: it is current.
    newer = admin_client.get(reverse("memory", args=[berlin.pk])).content.decode()
    assert "Supersession chain" in newer
    assert reverse("memory_unsupersede", args=[berlin.pk]) not in newer


def test_undo_makes_the_memory_current_again(admin_client, chain):
    paris, _ = chain

    response = admin_client.post(reverse("memory_unsupersede", args=[paris.pk]), follow=True)

    assert response.redirect_chain == [(reverse("memory", args=[paris.pk]), 302)]
    assert f"Memory #{paris.pk} is current again." in response.content.decode()
    paris.refresh_from_db()
    assert (paris.valid_until, paris.superseded_by_id) == (None, None)
    last = LongTermMemoryHistory.objects.filter(memory_id=paris.pk).latest("id")
    assert (last.action, last.actor) == ("unsupersede", "ui:admin")
    again = admin_client.post(reverse("memory_unsupersede", args=[paris.pk]), follow=True)
    assert f"Memory #{paris.pk} is current already." in again.content.decode()


def test_a_viewer_sees_the_chain_but_no_undo(chain):
    paris, _ = chain
    client = signed_in("vera", groups=("orca viewers",))

    body = client.get(reverse("memory", args=[paris.pk])).content.decode()

    assert "Supersession chain" in body
    assert reverse("memory_unsupersede", args=[paris.pk]) not in body
    assert client.post(reverse("memory_unsupersede", args=[paris.pk])).status_code == 403
    assert LongTermMemory.objects.get(pk=paris.pk).valid_until == JUNE


def test_the_list_filters_superseded_and_as_of_a_day(admin_client, chain):
    paris, berlin = chain

    def listed(**query) -> list[int]:
        response = admin_client.get(reverse("memories"), query, headers=HTMX)
        return [m.pk for m in response.context["page"]]

    assert listed() == [berlin.pk, paris.pk]
    assert listed(state="active") == [berlin.pk]
    assert listed(state="superseded") == [paris.pk]
    assert listed(as_of="2026-04-01") == [paris.pk]
    assert listed(as_of="2026-06-16") == [berlin.pk]


def test_the_chain_page_is_in_chinese(admin_client, chain):
    paris, _ = chain
    admin_client.cookies["django_language"] = "zh-hans"

    body = admin_client.get(reverse("memory", args=[paris.pk])).content.decode()

    assert "取代链" in body and "撤销取代" in body and "已被取代" in body
