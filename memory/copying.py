"""Copying a whole store to another database, SQLite to PostgreSQL or back (`copy_database`).

What is copied: the table of every model of the installed apps (the app registry, so the
sub-agent transcripts, users, groups, permissions, API keys, the admin's log and sign-in
throttling come without this module naming them), many-to-many tables included, parents
before the rows that point at them; then the three vector tables. Primary keys are kept, so
every reference (a transcript's message, a run's last message id, a history row's memory id)
still holds. The lexical tables are not copied: the target's triggers fill them as the base
rows arrive, and the messages whose context (`ctx`, the two messages before) was written
before an older-dated message arrived are indexed again at the end.

Not copied: the task queue (django-tasks-db), which is the source's work in flight, its rows
naming the source's workers, keyed by random UUIDs that have no order to resume by: stop the
service and let its worker finish (`db_worker --batch`) before copying; the copy counts what
is left unfinished. Nor sign-in sessions, keyed by random strings: people sign in again.

The rules:
- The target is migrated by the copy (`migrate --database`); the source must be migrated
  already, so both have the same tables.
- Resume rule: a target is accepted when each of its tables holds nothing but the source's
  first rows, unchanged: its row count and checksum equal those of the source's rows up to
  the target's last id. The copy then continues after that id. An empty target is the case
  with no rows; a target stopped mid-copy (batches are transactions) is another; any other
  row, a foreign store's or a copied one since changed, refuses the target and nothing is
  written. Content types, permissions and groups (rows that migrations write on every
  database) are replaced by the source's while no other table holds a row.
- Verify: every table's row count and SHA-256 on both sides, rows in id order, values as
  Python reads them from either engine (datetimes in UTC ISO form, JSON with sorted keys,
  floats by repr, vectors as float32 bytes). A difference raises CopyError.
"""

from __future__ import annotations

import hashlib
import json
import time
from array import array
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any
from uuid import UUID

from django.apps import apps
from django.conf import settings
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.core.management.color import no_style
from django.db import connections, models, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.models import Exists, OuterRef
from django.db.utils import load_backend
from django_tasks_db.models import DBTaskResult
from tqdm import tqdm

from memory import index
from memory.models import MainMessage, VectorIndexState
from orca_memory.core.config import postgres_settings

TARGET = "target"
# Apps whose rows are not copied (see the module's docstring): the queue, sign-in sessions.
NOT_COPIED = (DBTaskResult._meta.app_label, "sessions")
# Rows migrations write on every database: content types and permissions (post_migrate and
# migration 0010), 0010's two dashboard groups and their permissions.
FRAMEWORK = ("contenttypes.contenttype", "auth.permission", "auth.group", "auth.group_permissions")
DASHBOARD_GROUPS = ("orca viewers", "orca curators")
BATCH_SIZE = 1000


class CopyError(Exception):
    """The copy cannot start or did not produce an identical store; the message says why."""


@dataclass(frozen=True)
class Digest:
    count: int
    sha256: str
    last_id: int  # 0 for an empty table


@dataclass(frozen=True)
class TableCopy:
    name: str
    rows: int  # in the source
    copied: int  # by this run (less than rows when resumed)


@dataclass(frozen=True)
class CopyReport:
    tables: list[TableCopy]
    seconds: float
    unfinished_tasks: int

    @property
    def rows(self) -> int:
        return sum(table.rows for table in self.tables)

    @property
    def copied(self) -> int:
        return sum(table.copied for table in self.tables)


# --- the target connection -----------------------------------------------------------------


def target_settings(url: str) -> dict[str, Any]:
    """The DATABASES entry of a `postgres://` URL, or of a SQLite file (a path, or a
    `sqlite:///relative` / `sqlite:////absolute` URL) opened as the service opens its own."""
    if url.startswith(("postgres://", "postgresql://")):
        return postgres_settings(url)
    path = url.removeprefix("sqlite:///") if url.startswith("sqlite:") else url
    if not path:
        raise CopyError("name the SQLite file: a path, or sqlite:////absolute/path.db")
    return {**settings.SQLITE_DATABASE, "NAME": Path(path).expanduser().resolve()}


