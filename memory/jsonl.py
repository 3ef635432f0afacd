"""The JSONL format of the old store (one file per session): parse, export, backup.

Lines come in three shapes:
- orca's own: {"role", "content", "timestamp"?, "type"?, "metadata"?, "session_id"?};
- OpenAI chat messages: content as a string or a list of parts, `tool_calls`,
  `tool_call_id` and `name` kept in metadata;
- a line wrapping the message: {"message": {...}, "timestamp"?, "session_id"?, ...}.
A file's session is its name without ".jsonl", unless a line names one. Every line has a
fingerprint, so importing the same file again adds nothing (the importer is
memory/jsonl_import.py: it stores through messages.message_add, which uses this module's
backup, so the two cannot be one module without an import cycle).

Export writes orca's shape, one file per session, which imports back into the same rows.
Every line written (export, backup) names its session, so a file's name only has to be safe:
orca_memory.core.files encodes ids into names.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import fcntl
import hashlib
import json
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils.dateparse import parse_datetime

from memory.models import MainMessage, MessageType, Role
from memory.validation import InvalidInput, check_idempotency_key, check_identifier
from orca_memory.core.files import id_file_name, open_private, path_inside, private_dir


class LineError(ValueError):
    """Why one line cannot be imported; reported with its file and line number."""


# A line's field naming the idempotency key of the request it was kept for (fallback_append).
IDEMPOTENCY_FIELD = "idempotency_key"


@dataclass(frozen=True)
class Parsed:
    session_id: str
    role: str
    content: str
    msg_type: str
    metadata: dict[str, Any] | None
    timestamp: datetime | None
    # Not part of `key`: the same message kept twice (a retry) is told apart by its time.
    idempotency_key: str | None = None

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


def line_fingerprint(key: str, occurrence: int) -> str:
    """The fingerprint of the `occurrence`-th line of a file with this key (Parsed.key)."""
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
    occurrence: int = 1,
) -> str:
    """The fingerprint the message's backup line will have when imported: the
    `occurrence`-th line of its file with these values.

    A message stored while the backup is on carries it, so importing the backup files after
    an outage brings in only what the database missed.
    """
    parsed = Parsed(session_id, role, content, msg_type, metadata or None, timestamp)
    return line_fingerprint(parsed.key(agent_id), occurrence)


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


class CutLine(LineError):
    """A line whose JSON ends before it is complete: a write interrupted (a full disk, a
    crash) before its end."""


def _json(text: str) -> Any:
    """Standard JSON only: Python's json takes NaN and Infinity, which the database refuses."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except LineError:
        raise
    except RecursionError as exc:
        raise LineError("malformed JSON (nested too deeply)") from exc
    except json.JSONDecodeError as exc:
        cut = exc.msg.startswith("Unterminated string") or exc.pos >= len(text.rstrip())
        if cut and text.lstrip().startswith("{"):
            raise CutLine(
                "cut off: the line ends before its JSON does (a write interrupted by a full "
                "disk or a crash; the message on it was not acknowledged)"
            ) from exc
        raise LineError(f"malformed JSON ({exc})") from exc
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
    idempotency_key = line.get(IDEMPOTENCY_FIELD)
    try:
        check_identifier("session_id", session_id)
        if idempotency_key is not None:
            check_idempotency_key(IDEMPOTENCY_FIELD, idempotency_key)
    except InvalidInput as exc:
        raise LineError(str(exc)) from exc
    return Parsed(
        session_id=session_id,
        role=role,
        content=content,
        msg_type=msg_type,
        metadata=metadata or None,
        timestamp=_timestamp(message.get("timestamp", line.get("timestamp"))),
        idempotency_key=idempotency_key,
    )


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


