"""The PostgreSQL server settings the service needs, checked at start.

PostgreSQL's defaults (shared_buffers 128MB, maintenance_work_mem 64MB) are sized for a server
that shares its machine with anything: the HNSW graph a query walks at 100k messages of 1024
dimensions does not stay in 128MB of buffers, and pgvector builds an HNSW index much faster
while the graph fits in maintenance_work_mem (docs/DEPLOYMENT.md). `check_server_settings` is
a Django system check on the `database` tag (registered by memory.apps): `manage.py migrate`
(every `make run`, every deployment's migrate step) and `manage.py check --database default`
print its warnings. `manage.py local_postgres` gives its server at least these values, so a
normal start prints none, and shared_buffers a quarter of the machine's memory where that is
more (`local_bytes`). hnsw.ef_search is set by the service for each query
(memory.index_postgres), not here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from django.core import checks
from django.db import connections

MB = 1024 * 1024


@dataclass(frozen=True)
class ServerSetting:
    name: str
    check_id: str
    minimum_bytes: int
    applied_by: str  # what makes a new value take effect
    advice: str
    # What `local_postgres` gives its own server: this share of the machine's memory, where
    # that is more than the minimum.
    memory_share: float = 0.0

    @property
    def recommended(self) -> str:
        return f"{self.minimum_bytes // MB}MB"

    def local_bytes(self, machine_bytes: int) -> int:
        """What `local_postgres` gives its server on a machine of `machine_bytes`, in whole
        MB."""
        return max(self.minimum_bytes, int(self.memory_share * machine_bytes) // MB * MB)


SERVER_SETTINGS: tuple[ServerSetting, ...] = (
    ServerSetting(
        "shared_buffers",
        "orca.W001",
        512 * MB,
        applied_by="restart PostgreSQL",
        advice="on a machine of its own, about a quarter of its memory",
        # The HNSW graphs a context call walks (781 MB per 100k x 1024 vectors, a large
        # agent's own index as much again) and the rows it reads outgrow 512MB: at 1M
        # messages, 6GB made context_build for the largest agent 1.7x faster at p95
        # (docs/BENCHMARKS.md, PostgreSQL's "Context assembly"). PostgreSQL takes its
        # buffers' memory as it uses them.
        memory_share=0.25,
    ),
    ServerSetting(
        "maintenance_work_mem",
        "orca.W002",
        512 * MB,
        applied_by="SELECT pg_reload_conf()",
        advice="more makes HNSW index builds faster",
    ),
)
_READ = "SELECT current_setting(%s), pg_size_bytes(current_setting(%s))"


def settings_below(
    cursor: Any, wanted: Callable[[ServerSetting], int] = lambda setting: setting.minimum_bytes
) -> list[tuple[ServerSetting, str]]:
    """The settings of the PostgreSQL server that are below what is `wanted` (the service's
    minimum), each with its value as the server says it. `cursor`: a DB-API cursor on the
    server (Django's, or psycopg's for `local_postgres`, which runs before the service knows
    the server)."""
    low = []
    for setting in SERVER_SETTINGS:
        cursor.execute(_READ, [setting.name, setting.name])
        shown, size = cursor.fetchone()
        if size < wanted(setting):
            low.append((setting, shown))
    return low


def check_server_settings(
    databases: Sequence[str] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """One warning per setting below its minimum, naming its value, the recommended one and
    how to set it (on PostgreSQL only; a server that cannot be reached raises the error
    migrate itself would)."""
    found: list[checks.CheckMessage] = []
    for alias in databases or ():
        if connections[alias].vendor != "postgresql":
            continue
        with connections[alias].cursor() as cursor:
            low = settings_below(cursor)
        for setting, shown in low:
            found.append(
                checks.Warning(
                    f"PostgreSQL's {setting.name} is {shown}; orca-memory recommends at least "
                    f"{setting.recommended}.",
                    hint=(
                        f"As a superuser: ALTER SYSTEM SET {setting.name} = "
                        f"'{setting.recommended}', then {setting.applied_by}; or set it in "
                        "postgresql.conf or your managed service's parameters "
                        f"({setting.advice}; docs/DEPLOYMENT.md)."
                    ),
                    id=setting.check_id,
                )
            )
    return found
