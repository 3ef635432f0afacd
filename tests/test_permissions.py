"""The dashboard checks Django's model permissions: viewing needs view_*, curating needs
change/delete of long-term memories; without them a signed-in user (staff or not) gets 403
and sees no button for it. Migration 0010 makes the groups that grant them."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, Permission, User
from django.test import Client
from django.urls import reverse

from memory.models import LongTermMemory, LongTermMemoryHistory
from memory.views import CHANGE_MEMORIES, VIEW_HISTORY, VIEW_SESSIONS

pytestmark = pytest.mark.django_db

HTMX = {"HX-Request": "true"}
VIEWS = {
    "view_consolidationrun",
    "view_longtermmemory",
    "view_longtermmemoryhistory",
    "view_mainmessage",
    "view_shorttermmemory",
    "view_subagentmessage",
}


def signed_in(
    username: str, *, groups: tuple[str, ...] = (), perms: tuple[str, ...] = (), staff: bool = False
) -> Client:
    user = User.objects.create_user(username, password="pw", is_staff=staff)
    user.groups.set(Group.objects.filter(name__in=groups))
    for perm in perms:
        app_label, codename = perm.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    client = Client()
    client.force_login(user)
    return client


def pages(c) -> list[str]:
    """Every page a viewer may open, for one `conversation`."""
    return [
        reverse("dashboard"),
        reverse("sessions"),
        reverse("session", args=["agent-a", "s-1"]),
        reverse("subagent_run", args=[c.ask.pk]),
        reverse("memories"),
        reverse("memory", args=[c.tea.pk]),
        reverse("memory_history", args=[c.tea.pk]),
    ]


def curation(c) -> list[tuple[str, str]]:
    """(method, url) of everything that changes a memory."""
    return [
        ("get", reverse("memory_edit", args=[c.tea.pk])),
        ("post", reverse("memory_edit", args=[c.tea.pk])),
        ("post", reverse("memory_expire", args=[c.tea.pk])),
        ("post", reverse("memory_restore", args=[c.tea.pk])),
        ("post", reverse("memory_unarchive", args=[c.tea.pk])),
        ("get", reverse("memory_delete", args=[c.tea.pk])),
        ("post", reverse("memory_delete", args=[c.tea.pk])),
        ("post", reverse("memory_revert", args=[c.tea.pk])),
        ("post", reverse("memory_unsupersede", args=[c.tea.pk])),
        ("post", reverse("memories_bulk")),
    ]


def unchanged(c) -> bool:
    tea = LongTermMemory.objects.filter(pk=c.tea.pk, expires_at=None).first()
    curated = LongTermMemoryHistory.objects.filter(actor__startswith="ui:").exists()
    return tea is not None and tea.content == c.tea.content and not curated


def test_the_migration_makes_a_viewers_and_a_curators_group(db):
    def codenames(name: str) -> set[str]:
        group = Group.objects.get(name=name)
        return set(group.permissions.values_list("codename", flat=True))

    assert codenames("orca viewers") == VIEWS
    assert codenames("orca curators") == VIEWS | {
        "change_longtermmemory",
        "delete_longtermmemory",
    }


@pytest.mark.parametrize("staff", [False, True], ids=["user", "staff"])
def test_a_user_without_permissions_can_open_and_change_nothing(conversation, staff):
    client = signed_in("nobody", staff=staff)
    requests = [("get", url) for url in pages(conversation)] + curation(conversation)
    requests.append(("post", reverse("context_preview", args=["agent-a", "s-1"])))

    for method, url in requests:
        for headers in ({}, HTMX):
            response = getattr(client, method)(url, headers=headers)
            assert response.status_code == 403, (method, url)

    assert unchanged(conversation)
    assert LongTermMemory.objects.get(pk=conversation.tea.pk).access_count == 0
    page = client.get(reverse("dashboard")).content.decode()
    assert "orca viewers" in page  # the 403 page says how to get access


def test_a_viewer_sees_every_page_and_no_curation(conversation):
    client = signed_in("vera", groups=("orca viewers",))

    for url in pages(conversation):
        assert client.get(url).status_code == 200, url
    for method, url in curation(conversation):
        assert getattr(client, method)(url).status_code == 403, (method, url)

    assert unchanged(conversation)
    listing = client.get(reverse("memories")).content.decode()
    card = client.get(reverse("memory", args=[conversation.tea.pk])).content.decode()
    for body in (listing, card):
        for name in ("memory_edit", "memory_expire", "memory_delete"):
            assert reverse(name, args=[conversation.tea.pk]) not in body, name
    assert reverse("memory_revert", args=[conversation.tea.pk]) not in card
    assert 'form="bulk"' not in listing and reverse("memories_bulk") not in listing
    assert "History" in card and "create" in card  # the history is part of viewing
    preview = client.post(
        reverse("context_preview", args=["agent-a", "s-1"]), {"query": "tea", "model_window": 8192}
    )
    assert preview.status_code == 200


def test_a_curator_curates_through_the_dashboard(conversation):
    client = signed_in("cora", groups=("orca curators",))
    card = client.get(reverse("memory", args=[conversation.tea.pk])).content.decode()
    for name in ("memory_edit", "memory_expire", "memory_delete"):
        assert reverse(name, args=[conversation.tea.pk]) in card, name

    response = client.post(reverse("memory_expire", args=[conversation.tea.pk]), headers=HTMX)

    assert response.status_code == 200
    assert LongTermMemory.objects.get(pk=conversation.tea.pk).is_expired()
    change = LongTermMemoryHistory.objects.filter(memory_id=conversation.tea.pk).latest("id")
    assert (change.action, change.actor) == ("expire", "ui:cora")


def test_deleting_needs_the_delete_permission(conversation):
    client = signed_in("edith", perms=CHANGE_MEMORIES)
    card = client.get(reverse("memory", args=[conversation.tea.pk])).content.decode()
    assert reverse("memory_edit", args=[conversation.tea.pk]) in card
    assert reverse("memory_delete", args=[conversation.tea.pk]) not in card

    response = client.post(reverse("memory_delete", args=[conversation.tea.pk]))

    assert response.status_code == 403
    assert LongTermMemory.objects.filter(pk=conversation.tea.pk).exists()


def test_the_history_needs_its_own_view_permission(conversation):
    client = signed_in("mia", perms=("memory.view_longtermmemory",))
    card = client.get(reverse("memory", args=[conversation.tea.pk]))
    listing = client.get(reverse("memories")).content.decode()

    assert card.status_code == 200
    assert "<h2>History</h2>" not in card.content.decode()
    assert reverse("memory_history", args=[conversation.tea.pk]) not in listing
    assert client.get(reverse("memory_history", args=[conversation.tea.pk])).status_code == 403
    assert (
        signed_in("hal", perms=VIEW_HISTORY)
        .get(reverse("memory_history", args=[conversation.tea.pk]))
        .status_code
        == 200
    )


def test_the_session_page_hides_what_the_user_may_not_open(conversation):
    client = signed_in("sam", perms=VIEW_SESSIONS)
    body = client.get(reverse("session", args=["agent-a", "s-1"])).content.decode()

    assert reverse("subagent_run", args=[conversation.ask.pk]) not in body
    assert reverse("context_preview", args=["agent-a", "s-1"]) not in body
    assert conversation.summary.content in body
    assert client.get(reverse("subagent_run", args=[conversation.ask.pk])).status_code == 403


def test_the_menu_shows_only_the_pages_the_user_may_open(conversation):
    def menu(client: Client) -> str:
        body = client.get(reverse("memories")).content.decode()
        return body[body.index("<nav>") : body.index("</nav>")]

    memories_only = menu(signed_in("max", perms=("memory.view_longtermmemory",)))
    everything = menu(signed_in("vic", groups=("orca viewers",)))

    assert reverse("memories") in memories_only
    assert reverse("sessions") not in memories_only
    assert reverse("admin:index") not in everything
    assert all(reverse(n) in everything for n in ("dashboard", "sessions", "memories"))
