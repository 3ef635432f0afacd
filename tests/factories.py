"""Rows the tests need, made one way."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory.consolidation import request_consolidation, run_consolidation
from memory.messages import message_add
from memory.models import ConsolidationRun, MainMessage, MessageType, Trigger


def add_message(
    content: str,
    *,
    role: str = "user",
    msg_type: str = MessageType.NORMAL,
    agent_id: str = "a1",
    session_id: str = "s1",
    metadata: dict[str, Any] | None = None,
    timestamp: datetime | None = None,
    summarize: bool = True,
) -> MainMessage:
    """A message stored as an agent stores it: through `message_add` (token count, indexes,
    queued embedding and summary). A user's, of agent a1, in session s1, unless told."""
    return message_add(
        agent_id=agent_id,
        session_id=session_id,
        role=role,
        content=content,
        msg_type=msg_type,
        metadata=metadata,
        timestamp=timestamp,
        summarize=summarize,
    )


def consolidate_session(
    *, agent_id: str, session_id: str, trigger: str = Trigger.SESSION_END
) -> ConsolidationRun:
    """Request the session's consolidation and run it here rather than in the worker, unless
    the agent's window defers it; returns the run as it stands."""
    run = request_consolidation(agent_id=agent_id, session_id=session_id, trigger=trigger)
    run_consolidation(run.pk)  # nothing to do if the task already ran it
    run.refresh_from_db()
    return run
