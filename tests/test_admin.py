"""Curation in the Django admin keeps the memories' history, and `ensure_admin`."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from memory import index, vectors
from memory.auth import api_key_create, api_key_revoke
from memory.memories import memory_expire
from memory.models import LongTermMemory, LongTermMemoryHistory, MainMessage, ShortTermMemory
from tests.factories import add_message

pytestmark = pytest.mark.django_db

CHANGELIST = reverse("admin:memory_longtermmemory_changelist")


def history(memory_id: int) -> list[tuple[str, str]]:
    rows = LongTermMemoryHistory.objects.filter(memory_id=memory_id).order_by("id")
    return [(h.action, h.actor) for h in rows]


def test_every_admin_page_opens(admin_client, conversation):
    for name in (
        "memory_mainmessage",
        "memory_shorttermmemory",
        "memory_longtermmemory",
        "memory_longtermmemoryhistory",
        "memory_consolidationrun",
        "memory_apikey",
        "subagents_subagentmessage",
    ):
        assert admin_client.get(reverse(f"admin:{name}_changelist")).status_code == 200, name
    url = reverse("admin:memory_longtermmemory_change", args=[conversation.tea.pk])
    assert admin_client.get(url).status_code == 200


@pytest.mark.parametrize(
    ("model", "one_line", "text_areas"),
    [
        ("memory_apikey", ["agent_id", "name"], []),
        ("memory_longtermmemory", ["agent_id", "source_session"], ["content"]),
        ("memory_mainmessage", ["agent_id", "session_id"], ["content", "metadata"]),
        ("memory_shorttermmemory", ["agent_id", "session_id"], ["content"]),
        ("subagents_subagentmessage", ["agent_name"], ["content"]),
    ],
)
def test_identifiers_and_labels_are_one_line_inputs_text_a_text_area(
    admin_client, db, model, one_line, text_areas
):
    """The API key form (and the others) showed an agent's id and a key's name in text
    areas: one-line values, which a return key would have broken."""
    body = admin_client.get(reverse(f"admin:{model}_add")).content.decode()
    assert re.findall(r'<textarea name="(\w+)"', body) == text_areas
    inputs = re.findall(r'<input type="text" name="(\w+)"', body)
    assert all(name in inputs for name in one_line), inputs


def test_it_lists_and_filters_memories(admin_client, conversation):
    memory_expire(conversation.deploy, actor="api")
    response = admin_client.get(CHANGELIST, {"expired": "yes"})
    assert [m.pk for m in response.context["cl"].result_list] == [conversation.deploy.pk]
    response = admin_client.get(CHANGELIST, {"q": "green"})
    assert [m.pk for m in response.context["cl"].result_list] == [conversation.tea.pk]


def test_an_admin_edit_goes_through_the_history(admin_client, conversation):
    url = reverse("admin:memory_longtermmemory_change", args=[conversation.tea.pk])
    data = {
        "content": "The user prefers black tea.",
        "memory_type": "preference",
        "confidence": "0.8",
        "expires_at_0": "",
        "expires_at_1": "",
        "source_session": "",
    }
    response = admin_client.post(url, data)
    assert response.status_code == 302
    memory = LongTermMemory.objects.get(pk=conversation.tea.pk)
    assert (memory.content, memory.confidence, memory.agent_id) == (
        "The user prefers black tea.",
        0.8,
        "agent-a",
    )
    change = LongTermMemoryHistory.objects.filter(memory_id=memory.pk).latest("id")
    assert (change.action, change.actor) == ("update", "admin:admin")
    assert change.old_content == "The user prefers green tea."
    assert change.changes == {"confidence": 0.8}


def test_an_admin_edit_is_validated(admin_client, conversation):
    url = reverse("admin:memory_longtermmemory_change", args=[conversation.tea.pk])
    data = {"content": "ok", "memory_type": "preference", "confidence": "1.5"}
    response = admin_client.post(url, data)
    assert response.status_code == 200
    assert "confidence must be between 0 and 1" in response.content.decode()
    assert history(conversation.tea.pk) == [("create", "api")]


def test_an_admin_creation_is_recorded(admin_client, db):
    data = {
        "agent_id": "agent-c",
        "content": "We ship on Mondays.",
        "memory_type": "decision",
        "confidence": "0.6",
        "source_session": "s-9",
    }
    response = admin_client.post(reverse("admin:memory_longtermmemory_add"), data)
    assert response.status_code == 302
    memory = LongTermMemory.objects.get(agent_id="agent-c")
    assert (memory.content, memory.confidence, memory.source_session) == (
        "We ship on Mondays.",
        0.6,
        "s-9",
    )
    assert history(memory.pk) == [("create", "admin:admin")]


def test_admin_actions_expire_restore_reembed_and_delete(admin_client, conversation):
    pk = conversation.tea.pk
    LongTermMemory.objects.filter(pk=pk).update(has_embedding=True)

    def act(action: str, **extra):
        data = {"action": action, "_selected_action": [pk], **extra}
        return admin_client.post(CHANGELIST, data, follow=True)

    act("expire")
    assert LongTermMemory.objects.get(pk=pk).is_expired()
    act("restore")
    assert LongTermMemory.objects.get(pk=pk).expires_at is None
    act("reembed")
    assert LongTermMemory.objects.get(pk=pk).has_embedding is False
    act("delete_selected", post="yes")
    assert not LongTermMemory.objects.filter(pk=pk).exists()
    assert history(pk) == [
        ("create", "api"),
        ("expire", "admin:admin"),
        ("restore", "admin:admin"),
        ("delete", "admin:admin"),
    ]


def test_archived_memories_and_revoked_keys_are_filtered_in_words(admin_client, conversation):
    """Django's filter for a missing date said "Empty" and "Not empty": "archived: Empty"
    reads as the opposite of what it means."""
    LongTermMemory.objects.filter(pk=conversation.deploy.pk).update(archived_at=timezone.now())
    key, _secret = api_key_create(agent_id="agent-a", name="phone")
    api_key_revoke(key)
    api_key_create(agent_id="agent-a", name="laptop")

    body = admin_client.get(CHANGELIST).content.decode()
    assert "not archived" in body and "Not empty" not in body
    response = admin_client.get(CHANGELIST, {"archived": "yes"})
    assert [m.pk for m in response.context["cl"].result_list] == [conversation.deploy.pk]
    response = admin_client.get(CHANGELIST, {"archived": "no"})
    assert conversation.deploy.pk not in [m.pk for m in response.context["cl"].result_list]

    LongTermMemory.objects.filter(pk=conversation.deploy.pk).update(
        valid_until=timezone.now() - timedelta(minutes=1)
    )
    response = admin_client.get(CHANGELIST, {"superseded": "yes"})
    assert [m.pk for m in response.context["cl"].result_list] == [conversation.deploy.pk]
    response = admin_client.get(CHANGELIST, {"superseded": "no"})
    assert conversation.deploy.pk not in [m.pk for m in response.context["cl"].result_list]

    keys = reverse("admin:memory_apikey_changelist")
    body = admin_client.get(keys).content.decode()
    assert "not revoked" in body and "Not empty" not in body
    response = admin_client.get(keys, {"revoked": "yes"})
    assert [k.name for k in response.context["cl"].result_list] == ["phone"]
    response = admin_client.get(keys, {"revoked": "no"})
    assert [k.name for k in response.context["cl"].result_list] == ["laptop"]


def test_a_memorys_page_names_its_extractions_apart_from_its_sources(admin_client, conversation):
    """Its source count was labelled "sources" like the list of sources under it, and
    differed from that list's length (a person's edit is a source, not an extraction)."""
    url = reverse("admin:memory_longtermmemory_change", args=[conversation.tea.pk])
    body = admin_client.get(url).content.decode()
    labels = re.findall(r"<label>([^<]+):</label>", body)
    assert labels.count("Sources") == 1, labels
    assert "Seen in extractions" in labels
    assert admin_client.get(reverse("admin:memory_longtermmemory_add")).status_code == 200


def test_derived_fields_are_read_only(admin_client, conversation):
    url = reverse("admin:memory_mainmessage_change", args=[conversation.ask.pk])
    form = admin_client.get(url).context["adminform"].form
    assert "token_count" not in form.fields and "has_embedding" not in form.fields
    url = reverse("admin:memory_longtermmemory_change", args=[conversation.tea.pk])
    form = admin_client.get(url).context["adminform"].form
    assert {"has_embedding", "access_count", "agent_id"}.isdisjoint(form.fields)


def test_history_and_consolidation_runs_are_read_only(admin_client, conversation):
    change = LongTermMemoryHistory.objects.filter(memory_id=conversation.tea.pk).get()
    url = reverse("admin:memory_longtermmemoryhistory_change", args=[change.pk])
    response = admin_client.post(url, {"actor": "forged"})
    assert response.status_code == 403
    assert LongTermMemoryHistory.objects.get(pk=change.pk).actor == "api"
    add = reverse("admin:memory_consolidationrun_add")
    assert admin_client.get(add).status_code == 403


def test_reembed_messages_from_the_admin(admin_client, conversation):
    MainMessage.objects.update(has_embedding=True)
    data = {"action": "reembed", "_selected_action": [conversation.ask.pk]}
    admin_client.post(reverse("admin:memory_mainmessage_changelist"), data)
    assert list(MainMessage.objects.filter(has_embedding=False)) == [conversation.ask]


def test_ensure_admin_creates_a_superuser_once(client):
    out = StringIO()
    call_command("ensure_admin", stdout=out)
    match = re.fullmatch(r"Sign in at http://127.0.0.1:8000/ as admin / (\S+)\n", out.getvalue())
    assert match
    # Through the sign-in page, as a person does (and past the throttling's backend).
    signed_in = client.post(reverse("login"), {"username": "admin", "password": match[1]})
    assert signed_in.status_code == 302 and signed_in["Location"] == reverse("dashboard")
    assert client.get(reverse("dashboard")).status_code == 200
    assert client.get(reverse("memories")).status_code == 200

    again = StringIO()
    call_command("ensure_admin", stdout=again)
    assert "changepassword admin" in again.getvalue()
    assert get_user_model().objects.count() == 1


def edit_message(admin_client, message: MainMessage, content: str, metadata: str = "null") -> None:
    url = reverse("admin:memory_mainmessage_change", args=[message.pk])
    form = admin_client.get(url).context["adminform"].form
    data = {name: form.initial.get(name) or "" for name in form.fields}
    data.update(content=content, metadata=metadata)
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.content[:500]


def test_editing_a_messages_text_recounts_its_tokens_and_asks_for_a_new_vector(
    admin_client, conversation
):
    message = conversation.ask
    MainMessage.objects.filter(pk=message.pk).update(has_embedding=True)

    edit_message(admin_client, message, "我喜欢喝红茶，不喜欢绿茶。")

    message.refresh_from_db()
    assert (message.content, message.token_count, message.has_embedding) == (
        "我喜欢喝红茶，不喜欢绿茶。",
        17,  # 11 CJK characters x 1.5 + 2 punctuation marks / 4
        False,
    )


def test_deleting_messages_and_summaries_in_the_admin_deletes_their_vectors(
    admin_client, conversation, fake_embedder
):
    def stored(table: index.VectorTable) -> set[int]:
        probe = fake_embedder.embed(["probe"])[0]
        return {hit.id for hit in index.knn(table, agent_id="agent-a", embedding=probe, k=4096)}

    vectors.embed_pending()
    ask, reply, summary = conversation.ask, conversation.reply, conversation.summary
    assert {ask.pk, reply.pk} <= stored(index.MESSAGE_VECTORS)
    assert summary.pk in stored(index.SUMMARY_VECTORS)

    confirm = {"post": "yes"}
    admin_client.post(reverse("admin:memory_mainmessage_delete", args=[ask.pk]), confirm)
    admin_client.post(
        reverse("admin:memory_mainmessage_changelist"),
        {"action": "delete_selected", "_selected_action": [reply.pk], **confirm},
    )
    admin_client.post(reverse("admin:memory_shorttermmemory_delete", args=[summary.pk]), confirm)

    assert not MainMessage.objects.filter(pk__in=[ask.pk, reply.pk]).exists()
    assert not ShortTermMemory.objects.filter(pk=summary.pk).exists()
    assert stored(index.MESSAGE_VECTORS).isdisjoint({ask.pk, reply.pk})
    assert summary.pk not in stored(index.SUMMARY_VECTORS)


def found(query: str) -> set[int]:
    hits = index.lexical_search(index.MESSAGE_TEXT, agent_id="a1", query=query, k=10)
    return {hit.id for hit in hits}


def test_editing_a_messages_text_refreshes_the_context_of_the_replies_after_it(admin_client):
    question = add_message("Did you visit the aquarium yesterday?")
    answer = add_message("Yes, it was wonderful.", role="assistant")
    add_message("Great to hear.")
    third = add_message("We should go again.", role="assistant")  # out of the question's context

    assert answer.pk in found("aquarium") and third.pk not in found("aquarium")

    edit_message(admin_client, question, "Did you visit the planetarium yesterday?")

    assert found("aquarium") == set()
    assert {question.pk, answer.pk} <= found("planetarium")
    assert third.pk not in found("planetarium")


def test_a_message_keeps_who_said_it_where_and_a_new_speaker_is_indexed(admin_client):
    message = add_message("I adopted a puppy.")
    MainMessage.objects.filter(pk=message.pk).update(has_embedding=True)
    url = reverse("admin:memory_mainmessage_change", args=[message.pk])
    form = admin_client.get(url).context["adminform"].form
    assert not {"agent_id", "session_id", "role"} & set(form.fields)

    edit_message(admin_client, message, message.content, metadata='{"speaker": "Melanie"}')

    assert found("Melanie") == {message.pk}
    message.refresh_from_db()
    assert (message.metadata, message.has_embedding) == ({"speaker": "Melanie"}, False)


def test_a_summary_keeps_its_scope_and_an_edited_text_asks_for_a_new_vector(
    admin_client, conversation
):
    summary = conversation.summary
    ShortTermMemory.objects.filter(pk=summary.pk).update(has_embedding=True)
    url = reverse("admin:memory_shorttermmemory_change", args=[summary.pk])
    form = admin_client.get(url).context["adminform"].form
    assert not {"agent_id", "session_id"} & set(form.fields)
    data = {name: form.initial.get(name) or "" for name in form.fields}
    data.update(content="The user asked how to deploy Django with gunicorn.")

    response = admin_client.post(url, data)

    assert response.status_code == 302, response.content[:500]
    summary.refresh_from_db()
    assert summary.content.endswith("with gunicorn.") and summary.has_embedding is False


def test_a_message_deleted_in_the_admin_is_no_longer_found_through_the_replies_after_it(
    admin_client,
):
    question = add_message("Did you visit the aquarium yesterday?")
    answer = add_message("Yes, it was wonderful.", role="assistant")
    assert found("aquarium") == {question.pk, answer.pk}

    admin_client.post(
        reverse("admin:memory_mainmessage_delete", args=[question.pk]), {"post": "yes"}
    )

    assert found("aquarium") == set()
    assert found("wonderful") == {answer.pk}


# --- adding rows by hand goes through the service (issue 15, item 11) -----------------------

MESSAGE_ADD = reverse("admin:memory_mainmessage_add")


def message_form(**fields: str) -> dict[str, str]:
    return {
        "agent_id": "a1",
        "session_id": "s1",
        "role": "user",
        "content": "I moved to Lisbon last month.",
        "msg_type": "normal",
        "metadata": "null",
        **fields,
    }


def test_an_admin_added_message_goes_through_message_add(
    admin_client, fake_embedder, django_capture_on_commit_callbacks
):
    admin_client.post(MESSAGE_ADD, message_form())
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            MESSAGE_ADD, message_form(role="assistant", content="Lisbon is lovely in spring.")
        )

    assert response.status_code == 302
    reply = MainMessage.objects.get(role="assistant")
    assert (reply.agent_id, reply.session_id, reply.token_count) == ("a1", "s1", 7)
    assert reply.has_embedding is True  # embedded by the task queued on commit
    summary = ShortTermMemory.objects.get(agent_id="a1", session_id="s1")
    assert summary.reply_id == reply.pk  # the turn was summarised, as for an API message
    assert response["Location"] == reverse("admin:memory_mainmessage_changelist")


# Hostile cases of the admin's forms (issue 15): each is refused with the error shown, and
# nothing is stored. (Table of this module; see issue 15.)
BAD_ADMIN_MESSAGES = [
    pytest.param({"session_id": "a/b"}, "session_id", id="session-slash"),
    pytest.param({"session_id": "s\x00"}, "session_id", id="session-nul"),
    pytest.param({"session_id": "s\x07"}, "session_id", id="session-control"),
    pytest.param({"session_id": "x" * 201}, "session_id", id="session-too-long"),
    pytest.param({"agent_id": "a/b"}, "agent_id", id="agent-slash"),
    pytest.param({"agent_id": "a\nb"}, "agent_id", id="agent-newline"),
    pytest.param({"content": "   "}, "content", id="content-blank"),
    pytest.param({"role": "robot"}, "role", id="role-unknown"),
    pytest.param({"msg_type": "gossip"}, "msg_type", id="type-unknown"),
    pytest.param({"metadata": "[1, 2]"}, "metadata", id="metadata-list"),
    pytest.param({"metadata": '"text"'}, "metadata", id="metadata-text"),
    pytest.param(
        {"role": "tool", "metadata": '{"subagent": {"parent_msg_id": 1, "agent_name": "x"}}'},
        "metadata",
        id="metadata-forged-run",
    ),
    pytest.param({"metadata": "{not json"}, "metadata", id="metadata-malformed"),
    pytest.param({"metadata": '{"x": NaN}'}, "metadata", id="metadata-nan"),
    pytest.param({"metadata": '{"x": 1e400}'}, "metadata", id="metadata-infinite"),
]


@pytest.mark.parametrize(("fields", "field"), BAD_ADMIN_MESSAGES)
def test_the_admin_refuses_a_message_the_api_would_refuse(admin_client, fields, field):
    response = admin_client.post(MESSAGE_ADD, message_form(**fields))

    assert response.status_code == 200
    form = response.context["adminform"].form
    assert field in form.errors, form.errors
    assert "errornote" in response.content.decode()
    assert not MainMessage.objects.exists()


def test_an_admin_edit_keeps_the_run_record_of_a_result(admin_client, conversation):
    result = conversation.result
    url = reverse("admin:memory_mainmessage_change", args=[result.pk])
    form = admin_client.get(url).context["adminform"].form
    data = {name: form.initial.get(name) or "" for name in form.fields}
    run = dict(result.metadata["subagent"])

    forged = json.dumps({"subagent": {**run, "agent_name": "someone-else"}})
    refused = admin_client.post(url, {**data, "metadata": forged})
    removed = admin_client.post(url, {**data, "metadata": '{"speaker": "bot"}'})
    kept = admin_client.post(url, {**data, "metadata": json.dumps({"subagent": run, "note": 1})})

    assert refused.status_code == removed.status_code == 200
    assert "cannot be added, changed or removed" in refused.content.decode()
    assert kept.status_code == 302
    result.refresh_from_db()
    assert result.metadata == {"subagent": run, "note": 1}


def test_an_admin_edit_of_a_plain_message_cannot_add_a_run(admin_client, conversation):
    url = reverse("admin:memory_mainmessage_change", args=[conversation.ask.pk])
    form = admin_client.get(url).context["adminform"].form
    data = {name: form.initial.get(name) or "" for name in form.fields}
    forged = '{"subagent": {"parent_msg_id": 1, "agent_name": "x"}}'

    response = admin_client.post(url, {**data, "metadata": forged})

    assert response.status_code == 200
    conversation.ask.refresh_from_db()
    assert conversation.ask.metadata is None


def test_an_admin_added_summary_is_checked_and_embedded(
    admin_client, fake_embedder, django_capture_on_commit_callbacks
):
    add = reverse("admin:memory_shorttermmemory_add")
    summary = {"content": "The user moved.", "source_count": "1", "confidence": "0.8"}

    refused = admin_client.post(add, {**summary, "agent_id": "a1", "session_id": "a/b"})
    with django_capture_on_commit_callbacks(execute=True):
        added = admin_client.post(add, {**summary, "agent_id": "a1", "session_id": "s1"})

    assert refused.status_code == 200 and "session_id" in refused.context["adminform"].form.errors
    assert added.status_code == 302
    assert list(ShortTermMemory.objects.values_list("session_id", "has_embedding")) == [
        ("s1", True)
    ]


def test_an_admin_added_subagent_reply_goes_through_subagent_record(admin_client, conversation):
    from subagents.models import SubagentMessage

    add = reverse("admin:subagents_subagentmessage_add")
    reply = {"parent_msg": str(conversation.reply.pk), "role": "assistant", "content": "ok"}
    before = SubagentMessage.objects.count()

    bad_name = admin_client.post(add, {**reply, "agent_name": "a/b"})
    finished = admin_client.post(
        add, {**reply, "parent_msg": str(conversation.ask.pk), "agent_name": "researcher"}
    )
    added = admin_client.post(add, {**reply, "agent_name": "critic"})

    assert bad_name.status_code == finished.status_code == 200
    assert "already finished" in finished.content.decode()
    assert added.status_code == 302
    assert SubagentMessage.objects.count() == before + 1
    stored = SubagentMessage.objects.latest("id")
    assert (stored.agent_name, stored.session_id) == ("critic", conversation.reply.session_id)
