"""API keys: creation, revocation and the bearer authentication the API uses."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

from django.conf import settings
from django.db import InterfaceError, OperationalError, transaction
from django.db.models import QuerySet
from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from memory import outage
from memory.models import ApiKey
from memory.validation import check_identifier

logger = logging.getLogger(__name__)

KEY_PREFIX = "orca_"
# Recording every use would make each read a write; once a minute is enough to see activity.
LAST_USED_RESOLUTION = timedelta(minutes=1)
# A key found valid is trusted this many seconds before the database is asked again: the
# lookup was a good share of the CPU of storing a message (docs/BENCHMARKS.md, "Single writes:
# turn summaries join a waiting task, keys trusted for a second"). The price: a key
# revoked by another process (the other gunicorn worker, `manage.py revoke_api_key`) still
# works there for up to this long; the revoking process forgets it at once.
KEY_TRUST_SECONDS = 1.0
# key hash -> (agent_id, time.monotonic() until which it is trusted); only valid keys enter.
_trusted: dict[str, tuple[str, float]] = {}
# key pk -> when it was used, not yet in last_used_at: written once the request is answered
# (record_key_uses), so that no write precedes a message's, which may then be kept in the
# JSONL backup while the database is locked or gone.
_unrecorded: dict[int, datetime] = {}


def _hash(key: str) -> str:
    # Keys are 256 random bits: a fast hash cannot be brute-forced, unlike a password.
    return hashlib.sha256(key.encode()).hexdigest()


def mirror_path() -> Path:
    return settings.ORCA.data_dir / "api_keys.json"


def _write_mirror() -> None:
    """The active keys' hashes in a file (mode 0600), to authenticate while the database is
    unavailable and messages go to the JSONL fallback. Only hashes, never keys."""
    active = {row.key_hash: row.agent_id for row in ApiKey.objects.active()}
    path = mirror_path()
    temporary = path.with_suffix(".tmp")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(active, f)
    temporary.replace(path)


def api_key_create(*, agent_id: str, name: str = "") -> tuple[ApiKey, str]:
    """A new key for the agent; returns the row and the key, which is not stored anywhere."""
    check_identifier("agent_id", agent_id)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey.objects.create(
        agent_id=agent_id, name=name, prefix=key[: len(KEY_PREFIX) + 6], key_hash=_hash(key)
    )
    transaction.on_commit(_write_mirror)
    return row, key


def api_keys_delete(rows: QuerySet[ApiKey]) -> int:
    """Delete keys (the admin's delete): gone from the database, from the mirror used during
    an outage, and from this process's trust; returns how many."""
    hashes = list(rows.values_list("key_hash", flat=True))
    deleted, _ = rows.delete()
    for hashed in hashes:
        _trusted.pop(hashed, None)
    transaction.on_commit(_write_mirror)
    return deleted


def api_key_revoke(row: ApiKey) -> None:
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
        _trusted.pop(row.key_hash, None)
        transaction.on_commit(_write_mirror)


def _agent_from_mirror(key: str) -> str | None:
    try:
        return json.loads(mirror_path().read_text()).get(_hash(key))
    except (OSError, ValueError):
        return None


def agent_for_key(key: str) -> str | None:
    """The agent a valid, unrevoked key belongs to, else None."""
    hashed = _hash(key)
    trusted = _trusted.get(hashed)
    if trusted is not None and time.monotonic() < trusted[1]:
        return trusted[0]
    try:
        # Three values, not a model (key_hash is unique).
        found = list(
            ApiKey.objects.active()
            .filter(key_hash=hashed)
            .values_list("pk", "agent_id", "last_used_at")
        )
    except (OperationalError, InterfaceError):
        logger.error("The database is unavailable: checking the API key against %s", mirror_path())
        return _agent_from_mirror(key)
    if not found:
        _trusted.pop(hashed, None)
        return None
    ((pk, agent_id, last_used_at),) = found
    now = timezone.now()
    if last_used_at is None or now - last_used_at > LAST_USED_RESOLUTION:
        _unrecorded[pk] = now
    _trusted[hashed] = (agent_id, time.monotonic() + KEY_TRUST_SECONDS)
    return agent_id


def record_key_uses(**signal: object) -> None:
    """Write the key uses agent_for_key noted (last_used_at), after the answer was sent
    (Django's request_finished), as bookkeeping (outage.best_effort): a database locked or
    gone loses a timestamp, never a request."""
    while _unrecorded:
        pk, used_at = _unrecorded.popitem()
        record = partial(ApiKey.objects.filter(pk=pk).update, last_used_at=used_at)
        outage.best_effort("recording an API key's use", record)


# What a request without a valid key is told, by the API and /mcp alike: how to send one,
# and how to make one.
UNAUTHORIZED_DETAIL = (
    "Unauthorized: send Authorization: Bearer <API key> "
    "(make one with: manage.py create_api_key --agent NAME)"
)


def bearer_key(authorization: str) -> str | None:
    """The key of an `Authorization: Bearer <key>` header's value, else None: the scheme in
    any case, and any number of spaces before the key (RFC 7235 allows more than one), read
    the same way by the JSON API and /mcp."""
    scheme, _, key = authorization.strip().partition(" ")
    key = key.strip()
    if scheme.lower() != "bearer" or not key:
        return None
    return key


class ApiKeyAuth(HttpBearer):
    """`Authorization: Bearer <key>`; `request.auth` becomes the key's agent_id."""

    def __call__(self, request: HttpRequest) -> str | None:
        # django-ninja's own reading splits on single spaces: "Bearer  <key>" would fail here
        # and pass on /mcp.
        key = bearer_key(request.headers.get(self.header, ""))
        return None if key is None else self.authenticate(request, key)

    def authenticate(self, request: HttpRequest, token: str) -> str | None:
        return agent_for_key(token)