@contextmanager
def attached(database: dict[str, Any], alias: str = TARGET) -> Iterator[str]:
    """The database as a connection alias while the block runs.

    The connection is made here rather than added to settings.DATABASES: Django treats it as
    created at run time (its test cases too), and it is closed and forgotten afterwards.
    """
    configured = connections.configure_settings({"default": dict(database)})["default"]
    connections[alias] = load_backend(configured["ENGINE"]).DatabaseWrapper(configured, alias)
    try:
        yield alias
    finally:
        connections[alias].close()
        del connections[alias]
        ContentType.objects.clear_cache()


def _same_database(source: str, target: str) -> bool:
    a, b = connections[source].settings_dict, connections[target].settings_dict
    keys = ("ENGINE", "NAME", "HOST", "PORT")
    return [str(a[k]) for k in keys] == [str(b[k]) for k in keys]


def _unapplied(using: str) -> int:
    executor = MigrationExecutor(connections[using])
    return len(executor.migration_plan(executor.loader.graph.leaf_nodes()))


# --- what is copied: parts, each a table read in id order -----------------------------------


def _plain(value: Any) -> Any:
    """A value as both engines give it once read by Django, for the checksum."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    if isinstance(value, date | Decimal | UUID):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, bytes | memoryview):
        return bytes(value).hex()
    return value


def _line(values: Sequence[Any]) -> bytes:
    return json.dumps(
        [_plain(v) for v in values], sort_keys=True, ensure_ascii=False, separators=(",", ":")
    ).encode()


class ModelPart:
    """A model's table."""

    def __init__(self, model: type[models.Model]) -> None:
        self.model = model
        self.name = model._meta.db_table
        self.fields = model._meta.concrete_fields
        # bulk_create stamps auto_now(_add) fields with the time of the copy: they are put back.
        self.stamped = [
            f
            for f in self.fields
            if getattr(f, "auto_now", False) or getattr(f, "auto_now_add", False)
        ]

    def batches(self, using: str, after: int) -> Iterator[list[models.Model]]:
        rows = self.model._base_manager.using(using).order_by("pk")
        while batch := list(rows.filter(pk__gt=after)[:BATCH_SIZE]):
            yield batch
            after = batch[-1].pk

    def key(self, row: models.Model) -> int:
        return row.pk

    def encode(self, row: models.Model) -> bytes:
        return _line([getattr(row, f.attname) for f in self.fields])

    def write(self, rows: list[models.Model], using: str) -> None:
        stamps = [[getattr(row, f.attname) for f in self.stamped] for row in rows]
        manager = self.model._base_manager.using(using)
        manager.bulk_create(rows)
        if self.stamped:
            for row, values in zip(rows, stamps, strict=True):
                for field, value in zip(self.stamped, values, strict=True):
                    setattr(row, field.attname, value)
            manager.bulk_update(rows, [f.name for f in self.stamped])

    def total(self, using: str) -> int | None:
        return self.model._base_manager.using(using).count()

    def exists(self, using: str) -> bool:
        return self.model._base_manager.using(using).exists()


class VectorPart:
    """A vector table (vec0 or pgvector), read and written through memory.index."""

    def __init__(self, table: index.VectorTable) -> None:
        self.table = table
        self.name = table.name

    def batches(self, using: str, after: int) -> Iterator[list[index.VectorRow]]:
        rows = index.vector_rows(self.table, after=after, batch_size=BATCH_SIZE, using=using)
        batch: list[index.VectorRow] = []
        for row in rows:
            batch.append(row)
            if len(batch) == BATCH_SIZE:
                yield batch
                batch = []
        if batch:
            yield batch

    def key(self, row: index.VectorRow) -> int:
        return row.row_id

    def encode(self, row: index.VectorRow) -> bytes:
        metadata = [row.metadata[column] for column in self.table.metadata]
        return _line([row.row_id, row.agent_id, *metadata]) + array("f", row.embedding).tobytes()

    def write(self, rows: list[index.VectorRow], using: str) -> None:
        index.vectors_put(self.table, rows, using=using)

    def total(self, using: str) -> int | None:
        return None  # counting would read every vector: the progress bar goes without

    def exists(self, using: str) -> bool:
        return next(self.batches(using, 0), None) is not None


