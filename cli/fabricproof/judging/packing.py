"""How a fleet-sized evaluation holds what it keeps: host projections packed, repeated strings and tuples shared,
results spilled to a temporary file a check at a time."""

from __future__ import annotations

import dataclasses
import errno
import json
import operator
import os
import pickle
import sys
import tempfile
import zlib
from itertools import chain, starmap
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, BinaryIO, overload

from ..errors import WriteError
from ..model import Outcome, Result, Severity, Tally

Facts = Mapping[str, Any]


#: Hosts whose projections stay in memory before the rest go to a scratch file: a small run writes none.
HELD_HOSTS = 256


class Scratch:
    """An anonymous temporary file (unlinked at once, mode 600, gone with the process), created at the first write:
    what a fleet-sized evaluation keeps beyond a small run's size is written here and read back by offset."""

    def __init__(self) -> None:
        self._file: BinaryIO | None = None
        self.written = 0  # bytes

    def append(self, data: bytes) -> tuple[int, int]:
        try:
            if self._file is None:
                self._file = tempfile.TemporaryFile(prefix="fabricproof-judging-")
            offset = self._file.seek(0, os.SEEK_END)
            self._file.write(data)
            self._file.flush()  # read back with pread, past the buffer
        except OSError as exc:
            # The file has no name (unlinked at once): the operator needs the directory it was made in.
            raise WriteError(tempfile.gettempdir(), f"{exc.strerror or exc} (the evaluation's unlinked scratch file: "
                                                    "results and projections past a small run's; set TMPDIR to a "
                                                    "directory with room)", exc.errno or errno.EIO) from None
        self.written += len(data)
        return offset, len(data)

    def read(self, offset: int, length: int) -> bytes:
        assert self._file is not None
        # pread: readers at different places in the file (a reporter's nested passes) move no shared offset
        return os.pread(self._file.fileno(), length, offset)

    @property
    def created(self) -> bool:
        return self._file is not None


class PackedFacts(Mapping[str, Facts]):
    """Each host's fleet projection as compressed JSON: about 0.9 KB a host where the dicts took about 14 KB,
    decoded again (tens of microseconds) each time a fleet-scope check reads the host. Past HELD_HOSTS hosts the
    compressed projections go to a scratch file, so a 10,000-host run keeps ~9 MB of them out of memory. Facts are
    JSON by contract (the run store writes them so), so the round trip changes no verdict."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes | tuple[int, int]] = {}
        self._scratch = Scratch()

    def __setitem__(self, host: str, doc: Facts) -> None:
        blob = zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 1)
        self._blobs[host] = blob if len(self._blobs) < HELD_HOSTS else self._scratch.append(blob)

    def __getitem__(self, host: str) -> Facts:
        blob = self._blobs[host]
        return json.loads(zlib.decompress(blob if isinstance(blob, bytes) else self._scratch.read(*blob)))

    def __iter__(self) -> Iterator[str]:
        return iter(self._blobs)

    def __len__(self) -> int:
        return len(self._blobs)


def projections(pack: bool) -> dict[str, Facts] | PackedFacts:
    """Where an evaluation keeps each host's fleet projection until the fleet-scope checks run. They are what grows
    with the fleet, so they are packed unless the caller holds the facts anyway (`pack` false)."""
    return PackedFacts() if pack else {}


def shared(text: str) -> str:
    """One copy of a string that repeats on every host (a skip's or a missing fact's reason): a fleet's report keeps
    one result per check and host, so a repeat is paid for 10,000 times."""
    return sys.intern(text) if text else ""


class Tuples:
    """One host's evidence tuples, one per raw output: its results share them instead of each holding its own."""

    def __init__(self) -> None:
        self._memo: dict[str, tuple[str, ...]] = {}

    def of(self, path: str) -> tuple[str, ...]:
        return self._memo.setdefault(path, (path,))


