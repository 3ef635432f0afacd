"""Sub-agent runs: full transcripts kept apart, only the (truncated) result in the main flow."""

from __future__ import annotations

import pytest

from memory import index
from memory.models import MainMessage
from memory.tokens import TRUNCATION_MARK, estimate_tokens
from subagents.models import SubagentMessage

pytestmark = pytest.mark.django_db


@pytest.fixture
def parent(api) -> dict:
    return api.post(
        "/sessions/s1/messages", {"role": "assistant", "content": "Let me ask the coder."}
    ).json()


def test_it_records_replies_and_finishes_with_a_tool_message(api, parent):
    base = f"/messages/{parent['id']}/subagent"
    reply = api.post(base, {"agent_name": "coder", "role": "system", "content": "You write code."})
    api.post(
        base, {"agent_name": "coder", "role": "assistant", "content": "思考：先写测试 zebra-secret"}
    )

    result = api.post(f"{base}/result", {"agent_name": "coder", "content": "The function is done."})

    assert reply.status_code == 201
    assert reply.json()["parent_msg_id"] == parent["id"] and reply.json()["session_id"] == "s1"
    assert result.status_code == 201
    body = result.json()
    assert (body["role"], body["content"], body["session_id"]) == (
        "tool",
        "The function is done.",
        "s1",
    )
    assert body["metadata"]["subagent"] == {
        "parent_msg_id": parent["id"],
        "agent_name": "coder",
        "truncated": False,
        "original_tokens": 6,
    }
    assert SubagentMessage.objects.filter(parent_msg_id=parent["id"]).count() == 2

    transcript = api.get(base).json()
    assert [m["role"] for m in transcript["messages"]] == ["system", "assistant"]
    assert [r["id"] for r in transcript["results"]] == [body["id"]]


@pytest.mark.parametrize(
    "content",
    ["很长的输出" * 4000, "long output " * 10_000],  # 30,000 tokens each
    ids=["chinese", "english"],
)
def test_a_result_above_10000_tokens_is_cut_and_marked(api, parent, content):
    """With the design's mark whatever the result's language (a context's recalled lines
    mark a cut in the text's own: memory.tokens.cut_mark)."""
    body = api.post(
        f"/messages/{parent['id']}/subagent/result", {"agent_name": "coder", "content": content}
    ).json()

    stored = MainMessage.objects.get(pk=body["id"]).content
    assert stored.endswith(TRUNCATION_MARK)
    assert estimate_tokens(stored) <= 10_000
    assert body["token_count"] == estimate_tokens(stored)
    assert body["metadata"]["subagent"]["truncated"] is True
    assert body["metadata"]["subagent"]["original_tokens"] == 30_000


def test_a_finished_run_takes_nothing_more(api, parent):
    base = f"/messages/{parent['id']}/subagent"
    api.post(f"{base}/result", {"agent_name": "coder", "content": "done"})

    again = api.post(f"{base}/result", {"agent_name": "coder", "content": "done twice"})
    late = api.post(base, {"agent_name": "coder", "role": "assistant", "content": "late"})
    other = api.post(base, {"agent_name": "reviewer", "role": "assistant", "content": "my own run"})

    assert again.status_code == 409 and "already finished" in again.json()["detail"]
    assert late.status_code == 409
    assert other.status_code == 201
    assert MainMessage.objects.filter(role="tool").count() == 1


@pytest.mark.parametrize(
    "payload",
    [
        {"agent_name": "coder", "role": "user", "content": "x"},
        {"agent_name": "coder", "role": "tool", "content": "x"},
        {"agent_name": "", "role": "assistant", "content": "x"},
        {"agent_name": "coder", "role": "assistant", "content": ""},
    ],
)
def test_it_refuses_invalid_subagent_messages(api, parent, payload):
    assert api.post(f"/messages/{parent['id']}/subagent", payload).status_code == 422
    assert not SubagentMessage.objects.exists()


def test_subagent_content_stays_out_of_the_main_conversation_and_search(api, parent):
    base = f"/messages/{parent['id']}/subagent"
    api.post(base, {"agent_name": "coder", "role": "assistant", "content": "内部推理 zebra-secret"})
    api.post(f"{base}/result", {"agent_name": "coder", "content": "结论：可以上线"})

    contents = [m["content"] for m in api.get("/sessions/s1/messages").json()["items"]]
    assert contents == ["Let me ask the coder.", "结论：可以上线"]
    assert index.lexical_search(index.MESSAGE_TEXT, agent_id="agent-a", query="zebra", k=10) == []
    assert index.lexical_search(index.MESSAGE_TEXT, agent_id="agent-a", query="推理", k=10) == []
    assert (
        len(index.lexical_search(index.MESSAGE_TEXT, agent_id="agent-a", query="上线", k=10)) == 1
    )


def test_an_unknown_parent_is_404(api):
    assert api.get("/messages/999/subagent").status_code == 404
    assert (
        api.post("/messages/999/subagent/result", {"agent_name": "c", "content": "x"}).status_code
        == 404
    )