Part = ModelPart | VectorPart


def copied_models() -> list[type[models.Model]]:
    """Every model whose table is copied, each after the models its foreign keys point at;
    content types, permissions and groups first."""
    chosen = [
        model
        for model in apps.get_models(include_auto_created=True)
        if model._meta.app_label not in NOT_COPIED and model._meta.managed and not model._meta.proxy
    ]
    graph = {
        model: {
            field.related_model
            for field in model._meta.concrete_fields
            if field.is_relation
            and field.related_model in chosen
            and field.related_model is not model
        }
        for model in chosen
    }
    ordered = list(TopologicalSorter(graph).static_order())
    # Stable: the framework's tables point at nothing else, so they can lead.
    return sorted(ordered, key=lambda model: model._meta.label_lower not in FRAMEWORK)


def _digest(part: Part, using: str, *, through: int | None = None) -> Digest:
    """Count and SHA-256 of the part's rows in id order (only those up to `through`)."""
    sha, count, last = hashlib.sha256(), 0, 0
    for batch in part.batches(using, 0):
        for row in batch:
            if through is not None and part.key(row) > through:
                return Digest(count, sha.hexdigest(), last)
            sha.update(part.encode(row) + b"\n")
            count, last = count + 1, part.key(row)
    return Digest(count, sha.hexdigest(), last)


# --- the copy --------------------------------------------------------------------------------


def _parts(source: str) -> list[Part]:
    parts: list[Part] = [ModelPart(model) for model in copied_models()]
    if index.vector_index_status(using=source).enabled:
        parts += [VectorPart(table) for table in index.VECTOR_TABLES]
    return parts


def _is_fresh(parts: Sequence[Part], target: str) -> bool:
    """Whether the target holds nothing but what migrations write on every database."""
    if Group.objects.using(target).exclude(name__in=DASHBOARD_GROUPS).exists():
        return False
    return not any(
        part.exists(target)
        for part in parts
        if not (isinstance(part, ModelPart) and part.model._meta.label_lower in FRAMEWORK)
    )


def _prepare_fresh(parts: Sequence[Part], source: str, target: str) -> None:
    """Empty the framework's tables and give the vector tables the source's dimension."""
    with transaction.atomic(using=target):
        for part in reversed(parts):
            if isinstance(part, ModelPart) and part.model._meta.label_lower in FRAMEWORK:
                part.model._base_manager.using(target).all().delete()
        dimension = _vector_dimension(parts, source)
        if dimension:
            index.drop_vector_tables(using=target)
            index.create_vector_tables(dimension=dimension, search_index=False, using=target)


def _vector_dimension(parts: Sequence[Part], source: str) -> int | None:
    """The dimension of the source's vector tables, when it has vectors to copy."""
    state = VectorIndexState.objects.using(source).filter(pk=1).first()
    vectors = any(isinstance(part, VectorPart) for part in parts)
    return state.dimension if state and vectors else None


def _resume_point(part: Part, source: str, target: str) -> Digest | None:
    """What the target holds of this table if that is the source's first rows, else None."""
    there = _digest(part, target)
    if there.count and _digest(part, source, through=there.last_id) != there:
        return None
    return there


def _copy_part(part: Part, source: str, target: str, there: Digest, progress: bool) -> int:
    copied = 0
    bar = tqdm(
        total=part.total(source),
        initial=there.count,
        desc=part.name,
        unit="row",
        disable=not progress,
        leave=False,
    )
    with bar:
        for batch in part.batches(source, there.last_id):
            # Each batch its own transaction: an interruption loses at most the one in flight.
            with transaction.atomic(using=target):
                part.write(batch, target)
            copied += len(batch)
            bar.update(len(batch))
    return copied


