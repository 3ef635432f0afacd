"""`migrate_jsonl`'s logic: import JSONL session files (memory/jsonl.py reads each line).

Lines are committed in batches, each line in a savepoint: a line the checks or the database
refuse is reported as `file:line: reason` and takes back nothing else, and after a crash the
next run imports what is missing. Each line is stored by messages.message_add, the same flow
as the API's, so it gets every check and the same vectors. The lines the JSONL backup kept
for one request with an idempotency key are stored together by messages.messages_add with
that key, so that a request a client sent again (kept twice, or stored once the database was
back) is stored once.
"""

from __future__ import annotations

import codecs
import logging
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, BinaryIO

from django.db import DatabaseError, DataError, IntegrityError, OperationalError, transaction

from memory import messages
from memory.jsonl import LINE_START, LineError, Parsed, line_fingerprint, parse_line
from memory.models import MainMessage
from memory.validation import InvalidInput

logger = logging.getLogger(__name__)

# A line of a file: its number, what it says, its fingerprint.
Line = tuple[int, Parsed, str]

# Lines committed together: a crash loses at most this many, which the next run imports.
BATCH_LINES = 500


@dataclass
class FileReport:
    path: Path
    imported: int = 0
    skipped: int = 0
    errors: list[tuple[int, str]] = field(default_factory=list)
    failure: str | None = None  # why the file itself could not be imported (or not whole)


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
) -> Iterator[Line]:
    """The file's lines parsed and fingerprinted; the lines that cannot be go to the report."""
    seen: Counter[str] = Counter()
    previous_time: datetime | None = None
    for number, raw in enumerate(f, 1):
        if number == 1:
            raw = raw.removeprefix(codecs.BOM_UTF8)  # editors on Windows start files with one
        if not raw.strip():
            continue
        try:
            parsed = _parse(
                raw.rstrip(b"\r\n"), default_session=default_session, report=report, number=number
            )
        except Exception as exc:  # a bad line never stops the file
            report.errors.append((number, _reason(exc)))
            continue
        for line in parsed:
            # Keep the file's order: a line without a time takes the one before it.
            timed = line if line.timestamp else replace(line, timestamp=previous_time)
            previous_time = timed.timestamp
            key = timed.key(agent_id)
            # Two identical lines in one file are two messages: the occurrence tells them apart.
            seen[key] += 1
            yield number, timed, line_fingerprint(key, seen[key])


def _parse(raw: bytes, *, default_session: str, report: FileReport, number: int) -> list[Parsed]:
    """The messages of a line: itself; or, when it is a line of ours that an earlier version
    appended onto a cut one (it did not start a fresh line after a failed write), both parts,
    the cut one reported. Raises what parse_line raises for the whole line otherwise."""
    try:
        return [parse_line(raw, default_session=default_session)]
    except LineError:
        start = raw.find(LINE_START, 1)
        while start != -1:
            try:
                appended = parse_line(raw[start:], default_session=default_session)
            except LineError:
                start = raw.find(LINE_START, start + 1)
                continue
            try:
                return [parse_line(raw[:start], default_session=default_session), appended]
            except LineError as cut:
                report.errors.append((number, f"{cut}; the line appended onto it was read"))
                return [appended]
        raise


def _reason(exc: Exception) -> str:
    if isinstance(exc, LineError | InvalidInput):
        return str(exc)
    if isinstance(exc, RecursionError):
        return "nested too deeply"
    if isinstance(exc, IntegrityError | DataError):
        return f"refused by the database ({exc})"
    logger.error("Unexpected error importing a line", exc_info=exc)
    return f"{type(exc).__name__}: {exc}"


def _requests(lines: Iterable[Line]) -> Iterator[list[Line]]:
    """The lines grouped by the request they were kept for: the consecutive lines with one
    idempotency key, session and time (fallback_append writes a request's lines in one append,
    at one time, so a retry kept again is a request of its own); any other line alone."""
    group: list[Line] = []
    for item in lines:
        line = item[1]
        if group and (
            line.idempotency_key is None or _request_of(line) != _request_of(group[-1][1])
        ):
            yield group
            group = []
        group.append(item)
    if group:
        yield group


def _request_of(line: Parsed) -> tuple[str | None, str, datetime | None]:
    return line.idempotency_key, line.session_id, line.timestamp


