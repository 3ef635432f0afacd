"""Files and folders the service writes: private to its user, named safely after ids.

Everything the service creates (the data folder, the database and its WAL/SHM, backups,
exports, the JSONL backup) is 0600 in 0700 folders, whichever command creates it first:
conversations, login sessions and password hashes are nobody else's business. The mode is
given when the file is created, never left to the umask.

A file name made from an id (agent, session) is a bounded, safe encoding of it, and the path
is checked to stay inside its folder before anything is written.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import unicodedata
from pathlib import Path

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600

# Under the 255-byte name limit of common file systems, with room for ".jsonl", ".tmp".
MAX_NAME_BYTES = 200
# Kept as themselves: letters, digits and "-_." in ASCII, printable characters beyond it.
# Everything else ("%" itself included) is percent-encoded, so names are reversible
# (urllib.parse.unquote), portable ("<>:\"\\|?*" are escaped) and never "." or "..".
_PLAIN_ASCII = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.")
# Marks a name cut to MAX_NAME_BYTES and completed with a hash of the whole id; it is always
# escaped in uncut names, so a cut name never equals another id's name.
_HASH_MARK = "~"


def private_dir(path: Path) -> Path:
    """Create `path` and its missing parents as 0700 folders; existing ones stay as they are."""
    missing = []
    folder = path
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR_MODE)
        except FileExistsError:
            continue  # another process made it first
        os.chmod(folder, PRIVATE_DIR_MODE)  # exactly 0700, whatever the umask
    return path


def make_private(path: Path, *, mode: int = PRIVATE_FILE_MODE) -> bool:
    """Take group and other access away from an existing file or folder of ours.

    For data written by earlier versions (the database was created 0644). Returns whether
    the mode changed; paths of another user, or missing ones, are left alone.
    """
    try:
        status = path.stat()
    except OSError:
        return False
    if status.st_uid != os.geteuid() or not stat.S_IMODE(status.st_mode) & 0o077:
        return False
    os.chmod(path, mode)
    return True


def create_private_file(path: Path, *, exclusive: bool = False) -> None:
    """Create `path` empty with mode 0600 if it does not exist (`exclusive`: fail if it does).

    SQLite gives a database's -wal and -shm files the database file's mode, so creating the
    file first makes all three private.
    """
    flags = os.O_WRONLY | os.O_CREAT | (os.O_EXCL if exclusive else 0)
    os.close(os.open(path, flags, PRIVATE_FILE_MODE))


def open_private(path: Path, flags: int) -> int:
    """os.open with mode 0600; a file that already existed is made 0600 too."""
    fd = os.open(path, flags | os.O_CREAT, PRIVATE_FILE_MODE)
    try:
        os.fchmod(fd, PRIVATE_FILE_MODE)
    except OSError:
        os.close(fd)
        raise
    return fd


def shared_secret(path: Path) -> str:
    """The secret kept in `path` (0600), made on first use; the same for every process.

    Processes starting together on a fresh data folder (`make run`'s web server and worker,
    two workers) race to make it: each writes a whole secret to a file of its own and links it
    to the name, which only the first link gets; the others read that one.
    """
    if not path.exists():
        draft = path.with_name(f"{path.name}.{os.getpid()}")
        with os.fdopen(open_private(draft, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "w") as f:
            f.write(secrets.token_urlsafe(50))
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_text().strip()


def _units(identifier: str) -> list[str]:
    """The encoded name, one item per character of the id."""
    units = []
    for position, char in enumerate(identifier):
        plain = char in _PLAIN_ASCII and not (char == "." and position == 0)
        printable = ord(char) > 0x7F and unicodedata.category(char)[0] in "LMNPS"
        if plain or printable:
            units.append(char)
        else:
            units.append("".join(f"%{b:02X}" for b in char.encode("utf-8", "surrogatepass")))
    return units


def id_file_name(identifier: str, suffix: str = "") -> str:
    """A file or folder name for an id: the id percent-encoded, or when that is longer than
    MAX_NAME_BYTES, its beginning followed by "~" and 16 hex digits of its SHA-256."""
    units = _units(identifier)
    name = "".join(units)
    if name and len(name.encode()) <= MAX_NAME_BYTES:
        return name + suffix
    digest = hashlib.sha256(identifier.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    room = MAX_NAME_BYTES - len(_HASH_MARK) - len(digest)
    head = ""
    for unit in units:
        if len((head + unit).encode()) > room:
            break
        head += unit
    return f"{head}{_HASH_MARK}{digest}{suffix}"


class UnsafePath(ValueError):
    """A path to write that leads out of its folder, or cannot be resolved (a symbolic link
    planted there to point elsewhere, or links in a loop)."""


def path_inside(folder: Path, *names: str) -> Path:
    """`folder/name/...`, refused (UnsafePath) if it resolves outside `folder`.

    The names come from id_file_name and cannot climb out; this check is the second lock,
    and also refuses a symbolic link planted to point elsewhere.
    """
    path = folder.joinpath(*names)
    try:
        resolved, root = path.resolve(), folder.resolve()
    except (OSError, RuntimeError) as exc:  # links in a loop (RuntimeError before Python 3.13)
        raise UnsafePath(f"{path} cannot be resolved: {exc}") from exc
    if resolved.is_relative_to(root) and resolved != root:
        return path
    steps = [folder.joinpath(*names[: count + 1]) for count in range(len(names))]
    link = next((step for step in steps if step.is_symlink()), None)
    through = f" through the symbolic link {link}" if link is not None else ""
    raise UnsafePath(f"{path} leads{through} to {resolved}, outside {folder}")
