"""Durable file writes: atomic replace (temp file, fsync, rename, fsync dir) and fsynced appends."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path


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


class NotWritten(OSError):
    """A write that did not happen: the file was cut back to what it held before (errno and path as the OS gave)."""


def open_append(path: Path, mode: int = 0o600) -> int:
    """An fd appending to path (read-write, so the caller may inspect the tail); a file it creates is durable in its
    directory before anything is appended."""
    path = Path(path)
    try:
        return os.open(path, os.O_RDWR | os.O_APPEND)
    except FileNotFoundError:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode)
    _fsync_dir(path.parent)
    return fd


def write_new(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Create path (never replacing a file: FileExistsError) holding data, whole and durable, or leave nothing."""
    path = Path(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        append_whole(fd, data, path)
    except BaseException:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    _fsync_dir(path.parent)


def append_whole(fd: int, data: bytes, path: Path) -> None:
    """One write() of all of `data` at the end of the file open (O_APPEND) as fd, then fsync. A short write (a disk
    that filled up mid-line) or a failed one is cut back to the previous length, so a reader never finds half a
    line, and raises NotWritten naming the path."""
    before = os.fstat(fd).st_size
    try:
        written = os.write(fd, data)
        if written != len(data):
            raise OSError(errno.ENOSPC, f"only {written} of {len(data)} bytes could be written")
        os.fsync(fd)
    except OSError as exc:
        why = exc.strerror or os.strerror(exc.errno or errno.EIO)
        try:
            os.ftruncate(fd, before)
            os.fsync(fd)
        except OSError as cut:
            raise NotWritten(exc.errno or errno.EIO, f"{why}; cutting the partial line back failed too "
                             f"({cut.strerror}): its start stays at the end of the file", str(path)) from None
        raise NotWritten(exc.errno or errno.EIO, f"{why}; nothing of it was kept", str(path)) from None