def _import_batch(
    batch: list[list[Line]],
    *,
    agent_id: str,
    dry_run: bool,
    known: set[str],
    report: FileReport,
) -> None:
    """Import about BATCH_LINES lines in one transaction, each line (or request) in a
    savepoint, so a line the database refuses takes back only itself. A dry run does the same
    and rolls back, so it applies every check the import applies."""
    known.update(
        MainMessage.objects.filter(
            import_fingerprint__in=[fp for request in batch for *_, fp in request]
        ).values_list("import_fingerprint", flat=True)
    )
    with transaction.atomic():
        for request in batch:
            fresh = [item for item in request if item[2] not in known]
            report.skipped += len(request) - len(fresh)
            key = request[0][1].idempotency_key
            if (
                key is None
                or len(fresh) < len(request)
                or not _import_request(fresh, key, agent_id=agent_id, known=known, report=report)
            ):
                for item in fresh:
                    _import_line(item, agent_id=agent_id, known=known, report=report)
        if dry_run:
            transaction.set_rollback(True)


def _import_request(
    request: list[Line], key: str, *, agent_id: str, known: set[str], report: FileReport
) -> bool:
    """Store a request's lines as the request they were kept for, with its idempotency key:
    once, whether the client's retry stored it already or kept it again. False when it must
    go line by line instead (a line refused, or the key taken by another request)."""
    new = [messages.NewMessage(**_message(line, fingerprint)) for _, line, fingerprint in request]
    try:
        with transaction.atomic():
            stored = messages.messages_add(
                agent_id=agent_id,
                session_id=request[0][1].session_id,
                messages=new,
                summarize=False,
                idempotency_key=key,
            )
    except OperationalError:
        raise  # the database itself (unavailable, locked), not these lines
    except Exception:
        return False
    fingerprints = [fingerprint for *_, fingerprint in request]
    if [message.import_fingerprint for message in stored] == fingerprints:
        report.imported += len(request)
        known.update(fingerprints)
    else:
        report.skipped += len(request)  # the key's request, stored already (a retry)
    return True


def _message(line: Parsed, fingerprint: str) -> dict[str, Any]:
    """A line as the message fields the flows take (NewMessage's, message_add's)."""
    return {
        "role": line.role,
        "content": line.content,
        "msg_type": line.msg_type,
        "metadata": line.metadata,
        "timestamp": line.timestamp,
        "import_fingerprint": fingerprint,
    }


def _import_line(item: Line, *, agent_id: str, known: set[str], report: FileReport) -> None:
    number, line, fingerprint = item
    try:
        with transaction.atomic():
            messages.message_add(
                agent_id=agent_id,
                session_id=line.session_id,
                summarize=False,
                **_message(line, fingerprint),
            )
    except OperationalError:
        raise  # the database itself (unavailable, locked), not this line
    except Exception as exc:
        report.errors.append((number, _reason(exc)))
        return
    known.add(fingerprint)
    report.imported += 1


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
            batch: list[list[Line]] = []
            lines = _lines(f, agent_id=agent_id, default_session=path.stem, report=report)
            for request in _requests(lines):
                batch.append(request)
                if sum(map(len, batch)) >= BATCH_LINES:
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


def report_lines(reports: list[FileReport], *, dry_run: bool, unit: str = "line") -> list[str]:
    """What an import command prints of its reports: each file's counts, failure and errors
    (`file:3: reason` for lines, `file: entry 3: reason` for other units), then the totals."""
    verb = "would import" if dry_run else "imported"
    lines = []
    for report in reports:
        lines.append(
            f"{report.path}: {verb} {report.imported}, skipped {report.skipped} "
            f"(already imported), errors {len(report.errors)}"
        )
        if report.failure:
            lines.append(f"  {report.path}: {report.failure}")
        for number, reason in report.errors:
            where = (
                f"{report.path}:{number}" if unit == "line" else f"{report.path}: {unit} {number}"
            )
            lines.append(f"  {where}: {reason}")
    failed, failed_files = failures(reports)
    total = sum(r.imported for r in reports)
    lines.append(
        f"{len(reports)} file(s): {verb} {total}, {failed} {unit}(s) failed"
        + (f", {failed_files} file(s) failed." if failed_files else ".")
    )
    return lines


def failures(reports: list[FileReport]) -> tuple[int, int]:
    """How many entries (lines) and files of these reports could not be imported."""
    return sum(len(r.errors) for r in reports), sum(1 for r in reports if r.failure)
