"""JSONL compatibility with the old store (one file per session): import, export, backup.

Import reads three line shapes:
- orca's own: {"role", "content", "timestamp"?, "type"?, "metadata"?, "session_id"?};
- OpenAI chat messages: content as a string or a list of parts, `tool_calls`,
  `tool_call_id` and `name` kept in metadata;
- a line wrapping the message: {"message": {...}, "timestamp"?, "session_id"?, ...}.
A file's session is its name without ".jsonl", unless a line names one. Every imported line
gets a fingerprint, so importing the same file again adds nothing. Lines are committed in
batches, each line in a savepoint: a line the checks or the database refuse is reported as
`file:line: reason` and takes back nothing else, and after a crash the next run imports
what is missing.

Export writes orca's shape, one file per session, which imports back into the same rows.
Every line written (export, backup) names its session, so a file's name only has to be safe:
orca_memory.files encodes ids into names.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import logging
import math
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from django.conf import settings
from django.db import DatabaseError, DataError, IntegrityError, OperationalError, transaction
from django.utils.dateparse import parse_datetime

from memory import messages
from memory.models import MainMessage, MessageType, Role
from memory.validation import InvalidInput, check_identifier
from orca_memory.files import id_file_name, open_private, path_inside, private_dir

logger = logging.getLogger(__name__)

# Lines committed together: a crash loses at most this many, which the next run imports.
BATCH_LINES = 500


class LineError(ValueError):
    """Why one line cannot be imported; reported with its file and line number."""


@dataclass(frozen=True)
class Parsed:
    session_id: str
    role: str
    content: str
    msg_type: str
    metadata: dict[str, Any] | None
    timestamp: datetime | None

    def key(self, agent_id: str) -> str:
        """What makes two lines the same message."""
        return json.dumps(
            [
                agent_id,
                self.session_id,
                self.role,
                self.content,
                self.msg_type,
                self.metadata,
                self.timestamp.isoformat() if self.timestamp else None,
            ],
            sort_keys=True,
            ensure_ascii=False,
        )


@dataclass
class FileReport:
    path: Path
    imported: int = 0
    skipped: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)
    failure: str | None = None  # why the file itself could not be imported (or not whole)


def _fingerprint(key: str, occurrence: int) -> str:
    # surrogatepass: a line with an escaped lone surrogate still gets a fingerprint; the
    # text checks then refuse it with a reason.
    return hashlib.sha256(f"{key}\0{occurrence}".encode("utf-8", "surrogatepass")).hexdigest()


def backup_fingerprint(
    *,
    agent_id: str,
    session_id: str,
    role: str,
    content: str,
    msg_type: str,
    metadata: dict[str, Any] | None,
    timestamp: datetime,
) -> str:
    """The fingerprint the message's backup line will have when imported.

    A message stored while the backup is on carries it, so importing the backup files after
    an outage brings in only what the database missed.
    """
    parsed = Parsed(session_id, role, content, msg_type, metadata or None, timestamp)
    return _fingerprint(parsed.key(agent_id), 1)


def _shown(value: Any) -> str:
    """A value quoted in a report, cut so that a huge one cannot flood it."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _timestamp(value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            parsed = datetime.fromtimestamp(value, tz=UTC)
        else:
            parsed = parse_datetime(value) if isinstance(value, str) else None
        if parsed is None:
            raise LineError(f"invalid timestamp {_shown(value)}")
        parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
        # Stored in UTC: a time that overflows once converted (year 1 at +01:00) is refused
        # here. The line keeps its own offset, which its fingerprint was made with.
        parsed.astimezone(UTC)
    except (OverflowError, OSError, ValueError) as exc:  # out of range, or no such day
        if isinstance(exc, LineError):
            raise
        raise LineError(f"invalid timestamp {_shown(value)} ({exc})") from exc
    return parsed


def _no_constant(name: str) -> float:
    raise LineError(f"{name} is not a number JSON allows")


