"""Input rules shared by the API, the commands and the domain functions.

Domain functions raise `InvalidInput`; the API turns it into a 422 with the same message.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.utils.deconstruct import deconstructible

from memory.text import has_terms

# Identifiers (agent, session, sub-agent name) become file names (the JSONL backup and
# export) and URL path segments: counted in UTF-8 bytes, as file systems count names.
MAX_IDENTIFIER_BYTES = 200
MAX_METADATA_DEPTH = 20
# Control characters (C0, DEL, C1, line and paragraph separators) break logs and URLs;
# "/" cannot be addressed in an API path, and neither separator belongs in a file name.
_BAD_IDENTIFIER_CHAR = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029/\\]")
# Unicode's format characters (category Cf): the bidirectional controls (U+202A-U+202E,
# U+2066-U+2069, U+200E/U+200F, U+061C), which reverse the text shown after them (a page's
# line, a log's), and the invisible ones (U+200B-U+200D, U+2060, U+FEFF, U+00AD...), which
# make two ids that look the same differ. An id is compared, not read: none has a use in one.
# Refused in ids written anew; content keeps them (text in any language may need them).
_FORMAT_CATEGORY = "Cf"
MAX_IDEMPOTENCY_KEY_CHARS = 200
_IDEMPOTENCY_KEY = re.compile(rf"[ -~]{{1,{MAX_IDEMPOTENCY_KEY_CHARS}}}")
# The largest id a row can have: both databases keep ids as signed 64-bit integers, and a
# larger number overflows their drivers.
MAX_ID = 2**63 - 1
# Python's json reads NaN, Infinity and 1e400 (an infinity); JSON and SQLite's JSON refuse them.
NON_FINITE_MESSAGE = "numbers must be finite: NaN and Infinity are not JSON"


class InvalidInput(ValueError):
    """Input a caller can fix; the message says what is wrong (HTTP 422).

    `field` names the input at fault, so that the API's error can point at it (`loc`).
    """

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class ContentTooLarge(InvalidInput):
    """Content above the configured size limit (HTTP 413)."""


class InvalidItems(InvalidInput):
    """Items of a list at fault, each with its index in the list (HTTP 422, or 413 when each
    is too large). `field` names the list."""

    def __init__(self, field: str, errors: list[tuple[int, InvalidInput]]) -> None:
        super().__init__(
            "; ".join(f"{field}.{index}.{exc.field}: {exc}" for index, exc in errors),
            field=field,
        )
        self.errors = errors


class Conflict(Exception):
    """A request that contradicts the stored state, such as writing to a finished run (409)."""


def check_identifier(kind: str, value: object) -> str:
    """An agent id, session id or sub-agent name written anew: one rule wherever it comes in
    (API, commands, admin, importer). What `check_stored_identifier` asks, and no format
    character (bidirectional controls, zero-width and other invisible characters)."""
    value = check_stored_identifier(kind, value)
    invisible = next((c for c in value if unicodedata.category(c) == _FORMAT_CATEGORY), None)
    if invisible is not None:
        name = unicodedata.name(invisible, "a format character")
        raise InvalidInput(
            f"{kind} must not contain U+{ord(invisible):04X} ({name}): bidirectional and "
            "invisible formatting characters make an id look like another",
            field=kind,
        )
    return value


def check_stored_identifier(kind: str, value: object) -> str:
    """An id that names what may be stored already (a session to read, to build a context
    for, to export): the rule ids have had from the start. Valid UTF-8 of 1-200 bytes, not
    only dots ("." and ".." name folders, and clients normalise them out of URLs), no "/" or
    "\\", no control characters, no leading or trailing spaces. Ids stored before the
    format-character rule of `check_identifier` stay reachable by it."""
    if not isinstance(value, str):
        raise InvalidInput(f"{kind} must be text", field=kind)
    check_text(kind, value)
    if not 1 <= len(value.encode("utf-8")) <= MAX_IDENTIFIER_BYTES:
        raise InvalidInput(f"{kind} must be 1 to {MAX_IDENTIFIER_BYTES} bytes of UTF-8", field=kind)
    if _BAD_IDENTIFIER_CHAR.search(value) or value != value.strip():
        raise InvalidInput(
            f"{kind} must not contain '/', '\\', control characters or leading/trailing spaces",
            field=kind,
        )
    if not value.strip("."):
        raise InvalidInput(f"{kind} must not be only dots", field=kind)
    return value


def row_id(text: str | None) -> int | None:
    """The id a URL's text names (ASCII digits, at most `MAX_ID`), else None: no row has it."""
    if text and text.isascii() and text.isdigit() and int(text) <= MAX_ID:
        return int(text)
    return None