#: Results of one check held in memory before they go to the spill file as one chunk: 100 checks hold at most
#: this many each, however large the fleet.
CHUNK = 256
#: A result as the tuple of its fields: pickled so and made again by Result(*fields), it is read back in half the
#: time the object itself takes (1.7 against 3.9 us a result) and written in half the time.
_FIELDS = operator.attrgetter(*(f.name for f in dataclasses.fields(Result)))


class Spill:
    """A fleet's results, one segment per check, each added as it is judged (hosts in any order): a segment's
    results go to an anonymous temporary file a chunk at a time, so what a report holds stays flat with fleet size.
    A run whose results fit in memory (one host, a small fleet) never creates the file."""

    def __init__(self, segments: int) -> None:
        self._chunks: list[list[tuple[int, int]]] = [[] for _ in range(segments)]  # (offset, length) in the file
        self._pending: list[list[Result]] = [[] for _ in range(segments)]
        self._counts: list[dict[Outcome, int]] = [{} for _ in range(segments)]
        self._failed_hosts: set[str] = set()
        self._scratch = Scratch()

    @property
    def spilled(self) -> int:
        """Bytes written to the file."""
        return self._scratch.written

    def add(self, segment: int, result: Result) -> None:
        counts = self._counts[segment]
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
        if result.outcome is Outcome.FAIL:
            self._failed_hosts.add(result.host)
        pending = self._pending[segment]
        pending.append(result)
        if len(pending) >= CHUNK:
            self._flush(segment)

    def _flush(self, segment: int) -> None:
        data = pickle.dumps(list(map(_FIELDS, self._pending[segment])), pickle.HIGHEST_PROTOCOL)
        self._chunks[segment].append(self._scratch.append(data))
        self._pending[segment] = []

    def segment(self, segment: int) -> Iterator[list[Result]]:
        """A segment's results in the order they were added, a chunk at a time."""
        for offset, length in self._chunks[segment]:
            yield list(starmap(Result, pickle.loads(self._scratch.read(offset, length))))
        yield list(self._pending[segment])

    def only_skipped(self, segment: int) -> bool:
        """No result of the segment but skips (or none at all): its check applied nowhere."""
        return not any(n for outcome, n in self._counts[segment].items() if outcome is not Outcome.SKIP)

    def tally(self, order: Iterable[int], severity: Callable[[int], Severity]) -> Tally:
        """The results counted with the segments in report order (a segment's results share one severity: its
        check's)."""
        tally = Tally()
        for k in order:
            for outcome, n in self._counts[k].items():
                tally.add_count(outcome, severity(k), n)
        tally.failed_hosts = set(self._failed_hosts)
        return tally


def in_order(spill: Spill, segment: int, order: Sequence[int]) -> Iterator[list[Result]]:
    """A segment's results, a list at a time, with its first len(order) put in host order (`order`: the position
    each was added in)."""
    if not order:
        yield from spill.segment(segment)
        return
    held = list(chain.from_iterable(spill.segment(segment)))  # one check's results, to put in host order
    yield [held[p] for p in order]
    yield held[len(order):]


class Spilled(Sequence[Result]):
    """A report's results read back from a Spill, re-iterable: each segment in turn, its results in host order.

    `parts` lists (segment, order): `order` gives, for the segment's first len(order) results, the positions they
    were added in (hosts that finished out of name order), or is empty when they were added in order already."""

    def __init__(self, spill: Spill, parts: Sequence[tuple[int, Sequence[int]]], tally: Tally) -> None:
        self._spill = spill
        self._parts = tuple(parts)
        self.tally = tally
        self._len = tally.total

    def __iter__(self) -> Iterator[Result]:
        return chain.from_iterable(chain.from_iterable(in_order(self._spill, segment, order)
                                                       for segment, order in self._parts))

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    @overload
    def __getitem__(self, index: int) -> Result: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Result]: ...

    def __getitem__(self, index: int | slice) -> Result | Sequence[Result]:
        return tuple(self)[index]  # reporters iterate; an index reads the results whole

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and tuple(self) == tuple(other)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Spilled({self._len} results)"
