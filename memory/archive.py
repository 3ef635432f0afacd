"""One agent's whole memory as one archive, and back: `export_agent`, `import_agent`, the
API's `GET /export` and `POST /import`. The format is docs/ARCHIVE.md's.

What is in it: the agent's messages, their sub-agent transcripts (the subagents app's table,
taken from the app registry as memory.copying does: memory never imports subagents),
summaries, consolidation runs that finished, long-term memories with every column, their
sources and history, the embedding signature and the vectors of messages, summaries and
memories. Every column of every row, times to the microsecond.

Import rules:
- One transaction: an archive refused at any line, or a database error, leaves nothing.
- Ids are new ids of the target store, given in the archive's id order (so `<=` between ids
  means what it meant: a run's last message, a summary's reply), and every reference follows
  them: a transcript's parent, a result's `metadata.subagent.parent_msg_id`, a summary's
  `reply_id`, a run's last message and summary, a source's memory and message, a memory's
  `superseded_by`, a history row's memory and the run its `changes` name. A reference to a
  row the archive does not hold (a memory deleted since: its history stays) takes a new id
  no row has or will have, taken from the table's own sequence, so it still names nothing
  and never names another agent's row. A run's last message or summary that is gone takes
  the id of the last one before it; a summary's gone reply and a result's gone parent are
  left out (null); a source whose message is gone is left out, as the database's cascade
  would have done.
- The target agent must hold nothing yet: importing an archive twice is refused, not
  doubled (the agent named by `--agent` or the archive, or the API key's).
- Vectors are reused when the archive's signature is the target's (its stored one, or, in
  a store with no vector yet, the configured provider's); otherwise every row waits for the
  worker's embedding (`has_embedding` false).
- Lexical index rows come from the target's own triggers; the messages whose context (the
  two messages before) was not there yet when they went in are indexed again at the end.
- Message `import_fingerprint`s name the lines of the agent's JSONL backup: kept under the
  archive's own agent id, dropped under another (they would never match its lines).
"""

from __future__ import annotations

import bisect
import json
import math
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.apps import apps
from django.core.exceptions import ValidationError
from django.db import models, transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from memory import embeddings, index, scheduling, vectors
from memory.copying import reindex_out_of_order
from memory.embeddings import Signature
from memory.models import (
    RUN_NOTE,
    ConsolidationRun,
    LongTermMemory,
    LongTermMemoryHistory,
    MainMessage,
    MemorySource,
    MemoryType,
    RunStatus,
    ShortTermMemory,
    Trigger,
)
from memory.subagent_run import RUN_METADATA_KEY
from memory.validation import Conflict, InvalidInput, check_identifier, check_stored_identifier
from orca_memory.core.files import open_private

FORMAT = "orca-memory-archive"
VERSION = 1
# Runs still waiting or running are the source's work in flight, as its task queue is: the
# target's own next run covers their messages.
FINISHED_RUNS = (RunStatus.DONE, RunStatus.FAILED, RunStatus.SKIPPED)
BATCH_SIZE = 1000
# The history's fields that hold a memory id (the supersession's, as written by memory_update).
MEMORY_ID_FIELDS = ("superseded_by", "superseded_by_id")


class ArchiveError(InvalidInput):
    """The archive cannot be imported; the message names the line and why."""


class AgentNotEmpty(Conflict):
    """The target agent holds data already (HTTP 409)."""


def _subagent_model() -> type[models.Model]:
    return apps.get_model("subagents", "SubagentMessage")


@dataclass(frozen=True)
class Part:
    """One table of the archive, in the order the lines come (each refers only to tables
    before it, memories' `superseded_by` aside)."""

    name: str
    model: type[models.Model]
    rows: Callable[[str], models.QuerySet[Any]]  # the agent's rows
    vectors: index.VectorTable | None = None


def parts() -> list[Part]:
    subagent = _subagent_model()
    return [
        Part(
            "main_messages",
            MainMessage,
            lambda a: MainMessage.objects.filter(agent_id=a),
            index.MESSAGE_VECTORS,
        ),
        Part(
            subagent._meta.db_table,
            subagent,
            lambda a: subagent.objects.filter(parent_msg__agent_id=a),
        ),
        Part(
            "short_term_memories",
            ShortTermMemory,
            lambda a: ShortTermMemory.objects.filter(agent_id=a),
            index.SUMMARY_VECTORS,
        ),
        Part(
            "consolidation_runs",
            ConsolidationRun,
            lambda a: ConsolidationRun.objects.filter(agent_id=a, status__in=FINISHED_RUNS),
        ),
        Part(
            "long_term_memories",
            LongTermMemory,
            lambda a: LongTermMemory.objects.filter(agent_id=a),
            index.MEMORY_VECTORS,
        ),
        Part(
            "long_term_memory_sources",
            MemorySource,
            lambda a: MemorySource.objects.filter(agent_id=a),
        ),
        Part(
            "long_term_memory_history",
            LongTermMemoryHistory,
            lambda a: LongTermMemoryHistory.objects.filter(agent_id=a),
        ),
    ]