def check_confidence(kind: str, value: float) -> float:
    """A confidence is a share: 0 to 1 (the tables' CHECK constraints hold the same bound)."""
    if not 0 <= value <= 1:
        raise InvalidInput(f"{kind} must be between 0 and 1", field=kind)
    return value


def check_text(kind: str, value: str) -> str:
    """Text SQLite can store faithfully: valid UTF-8 (no lone surrogates) and no NUL."""
    if "\x00" in value:
        raise InvalidInput(f"{kind} must not contain NUL characters", field=kind)
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput(f"{kind} is not valid UTF-8", field=kind) from exc
    return value


def check_content(kind: str, value: str) -> str:
    """Message or memory text: non-blank, valid, and within ORCA_MAX_CONTENT_BYTES."""
    limit = settings.ORCA.max_content_bytes
    if len(value.encode("utf-8", "surrogatepass")) > limit:
        raise ContentTooLarge(f"{kind} is larger than {limit} bytes", field=kind)
    if not value.strip():
        raise InvalidInput(f"{kind} must not be empty", field=kind)
    return check_text(kind, value)


def check_metadata(value: Any) -> Any:
    """JSON metadata: nested at most MAX_METADATA_DEPTH levels, every string valid text, every
    number finite, and at most ORCA_MAX_METADATA_BYTES once serialised (compact JSON in
    UTF-8: `{"a":"é"}` is 10 bytes, however the client escaped it)."""
    _check_metadata_values(value, 0)
    limit = settings.ORCA.max_metadata_bytes
    serialised = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if len(serialised.encode("utf-8")) > limit:
        raise ContentTooLarge(
            f"metadata is larger than {limit} bytes (as compact JSON in UTF-8)", field="metadata"
        )
    return value


def _check_metadata_values(value: Any, depth: int) -> None:
    if depth > MAX_METADATA_DEPTH:
        raise InvalidInput(
            f"metadata is nested deeper than {MAX_METADATA_DEPTH} levels", field="metadata"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            check_text("metadata", key)
            _check_metadata_values(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_metadata_values(item, depth + 1)
    elif isinstance(value, str):
        check_text("metadata", value)
    elif isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(NON_FINITE_MESSAGE, field="metadata")


def check_query(kind: str, value: str) -> str:
    """A search query with something to search for: a letter or a digit (memory.text's
    `has_terms`). Without one, the lexical index finds nothing and a vector search would
    answer whatever lies nearest to nothing."""
    if not has_terms(value):
        raise InvalidInput(
            f"{kind} has nothing to search for: give a word, a number or a Chinese character "
            "(spaces, punctuation, symbols and emoji alone are not searched)",
            field=kind,
        )
    return value


def check_datetime(kind: str, value: datetime) -> datetime:
    """A moment the service can store and compare, returned in UTC.

    It must say its time zone: a naive time is ambiguous, and the database keeps UTC. It must
    stay within years 1-9999 once in UTC (9999-12-31T23:30:00-01:00 does not).
    """
    if value.utcoffset() is None:
        raise InvalidInput(
            f"{kind} must give its time zone, as in 2024-05-01T09:00:00Z or +08:00", field=kind
        )
    try:
        return value.astimezone(UTC)
    except OverflowError as exc:
        raise InvalidInput(
            f"{kind} is out of range once converted to UTC (years 1 to 9999)", field=kind
        ) from exc


def check_idempotency_key(kind: str, value: object) -> str:
    """A client's key for one message post (the `Idempotency-Key` header, MCP's `client_id`):
    1-200 printable ASCII characters, which an HTTP header carries unchanged."""
    if not isinstance(value, str) or not _IDEMPOTENCY_KEY.fullmatch(value):
        raise InvalidInput(
            f"{kind} must be 1 to {MAX_IDEMPOTENCY_KEY_CHARS} printable ASCII characters",
            field=kind,
        )
    return value


# --- the same rules as model field validators ------------------------------------------------
# On the model fields, so that every ModelForm (the admin's, the dashboard's) applies the rule
# the API applies, with its message. Migrations name them: keep their names and arguments.


@contextmanager
def _as_validation_error() -> Iterator[None]:
    try:
        yield
    except InvalidInput as exc:
        # Not "invalid": a model field would put its own message for that code in its place.
        raise ValidationError(str(exc), code="invalid_input") from exc


@deconstructible
class IdentifierValidator:
    """check_identifier as a field validator; `kind` names the field in the message."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __call__(self, value: object) -> None:
        with _as_validation_error():
            check_identifier(self.kind, value)

    def __eq__(self, other: object) -> bool:
        # The migration autodetector compares validators: equal ones are no change.
        return isinstance(other, IdentifierValidator) and other.kind == self.kind


def validate_confidence(value: float) -> None:
    """check_confidence as a field validator."""
    with _as_validation_error():
        check_confidence("confidence", value)
