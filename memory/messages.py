"""Messages and sessions: the flows the API, the commands and the UI share.

A session has no table of its own: it is the set of an agent's messages with one session_id.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, transaction
from django.db.models import QuerySet
from django.utils import timezone

from memory import idempotency, index, jsonl, outage, scheduling
from memory.consolidation import request_consolidation
from memory.models import MainMessage, MessageType, Role, Trigger
from memory.subagent_run import RUN_METADATA_KEY, SubagentRun, stored_record, with_run
from memory.tokens import estimate_tokens
from memory.validation import (
    InvalidInput,
    InvalidItems,
    check_content,
    check_idempotency_key,
    check_identifier,
    check_metadata,
)
from memory.vectors import delete_with_vectors

logger = logging.getLogger(__name__)

# Messages one call of messages_add (POST .../messages:batch) stores at most.
MAX_BATCH_MESSAGES = 1000


def message_check(
    *,
    agent_id: str,
    session_id: str,
    role: str,
    content: str,
    msg_type: str,
    metadata: Any,
) -> None:
    """What message_add checks before it writes anything; raises InvalidInput.

    Apart so that a form (the admin's) can show the errors beside its fields.
    """
    check_identifier("agent_id", agent_id)
    check_identifier("session_id", session_id)
    _item_check(role=role, content=content, msg_type=msg_type, metadata=metadata, run_allowed=False)


def _item_check(
    *, role: str, content: str, msg_type: str, metadata: Any, run_allowed: bool
) -> None:
    """The checks of one message's own fields (its session's are made once per call)."""
    check_content("content", content)
    if role not in Role.values:
        raise InvalidInput(f"role must be one of {', '.join(Role.values)}", field="role")
    if msg_type not in MessageType.values:
        raise InvalidInput(
            f"msg_type must be one of {', '.join(MessageType.values)}", field="msg_type"
        )
    if metadata is not None and not isinstance(metadata, dict):
        raise InvalidInput("metadata must be a JSON object", field="metadata")
    check_metadata(metadata)
    if metadata and RUN_METADATA_KEY in metadata and not run_allowed:
        raise InvalidInput(
            f"metadata.{RUN_METADATA_KEY} is reserved: the service sets it when a sub-agent "
            "run finishes (POST /messages/{id}/subagent/result)",
            field="metadata",
        )


@dataclass(frozen=True)
class NewMessage:
    """One message for messages_add: what a client sends (role, content, msg_type,
    metadata), and what imports (timestamp, import_fingerprint) and sub-agent runs
    (subagent_run) add; see message_add."""

    role: str
    content: str
    msg_type: str = MessageType.NORMAL
    metadata: dict[str, Any] | None = None
    timestamp: datetime | None = None
    import_fingerprint: str | None = None
    subagent_run: SubagentRun | None = None

    def as_sent(self) -> dict[str, Any]:
        """The message as a client sends it (what the JSONL backup keeps, what an
        idempotency key's request is made of)."""
        return {
            "role": self.role,
            "content": self.content,
            "msg_type": self.msg_type,
            "metadata": self.metadata,
        }


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
    subagent_run: SubagentRun | None = None,
    idempotency_key: str | None = None,
) -> MainMessage:
    """Store one message with its token count; it waits for its embedding (has_embedding).

    It is `messages_add` of a batch of one, refused as one message (`_as_one_message`).
    `timestamp`, `import_fingerprint` and `summarize=False` are for messages recorded
    earlier (migrate_jsonl): an import is embedded, but its past turns are not summarized.
    `subagent_run` is for subagents.runs alone: it becomes `metadata.subagent`, which callers
    may not set themselves, except imports (files this service exported or backed up, which
    an operator brings back, keep their run links). `idempotency_key`: the client's key for
    the request (memory.idempotency); a retry with it returns the message stored the first time.
    """
    new = NewMessage(
        role=role,
        content=content,
        msg_type=msg_type,
        metadata=metadata,
        timestamp=timestamp,
        import_fingerprint=import_fingerprint,
        subagent_run=subagent_run,
    )
    with _as_one_message():
        (message,) = messages_add(
            agent_id=agent_id,
            session_id=session_id,
            messages=[new],
            summarize=summarize,
            idempotency_key=idempotency_key,
        )
    return message


