"""Rows the tests need, made one way."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memory.messages import message_add
from memory.models import MainMessage, MessageType


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
