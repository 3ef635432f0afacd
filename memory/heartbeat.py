"""The task workers' heartbeats: how health knows a worker runs, even with the database gone.

Each `manage.py db_worker` writes `<data_dir>/workers/<its id>.json` every HEARTBEAT_SECONDS
(a thread of its own, so a long task does not make it look dead) with what it is doing, and
removes it when it stops. A file, not a row: the worker must be seen while the database is
locked or gone, which is when it matters. Workers on another machine (a shared PostgreSQL)
write where health cannot read: health then says no worker is seen, and why.

A beat also carries the worker's use of the chat model since it started (memory.llm.Counts):
the worker asks it for summaries and extraction, and health, answered by a web process,
has no other way to see those calls.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings

from memory import llm
from orca_memory.core.files import id_file_name, open_private, path_inside, private_dir

HEARTBEAT_SECONDS = 5.0
# A worker whose heartbeat is older than this is gone (killed, or its machine stopped).
ALIVE_WITHIN = timedelta(seconds=30)


@dataclass(frozen=True)
class Beat:
    worker_id: str
    pid: int
    at: datetime
    state: str  # "polling", or "backing off" after a database error
    last_error: str | None = None
    last_error_at: datetime | None = None
    chat: llm.Counts | None = None  # the worker's use of the chat model

    def is_alive(self, now: datetime) -> bool:
        return now - self.at <= ALIVE_WITHIN


def _folder() -> Path:
    return settings.ORCA.data_dir / "workers"


def _path(worker_id: str) -> Path:
    return path_inside(_folder(), id_file_name(worker_id, ".json"))


def write(beat: Beat) -> None:
    """Replace the worker's file at once (a reader never sees half of it)."""
    path = _path(beat.worker_id)
    private_dir(path.parent)
    draft = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    with os.fdopen(open_private(draft, os.O_WRONLY | os.O_TRUNC), "w") as f:
        json.dump(asdict(beat), f, default=datetime.isoformat)
    draft.replace(path)


def remove(worker_id: str) -> None:
    _path(worker_id).unlink(missing_ok=True)


def _read(path: Path) -> Beat | None:
    try:
        raw = json.loads(path.read_text())
        return Beat(
            worker_id=raw["worker_id"],
            pid=raw["pid"],
            at=datetime.fromisoformat(raw["at"]),
            state=raw["state"],
            last_error=raw.get("last_error"),
            last_error_at=(
                datetime.fromisoformat(raw["last_error_at"]) if raw.get("last_error_at") else None
            ),
            chat=llm.Counts.read(raw.get("chat")),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # removed meanwhile, or not ours


def beats() -> list[Beat]:
    """Every worker's last heartbeat, newest first (gone workers' too, until removed)."""
    folder = _folder()
    found = [_read(path) for path in folder.glob("*.json")] if folder.is_dir() else []
    return sorted((beat for beat in found if beat), key=lambda beat: beat.at, reverse=True)


class Heart:
    """A worker's heartbeat thread; `state` and `failed` change what the next beat says."""

    def __init__(self, worker_id: str) -> None:
        self.worker_id = worker_id
        self.state = "polling"
        self.last_error: str | None = None
        self.last_error_at: datetime | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="heartbeat", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def failed(self, error: str) -> None:
        self.state, self.last_error, self.last_error_at = "backing off", error, _now()
        self.beat()

    def recovered(self) -> None:
        if self.state != "polling":
            self.state = "polling"
            self.beat()

    def beat(self) -> None:
        beat = Beat(
            worker_id=self.worker_id,
            pid=os.getpid(),
            at=_now(),
            state=self.state,
            last_error=self.last_error,
            last_error_at=self.last_error_at,
            chat=llm.USAGE.counts(),
        )
        with contextlib.suppress(OSError):  # a full disk: health says the worker is not seen
            write(beat)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=HEARTBEAT_SECONDS)
        remove(self.worker_id)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.beat()
            self._stop.wait(HEARTBEAT_SECONDS)


def _now() -> datetime:
    return datetime.now(tz=UTC)