def message_keep(
    *,
    agent_id: str,
    session_id: str,
    message: NewMessage,
    idempotency_key: str | None = None,
) -> MainMessage | Path:
    """An agent's message (the API's and MCP's): `messages_keep` of a batch of one, refused
    as one message (`_as_one_message`); returns the row, or the JSONL backup that kept it."""
    with _as_one_message():
        kept = messages_keep(
            agent_id=agent_id,
            session_id=session_id,
            messages=[message],
            idempotency_key=idempotency_key,
        )
    if isinstance(kept, Path):
        return kept
    (stored,) = kept
    return stored


@contextmanager
def _as_one_message() -> Iterator[None]:
    """A batch of one refused as the one message it is: the message's own error (`content`,
    413 when too large) rather than the list's (`messages.0.content`), as the API's and MCP's
    single-message calls have always answered."""
    try:
        yield
    except InvalidItems as exc:
        ((_, error),) = exc.errors
        raise error from None


def messages_keep(
    *,
    agent_id: str,
    session_id: str,
    messages: Sequence[NewMessage],
    idempotency_key: str | None = None,
) -> list[MainMessage] | Path:
    """An agent's batch of messages (the API's and MCP's): all stored, or, when the database
    is unavailable, all kept in the JSONL backup (`_or_kept`); returns the rows or that file."""
    return _or_kept(
        lambda: messages_add(
            agent_id=agent_id,
            session_id=session_id,
            messages=messages,
            idempotency_key=idempotency_key,
        ),
        agent_id=agent_id,
        session_id=session_id,
        messages=[m.as_sent() for m in messages],
        idempotency_key=idempotency_key,
    )


def _or_kept[T](
    store: Callable[[], T],
    *,
    agent_id: str,
    session_id: str,
    messages: list[dict[str, Any]],
    idempotency_key: str | None,
) -> T | Path:
    """What `store` returns; when the database is unavailable (memory.outage: locked beyond
    the busy timeout, cannot open, disk full, connection lost) and the JSONL backup is on,
    the messages kept in `<data_dir>/jsonl/` for `manage.py migrate_jsonl` instead, and that
    file. Kept means written whole and fsynced; when even that fails, jsonl.BackupFailed.
    The lines keep the request's idempotency key: `migrate_jsonl` stores a request once
    however many times a client sent it (kept during the outage, or stored after it)."""
    try:
        return store()
    except (OperationalError, InterfaceError) as exc:
        if not settings.ORCA.jsonl_backup or not outage.is_unavailable(exc):
            raise
        path = jsonl.fallback_append(
            agent_id=agent_id,
            session_id=session_id,
            messages=messages,
            idempotency_key=idempotency_key,
        )
        logger.error(
            "DATABASE UNAVAILABLE: %d message(s) kept in %s for migrate_jsonl", len(messages), path
        )
        return path


def messages_add(
    *,
    agent_id: str,
    session_id: str,
    messages: Sequence[NewMessage],
    summarize: bool = True,
    idempotency_key: str | None = None,
) -> list[MainMessage]:
    """Store a session's messages in their order, all or none. The API's, MCP's, imports'
    and sub-agent runs' messages all come in here: message_add is a batch of one.

    Every message is checked before anything is written: InvalidItems lists each one at
    fault with its index. The rows go in with one transaction, and the embedding run and the
    summaries of the turns they end are queued once for them all. `idempotency_key`: the
    client's key for the request (memory.idempotency); a retry with it returns the messages
    stored the first time. The rest of each message's fields: NewMessage, message_add.
    """
    check_identifier("agent_id", agent_id)
    check_identifier("session_id", session_id)
    if idempotency_key is not None:
        check_idempotency_key("idempotency_key", idempotency_key)
    if not 1 <= len(messages) <= MAX_BATCH_MESSAGES:
        raise InvalidInput(
            f"messages must hold 1 to {MAX_BATCH_MESSAGES:,} messages, not {len(messages):,}",
            field="messages",
        )
    errors = []
    for number, new in enumerate(messages):
        try:
            _check_new(new)
        except InvalidInput as exc:
            errors.append((number, exc))
    if errors:
        raise InvalidItems("messages", errors)
    return _store(
        agent_id=agent_id,
        session_id=session_id,
        new=messages,
        summarize=summarize,
        idempotency_key=idempotency_key,
    )


