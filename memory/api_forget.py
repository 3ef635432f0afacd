"""The forget endpoints (memory.forgetting), mounted at /api/v1/ beside memory.api's router:
a session, the key's own agent, or everything matching a query (preview, then confirm), each
answered with its receipt; and the agent's receipts.
"""

# No `from __future__ import annotations`: django-ninja builds its schemas from the
# annotations (see memory/api.py).
from datetime import datetime
from typing import Any, Literal

from django.http import Http404, HttpRequest
from ninja import Field, Router, Schema
from ninja.pagination import paginate
from pydantic import model_validator

from memory.forgetting import (
    KINDS,
    forget_agent,
    forget_confirmed,
    forget_preview,
    forget_session,
)
from memory.models import ForgetReceipt
from memory.schemas import TextSchema

router = Router(tags=["forget"])


class ReceiptOut(Schema):
    id: int
    agent_id: str
    scope: str = Field(description="session, agent or query")
    session_id: str | None
    actor: str
    at: datetime
    counts: dict[str, int] = Field(description=f"rows deleted, per kind: {', '.join(KINDS)}")
    ids: dict[str, list[int]] = Field(description="the ids deleted, per kind")


class SessionForgottenOut(Schema):
    session_id: str
    deleted_messages: int
    deleted_summaries: int
    receipt: ReceiptOut


class ForgetIn(TextSchema):
    query: str | None = Field(
        None, description="preview (confirm false): what to forget", max_length=2000
    )
    confirm: bool = False
    token: str | None = Field(
        None, description="confirm (confirm true): the preview's token", max_length=1_000_000
    )

    @model_validator(mode="after")
    def _one_step(self) -> "ForgetIn":
        if not self.confirm and self.query is None:
            raise ValueError("a preview (confirm false) needs the query")
        if self.confirm and self.token is None:
            raise ValueError("a confirm needs the preview's token")
        return self


class PreviewItemOut(Schema):
    kind: str
    id: int
    session_id: str | None
    snippet: str


class PreviewOut(Schema):
    confirm: Literal[False] = False
    terms: list[str] = Field(description="what a row must say, every one, to match")
    counts: dict[str, int] = Field(description="rows a confirm deletes, per kind")
    ids: dict[str, list[int]]
    items: list[PreviewItemOut] = Field(description="snippets, at most 50 of each kind")
    token: str = Field(description="send it back with confirm true within an hour")


class ForgottenOut(Schema):
    confirm: Literal[True] = True
    repeated: bool = Field(description="true: a retried confirm; the receipt is the first one's")
    receipt: ReceiptOut


@router.delete("/sessions/{session_id}", response=SessionForgottenOut)
def delete_session(request: HttpRequest, session_id: str) -> dict[str, Any]:
    """Forget the session: its messages, sub-agent transcripts, summaries, the long-term
    memories it alone is the source of, their history, index rows, vectors and backup
    lines; the answer holds the receipt."""
    receipt = forget_session(agent_id=request.auth, session_id=session_id, actor="api")
    if receipt is None:
        raise Http404("no such session")
    return {
        "session_id": session_id,
        "deleted_messages": receipt.counts["messages"],
        "deleted_summaries": receipt.counts["summaries"],
        "receipt": receipt,
    }


@router.delete("/agents/{agent_id}", response=ReceiptOut)
def delete_agent(request: HttpRequest, agent_id: str) -> ForgetReceipt:
    """Forget everything the key's own agent stored (naming it in the path guards against a
    slip); its keys and its receipts stay. Another agent's is not found."""
    if agent_id != request.auth:
        raise Http404("no such agent")
    receipt = forget_agent(agent_id=agent_id, actor="api")
    if receipt is None:
        raise Http404("the agent has nothing stored")
    return receipt


@router.post("/forget", response=PreviewOut | ForgottenOut)
def forget(request: HttpRequest, payload: ForgetIn) -> dict[str, Any]:
    """Forget everything matching a query: `{"query": ..., "confirm": false}` answers a
    preview (counts, ids, snippets, a token) and deletes nothing; `{"confirm": true,
    "token": ...}` deletes what the preview listed (and what was derived from it since) and
    answers the receipt. A row matches when its own text says every word of the query; at
    most 10,000 of a kind (a larger match is refused: forget sessions or the agent)."""
    return forget_answer(request.auth, payload, actor="api")


def forget_answer(agent_id: str, payload: ForgetIn, *, actor: str) -> dict[str, Any]:
    """POST /forget's answer, and MCP's `forget`'s."""
    if not payload.confirm:
        preview = forget_preview(agent_id=agent_id, query=payload.query or "")
        return PreviewOut(
            terms=preview.terms,
            counts=preview.counts,
            ids=preview.ids,
            items=[
                PreviewItemOut(kind=i.kind, id=i.id, session_id=i.session_id, snippet=i.snippet)
                for i in preview.items
            ],
            token=preview.token,
        ).model_dump(mode="json")
    receipt, repeated = forget_confirmed(agent_id=agent_id, token=payload.token or "", actor=actor)
    return ForgottenOut(repeated=repeated, receipt=ReceiptOut.from_orm(receipt)).model_dump(
        mode="json"
    )


@router.get("/forget/receipts", response=list[ReceiptOut])
@paginate
def list_receipts(request: HttpRequest) -> Any:
    """The agent's forget receipts, newest first."""
    return ForgetReceipt.objects.filter(agent_id=request.auth).order_by("-at", "-id")
