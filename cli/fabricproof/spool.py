"""Command output as it arrives: in memory up to a small bound per host, past it in a file, never held whole."""

from __future__ import annotations

import dataclasses
import os
import tempfile
from collections.abc import Collection
from pathlib import Path

from .model import CommandResult

#: What one host's outputs (every command, both streams) may hold in memory; past it, the command printing goes to a
#: file. A lab H100 node's outputs total 247 KiB (the corpus's nvidia-smi -q -x of a B200 alone is 349 KiB); 64
#: flooding hosts hold 64 times this, not their floods.
MEMORY_BYTES = 2 << 20
#: Spilled files are the host's raw evidence once the run store renames them into place: the owner's only.
PREFIX = ".spill-"
#: The largest output a parser is given: parsing holds the text and its lines, up to 9 times its size (ibstat's parser
#: on a flood), in whichever thread collected the host. The largest real node output in ../shared/corpus is 349 KiB
#: (nvidia-smi -q -x of a B200 node); 64 hosts flooding 30 MiB each, all parsed, peaked the client at 1,008 MiB.
PARSE_BYTES = 8 << 20
#: Outputs larger than this are parsed one at a time across a collection's host threads (facts.parse_output): 3x the
#: largest real node output, so no real collection waits on it.
SHARED_PARSE_BYTES = 1 << 20


class Spooler:
    """The spools of one host's collection. They share its memory bound; files go to `directory` (None: never to
    disk, for callers that already hold the whole stream)."""

    def __init__(self, directory: Path | None, memory_bytes: int = MEMORY_BYTES):
        self.directory = directory
        self.memory_bytes = memory_bytes
        self.held = 0  # bytes the spools of this host hold in memory
        self.spilled: list[Spool] = []

    def spool(self, keep: bool = True) -> Spool:
        """A new spool; keep=False counts what it is given and keeps none of it (a repeated frame)."""
        return Spool(self, keep)

    def discard(self, keep: Collection[str | None] = ()) -> None:
        """Close and remove the files the spools wrote, but those in `keep`: the host's outputs are not kept (nothing
        ran there, or its collection failed on the way), or a frame no command owns (a host can forge them)."""
        for sp in self.spilled:
            sp.finish()
            if sp.path not in keep:
                try:
                    os.unlink(sp.path or "")
                except FileNotFoundError:
                    pass
        self.spilled.clear()


class Spool:
    """One command's output on one stream, as it arrives."""

    def __init__(self, owner: Spooler, keep: bool = True):
        self._owner = owner
        self._keep = keep
        self._buf = bytearray()
        self._fd: int | None = None
        self.path: str | None = None
        self.size = 0
        self.last = b""  # the last byte written: the frame's END marker follows a newline the frame does not own

    def write(self, data: bytes | bytearray) -> None:
        if not data:
            return
        self.size += len(data)
        self.last = bytes(data[-1:])
        if not self._keep:
            return
        if self._fd is not None:
            _write_all(self._fd, data)
            return
        self._buf += data
        self._owner.held += len(data)
        if self._owner.directory is not None and self._owner.held > self._owner.memory_bytes:
            self._spill()

    def _spill(self) -> None:
        fd, path = tempfile.mkstemp(prefix=PREFIX, dir=self._owner.directory)  # 0600, O_EXCL
        self._fd, self.path = fd, path
        self._owner.spilled.append(self)
        _write_all(fd, self._buf)
        self._owner.held -= len(self._buf)
        self._buf = bytearray()

    def drop_last(self) -> None:
        """Forget the last byte written (the newline before an END marker)."""
        if self.size == 0:
            return
        self.size -= 1
        if not self._keep:
            return
        if self._fd is not None:
            os.ftruncate(self._fd, self.size)
            os.lseek(self._fd, self.size, os.SEEK_SET)
        else:
            del self._buf[-1]
            self._owner.held -= 1

    def finish(self) -> tuple[bytes, str | None]:
        """(bytes held in memory, or b"" and the file holding them)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
            return b"", self.path
        return bytes(self._buf), None


def _write_all(fd: int, data: bytes | bytearray) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def stdout_size(result: CommandResult) -> int:
    """How much a command printed on stdout (characters when it is held in memory, bytes when it spilled)."""
    return len(result.stdout) if result.stdout_path is None else os.stat(result.stdout_path).st_size


def stdout_text(result: CommandResult) -> str:
    """What a command printed on stdout, read from its file when it spilled there (decoded only here, to parse)."""
    if result.stdout_path is None:
        return result.stdout
    return Path(result.stdout_path).read_bytes().decode("utf-8", errors="replace")


def stderr_head(result: CommandResult, limit: int = 4096) -> str:
    """The start of what a command printed on stderr: enough for a one-line reason, however much it printed."""
    if result.stderr_path is None:
        return result.stderr[:limit]
    with open(result.stderr_path, "rb") as fh:
        return fh.read(limit).decode("utf-8", errors="replace")


def inline(result: CommandResult) -> CommandResult:
    """The result with its spilled outputs read back into memory and their files removed (for callers that
    combine outputs as text, such as probes)."""
    if result.stdout_path is None and result.stderr_path is None:
        return result
    out = stdout_text(result)
    err = result.stderr if result.stderr_path is None else \
        Path(result.stderr_path).read_bytes().decode("utf-8", errors="replace")
    for p in (result.stdout_path, result.stderr_path):
        if p is not None:
            os.unlink(p)
    return dataclasses.replace(result, stdout=out, stderr=err, stdout_path=None, stderr_path=None)