# --- export ----------------------------------------------------------------------------------


def _plain(value: Any) -> Any:
    """A column's value as JSON: times as ISO 8601 in UTC to the microsecond."""
    if isinstance(value, datetime):
        return value.astimezone(UTC).isoformat()
    return value


def _line(item: dict[str, Any]) -> bytes:
    return json.dumps(item, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _signature() -> Signature | None:
    """The signature of the store's vectors, when it has a vector index."""
    state = vectors.index_state()
    if state is None or not index.vector_index_status().enabled:
        return None
    return Signature(
        state.provider, state.model, state.dimension, state.query_prefix, state.document_prefix
    )


def _batches(rows: models.QuerySet[Any]) -> Iterator[list[Any]]:
    after = 0
    rows = rows.order_by("pk")
    while batch := list(rows.filter(pk__gt=after)[:BATCH_SIZE]):
        yield batch
        after = batch[-1].pk


def export_lines(agent_id: str) -> Iterator[bytes]:
    """The agent's archive, line by line: a header, every row, a trailer with the counts."""
    check_stored_identifier("agent_id", agent_id)
    signature = _signature()
    yield _line(
        {
            "format": FORMAT,
            "version": VERSION,
            "agent_id": agent_id,
            "exported_at": timezone.now().isoformat(),
            "signature": signature.__dict__ if signature else None,
        }
    )
    counts = {}
    for part in parts():
        fields = part.model._meta.concrete_fields
        counts[part.name] = 0
        for batch in _batches(part.rows(agent_id)):
            found = {}
            if part.vectors is not None and signature is not None:
                found = index.vectors_of(part.vectors, [r.pk for r in batch if r.has_embedding])
            for row in batch:
                item: dict[str, Any] = {
                    "table": part.name,
                    "row": {f.attname: _plain(getattr(row, f.attname)) for f in fields},
                }
                if row.pk in found:
                    item["vector"] = found[row.pk]
                counts[part.name] += 1
                yield _line(item)
    yield _line({"end": True, "counts": counts})


def export_agent(agent_id: str, path: Path) -> int:
    """Write the agent's archive to `path` (a new private file); how many rows it holds."""
    rows = 0
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_TRUNC), "wb") as f:
        for line in export_lines(agent_id):
            f.write(line)
            rows += 1
    return rows - 2  # the header and the trailer


# --- import ----------------------------------------------------------------------------------


@dataclass
class ImportReport:
    agent_id: str
    counts: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)  # references to rows gone
    vectors_reused: bool = False
    waiting_for_embedding: int = 0


@dataclass
class _Ids:
    """One table's ids: the archive's, and the target's for each, in the archive's order."""

    old: list[int] = field(default_factory=list)
    new: dict[int, int] = field(default_factory=dict)

    def add(self, old: int, new: int) -> None:
        self.old.append(old)
        self.new[old] = new

    def floor(self, old: int | None) -> int | None:
        """The new id of the row, or of the last row before it when it is gone."""
        if old is None:
            return None
        at = bisect.bisect_right(self.old, old)
        return self.new[self.old[at - 1]] if at else None


class _Reader:
    """The archive's lines parsed, each error naming its line."""

    def __init__(self, lines: Iterable[bytes]) -> None:
        self.lines = enumerate(lines, 1)
        self.number = 0

    def error(self, message: str) -> ArchiveError:
        return ArchiveError(f"line {self.number}: {message}")

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for number, raw in self.lines:
            self.number = number
            if not raw.strip():
                continue
            try:
                item = json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
            except (ValueError, RecursionError) as exc:
                raise self.error(f"not JSON ({exc})") from exc
            if not isinstance(item, dict):
                raise self.error("not a JSON object")
            yield item


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"number {text[:20]} is out of range")
    return number