def _check_new(new: NewMessage) -> None:
    _item_check(
        role=new.role,
        content=new.content,
        msg_type=new.msg_type,
        metadata=new.metadata,
        run_allowed=new.import_fingerprint is not None,
    )


def _store(
    *,
    agent_id: str,
    session_id: str,
    new: Sequence[NewMessage],
    summarize: bool,
    idempotency_key: str | None,
) -> list[MainMessage]:
    """Store checked messages (`_write`), once per idempotency key: a key already used for
    them returns their stored rows, as it does when a concurrent request with the key commits
    first (its record's unique constraint fails this one's transaction)."""
    if idempotency_key is None:
        return _write(agent_id=agent_id, session_id=session_id, new=new, summarize=summarize)
    key = idempotency.ClientKey(
        agent_id=agent_id,
        key=idempotency_key,
        fingerprint=idempotency.fingerprint(
            session_id=session_id,
            messages=[m.as_sent() for m in new],
        ),
    )
    earlier = key.earlier_messages()
    if earlier is not None:
        return earlier
    try:
        return _write(
            agent_id=agent_id, session_id=session_id, new=new, summarize=summarize, key=key
        )
    except IntegrityError:
        earlier = key.earlier_messages()
        if earlier is None:
            raise
        return earlier


def _write(
    *,
    agent_id: str,
    session_id: str,
    new: Sequence[NewMessage],
    summarize: bool,
    key: idempotency.ClientKey | None = None,
) -> list[MainMessage]:
    """Write checked messages in one transaction with the work they need (one embedding run,
    one task summarizing the turns they end) and the record of their idempotency key; their
    backup lines after the commit (not for imported messages: they come from lines already)."""
    backup = settings.ORCA.jsonl_backup
    # One moment for the whole call when the backup needs it in Python; the database's clock
    # (db_default) otherwise. Either way the ids keep the order of messages sharing a time.
    now = timezone.now() if backup else None
    seen: Counter[str] = Counter()
    rows = []
    for item in new:
        metadata = item.metadata
        if item.subagent_run is not None:
            metadata = with_run(metadata, item.subagent_run)
        timestamp, fingerprint = item.timestamp, item.import_fingerprint
        if backup and fingerprint is None:
            timestamp = timestamp or now
            fields = {
                "agent_id": agent_id,
                "session_id": session_id,
                "role": item.role,
                "content": item.content,
                "msg_type": item.msg_type,
                "metadata": metadata,
                "timestamp": timestamp,
            }
            fingerprint = jsonl.backup_fingerprint(**fields)
            # Identical messages of one call share a time: numbered as the importer numbers
            # identical lines of a file, so that each keeps a fingerprint of its own.
            seen[fingerprint] += 1
            if seen[fingerprint] > 1:
                fingerprint = jsonl.backup_fingerprint(**fields, occurrence=seen[fingerprint])
        rows.append(
            MainMessage(
                agent_id=agent_id,
                session_id=session_id,
                role=item.role,
                content=item.content,
                msg_type=item.msg_type,
                metadata=metadata,
                token_count=estimate_tokens(item.content),
                import_fingerprint=fingerprint,
                **({"timestamp": timestamp} if timestamp is not None else {}),
            )
        )
    with transaction.atomic():
        record = key.claim() if key is not None else None
        stored = MainMessage.objects.bulk_create(rows)
        if record is not None:
            idempotency.settle(record, stored)
        # Imports come from JSONL lines (the backup's own, after an outage): appended again,
        # each would be a second line of its message, which the next import took for another.
        backed_up = [
            m for m, item in zip(stored, new, strict=True) if item.import_fingerprint is None
        ]
        if backup and backed_up:
            transaction.on_commit(lambda: jsonl.backup_append(backed_up), robust=True)
        if any(message.needs_embedding for message in stored):
            scheduling.with_the_write(scheduling.schedule_embedding)
        replies = [message.pk for message in stored if message.role == Role.ASSISTANT]
        if summarize and replies:
            scheduling.with_the_write(lambda: scheduling.schedule_summaries(replies))
    return stored


