"""The dashboard's forget page (memory/views_forget.py): preview, then confirm, for each
scope; the receipts listed; only for users who may delete sessions and memories."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from memory.models import ForgetReceipt, LongTermMemory, MainMessage
from memory.views_forget import FORGET
from tests.factories import add_message

pytestmark = pytest.mark.django_db


@pytest.fixture
def forgetter(client):
    user = User.objects.create_user("fern", password="pw")
    for name in FORGET:
        app, codename = name.split(".")
        user.user_permissions.add(
            Permission.objects.get(content_type__app_label=app, codename=codename)
        )
    client.force_login(user)
    return client


def test_it_previews_a_query_then_forgets_it(forgetter):
    add_message("my bank PIN is 5521")
    add_message("the weather is fine")

    preview = forgetter.post(
        reverse("forget"), {"scope": "query", "agent_id": "a1", "query": "5521"}
    )

    assert preview.status_code == 200
    page = preview.content.decode()
    assert "<mark>5521</mark>" in page and "Forget for good" in page
    assert MainMessage.objects.count() == 2
    token = preview.context["preview"]["token"]

    done = forgetter.post(
        reverse("forget"),
        {"scope": "query", "agent_id": "a1", "query": "5521", "token": token, "confirm": "1"},
        follow=True,
    )

    assert list(MainMessage.objects.values_list("content", flat=True)) == ["the weather is fine"]
    receipt = ForgetReceipt.objects.get()
    assert receipt.actor == "ui:fern" and receipt.scope == "query"
    assert f"receipt #{receipt.pk}" in done.content.decode()
    assert "5521" not in done.content.decode()


@pytest.mark.parametrize("scope, fields", [("session", {"session_id": "s1"}), ("agent", {})])
def test_it_forgets_a_session_or_an_agent_after_its_preview(forgetter, scope, fields):
    add_message("hello there")
    add_message("elsewhere", agent_id="a2")
    asked = {"scope": scope, "agent_id": "a1", **fields}

    preview = forgetter.post(reverse("forget"), asked)
    assert ("messages", 1) in [(str(label), n) for label, n in preview.context["preview"]["rows"]]
    assert MainMessage.objects.count() == 2

    forgetter.post(reverse("forget"), {**asked, "confirm": "1"})

    assert list(MainMessage.objects.values_list("agent_id", flat=True)) == ["a2"]
    assert ForgetReceipt.objects.get().scope == scope


def test_a_curator_without_the_message_delete_permission_gets_403(client):
    user = User.objects.create_user("cory", password="pw")
    user.user_permissions.add(Permission.objects.get(codename="delete_longtermmemory"))
    client.force_login(user)
    assert client.get(reverse("forget")).status_code == 403
    assert LongTermMemory.objects.count() == 0


def test_the_page_is_in_chinese_too(forgetter):
    page = forgetter.get(reverse("forget"), HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "遗忘" in page