def _header(reader: _Reader, items: Iterator[dict[str, Any]]) -> dict[str, Any]:
    header = next(items, None)
    if header is None:
        raise ArchiveError("the archive is empty")
    if header.get("format") != FORMAT:
        raise reader.error(f'not an orca-memory archive (no "format": "{FORMAT}" header)')
    if header.get("version") != VERSION:
        raise reader.error(
            f"archive version {header.get('version')!r}: this service reads {VERSION}"
        )
    try:
        check_stored_identifier("agent_id", header.get("agent_id"))
    except InvalidInput as exc:
        raise reader.error(f"header: {exc}") from exc
    return header


def _archive_signature(reader: _Reader, value: Any) -> Signature | None:
    if value is None:
        return None
    try:
        signature = Signature(**value)
    except TypeError as exc:
        raise reader.error(f"header: signature is not one ({exc})") from exc
    if not (isinstance(signature.dimension, int) and signature.dimension > 0):
        raise reader.error("header: signature's dimension must be a positive integer")
    return signature


def _target_signature() -> Signature | None:
    """The signature vectors must have to be kept here: the store's, or, before its first
    vector, the configured provider's."""
    if not index.vector_index_status().enabled:
        return None
    stored = _signature()
    if stored is not None or index.vectors_exist():
        return stored
    embedder = embeddings.configured_embedder()
    return embedder.signature if embedder else None


def agent_holds_data(agent_id: str) -> dict[str, int]:
    """What the agent holds already, per table (only the tables that hold something)."""
    held = {part.name: part.rows(agent_id).count() for part in parts()}
    held["consolidation_runs"] = ConsolidationRun.objects.filter(agent_id=agent_id).count()
    return {name: n for name, n in held.items() if n}


