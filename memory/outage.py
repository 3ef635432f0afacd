"""The database being unavailable: which errors say so, and what a client is told.

An outage (the database locked by another process beyond the busy timeout, a file that cannot
be opened, a full disk, an I/O error, a PostgreSQL connection lost) is not the request's fault
and passes: the API answers 503 with Retry-After (orca_memory.api), MCP a tool error with the
same sentence, and the message paths keep the messages in the JSONL backup when it is on
(memory.messages). Any other database error is a bug or bad data and stays what it is.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.db import InterfaceError, OperationalError, connection, transaction

logger = logging.getLogger(__name__)

# How long a bookkeeping write waits for another process's lock (SQLite's busy timeout, ms).
BOOKKEEPING_WAIT_MS = 100
# What the client is asked to wait: the busy timeout (settings.SQLITE_INIT_COMMAND), the time
# a write waits for another process's lock before it gives up.
RETRY_AFTER_SECONDS = 10

# SQLite's primary result codes that mean "not now", not "not this":
# BUSY (5), LOCKED (6), READONLY (8), IOERR (10), FULL (13), CANTOPEN (14), PROTOCOL (15).
_SQLITE_UNAVAILABLE = {
    5: "locked",
    6: "locked",
    8: "read-only",
    10: "io",
    13: "full",
    14: "open",
    15: "locked",
}
# The same by message, for drivers whose errors carry no code.
_SQLITE_MESSAGES = {
    "database is locked": "locked",
    "database table is locked": "locked",
    "attempt to write a readonly database": "read-only",
    "disk i/o error": "io",
    "database or disk is full": "full",
    "unable to open database file": "open",
    "locking protocol": "locked",
}
# PostgreSQL's disk full told apart from the rest (a connection lost, refused or shut down).
_POSTGRES_STATES = {"53100": "full"}
_WHY = {
    "locked": "it is locked by another process for longer than the "
    f"{RETRY_AFTER_SECONDS} s busy timeout",
    "read-only": "its file cannot be written",
    "io": "reading or writing its file failed (disk I/O error)",
    "full": "its disk is full",
    "open": "its file cannot be opened",
    "connection": "the connection to it failed",
}


def _kind(exc: BaseException) -> str | None:
    """Which outage `exc` (or the driver error it wraps) reports, or None for any other error."""
    if not isinstance(exc, OperationalError | InterfaceError):
        return None
    cause = exc.__cause__ or exc
    if connection.vendor != "sqlite":
        # psycopg: a lost or refused connection, a server shutting down, a full disk, a lock
        # timeout: every OperationalError is the server's state, not the request's.
        return _POSTGRES_STATES.get(getattr(cause, "sqlstate", None) or "", "connection")
    code = getattr(cause, "sqlite_errorcode", None)
    if code is not None:
        return _SQLITE_UNAVAILABLE.get(code & 0xFF)
    text = str(exc).lower()
    return next((kind for message, kind in _SQLITE_MESSAGES.items() if message in text), None)


def is_unavailable(exc: BaseException) -> bool:
    """True when `exc` says the database cannot serve now (and may later)."""
    return _kind(exc) is not None


def unavailable_detail(exc: BaseException) -> str:
    """The sentence a client reads for an outage: what happened, that nothing changed, when
    to retry."""
    why = _WHY.get(_kind(exc) or "connection", _WHY["connection"])
    return (
        f"the database is unavailable: {why}. Nothing was changed; retry in {RETRY_AFTER_SECONDS} s"
    )


def backup_failed_detail(exc: OSError) -> str:
    """The sentence for messages the JSONL backup could not keep either (jsonl.BackupFailed)."""
    return (
        f"the database is unavailable and the JSONL backup could not keep the messages "
        f"({exc.strerror}). Nothing was kept; retry in {RETRY_AFTER_SECONDS} s"
    )


def best_effort(what: str, write: Callable[[], object]) -> None:
    """A bookkeeping `write` (a key's last use, memories' access counts) that must never fail
    nor hold up the request it serves: in its own transaction (a savepoint inside another),
    waiting BOOKKEEPING_WAIT_MS at most for another process's lock on SQLite, and skipped,
    logged, when the database cannot take it, whether at the transaction's start (SQLite's
    BEGIN IMMEDIATE takes the lock) or in the write. Other errors are raised. A function, not
    a `with` block: a block cannot be skipped once its transaction failed to start."""
    try:
        with _short_lock_wait(), transaction.atomic():
            write()
    except (OperationalError, InterfaceError) as exc:
        if not is_unavailable(exc):
            raise
        logger.warning("Skipped %s: the database could not take it (%s)", what, exc)


@contextmanager
def _short_lock_wait() -> Iterator[None]:
    if connection.vendor != "sqlite":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute("PRAGMA busy_timeout")
        (before,) = cursor.fetchone()
        cursor.execute(f"PRAGMA busy_timeout = {BOOKKEEPING_WAIT_MS}")
        try:
            yield
        finally:
            cursor.execute(f"PRAGMA busy_timeout = {int(before)}")
