"""Durable file writes: atomic replace (temp file, fsync, rename, fsync dir) and fsynced appends."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import writes


def _fsync_dir(directory: Path) -> None:
    dir_fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


#: Files fabricproof writes are its owner's unless a caller says otherwise: evidence shows a fleet's addresses,
#: firmware and faults.
PRIVATE = 0o600


def atomic_write_text(path: Path, text: str, mode: int = PRIVATE) -> None:
    """Write text to path so readers see the old file or the new one, never half of either."""
    atomic_write_chunks(path, (text,), mode)


@writes
def atomic_write_chunks(path: Path, chunks: Iterable[str], mode: int = PRIVATE) -> None:
    """atomic_write_text for a document made in pieces (a fleet-sized report): written as they come."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            for chunk in chunks:
                fh.write(chunk)
            fh.flush()
            os.fchmod(fh.fileno(), mode)
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)  # the rename is durable only once the directory entry is on disk


def read_chunks(path: Path, size: int = 1 << 20) -> Iterator[str]:
    """A text file in pieces of `size` characters (copying a large report without holding it whole)."""
    with open(path, encoding="utf-8") as fh:
        while piece := fh.read(size):
            yield piece


@writes
def append_line(path: Path, line: str, mode: int = 0o600) -> None:
    """Append one line and fsync before returning (an append-only log that survives a crash)."""
    path = Path(path)
    new = not path.exists()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, mode)
    try:
        os.write(fd, (line.rstrip("\n") + "\n").encode("utf-8"))
        os.fsync(fd)
    finally:
        os.close(fd)
    if new:
        _fsync_dir(path.parent)
