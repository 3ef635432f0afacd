"""`metadata.subagent` belongs to the service: no client forges a finished sub-agent run, and
the pages never fail on odd run metadata already stored (older rows, imports)."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from memory.messages import message_add
from memory.models import MainMessage
from memory.subagent_run import SubagentRun, result_run, run_in, with_run
from subagents.runs import run_results

pytestmark = pytest.mark.django_db

FORGED_RUN = {"parent_msg_id": 1, "agent_name": "coder", "truncated": False}

# Hostile cases: run metadata as it may sit in the database. Each must leave the session
# page and the sub-agent page answering 200. (Table of this module; see issue 15.)
ODD_RUN_METADATA = [
    pytest.param({"subagent": {"parent_msg_id": "PARENT"}}, id="no-agent-name"),
    pytest.param({"subagent": {"parent_msg_id": "PARENT", "agent_name": 7}}, id="name-int"),
    pytest.param({"subagent": {"parent_msg_id": "PARENT", "agent_name": ""}}, id="name-empty"),
    pytest.param({"subagent": {"parent_msg_id": "PARENT", "agent_name": None}}, id="name-null"),
    pytest.param(
        {"subagent": {"parent_msg_id": "PARENT", "agent_name": ["a", "b"]}}, id="name-list"
    ),
    pytest.param(
        {
            "subagent": {
                "parent_msg_id": "PARENT",
                "agent_name": "coder",
                "truncated": "yes",
                "original_tokens": "many",
            }
        },
        id="odd-truncation",
    ),
    pytest.param(
        {"subagent": {"parent_msg_id": "PARENT", "agent_name": "c", "truncated": True}},
        id="truncated-without-tokens",
    ),
    pytest.param({"subagent": {"parent_msg_id": -5, "agent_name": "coder"}}, id="parent-negative"),
    pytest.param({"subagent": {"parent_msg_id": 0, "agent_name": "coder"}}, id="parent-zero"),
    pytest.param({"subagent": {"parent_msg_id": "12", "agent_name": "coder"}}, id="parent-text"),
    pytest.param({"subagent": {"parent_msg_id": True, "agent_name": "coder"}}, id="parent-bool"),
    pytest.param({"subagent": {"parent_msg_id": 10**30, "agent_name": "c"}}, id="parent-huge"),
    pytest.param({"subagent": "coder"}, id="run-text"),
    pytest.param({"subagent": ["coder"]}, id="run-list"),
    pytest.param({"subagent": None}, id="run-null"),
    pytest.param({"subagent": {}}, id="run-empty"),
]


def _with_parent(value: object, parent_id: int) -> object:
    """The table's metadata with "PARENT" replaced by the parent message's id."""
    return json.loads(json.dumps(value).replace('"PARENT"', str(parent_id)))


@pytest.fixture
def parent(api) -> dict:
    return api.post(
        "/sessions/s1/messages", {"role": "assistant", "content": "Ask the coder."}
    ).json()


@pytest.mark.parametrize("role", ["tool", "user", "assistant"])
def test_a_client_cannot_set_metadata_subagent(api, parent, role):
    forged = {**FORGED_RUN, "parent_msg_id": parent["id"]}
    response = api.post(
        "/sessions/s1/messages",
        {"role": role, "content": "done", "metadata": {"subagent": forged}},
    )

    assert response.status_code == 422
    assert "metadata.subagent" in json.dumps(response.json()["detail"])
    assert list(MainMessage.objects.values_list("pk", flat=True)) == [parent["id"]]
    # The real run is not blocked by the forgery: it still takes replies and finishes.
    base = f"/messages/{parent['id']}/subagent"
    reply = api.post(base, {"agent_name": "coder", "role": "assistant", "content": "hm"})
    assert reply.status_code == 201
    result = api.post(f"{base}/result", {"agent_name": "coder", "content": "real result"})
    assert result.status_code == 201
    assert result.json()["metadata"]["subagent"]["agent_name"] == "coder"


def test_other_metadata_keys_are_still_free(api):
    metadata = {"speaker": "Ann", "tool_call_id": "call_1", "nested": {"subagent": "x"}}
    response = api.post(
        "/sessions/s1/messages", {"role": "tool", "content": "42", "metadata": metadata}
    )
    assert response.status_code == 201
    assert MainMessage.objects.get(pk=response.json()["id"]).metadata == metadata


def test_an_import_keeps_the_run_its_file_recorded(db):
    # An operator's migrate_jsonl brings back what this service exported or backed up.
    message = message_add(
        agent_id="a1",
        session_id="s1",
        role="tool",
        content="result",
        metadata={"subagent": FORGED_RUN},
        import_fingerprint="f" * 64,
    )
    assert message.metadata == {"subagent": FORGED_RUN}


@pytest.mark.parametrize("metadata", ODD_RUN_METADATA)
def test_the_pages_never_fail_on_odd_stored_run_metadata(admin_client, metadata):
    parent = message_add(agent_id="a1", session_id="s1", role="assistant", content="Ask.")
    # Written as an older version or an import could have: past the API's check.
    odd = MainMessage.objects.create(
        agent_id="a1",
        session_id="s1",
        role="tool",
        content="a result",
        token_count=3,
        metadata=_with_parent(metadata, parent.pk),
    )

    session = admin_client.get(reverse("session", args=["a1", "s1"]))
    run_url = reverse("subagent_run", args=[parent.pk])
    pages = [
        admin_client.get(run_url),
        admin_client.get(run_url, {"agent": "coder"}),
        admin_client.get(run_url, headers={"HX-Request": "true"}),
    ]

    assert session.status_code == 200
    assert "a result" in session.content.decode()
    assert [page.status_code for page in pages] == [200, 200, 200]
    shown = [run.result.pk for run in pages[0].context["runs"] if run.result]
    assert shown == [r.pk for r in run_results(parent)]
    assert set(shown) <= {odd.pk}


def test_a_result_without_a_name_shows_under_a_placeholder(admin_client):
    parent = message_add(agent_id="a1", session_id="s1", role="assistant", content="Ask.")
    MainMessage.objects.create(
        agent_id="a1",
        session_id="s1",
        role="tool",
        content="orphan result",
        metadata={"subagent": {"parent_msg_id": parent.pk}},
    )
    page = admin_client.get(reverse("subagent_run", args=[parent.pk]))
    body = page.content.decode()
    assert page.status_code == 200
    assert "(no sub-agent name recorded)" in body and "orphan result" in body


def test_a_run_record_reads_back_as_the_service_wrote_it():
    run = SubagentRun(parent_msg_id=7, agent_name="coder", truncated=True, original_tokens=12)

    metadata = with_run({"note": 1}, run)

    assert metadata == {
        "note": 1,
        "subagent": {
            "parent_msg_id": 7,
            "agent_name": "coder",
            "truncated": True,
            "original_tokens": 12,
        },
    }
    assert run_in(metadata) == run


@pytest.mark.parametrize(
    ("stored", "read"),
    [
        ({}, None),
        ({"subagent": "coder"}, None),
        ({"subagent": {}}, SubagentRun(parent_msg_id=None, agent_name=None)),
        (
            {"subagent": {"parent_msg_id": True, "agent_name": 7, "truncated": "yes"}},
            SubagentRun(parent_msg_id=None, agent_name=None, truncated=False),
        ),
        (
            {"subagent": {"parent_msg_id": 0, "agent_name": "", "original_tokens": "many"}},
            SubagentRun(parent_msg_id=None, agent_name="", original_tokens=None),
        ),
    ],
)
def test_an_odd_stored_record_reads_field_by_field(stored, read):
    assert run_in(stored) == read


def test_only_a_tool_message_with_both_links_is_a_runs_result():
    linked = {"subagent": {"parent_msg_id": 3, "agent_name": "coder"}}
    unnamed = {"subagent": {"parent_msg_id": 3}}

    assert result_run(MainMessage(role="tool", metadata=linked)) == SubagentRun(3, "coder")
    assert result_run(MainMessage(role="assistant", metadata=linked)) is None
    assert result_run(MainMessage(role="tool", metadata=unnamed)) is None
    assert SubagentRun(3, None).label == "(no sub-agent name recorded)"
