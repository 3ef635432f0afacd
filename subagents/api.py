"""Sub-agent endpoints, hanging from the main message that called the sub-agent."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.http import HttpRequest
from django.shortcuts import get_object_or_404
from ninja import Router, Schema, Status

from memory.models import MainMessage
from memory.schemas import MessageOut, Text, TextSchema
from subagents.models import SubagentRole
from subagents.runs import run_results, subagent_finish, subagent_record, subagent_transcript

router = Router(tags=["sub-agents"])


class SubagentMessageIn(TextSchema):
    agent_name: str = Text
    role: SubagentRole
    content: str = Text


class SubagentResultIn(TextSchema):
    agent_name: str = Text
    content: str = Text


class SubagentMessageOut(Schema):
    id: int
    parent_msg_id: int
    session_id: str
    agent_name: str
    role: SubagentRole
    content: str
    timestamp: datetime


class TranscriptOut(Schema):
    parent_msg_id: int
    messages: list[SubagentMessageOut]
    results: list[MessageOut]


def _parent_or_404(request: HttpRequest, parent_msg_id: int) -> MainMessage:
    return get_object_or_404(MainMessage, pk=parent_msg_id, agent_id=request.auth)


@router.post("/messages/{int:parent_msg_id}/subagent", response={201: SubagentMessageOut})
def post_subagent_message(
    request: HttpRequest, parent_msg_id: int, payload: SubagentMessageIn
) -> Status[Any]:
    """Record one complete reply of a sub-agent; it never enters the main conversation."""
    parent = _parent_or_404(request, parent_msg_id)
    return Status(201, subagent_record(parent=parent, **payload.dict()))


@router.post("/messages/{int:parent_msg_id}/subagent/result", response={201: MessageOut})
def post_subagent_result(
    request: HttpRequest, parent_msg_id: int, payload: SubagentResultIn
) -> Status[Any]:
    """Finish the run: its result (cut at 10,000 tokens) becomes a `tool` message."""
    parent = _parent_or_404(request, parent_msg_id)
    return Status(201, subagent_finish(parent=parent, **payload.dict()))


@router.get("/messages/{int:parent_msg_id}/subagent", response=TranscriptOut)
def get_subagent_transcript(request: HttpRequest, parent_msg_id: int) -> dict[str, Any]:
    """The full transcript of every sub-agent run of the message, and their results."""
    parent = _parent_or_404(request, parent_msg_id)
    return {
        "parent_msg_id": parent.pk,
        "messages": list(subagent_transcript(parent)),
        "results": list(run_results(parent)),
    }
