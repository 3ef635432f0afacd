"""Django's SQLite backend, plus sqlite-vec on every connection.

Selected with `ENGINE = "orca_memory.core.db"`. Like Django's SpatiaLite backend it loads an
extension in `get_new_connection()`. Many Python builds (this project's pyenv ones among them)
compile the standard library's sqlite3 without extension loading; then the `pysqlite3` driver
(package `pysqlite3-binary`) is used instead. When neither can load sqlite-vec, the service
still runs: `connection.vector_extension` says vectors are off and why, and the reason is
logged once.
The pragmas are the database's `OPTIONS` (settings.SQLITE_INIT_COMMAND); the SQL functions the
lexical index's triggers call are registered by memory.index on `connection_created`.
"""

from __future__ import annotations

import datetime
import decimal
import logging
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import tee
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from django.db.backends.sqlite3 import base as sqlite_base
from django.db.backends.sqlite3._functions import register as register_django_functions
from django.utils.dateparse import parse_date, parse_datetime, parse_time

from orca_memory.core.files import create_private_file, make_private

logger = logging.getLogger(__name__)


def _pick_driver() -> ModuleType:
    """The standard library's sqlite3 when it can load extensions, else pysqlite3 if installed."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        from pysqlite3 import dbapi2
    except ImportError:
        return sqlite3
    return dbapi2


Driver = _pick_driver()


@dataclass(frozen=True)
class VectorExtension:
    """Whether this connection can use vec0, and if not, a reason an operator can act on."""

    enabled: bool
    reason: str | None = None
    version: str | None = None


_logged_reasons: set[str] = set()


def load_sqlite_vec(conn: Any) -> VectorExtension:
    try:
        import sqlite_vec
    except ImportError as exc:
        return VectorExtension(False, f"the sqlite-vec package cannot be imported ({exc})")
    if not hasattr(conn, "enable_load_extension"):
        return VectorExtension(
            False,
            "this Python's sqlite3 cannot load extensions and pysqlite3-binary is not installed",
        )
    try:
        conn.enable_load_extension(True)
        try:
            sqlite_vec.load(conn)
        finally:
            conn.enable_load_extension(False)
        (version,) = conn.execute("SELECT vec_version()").fetchone()
    except Driver.Error as exc:
        return VectorExtension(False, f"loading the sqlite-vec extension failed ({exc})")
    return VectorExtension(True, version=version)


def _log_once(support: VectorExtension) -> None:
    if support.reason and support.reason not in _logged_reasons:
        _logged_reasons.add(support.reason)
        logger.warning("Vector search is disabled: %s", support.reason)


def private_database_file(database: Any) -> None:
    """Create the database file 0600 before SQLite does, and tighten one created before.

    SQLite would create it 0644 (minus the umask) and gives its -wal and -shm files the
    database file's mode: created here first, all three are private whichever command
    (migrate, the server, the worker, an import) opens the database first.
    """
    name = str(database)
    if not isinstance(database, str | Path) or name in ("", ":memory:") or name.startswith("file:"):
        return
    path = Path(database)
    try:
        create_private_file(path, exclusive=True)
    except FileExistsError:
        pass
    except OSError:
        return  # a missing folder, a directory...: SQLite says why it cannot open it
    for file in (path, path.with_name(f"{path.name}-wal"), path.with_name(f"{path.name}-shm")):
        if file.is_file() and make_private(file):
            logger.warning("Made %s private (mode 0600): other users could read it", file)


if Driver is not sqlite3:
    # Django registers these on the standard library's module only.
    Driver.register_converter("bool", b"1".__eq__)
    Driver.register_converter("date", sqlite_base.decoder(parse_date))
    Driver.register_converter("time", sqlite_base.decoder(parse_time))
    Driver.register_converter("datetime", sqlite_base.decoder(parse_datetime))
    Driver.register_converter("timestamp", sqlite_base.decoder(parse_datetime))
    Driver.register_adapter(decimal.Decimal, str)
    Driver.register_adapter(datetime.date, sqlite_base.adapt_date)
    Driver.register_adapter(datetime.datetime, sqlite_base.adapt_datetime)


class Connection(Driver.Connection):
    """The driver's connection; on pysqlite3 it adds `getlimit()`, which Django 6.1 calls.

    pysqlite3 offers no `setlimit()` either, so a connection's limits are the compile-time
    maxima that `PRAGMA compile_options` reports (SQLite's documented defaults otherwise).
    """

    if not hasattr(Driver.Connection, "getlimit"):
        _LIMITS = {
            sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER: ("MAX_VARIABLE_NUMBER", 32766),
            sqlite3.SQLITE_LIMIT_COLUMN: ("MAX_COLUMN", 2000),
        }

        # The library's, the same for every connection: read once per process (Django asks
        # on each bulk insert and each long `IN (...)`).
        _found: ClassVar[dict[int, int]] = {}

        def getlimit(self, category: int) -> int:
            if category not in self._found:
                option, default = self._LIMITS[category]
                options = dict(
                    name.partition("=")[::2] for (name,) in self.execute("PRAGMA compile_options")
                )
                self._found[category] = int(options.get(option, default))
            return self._found[category]


class CursorWrapper(Driver.Cursor):
    """Django's SQLiteCursorWrapper on whichever driver is in use.

    Django's class subclasses the standard library's Cursor, which a pysqlite3 connection
    refuses as a cursor factory; the body is Django's.
    """

    convert_query = sqlite_base.SQLiteCursorWrapper.convert_query

    def execute(self, query: str, params: Any = None) -> Any:
        if params is None:
            return super().execute(query)
        param_names = list(params) if isinstance(params, Mapping) else None
        query = self.convert_query(query, param_names=param_names)
        return super().execute(query, params)

    def executemany(self, query: str, param_list: Any) -> Any:
        peekable, param_list = tee(iter(param_list))
        if (params := next(peekable, None)) and isinstance(params, Mapping):
            param_names = list(params)
        else:
            param_names = None
        query = self.convert_query(query, param_names=param_names)
        return super().executemany(query, param_list)


# How long gathering the planner's statistics waits for another process's write lock.
STATISTICS_WAIT_MS = 100


def _gather_statistics(conn: Any) -> None:
    """The query planner's statistics (sqlite_stat1), as SQLite recommends for long-lived
    connections: tables never analysed, or grown 25x since, are analysed within a bounded
    effort. Without them the planner reads `agent_id = ? AND id IN (100 ids)` through the
    agent's index, every message of the agent, instead of looking up the hundred ids
    (docs/BENCHMARKS.md, "Planner statistics and the unembedded memories")."""
    # It writes (ANALYZE) when a table needs it: while another process holds the write lock,
    # a new connection waits STATISTICS_WAIT_MS for it, not the whole busy timeout before
    # the request's own work even starts (a message then took twice the timeout to reach
    # the JSONL backup).
    (busy_timeout,) = conn.execute("PRAGMA busy_timeout").fetchone()
    conn.execute(f"PRAGMA busy_timeout = {STATISTICS_WAIT_MS}")
    try:
        conn.execute("PRAGMA optimize=0x10002")
    except Driver.OperationalError as exc:
        # A read-only file, or the write lock held by another process: the plans stay what
        # they were, which is slower but right; the next connection tries again.
        logger.info("Planner statistics not gathered: %s", exc)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout)}")


class DatabaseWrapper(sqlite_base.DatabaseWrapper):
    Database = Driver

    _vector_extension: VectorExtension | None = None

    @property
    def vector_extension(self) -> VectorExtension:
        """Whether vec0 is loaded on this connection (opening it if needed)."""
        self.ensure_connection()
        assert self._vector_extension is not None
        return self._vector_extension

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        # Django's body with our driver and connection class, then sqlite-vec.
        private_database_file(conn_params["database"])
        conn = Driver.connect(**conn_params, factory=Connection)
        register_django_functions(conn)
        conn.execute("PRAGMA foreign_keys = ON")
        conn.execute("PRAGMA legacy_alter_table = OFF")
        for init_command in self.init_commands:
            if init_command := init_command.strip():
                conn.execute(init_command)
        _gather_statistics(conn)
        self._vector_extension = load_sqlite_vec(conn)
        _log_once(self._vector_extension)
        return conn

    def create_cursor(self, name: str | None = None) -> Any:
        return self.connection.cursor(factory=CursorWrapper)
