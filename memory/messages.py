"""Messages and sessions: the flows the API, the commands and the UI share.

A session has no table of its own: it is the set of an agent's messages with one session_id.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import OperationalError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from memory import jsonl, scheduling
from memory.models import MainMessage, MessageType, Role, ShortTermMemory
from memory.tokens import estimate_tokens
from memory.validation import InvalidInput, check_content, check_identifier, check_metadata
from memory.vectors import delete_with_vectors

logger = logging.getLogger(__name__)

# The key of `metadata` that marks a sub-agent run's result (subagents.runs). Only the service
# sets it: a client that could would forge a finished run, and block the real one (409).
RUN_METADATA_KEY = "subagent"


def message_check(
    *,
    agent_id: str,
    session_id: str,
    role: str,
    content: str,
    msg_type: str,
    metadata: Any,
    run_allowed: bool = False,
) -> None:
    """What message_add checks before it writes anything; raises InvalidInput.

    Apart so that a form (the admin's) can show the errors beside its fields. `run_allowed`:
    `metadata.subagent` may be there (an import, or an edit keeping the stored record).
    """
    check_identifier("agent_id", agent_id)
    check_identifier("session_id", session_id)
    check_content("content", content)
    if role not in Role.values:
        raise InvalidInput(f"role must be one of {', '.join(Role.values)}")
    if msg_type not in MessageType.values:
        raise InvalidInput(f"msg_type must be one of {', '.join(MessageType.values)}")
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInput("metadata must be a JSON object")
    check_metadata(metadata)
    if metadata and RUN_METADATA_KEY in metadata and not run_allowed:
        raise InvalidInput(
            f"metadata.{RUN_METADATA_KEY} is reserved: the service sets it when a sub-agent "
            "run finishes (POST /messages/{id}/subagent/result)"
        )


def message_add(
    *,
    agent_id: str,
    session_id: str,
    role: str,
    content: str,
    msg_type: str = MessageType.NORMAL,
    metadata: dict[str, Any] | None = None,
    timestamp: datetime | None = None,
    import_fingerprint: str | None = None,
    summarize: bool = True,
    subagent_run: dict[str, Any] | None = None,
) -> MainMessage:
    """Store one message with its token count; it waits for its embedding (has_embedding).

    `timestamp`, `import_fingerprint` and `summarize=False` are for messages recorded
    earlier (migrate_jsonl): an import is embedded, but its past turns are not summarized.
    `subagent_run` is for subagents.runs alone: it becomes `metadata.subagent`, which callers
    may not set themselves, except imports (files this service exported or backed up, which
    an operator brings back, keep their run links).
    """
    message_check(
        agent_id=agent_id,
        session_id=session_id,
        role=role,
        content=content,
        msg_type=msg_type,
        metadata=metadata,
        run_allowed=import_fingerprint is not None,
    )
    if subagent_run is not None:
        metadata = {**(metadata or {}), RUN_METADATA_KEY: subagent_run}
    if settings.ORCA.jsonl_backup and import_fingerprint is None:
        timestamp = timestamp or timezone.now()
        import_fingerprint = jsonl.backup_fingerprint(
            agent_id=agent_id,
            session_id=session_id,
            role=role,
            content=content,
            msg_type=msg_type,
            metadata=metadata,
            timestamp=timestamp,
        )
    message = MainMessage.objects.create(
        agent_id=agent_id,
        session_id=session_id,
        role=role,
        content=content,
        msg_type=msg_type,
        metadata=metadata,
        token_count=estimate_tokens(content),
        import_fingerprint=import_fingerprint,
        **({"timestamp": timestamp} if timestamp is not None else {}),
    )
    if settings.ORCA.jsonl_backup:
        transaction.on_commit(lambda: jsonl.backup_append(message), robust=True)
    # After the commit, so the worker finds the row; background work never fails the write.
    if message.needs_embedding:
        transaction.on_commit(scheduling.schedule_embedding, robust=True)
    if summarize and message.role == Role.ASSISTANT:
        transaction.on_commit(lambda: scheduling.schedule_summary(message.pk), robust=True)
    return message


def message_keep(
    *,
    agent_id: str,
    session_id: str,
    role: str,
    content: str,
    msg_type: str = MessageType.NORMAL,
    metadata: dict[str, Any] | None = None,
) -> MainMessage | Path:
    """An agent's message (the API's and MCP's): stored, or, when the database is unavailable
    (cannot open, or locked beyond the busy timeout) and the JSONL backup is on, kept in
    `<data_dir>/jsonl/` for `manage.py migrate_jsonl`; returns the row or that file."""
    fields = {"role": role, "content": content, "msg_type": msg_type, "metadata": metadata}
    try:
        return message_add(agent_id=agent_id, session_id=session_id, **fields)
    except OperationalError:
        if not settings.ORCA.jsonl_backup:
            raise
        path = jsonl.fallback_append(agent_id=agent_id, session_id=session_id, **fields)
        logger.error("DATABASE UNAVAILABLE: message kept in %s for migrate_jsonl", path)
        return path


def session_messages(agent_id: str, session_id: str) -> QuerySet[MainMessage]:
    """The session's messages, oldest first."""
    return MainMessage.objects.filter(agent_id=agent_id, session_id=session_id).order_by(
        "timestamp", "id"
    )


@dataclass(frozen=True)
class SessionDeleted:
    messages: int
    summaries: int


def session_delete(*, agent_id: str, session_id: str) -> SessionDeleted:
    """Delete a session's messages (with their sub-agent transcripts), summaries and vectors.

    Long-term memories learnt from the session stay: they belong to the agent, not the session.
    """
    with transaction.atomic():
        summaries = delete_with_vectors(ShortTermMemory.objects.of_session(agent_id, session_id))
        # Sub-agent rows go by the database's ON DELETE CASCADE, FTS rows by triggers.
        messages = delete_with_vectors(
            MainMessage.objects.filter(agent_id=agent_id, session_id=session_id)
        )
    return SessionDeleted(messages=messages, summaries=summaries)