def _finite(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise LineError(f"number {_shown(text)} is out of range")
    return number


def _json(text: str) -> Any:
    """Standard JSON only: Python's json takes NaN and Infinity, which the database refuses."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except LineError:
        raise
    except RecursionError as exc:
        raise LineError("malformed JSON (nested too deeply)") from exc
    except ValueError as exc:
        raise LineError(f"malformed JSON ({exc})") from exc


def _text_of_parts(parts: list[Any], metadata: dict[str, Any]) -> str:
    """OpenAI content parts: the text parts joined; others noted by type."""
    texts, others = [], []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict) and part.get("type") in ("text", "input_text"):
            texts.append(str(part.get("text", "")))
        elif isinstance(part, dict):
            others.append(str(part.get("type", "unknown")))
            texts.append(f"[{part.get('type', 'part')}]")
        else:
            raise LineError("content parts must be objects or strings")
    if others:
        metadata["content_parts"] = others
    return "\n".join(t for t in texts if t)


def _tool_calls_text(calls: Any) -> str:
    """A readable, searchable stand-in for an assistant message that only calls tools."""
    names = []
    for call in calls if isinstance(calls, list) else []:
        function = call.get("function", {}) if isinstance(call, dict) else {}
        names.append(f"{function.get('name', '?')}({function.get('arguments', '')})")
    return "[tool call] " + "; ".join(names) if names else ""


def parse_line(raw: bytes, *, default_session: str) -> Parsed:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise LineError(f"not valid UTF-8 ({exc.reason} at byte {exc.start})") from exc
    line = _json(text)
    if not isinstance(line, dict):
        raise LineError("a line must be a JSON object")
    message = line.get("message") if isinstance(line.get("message"), dict) else line
    metadata = message.get("metadata", line.get("metadata"))
    if metadata is not None and not isinstance(metadata, dict):
        raise LineError("metadata must be a JSON object")
    metadata = dict(metadata or {})
    for key in ("tool_calls", "tool_call_id", "name"):
        if key in message:
            metadata[key] = message[key]

    role = message.get("role")
    if role not in Role.values:
        raise LineError(f"unknown role {_shown(role)} (expected {', '.join(Role.values)})")
    content = message.get("content")
    if isinstance(content, list):
        content = _text_of_parts(content, metadata)
    elif content is None and "tool_calls" in message:
        content = _tool_calls_text(message["tool_calls"])
    if not isinstance(content, str):
        raise LineError(f"content must be text, got {type(content).__name__}")
    if not content.strip():
        raise LineError("empty content")
    # A wrapper's own "type" ("message", "user"...) says what the line is, not the message.
    msg_type = message.get("type", MessageType.NORMAL) if message is line else MessageType.NORMAL
    if msg_type not in MessageType.values:
        raise LineError(
            f"unknown type {_shown(msg_type)} (expected {', '.join(MessageType.values)})"
        )
    session_id = line.get("session_id") or line.get("sessionId") or default_session
    try:
        check_identifier("session_id", session_id)
    except InvalidInput as exc:
        raise LineError(str(exc)) from exc
    return Parsed(
        session_id=session_id,
        role=role,
        content=content,
        msg_type=msg_type,
        metadata=metadata or None,
        timestamp=_timestamp(message.get("timestamp", line.get("timestamp"))),
    )


def jsonl_files(paths: list[Path]) -> Iterator[Path]:
    """The files given, and what is named *.jsonl in the folders given, in name order.

    A folder named x.jsonl is searched, not read; anything else that is not a regular file
    (a FIFO, a broken link) is yielded so that its import reports it.
    """
    for path in paths:
        if path.is_dir():
            yield from sorted(p for p in path.rglob("*.jsonl") if not p.is_dir())
        else:
            yield path


def _lines(
    f: BinaryIO, *, agent_id: str, default_session: str, report: FileReport
) -> Iterator[tuple[int, Parsed, str]]:
    """The file's lines parsed and fingerprinted; the lines that cannot be go to the report."""
    seen: Counter[str] = Counter()
    previous_time: datetime | None = None
    for number, raw in enumerate(f, 1):
        if number == 1:
            raw = raw.removeprefix(codecs.BOM_UTF8)  # editors on Windows start files with one
        if not raw.strip():
            continue
        try:
            line = parse_line(raw.rstrip(b"\r\n"), default_session=default_session)
            if line.timestamp is None:
                # Keep the file's order: a line without a time takes the one before it.
                line = replace(line, timestamp=previous_time)
            key = line.key(agent_id)
        except Exception as exc:  # a bad line never stops the file
            report.errors.append((number, _reason(exc)))
            continue
        previous_time = line.timestamp
        # Two identical lines in one file are two messages: the occurrence tells them apart.
        seen[key] += 1
        yield number, line, _fingerprint(key, seen[key])


def _reason(exc: Exception) -> str:
    if isinstance(exc, LineError | InvalidInput):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, IntegrityError | DataError):
        return f"refused by the database ({exc})"
    logger.error("Unexpected error importing a line", exc_info=exc)
    return f"{type(exc).__name__}: {exc}"


def _import_batch(
    batch: list[tuple[int, Parsed, str]],
    *,
    agent_id: str,
    dry_run: bool,
    known: set[str],
    report: FileReport,
) -> None:
    """Import up to BATCH_LINES lines in one transaction, each line in a savepoint, so a line
    the database refuses takes back only itself. A dry run does the same and rolls back, so
    it applies every check the import applies."""
    known.update(
        MainMessage.objects.filter(import_fingerprint__in=[fp for *_, fp in batch]).values_list(
            "import_fingerprint", flat=True
        )
    )
    with transaction.atomic():
        for number, line, fingerprint in batch:
            if fingerprint in known:
                report.skipped += 1
                continue
            try:
                with transaction.atomic():
                    messages.message_add(
                        agent_id=agent_id,
                        session_id=line.session_id,
                        role=line.role,
                        content=line.content,
                        msg_type=line.msg_type,
                        metadata=line.metadata,
                        timestamp=line.timestamp,
                        import_fingerprint=fingerprint,
                        summarize=False,
                    )
            except OperationalError:
                raise  # the database itself (unavailable, locked), not this line
            except Exception as exc:
                report.errors.append((number, _reason(exc)))
                continue
            known.add(fingerprint)
            report.imported += 1
        if dry_run:
            transaction.set_rollback(True)


