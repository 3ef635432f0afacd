"""Idempotent message posts: a client's key for a post (the API's `Idempotency-Key` header,
MCP's `client_id`), recorded in the transaction of the messages it stored
(`memory.messages._store`), so that a process killed after the commit leaves both or neither.

- A retry with the same key and the same request within WINDOW answers the messages stored
  the first time, read again as they are now (an embedding may have come since); nothing is
  stored twice. The request is its session and its messages (`fingerprint`), so a batch of
  one message and a single post of that message are the same request.
- The same key with another request (another session, other messages): Conflict (409),
  nothing stored.
- The key's messages deleted since (a session deleted): Conflict (409), nothing stored again,
  which would bring back what someone deleted. A forget request (memory.forgetting) also
  scrubs the records naming its messages (`scrub`): the fingerprint, a hash of
  the text, and the ids go; the key stays until it expires, still answering 409.
- Concurrent requests with one key: the unique constraint lets one insert its record; the
  others' transactions fail on it, roll back, and answer the winner's messages.
- A record older than WINDOW no longer applies: the key stores again. An agent's expired
  records are deleted by its next post with a key, in that post's transaction.
- Keys are an agent's own: another agent's same key is another record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.utils import timezone

from memory.models import IdempotencyKey, MainMessage
from memory.validation import Conflict

# How long a key answers its first request's messages.
WINDOW = timedelta(hours=24)
_DELETED_SINCE = (
    "the messages first stored with this idempotency key have been deleted since; "
    "nothing was stored again"
)
# The fingerprint of a record whose messages a forget request deleted (never a SHA-256).
FORGOTTEN = "forgotten"


def fingerprint(*, session_id: str, messages: Sequence[Mapping[str, Any]]) -> str:
    """SHA-256 of the session id and the messages as a client sends them (role, content,
    msg_type, metadata) in canonical JSON: equal requests, equal fingerprints, whatever the
    order of the keys or the defaults the client left out."""
    canonical = json.dumps(
        {"session_id": session_id, "messages": list(messages)},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _cutoff() -> datetime:
    return timezone.now() - WINDOW


@dataclass(frozen=True)
class ClientKey:
    """One request's key, its agent and its fingerprint."""

    agent_id: str
    key: str
    fingerprint: str

    def earlier_messages(self) -> list[MainMessage] | None:
        """The messages stored with this key within WINDOW, in their order; None when the key
        is new (or its record expired). Conflict when it was used for another request, or
        when any of its messages has been deleted since."""
        record = IdempotencyKey.objects.filter(
            agent_id=self.agent_id, key=self.key, created_at__gte=_cutoff()
        ).first()
        if record is None:
            return None
        if record.fingerprint == FORGOTTEN:
            raise Conflict(_DELETED_SINCE)
        if record.fingerprint != self.fingerprint:
            raise Conflict(
                "this idempotency key was used within the last 24 hours for a different "
                "request (another session or other messages); nothing was stored: use a new "
                "key for a new request"
            )
        stored = MainMessage.objects.filter(agent_id=self.agent_id).in_bulk(record.message_ids)
        if len(stored) < len(record.message_ids):
            raise Conflict(_DELETED_SINCE)
        return [stored[pk] for pk in record.message_ids]

    def claim(self) -> IdempotencyKey:
        """The key's record, inserted inside the messages' transaction before them: when a
        concurrent request holds the key, the unique constraint raises IntegrityError here
        (on PostgreSQL once that request commits). The agent's expired records go first,
        this key's own included."""
        IdempotencyKey.objects.filter(agent_id=self.agent_id, created_at__lt=_cutoff()).delete()
        return IdempotencyKey.objects.create(
            agent_id=self.agent_id, key=self.key, fingerprint=self.fingerprint
        )


def settle(record: IdempotencyKey, messages: Sequence[MainMessage]) -> None:
    """Name the messages the claimed key stored, in the same transaction."""
    record.message_ids = [message.pk for message in messages]
    record.save(update_fields=["message_ids"])


def records_naming(*, agent_id: str, message_ids: Collection[int] | None) -> list[int]:
    """The ids of the agent's records naming any of these messages (every record, with
    None) that a forget has not scrubbed yet."""
    records = IdempotencyKey.objects.filter(agent_id=agent_id).exclude(fingerprint=FORGOTTEN)
    wanted = None if message_ids is None else set(message_ids)
    return sorted(
        pk
        for pk, ids in records.values_list("pk", "message_ids")
        if wanted is None or wanted & set(ids)
    )


def scrub(record_ids: Collection[int]) -> int:
    """A forget request's part (memory.forgetting): the records' fingerprint, a hash of the
    text that would confirm a guess of it, and their message ids go; the key stays until it
    expires, so that a retry is still refused rather than storing again what was forgotten."""
    return IdempotencyKey.objects.filter(pk__in=record_ids).update(
        fingerprint=FORGOTTEN, message_ids=[]
    )
