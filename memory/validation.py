"""Input rules shared by the API, the commands and the domain functions.

Domain functions raise `InvalidInput`; the API turns it into a 422 with the same message.
"""

from __future__ import annotations

import re
from typing import Any

from django.conf import settings

# Identifiers (agent, session, sub-agent name) become file names (the JSONL backup and
# export) and URL path segments: counted in UTF-8 bytes, as file systems count names.
MAX_IDENTIFIER_BYTES = 200
MAX_METADATA_DEPTH = 20
# Control characters (C0, DEL, C1, line and paragraph separators) break logs and URLs;
# "/" cannot be addressed in an API path, and neither separator belongs in a file name.
_BAD_IDENTIFIER_CHAR = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029/\\]")


class InvalidInput(ValueError):
    """Input a caller can fix; the message says what is wrong (HTTP 422)."""


class ContentTooLarge(InvalidInput):
    """Content above the configured size limit (HTTP 413)."""


class Conflict(Exception):
    """A request that contradicts the stored state, such as writing to a finished run (409)."""


def check_identifier(kind: str, value: object) -> str:
    """An agent id, session id or sub-agent name: one rule wherever it comes in (API,
    commands, admin, importer). Valid UTF-8 of 1-200 bytes, not only dots ("." and ".." name
    folders, and clients normalise them out of URLs), no "/" or "\\", no control characters,
    no leading or trailing spaces."""
    if not isinstance(value, str):
        raise InvalidInput(f"{kind} must be text")
    check_text(kind, value)
    if not 1 <= len(value.encode("utf-8")) <= MAX_IDENTIFIER_BYTES:
        raise InvalidInput(f"{kind} must be 1 to {MAX_IDENTIFIER_BYTES} bytes of UTF-8")
    if _BAD_IDENTIFIER_CHAR.search(value) or value != value.strip():
        raise InvalidInput(
            f"{kind} must not contain '/', '\\', control characters or leading/trailing spaces"
        )
    if not value.strip("."):
        raise InvalidInput(f"{kind} must not be only dots")
    return value


def check_text(kind: str, value: str) -> str:
    """Text SQLite can store faithfully: valid UTF-8 (no lone surrogates) and no NUL."""
    if "\x00" in value:
        raise InvalidInput(f"{kind} must not contain NUL characters")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{kind} is not valid UTF-8") from exc
    return value


def check_content(kind: str, value: str) -> str:
    """Message or memory text: non-blank, valid, and within ORCA_MAX_CONTENT_BYTES."""
    limit = settings.ORCA.max_content_bytes
    if len(value.encode("utf-8", "surrogatepass")) > limit:
        raise ContentTooLarge(f"{kind} is larger than {limit} bytes")
    if not value.strip():
        raise InvalidInput(f"{kind} must not be empty")
    return check_text(kind, value)


def check_metadata(value: Any, depth: int = 0) -> Any:
    """JSON metadata: nested at most MAX_METADATA_DEPTH levels, every string valid text."""
    if depth > MAX_METADATA_DEPTH:
        raise InvalidInput(f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels")
    if isinstance(value, dict):
        for key, item in value.items():
            check_text("metadata key", key)
            check_metadata(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            check_metadata(item, depth + 1)
    elif isinstance(value, str):
        check_text("metadata", value)
    return value
