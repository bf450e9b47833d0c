"""Durable file writes (atomic replace, fsynced appends), outputs written where an operator names them, and run
directories that follow no link planted inside them."""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

from .errors import InputError, Problem, writes


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
def atomic_write_chunks(path: Path, chunks: Iterable[str], mode: int = PRIVATE, parents: bool = True) -> None:
    """atomic_write_text for a document made in pieces (a fleet-sized report): written as they come. `parents`
    makes missing parent directories."""
    path = Path(path)
    if parents:
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


# ------------------------------------------------------------------------------------- outputs an operator names


def _names_a_descriptor(path: Path) -> bool:
    """/dev/stdout, /dev/fd/N, /proc/PID/fd/N: the name of a file someone else opened (a shell's `>> log`), so
    it is written where it is, at its end; renaming over the name would swap the file under its owner."""
    p = Path(os.path.abspath(path))
    for _ in range(40):  # the kernel's own limit on links followed in one lookup
        if str(p).startswith(("/proc/", "/dev/fd/")) or os.path.realpath(p.parent).startswith("/proc/"):
            return True
        try:
            p = Path(os.path.abspath(os.path.join(p.parent, os.readlink(p))))
        except OSError:  # not a link (or gone): the chain ends here
            return False
    return False


def _plan(path: Path, option: str) -> tuple[Path, bool]:
    """(the file to write, written in place?) for an output the operator named; InputError when it cannot be one."""
    path = Path(path)

    def refuse(why: str) -> InputError:
        return InputError(Problem(f"{option}: {why}" if option else why, str(path)))

    try:
        st: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise refuse(os.strerror(exc.errno or errno.EIO)) from None
    descriptor = _names_a_descriptor(path)
    if st is None and descriptor:
        raise refuse("names no open file")
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise refuse("a directory; name a file")
        if stat.S_ISSOCK(st.st_mode):
            raise refuse("a socket; name a file, a device or a FIFO")
        if descriptor or not stat.S_ISREG(st.st_mode):
            if not os.access(path, os.W_OK):
                raise refuse("not writable")
            return path, True
    real = Path(os.path.realpath(path))  # a link to a file: the file is replaced, the link stays
    if not real.parent.is_dir():
        raise refuse(f"no directory {real.parent}; create it first")
    if not os.access(real.parent, os.W_OK | os.X_OK):
        raise refuse(f"cannot create files in {real.parent}")
    return real, False


def check_target(path: Path, option: str) -> None:
    """An output the operator named (`option` says which, e.g. '--format json'), checked before anything
    runs: InputError (exit 2) for a directory, a socket, a missing or unwritable parent, a link loop."""
    _plan(path, option)


@writes
def write_target(path: Path, chunks: Iterable[str], mode: int = PRIVATE, option: str = "") -> None:
    """Write an output the operator named as they expect: a device, a FIFO or an open descriptor's name
    (/dev/stdout) is opened and written where it is, never renamed over or chmod-ed (as root a rename would
    replace /dev/null for every process); a regular file, or a link to one, is replaced atomically at the file the
    link resolves to, with `mode`, and the link stays. A FIFO waits for its reader, as a shell's `>` does."""
    target, in_place = _plan(path, option)
    if not in_place:
        atomic_write_chunks(target, chunks, mode, parents=False)
        return
    # O_APPEND: never truncates what another process opened; no O_CREAT: a target gone meanwhile is not made anew.
    with os.fdopen(os.open(target, os.O_WRONLY | os.O_APPEND | os.O_NOCTTY), "w", encoding="utf-8") as fh:
        for chunk in chunks:
            fh.write(chunk)


# ------------------------------------------------------------------------------------- run directories


def planted(path: Path) -> InputError:
    """The one-line refusal of a symbolic link found inside a run directory."""
    try:
        to = os.readlink(path)
    except OSError:
        to = "?"
    return InputError(Problem(f"a symbolic link inside a run directory (to {to}): fabricproof neither writes nor "
                              "reads evidence through one; remove it, or give a new run directory", str(path)))


def refuse_links(root: Path, path: Path) -> Path:
    """`path`, once no component of it below `root` is a symbolic link (planted in a run directory, one would
    carry evidence elsewhere); InputError naming the link otherwise."""
    cur = Path(root)
    for part in Path(path).relative_to(root).parts:
        cur = cur / part
        if cur.is_symlink():
            raise planted(cur)
    return Path(path)


def refuse_links_in(root: Path) -> None:
    """No symbolic link anywhere below `root`: a run directory about to be written to or read again."""
    stack = [Path(root)]
    while stack:
        with os.scandir(stack.pop()) as entries:
            for entry in entries:
                if entry.is_symlink():
                    raise planted(Path(entry.path))
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))


def private_dir(root: Path, *parts: str, mode: int = 0o700) -> Path:
    """root/parts..., each made if missing (owner-only) and none of them a link."""
    cur = Path(root)
    for part in Path(*parts).parts if parts else ():
        cur = cur / part
        try:
            os.mkdir(cur, mode)
        except FileExistsError:
            if cur.is_symlink():
                raise planted(cur) from None
            if not cur.is_dir():
                raise InputError(Problem("a file where the run keeps a directory", str(cur))) from None
    return cur


def create_private(path: Path, mode: int = PRIVATE) -> int:
    """A descriptor writing `path` afresh, never through a link at its name (O_NOFOLLOW)."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise planted(Path(path)) from None
        raise