class _Import:
    """One archive going into the store (inside the caller's transaction)."""

    def __init__(self, reader: _Reader, *, agent_id: str, source_agent: str, reuse: bool) -> None:
        self.reader = reader
        self.agent_id = agent_id
        self.same_agent = agent_id == source_agent
        self.reuse = reuse
        self.ids = {part.name: _Ids() for part in parts()}
        self.reserved: dict[str, dict[int, int]] = {
            "long_term_memories": {},
            "consolidation_runs": {},
        }
        self.report = ImportReport(agent_id, counts={part.name: 0 for part in parts()})
        # References set once their whole table is in (a later row may be named): (new id,
        # the archive's id it names) of memories' `superseded_by` and results' parents.
        self.superseded: list[tuple[int, int]] = []
        self.results: list[tuple[int, int | None]] = []

    # Building a row from a line.

    def row(self, part: Part, values: Any) -> tuple[int, models.Model]:
        """The line's row as an unsaved instance (its archive id apart), checked."""
        if not isinstance(values, dict):
            raise self.reader.error(f'{part.name}: "row" must be an object')
        fields = {f.attname: f for f in part.model._meta.concrete_fields}
        if unknown := sorted(set(values) - set(fields)):
            raise self.reader.error(f"{part.name}: unknown columns {', '.join(unknown)}")
        old = values.get("id")
        if type(old) is not int or old < 1:
            raise self.reader.error(f'{part.name}: "id" must be a positive integer')
        kwargs = {}
        for name, model_field in fields.items():
            if name == "id":
                continue
            if name not in values:
                if model_field.null or model_field.has_db_default():
                    continue  # a column added since the archive was written
                raise self.reader.error(f"{part.name}: column {name} is missing")
            kwargs[name] = self.value(part, model_field, values[name])
        instance = part.model(**kwargs)
        references = [f.name for f in fields.values() if f.is_relation]
        try:
            instance.clean_fields(exclude=[*references, "agent_id"])
        except ValidationError as exc:
            problems = "; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())
            raise self.reader.error(f"{part.name} row {old}: {problems}") from exc
        if "agent_id" in fields:
            instance.agent_id = self.agent_id
        return old, instance

    def value(self, part: Part, model_field: models.Field, value: Any) -> Any:
        if value is None or not isinstance(model_field, models.DateTimeField):
            if isinstance(value, float) and not math.isfinite(value):
                raise self.reader.error(f"{part.name}: {model_field.attname} is not finite")
            return value
        moment = parse_datetime(value) if isinstance(value, str) else None
        if moment is None or moment.utcoffset() is None:
            raise self.reader.error(
                f"{part.name}: {model_field.attname} must be an ISO 8601 time with its zone"
            )
        return moment

    def reserve(self, table: str, old: int) -> int:
        """A new id for a row the archive does not hold: taken from the table's sequence by a
        row inserted and deleted, so that no row has it or will have it."""
        taken = self.reserved[table]
        if old not in taken:
            if table == "long_term_memories":
                placeholder = LongTermMemory.objects.create(
                    agent_id=self.agent_id, content="-", memory_type=MemoryType.FACT
                )
            else:
                placeholder = ConsolidationRun.objects.create(
                    agent_id=self.agent_id,
                    session_id="-",
                    trigger=Trigger.SESSION_END,
                    status=RunStatus.DONE,
                )
            taken[old] = placeholder.pk
            placeholder.delete()
        return taken[old]

    def memory_id(self, old: int) -> int:
        return self.ids["long_term_memories"].new.get(old) or self.reserve(
            "long_term_memories", old
        )

    # The references of each table.

    def link(self, part: Part, row: Any) -> bool:
        """Point the row's references at the target's ids; False to leave the row out."""
        messages = self.ids["main_messages"].new
        if part.model is MainMessage:
            if not self.same_agent:
                row.import_fingerprint = None
        elif part.model is _subagent_model():
            if row.parent_msg_id not in messages:
                return False
            row.parent_msg_id = messages[row.parent_msg_id]
        elif part.model is ShortTermMemory:
            row.reply_id = messages.get(row.reply_id) if row.reply_id is not None else None
        elif part.model is ConsolidationRun:
            row.last_message_id = self.ids["main_messages"].floor(row.last_message_id)
            row.last_summary_id = self.ids["short_term_memories"].floor(row.last_summary_id)
        elif part.model is LongTermMemory:
            row.superseded_by_id = None  # set once every memory is in (`supersessions`)
        elif part.model is MemorySource:
            memories = self.ids["long_term_memories"].new
            if row.memory_id not in memories or (
                row.message_id is not None and row.message_id not in messages
            ):
                return False
            row.memory_id = memories[row.memory_id]
            row.message_id = messages.get(row.message_id) if row.message_id else None
        elif part.model is LongTermMemoryHistory:
            row.memory_id = self.memory_id(row.memory_id)
            row.changes = self.linked_notes(row.changes)
            row.old_values = self.linked_notes(row.old_values)
        return True

    def linked_notes(self, values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        values = dict(values)
        for name in MEMORY_ID_FIELDS:
            if type(values.get(name)) is int:
                values[name] = self.memory_id(values[name])
        run = values.get(RUN_NOTE)
        if type(run) is int:
            runs = self.ids["consolidation_runs"].new
            values[RUN_NOTE] = runs.get(run) or self.reserve("consolidation_runs", run)
        return values

    # Writing.

    def write(self, part: Part, batch: list[tuple[int, Any, Any]]) -> None:
        """Insert a batch of (archive id, row, vector) of one table, with their vectors."""
        kept = []
        for old, row, vector in batch:
            later = self.named_later(row)
            if self.link(part, row):
                kept.append((old, row, vector, later))
            else:
                self.report.left_out[part.name] = self.report.left_out.get(part.name, 0) + 1
        if not kept:
            return
        source = next((s for s in vectors.SOURCES if s.model is part.model), None)
        for _, row, vector, _ in kept:
            if source is not None:
                row.has_embedding = bool(row.has_embedding and self.reuse and vector is not None)
        stored = part.model.objects.bulk_create([row for _, row, _, _ in kept])
        ids = self.ids[part.name]
        for (old, _, _, later), row in zip(kept, stored, strict=True):
            ids.add(old, row.pk)
            if later is not None:
                named = self.superseded if part.model is LongTermMemory else self.results
                named.append((row.pk, later))
        self.report.counts[part.name] += len(stored)
        if source is not None and part.vectors is not None:
            put = [
                index.VectorRow(row.pk, row.agent_id, source.metadata(row), vector)
                for (_, _, vector, _), row in zip(kept, stored, strict=True)
                if row.has_embedding
            ]
            if put:
                index.vectors_put(part.vectors, put)
            pending = source.pending().filter(pk__in=[row.pk for row in stored])
            self.report.waiting_for_embedding += pending.count()

    @staticmethod
    def named_later(row: Any) -> Any:
        """The archive's id a reference set later names (`superseded_and_results`), if any."""
        if isinstance(row, LongTermMemory):
            return row.superseded_by_id
        if isinstance(row, MainMessage) and isinstance(row.metadata, dict):
            run = row.metadata.get(RUN_METADATA_KEY)
            if isinstance(run, dict) and "parent_msg_id" in run:
                parent = run["parent_msg_id"]
                return parent if type(parent) is int else -1  # -1: names no message
        return None

    def superseded_and_results(self) -> None:
        for new, old in self.superseded:
            LongTermMemory.objects.filter(pk=new).update(superseded_by_id=self.memory_id(old))
        messages = self.ids["main_messages"].new
        for new, old in self.results:
            message = MainMessage.objects.get(pk=new)
            message.metadata[RUN_METADATA_KEY]["parent_msg_id"] = messages.get(old)
            message.save(update_fields=["metadata"])


def _vector(reader: _Reader, value: Any, signature: Signature | None) -> list[float] | None:
    if value is None:
        return None
    if (
        signature is None
        or not isinstance(value, list)
        or len(value) != signature.dimension
        or not all(isinstance(x, int | float) and math.isfinite(x) for x in value)
    ):
        raise reader.error('"vector" must be the signature\'s dimension of finite numbers')
    return value


def import_archive(lines: Iterable[bytes], *, agent_id: str | None = None) -> ImportReport:
    """Import an archive (its lines as bytes) under `agent_id` (default: the archive's own)
    in one transaction; ArchiveError names the line at fault, AgentNotEmpty an agent that
    holds data already. The module's docstring says the rules."""
    reader = _Reader(lines)
    items = iter(reader)
    header = _header(reader, items)
    source_agent = header["agent_id"]
    target = check_identifier("agent_id", agent_id if agent_id is not None else source_agent)
    signature = _archive_signature(reader, header.get("signature"))
    order = {part.name: (number, part) for number, part in enumerate(parts())}
    with transaction.atomic():
        if held := agent_holds_data(target):
            raise AgentNotEmpty(
                f"agent {target!r} already holds data ("
                + ", ".join(f"{n} {name}" for name, n in held.items())
                + "): import under a new agent id, or forget this one first"
            )
        reuse = signature is not None and signature == _target_signature()
        if reuse and _signature() is None:
            vectors.prepare_index(signature)  # the first vectors of this store: its tables
        job = _Import(reader, agent_id=target, source_agent=source_agent, reuse=reuse)
        job.report.vectors_reused = reuse
        _rows(reader, items, job, order, signature)
        job.superseded_and_results()
        reindex_out_of_order(agent_id=target)
        if job.report.waiting_for_embedding:
            scheduling.with_the_write(scheduling.schedule_embedding)
    return job.report


def _rows(
    reader: _Reader,
    items: Iterator[dict[str, Any]],
    job: _Import,
    order: dict[str, tuple[int, Part]],
    signature: Signature | None,
) -> None:
    """Read the rows after the header, table after table, and write them in batches."""
    at, batch, last_id = 0, [], 0
    part: Part | None = None
    for item in items:
        if item.get("end") is True:
            if batch:
                job.write(part, batch)
            _check_trailer(reader, item, job, items)
            return
        name = item.get("table")
        if name not in order:
            raise reader.error(f"unknown table {name!r}")
        number, next_part = order[name]
        if number < at:
            raise reader.error(f"{name} after {part.name if part else 'the header'}: out of order")
        if part is not next_part:
            if batch and part is not None:
                job.write(part, batch)
            batch, last_id, at, part = [], 0, number, next_part
        old, row = job.row(part, item.get("row"))
        if old <= last_id:
            raise reader.error(f"{name}: ids must ascend ({old} after {last_id})")
        last_id = old
        vector = _vector(reader, item.get("vector"), signature) if part.vectors else None
        batch.append((old, row, vector))
        if len(batch) == BATCH_SIZE:
            job.write(part, batch)
            batch = []
    raise ArchiveError("the archive ends before its trailer: it was cut short")


def _check_trailer(
    reader: _Reader, item: dict[str, Any], job: _Import, items: Iterator[dict[str, Any]]
) -> None:
    counts = item.get("counts")
    if not isinstance(counts, dict):
        raise reader.error('the trailer\'s "counts" must be an object')
    read = {name: len(ids.old) for name, ids in job.ids.items()}
    for name, n in read.items():
        n += job.report.left_out.get(name, 0)
        if counts.get(name, 0) != n:
            raise reader.error(
                f"the trailer counts {counts.get(name, 0)} {name}, the archive holds {n}"
            )
    if next(items, None) is not None:
        raise reader.error("lines after the trailer")