def reindex_out_of_order(*, using: str = "default", agent_id: str | None = None) -> None:
    """Index again the messages a later id precedes in their session (of one agent, with
    `agent_id`): when they were inserted in id order (a copy, an archive's import) the
    messages before them in time were not there yet, so `ctx` missed them."""
    messages = MainMessage.objects.using(using)
    if agent_id is not None:
        messages = messages.filter(agent_id=agent_id)
    preceded = MainMessage.objects.using(using).filter(
        agent_id=OuterRef("agent_id"),
        session_id=OuterRef("session_id"),
        id__gt=OuterRef("id"),
        timestamp__lt=OuterRef("timestamp"),
    )
    ids = messages.filter(Exists(preceded)).values_list("id", flat=True)
    index.reindex_messages(list(ids), using=using)


def _reset_sequences(parts: Sequence[Part], target: str) -> None:
    """Inserting explicit ids leaves PostgreSQL's sequences behind: the next row would clash."""
    connection = connections[target]
    statements = connection.ops.sequence_reset_sql(
        no_style(), [part.model for part in parts if isinstance(part, ModelPart)]
    )
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def _verify(parts: Sequence[Part], source: str, target: str) -> list[Digest]:
    """The source's digest of each part, once the target's is found equal."""
    digests = []
    for part in parts:
        ours, theirs = _digest(part, source), _digest(part, target)
        digests.append(ours)
        if ours != theirs:
            raise CopyError(
                f"{part.name} differs after the copy: {ours.count} rows (sha256 "
                f"{ours.sha256[:12]}) in the source, {theirs.count} (sha256 "
                f"{theirs.sha256[:12]}) in the target. Was the source written to meanwhile? "
                "Stop the service and run the copy again."
            )
    return digests


def _unfinished_tasks(source: str) -> int:
    return DBTaskResult.objects.using(source).filter(finished_at__isnull=True).count()


def database_copy(*, to: str, source: str = "default", progress: bool = False) -> CopyReport:
    """Copy the store at `source` (a connection alias) into the database at `to` (a URL or
    SQLite path), resuming a copy stopped before, then verify it (the module's rules)."""
    started = time.monotonic()
    if _unapplied(source):
        raise CopyError("the source has unapplied migrations: run `manage.py migrate` first")
    with attached(target_settings(to)) as target:
        if _same_database(source, target):
            raise CopyError("the target is the source database")
        call_command("migrate", database=target, verbosity=0, interactive=False)
        parts = _parts(source)
        vectors = any(isinstance(part, VectorPart) for part in parts)
        status = index.vector_index_status(using=target)
        if vectors and not status.enabled:
            raise CopyError(f"the target cannot hold vectors: {status.reason}")
        if _is_fresh(parts, target):
            _prepare_fresh(parts, source, target)
        # Every table is checked before anything is written: a foreign target stays as it was.
        resume = [_resume_point(part, source, target) for part in parts]
        foreign = [part.name for part, there in zip(parts, resume, strict=True) if not there]
        if foreign:
            raise CopyError(
                f"the target holds rows that are not this store's in {', '.join(foreign)}: it "
                "is another store, or a copy changed since. Copy to an empty database."
            )
        copied = [
            _copy_part(part, source, target, there, progress)
            for part, there in zip(parts, resume, strict=True)
        ]
        reindex_out_of_order(using=target)
        if dimension := _vector_dimension(parts, source):
            index.create_vector_tables(dimension=dimension, using=target)  # the search index
        _reset_sequences(parts, target)
        digests = _verify(parts, source, target)
    tables = [
        TableCopy(part.name, digest.count, n)
        for part, digest, n in zip(parts, digests, copied, strict=True)
    ]
    return CopyReport(tables, time.monotonic() - started, _unfinished_tasks(source))