# What an edit may change of a message. Who said it where (agent, session, role) and when is
# the record; the token count, the vector and the lexical index rows are derived.
EDITABLE_FIELDS = frozenset({"content", "msg_type", "metadata"})


def message_update_check(message: MainMessage, **fields: Any) -> None:
    """What message_update checks before it writes anything; raises InvalidInput.

    Apart so that a form (the admin's) can show the errors beside its fields. A result's run
    record (`metadata.subagent`) may stay as it is, never be added, changed or removed.
    """
    if unknown := set(fields) - EDITABLE_FIELDS:
        raise InvalidInput(f"unknown fields: {', '.join(sorted(unknown))}")
    values = {name: fields.get(name, getattr(message, name)) for name in EDITABLE_FIELDS}
    if stored_record(values["metadata"]) != stored_record(message.metadata):
        raise InvalidInput(
            f"metadata.{RUN_METADATA_KEY} is the service's record of a sub-agent run: "
            "it cannot be added, changed or removed",
            field="metadata",
        )
    _item_check(role=message.role, run_allowed=True, **values)


def message_update(message: MainMessage, **fields: Any) -> MainMessage:
    """Change a message's EDITABLE_FIELDS, and what is derived from them, in one transaction.

    The token count follows the text. Every editable field is in the vector (the text, the
    speaker in `metadata`, `msg_type` as a filter stored with it): the message waits for a
    new one. The lexical index rows of the message and of the messages after it that hold
    its text in their context (`ctx`) follow the text and the speaker.
    """
    message_update_check(message, **fields)
    changed = {name: value for name, value in fields.items() if getattr(message, name) != value}
    if not changed:
        return message
    with transaction.atomic():
        for name, value in changed.items():
            setattr(message, name, value)
        message.has_embedding = False
        update = {*changed, "has_embedding"}
        if "content" in changed:
            message.token_count = estimate_tokens(message.content)
            update.add("token_count")
        # Only what changed is written: a timestamp set by SQLite's default (milliseconds)
        # written back from Python (microseconds) would change its text, and with it its
        # order among the messages of the same millisecond.
        message.save(update_fields=sorted(update))
        scheduling.with_the_write(scheduling.schedule_embedding)
        if changed.keys() & {"content", "metadata"}:
            index.reindex_messages([message.pk, *index.messages_after(message.pk)])
    return message


def messages_delete(*, messages: QuerySet[MainMessage]) -> int:
    """Delete these messages with their vectors (their sub-agent transcripts go by the
    database's ON DELETE CASCADE), in one transaction; how many were deleted.

    The messages after a deleted one hold its text in their context (`ctx`): their lexical
    index rows are made again, or the deleted text would still be found through them.
    """
    with transaction.atomic():
        ids = set(messages.values_list("pk", flat=True))
        after = {n for pk in ids for n in index.messages_after(pk)} - ids
        deleted = delete_with_vectors(messages)
        index.reindex_messages(sorted(after))
    return deleted


def session_messages(agent_id: str, session_id: str) -> QuerySet[MainMessage]:
    """The session's messages, oldest first."""
    return MainMessage.objects.filter(agent_id=agent_id, session_id=session_id).order_by(
        "timestamp", "id"
    )


@dataclass(frozen=True)
class SessionEnded:
    """What ending a session asked for: the consolidation run it queued or joined, `queued`
    or `deferred` to `run_after` (the API's and MCP's answer, SessionEndOut)."""

    session_id: str
    consolidation: str
    run_after: datetime | None


def session_end(*, agent_id: str, session_id: str) -> SessionEnded | None:
    """The session is over: ask for its consolidation into long-term memories (the API's
    POST /sessions/{id}/end and MCP's end_session); None when the agent has no such session.

    Never dropped: the run is queued, or deferred to the end of the agent's window; a
    session already waiting joins its run (consolidation.request_consolidation).
    """
    if not session_messages(agent_id, session_id).exists():
        return None
    run = request_consolidation(
        agent_id=agent_id, session_id=session_id, trigger=Trigger.SESSION_END
    )
    return SessionEnded(session_id=session_id, consolidation=run.status, run_after=run.run_after)
