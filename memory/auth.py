"""API keys: creation, revocation and the bearer authentication the API uses."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta

from django.http import HttpRequest
from django.utils import timezone
from ninja.security import HttpBearer

from memory.models import ApiKey
from memory.validation import check_identifier

KEY_PREFIX = "orca_"
# Recording every use would make each read a write; once a minute is enough to see activity.
LAST_USED_RESOLUTION = timedelta(minutes=1)


def _hash(key: str) -> str:
    # Keys are 256 random bits: a fast hash cannot be brute-forced, unlike a password.
    return hashlib.sha256(key.encode()).hexdigest()


def api_key_create(*, agent_id: str, name: str = "") -> tuple[ApiKey, str]:
    """A new key for the agent; returns the row and the key, which is not stored anywhere."""
    check_identifier("agent_id", agent_id)
    key = KEY_PREFIX + secrets.token_urlsafe(32)
    row = ApiKey.objects.create(
        agent_id=agent_id, name=name, prefix=key[: len(KEY_PREFIX) + 6], key_hash=_hash(key)
    )
    return row, key


def api_key_revoke(row: ApiKey) -> None:
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])


def agent_for_key(key: str) -> str | None:
    """The agent a valid, unrevoked key belongs to, else None."""
    row = ApiKey.objects.active().filter(key_hash=_hash(key)).first()
    if row is None:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.agent_id


class ApiKeyAuth(HttpBearer):
    """`Authorization: Bearer <key>`; `request.auth` becomes the key's agent_id."""

    def authenticate(self, request: HttpRequest, token: str) -> str | None:
        return agent_for_key(token)