# How every line this module writes starts (`_line`'s first key, json.dumps' separators): where
# a line appended onto a cut one by an earlier version begins (jsonl_import recovers it).
LINE_START = b'{"session_id": '


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

    Folders created here are 0700 and files 0600, as everything the service writes. Every
    file's path is checked before anything is written: one that would lead out of `folder`
    (a symbolic link there) stops the export (UnsafePath) with nothing written.
    """
    rows = MainMessage.objects.all()
    if agent_id is not None:
        rows = rows.filter(agent_id=agent_id)
    if session_id is not None:
        rows = rows.filter(session_id=session_id)
    sessions = rows.order_by().values_list("agent_id", "session_id").distinct()
    paths = {(agent, session): _session_file(folder, agent, session) for agent, session in sessions}
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
                path = paths[current]
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


class BackupFailed(OSError):
    """A backup append that did not reach the disk whole: nothing of it is kept."""


def _append(agent_id: str, session_id: str, lines: Sequence[dict[str, Any]]) -> Path:
    """Append a call's lines to its session's file, whole and durable, or not at all.

    Acknowledged means on disk: every byte written, the file fsynced. A write cut short (a
    full disk) is taken back (the file truncated to its size before), and BackupFailed
    raised. The lock keeps concurrent writers (web workers, commands) from interleaving, and
    a line left cut off by a crash or an older version is ended first, so that the next line
    starts on a fresh one instead of being swallowed by it.
    """
    path = backup_path(agent_id, session_id)
    private_dir(path.parent)
    data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode()
    fd = _locked(path)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            data = b"\n" + data
        try:
            _write_all(fd, data)
            os.fsync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):  # else the next append ends the cut line
                os.ftruncate(fd, size)
            raise BackupFailed(exc.errno, exc.strerror, str(path)) from exc
        if size == 0:
            _fsync_dir(path.parent)  # a new file: its name must survive a crash too
    finally:
        os.close(fd)  # releases the lock
    return path


def _locked(path: Path) -> int:
    """The file at `path` opened for appending and locked. A forget request may have replaced
    it (`backup_drop`) while this waited for the lock: a line written to the old file would
    be lost with it, so the file is opened again until the one locked is the one named."""
    while True:
        try:
            fd = open_private(path, os.O_RDWR | os.O_APPEND)
        except OSError as exc:
            raise BackupFailed(exc.errno, exc.strerror, str(path)) from exc
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            current = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            current = False
        if current:
            return fd
        os.close(fd)


def _write_all(fd: int, data: bytes) -> None:
    """os.write until every byte is written: it may write fewer than it was given."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        if written == 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        view = view[written:]


def _fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def backup_append(messages: Sequence[MainMessage]) -> None:
    """Append stored messages of one session to its backup file (ORCA_JSONL_BACKUP)."""
    if messages:
        first = messages[0]
        _append(first.agent_id, first.session_id, [message_line(m) for m in messages])


def fallback_append(
    *,
    agent_id: str,
    session_id: str,
    messages: Sequence[Mapping[str, Any]],
    idempotency_key: str | None = None,
) -> Path:
    """Keep messages the database could not take (each `role`, `content`, `msg_type`,
    `metadata`), for `migrate_jsonl` to bring in later; a request's idempotency key goes on
    each of its lines (`idempotency_key`), which the import stores as one request."""
    now = datetime.now(tz=UTC)
    lines = [
        _line(
            session_id=session_id,
            role=message["role"],
            content=message["content"],
            timestamp=now,
            msg_type=message["msg_type"],
            metadata=message["metadata"],
        )
        | ({IDEMPOTENCY_FIELD: idempotency_key} if idempotency_key is not None else {})
        for message in messages
    ]
    return _append(agent_id, session_id, lines)


def backup_drop(agent_id: str, drop: Callable[[Parsed], bool], *, dry_run: bool = False) -> int:
    """Take out of the agent's backup files (`<data_dir>/jsonl/<agent>/`) the lines `drop`
    says, so that `migrate_jsonl` of the folder cannot bring them back; how many it took
    (with `dry_run`, would take). Each file is rewritten whole to a new file that replaces
    it (a crash leaves the old file or the new one, never half of one), every other line
    kept byte for byte; a file left with no line is removed. A line that cannot be read is
    kept: it cannot be imported either. The lock is `_append`'s, which writes to the file
    that replaced it."""
    folder = path_inside(settings.ORCA.data_dir / "jsonl", id_file_name(agent_id))
    if not folder.is_dir():
        return 0
    dropped = 0
    for path in sorted(p for p in folder.rglob("*.jsonl") if p.is_file()):
        dropped += _drop_lines(path, drop, dry_run=dry_run)
    return dropped


def _drop_lines(path: Path, drop: Callable[[Parsed], bool], *, dry_run: bool) -> int:
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        with os.fdopen(os.dup(fd), "rb") as f:
            lines = f.read().splitlines(keepends=True)
        kept = [line for line in lines if not _dropped(line, path.stem, drop)]
        dropped = len(lines) - len(kept)
        if dropped and not dry_run:
            _replace(path, b"".join(kept))
    finally:
        os.close(fd)
    return dropped


def _dropped(line: bytes, default_session: str, drop: Callable[[Parsed], bool]) -> bool:
    raw = line.removeprefix(codecs.BOM_UTF8).rstrip(b"\r\n")
    if not raw.strip():
        return False
    try:
        parsed = parse_line(raw, default_session=default_session)
    except (LineError, RecursionError):
        return False
    return drop(parsed)


def _replace(path: Path, data: bytes) -> None:
    if not data:
        path.unlink()
    else:
        new = path.with_name(path.name + ".forget")
        fd = open_private(new, os.O_WRONLY | os.O_TRUNC)
        try:
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(new, path)
    _fsync_dir(path.parent)