def import_file(
    path: Path, *, agent_id: str, dry_run: bool = False, known: set[str] | None = None
) -> FileReport:
    """Import one file; whatever goes wrong is in the report, never raised.

    `known`: fingerprints already imported in this run (in a dry run, that would have been),
    shared between the files of a run so a dry run counts a repeated line once, as the
    import does.
    """
    report = FileReport(path)
    known = set() if known is None else known
    if not path.is_file():
        report.failure = "not a regular file" if path.exists() else "not found"
        return report
    try:
        with path.open("rb") as f:
            batch: list[tuple[int, Parsed, str]] = []
            lines = _lines(f, agent_id=agent_id, default_session=path.stem, report=report)
            for item in lines:
                batch.append(item)
                if len(batch) == BATCH_LINES:
                    _import_batch(
                        batch, agent_id=agent_id, dry_run=dry_run, known=known, report=report
                    )
                    batch = []
            if batch:
                _import_batch(batch, agent_id=agent_id, dry_run=dry_run, known=known, report=report)
    except OSError as exc:
        report.failure = f"cannot be read ({exc.strerror or exc})"
    except DatabaseError as exc:
        report.failure = f"the database failed ({exc}); earlier batches are kept, run again"
    report.errors.sort()
    return report


def _line(
    *,
    session_id: str,
    role: str,
    content: str,
    timestamp: datetime,
    msg_type: str,
    metadata: dict[str, Any] | None,
) -> dict[str, Any]:
    """A message in orca's JSONL shape (the first import shape)."""
    line: dict[str, Any] = {
        "session_id": session_id,
        "role": role,
        "content": content,
        "timestamp": timestamp.isoformat(),
        "type": msg_type,
    }
    if metadata is not None:
        line["metadata"] = metadata
    return line


def message_line(message: MainMessage) -> dict[str, Any]:
    return _line(
        session_id=message.session_id,
        role=message.role,
        content=message.content,
        timestamp=message.timestamp,
        msg_type=message.msg_type,
        metadata=message.metadata,
    )


def _session_file(folder: Path, agent_id: str, session_id: str) -> Path:
    """`folder/<agent>/<session>.jsonl`, each name encoded, never outside `folder`."""
    return path_inside(folder, id_file_name(agent_id), id_file_name(session_id, ".jsonl"))


def export_sessions(
    folder: Path, *, agent_id: str | None = None, session_id: str | None = None
) -> list[Path]:
    """One file per session, `folder/<agent>/<session>.jsonl`, oldest message first.

    Folders created here are 0700 and files 0600, as everything the service writes.
    """
    rows = MainMessage.objects.all()
    if agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    private_dir(folder)
    written: list[Path] = []
    current: tuple[str, str] | None = None
    out = None
    try:
        # Ordered by session, so one file at a time is open however many sessions there are.
        for message in rows.order_by("agent_id", "session_id", "timestamp", "id").iterator():
            if current != (message.agent_id, message.session_id):
                current = (message.agent_id, message.session_id)
                if out is not None:
                    out.close()
                path = _session_file(folder, *current)
                private_dir(path.parent)
                fd = open_private(path, os.O_WRONLY | os.O_TRUNC)
                out = os.fdopen(fd, "w", encoding="utf-8")
                written.append(path)
            out.write(json.dumps(message_line(message), ensure_ascii=False) + "\n")
    finally:
        if out is not None:
            out.close()
    return written


def backup_path(agent_id: str, session_id: str) -> Path:
    """Where the JSONL backup keeps a session: `<data_dir>/jsonl/<agent>/<session>.jsonl`.

    Before names were encoded, the raw ids were used; `migrate_jsonl` on the agent's folder
    reads files of either naming, since every line names its session.
    """
    return _session_file(settings.ORCA.data_dir / "jsonl", agent_id, session_id)


def _append(agent_id: str, line: dict[str, Any]) -> Path:
    # One write per line in append mode, so concurrent workers never interleave lines.
    path = backup_path(agent_id, line["session_id"])
    private_dir(path.parent)
    data = (json.dumps(line, ensure_ascii=False) + "\n").encode()
    fd = open_private(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    return path


def backup_append(message: MainMessage) -> None:
    """Append a stored message to its session's backup file (ORCA_JSONL_BACKUP)."""
    _append(message.agent_id, message_line(message))


def fallback_append(
    *,
    agent_id: str,
    session_id: str,
    role: str,
    content: str,
    msg_type: str,
    metadata: dict[str, Any] | None,
) -> Path:
    """Keep a message the database could not take, for `migrate_jsonl` to bring in later."""
    line = _line(
        session_id=session_id,
        role=role,
        content=content,
        timestamp=datetime.now(tz=UTC),
        msg_type=msg_type,
        metadata=metadata,
    )
    return _append(agent_id, line)
