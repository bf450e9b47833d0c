"""What a run may take from an earlier run on this machine: JSON documents kept owner-only under keys made from
their inputs (the packaged catalog in the state directory, ansible-inventory's answers in the user's cache)."""

from __future__ import annotations

import fcntl
import json
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from .errors import InputError, WriteError
from .fsutil import atomic_write_text, private_dir
from .paths import CACHE_DIR, state_dir

#: A kept document larger than this is not read (the packaged catalog's is ~0.15 MB).
MAX_BYTES = 16 << 20


def _private(st: os.stat_result) -> bool:
    """This user's own, and no one else may read or change it: anything else is not read (another user able to
    write it could plant hosts or checks)."""
    return st.st_uid == os.geteuid() and not st.st_mode & 0o077


def load(directory: Path, name: str) -> dict[str, Any] | None:
    """The JSON object kept as `name` in `directory`, or None: nothing kept, or a file or directory that is a link,
    not this user's own alone, too large, or not a JSON object. A document read is marked recently used."""
    path = Path(directory) / f"{name}.json"
    try:
        dir_st = os.lstat(directory)
        if not stat.S_ISDIR(dir_st.st_mode) or not _private(dir_st):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            st = os.fstat(fh.fileno())
            if not stat.S_ISREG(st.st_mode) or not _private(st) or st.st_size > MAX_BYTES:
                return None
            doc = json.loads(fh.read(MAX_BYTES + 1))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    with suppress(OSError):
        os.utime(path)  # recently used: kept longest where entries are pruned
    return doc


def _ready(directory: Path) -> bool:
    """Make `directory` if missing, owner-only (0700); False when it cannot be (read-only, not ours, a link)."""
    try:
        directory.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        private_dir(directory.parent, directory.name)
        os.chmod(directory, 0o700)  # private_dir refused a link here; an older 0755 directory is made owner-only
        return _private(os.lstat(directory))
    except (OSError, InputError, WriteError):
        return False


@contextmanager
def alone(directory: Path, name: str) -> Iterator[None]:
    """Held while this process makes the document `name`: another process making the same one waits here until it
    is kept, and should then look again before making it too. Where no lock can be taken, nobody waits."""
    directory = Path(directory)
    fd = _locked(directory / f".{name}.lock") if _ready(directory) else -1
    try:
        yield
    finally:
        if fd >= 0:
            # Removed before the lock is let go: a waiter holds the old file and finds the document kept; a
            # process coming later finds the document before it looks for a lock.
            with suppress(OSError):
                os.unlink(directory / f".{name}.lock")
            os.close(fd)


def _locked(path: Path) -> int:
    """A descriptor of `path` holding its exclusive lock (released by the kernel if this process dies), or -1."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError:
        return -1
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd
    except OSError:
        os.close(fd)
        return -1


def keep(directory: Path, name: str, text: str, most: int | None = None) -> None:
    """Keep `text` as `name` in `directory` (0700; the file 0600, written whole or not at all), and only the `most`
    recently used documents there. A directory that cannot take it (read-only, not ours) only means the next run
    does the work again."""
    directory = Path(directory)
    if not _ready(directory):
        return
    try:
        atomic_write_text(directory / f"{name}.json", text, mode=0o600)
        if most is not None:
            entries = sorted(directory.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
            for old in entries[most:]:
                old.unlink(missing_ok=True)
    except (OSError, InputError, WriteError):
        return


def read(name: str, key: str) -> Any | None:
    """The data kept in the state directory as `name` under `key`, or None (nothing kept, or its inputs changed)."""
    doc = load(state_dir() / CACHE_DIR, name)
    if doc is None or doc.get("key") != key or "data" not in doc:
        return None
    return doc["data"]


def write(name: str, key: str, data: Any) -> None:
    """Keep `data` in the state directory as `name` under `key`; a state directory that is missing, read-only or
    not ours only means the next run does the work again."""
    keep(state_dir() / CACHE_DIR, name, json.dumps({"key": key, "data": data}))
