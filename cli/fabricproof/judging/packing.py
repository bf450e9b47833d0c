"""How a fleet-sized evaluation holds what it keeps: what each host brings to the fleet-scope checks and the results,
spilled to a temporary file a check at a time; repeated strings and tuples shared."""

from __future__ import annotations

import dataclasses
import errno
import gc
import operator
import os
import pickle
import sys
import tempfile
from array import array
from bisect import bisect_right
from collections import Counter
from contextlib import contextmanager
from itertools import chain, starmap
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, BinaryIO, overload

from ..errors import WriteError
from ..model import Outcome, Result, Severity, Tally

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
                                                    "what a fleet's judging keeps past a small run's; set TMPDIR to a "
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


@contextmanager
def no_cycles() -> Iterator[None]:
    """The cyclic garbage collector out of a fleet's judging: JSON documents, entries and results hold no reference
    cycles, yet the collector walked each host's ~170 KB of facts while they were judged, and every full collection
    the ~200,000 objects of the imports, the catalog and the validators (about 1 ms of CPU a host of ~10). What
    exists is frozen, the collector paused, and both are undone after (library callers judge again)."""
    was = gc.isenabled()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.unfreeze()
        if was:
            gc.enable()


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
#: A result as the tuple of its fields: pickled so and made again by made_result(*fields), it is read back in half
#: the time the object itself takes (1.7 against 3.9 us a result) and written in half the time.
result_fields = operator.attrgetter(*(f.name for f in dataclasses.fields(Result)))
_SETTERS = tuple(getattr(Result, f.name).__set__ for f in dataclasses.fields(Result))  # the slots' own descriptors
_new = object.__new__


def _made_result() -> Callable[..., Result]:
    """made_result, its body written out one slot a line from Result's fields (as dataclasses writes __init__): a
    loop over the setters took 2.6 us a result, this 1.8 (timeit, side by side), and a fleet's judging and its
    reports each make one a check and host."""
    names = [f.name for f in dataclasses.fields(Result)]
    scope: dict[str, Any] = {"_new": _new, "Result": Result, **{f"_set{i}": put for i, put in enumerate(_SETTERS)}}
    lines = [f"    _set{i}(result, {name})" for i, name in enumerate(names)]
    exec(f"def made_result({', '.join(names)}):\n    result = _new(Result)\n" + "\n".join(lines)
         + "\n    return result\n", scope)
    made = scope["made_result"]
    made.__doc__ = """Result(*fields), every field given in order, without the frozen dataclass's __init__, which sets each
    field through object.__setattr__ (3.9 us): a fleet's evaluation makes one a check and host, and its reports make
    each again from the spill. The same object: equal, frozen, slotted."""
    return made


made_result = _made_result()


class Records:
    """Items kept in segments, each segment's in the order they were added: CHUNK of a segment held in memory, the
    rest pickled a chunk at a time to an anonymous temporary file (as the tuples `flat` makes of them, made again by
    `made(*fields)`), so what is held stays flat with fleet size. A small run never creates the file."""

    def __init__(self, segments: int, flat: Callable[[Any], tuple[Any, ...]] | None = None,
                 made: Callable[..., Any] | None = None) -> None:
        self._chunks: list[list[tuple[int, int]]] = [[] for _ in range(segments)]  # (offset, length) in the file
        self._starts: list[list[int]] = [[] for _ in range(segments)]  # the position of each chunk's first item
        self._pending: list[list[Any]] = [[] for _ in range(segments)]
        self._added = [0] * segments
        self._flat, self._made = flat, made
        self._scratch = Scratch()

    @property
    def written(self) -> int:
        """Bytes written to the file."""
        return self._scratch.written

    def add(self, segment: int, item: Any) -> None:
        pending = self._pending[segment]
        pending.append(item)
        self._added[segment] += 1
        if len(pending) >= CHUNK:
            items = pending if self._flat is None else list(map(self._flat, pending))
            self._starts[segment].append(self._added[segment] - len(pending))
            self._chunks[segment].append(self._scratch.append(pickle.dumps(items, pickle.HIGHEST_PROTOCOL)))
            self._pending[segment] = []

    def added(self, segment: int) -> int:
        """Items added to a segment."""
        return self._added[segment]

    def segment(self, segment: int, flat: bool = False) -> Iterator[list[Any]]:
        """A segment's items in the order they were added, a chunk at a time (as the tuples `flat` makes of them,
        when flat)."""
        for n in range(len(self._chunks[segment])):
            yield self._chunk(segment, n, flat)
        pending = self._pending[segment]
        yield list(map(self._flat, pending)) if flat and self._flat is not None else list(pending)

    def picked(self, segment: int, positions: Sequence[int], flat: bool = False) -> list[Any]:
        """The items added at `positions` (their places in the order added) of a segment, in that order: each chunk
        that holds some of them read once, one at a time (as the tuples `flat` makes of them, when flat)."""
        pending = self._pending[segment]
        starts = [*self._starts[segment], self._added[segment] - len(pending)]  # the items held start last
        wanted: dict[int, list[int]] = {}  # chunk -> the indexes into positions it holds
        for i, p in enumerate(positions):
            wanted.setdefault(bisect_right(starts, p) - 1, []).append(i)
        picked: list[Any] = [None] * len(positions)
        for n, indexes in wanted.items():
            first = starts[n]
            if n == len(starts) - 1 or self._made is None:
                items = pending if n == len(starts) - 1 else self._chunk(segment, n)
                flatten = self._flat if flat and self._flat is not None and items is pending else None
                for i in indexes:
                    item = items[positions[i] - first]
                    picked[i] = item if flatten is None else flatten(item)
            else:  # a chunk read for several windows makes only the items each one picks
                fields, made = self._chunk(segment, n, flat=True), self._made
                for i in indexes:
                    picked[i] = fields[positions[i] - first] if flat else made(*fields[positions[i] - first])
        return picked

    def _chunk(self, segment: int, n: int, flat: bool = False) -> list[Any]:
        offset, length = self._chunks[segment][n]
        items = pickle.loads(self._scratch.read(offset, length))
        return items if self._made is None or flat else list(starmap(self._made, items))


class Spill:
    """A fleet's results, one segment per check, each added as it is judged (hosts in any order), kept as Records:
    what a report holds stays flat with fleet size."""

    def __init__(self, segments: int) -> None:
        self._records = Records(segments, result_fields, made_result)
        self._counts: list[dict[Outcome, int]] = [{} for _ in range(segments)]
        self._failed_hosts: set[str] = set()

    @property
    def spilled(self) -> int:
        """Bytes written to the file."""
        return self._records.written

    def add(self, segment: int, result: Result) -> None:
        counts = self._counts[segment]
        counts[result.outcome] = counts.get(result.outcome, 0) + 1
        if result.outcome is Outcome.FAIL:
            self._failed_hosts.add(result.host)
        self._records.add(segment, result)

    def segment(self, segment: int, flat: bool = False) -> Iterator[list[Any]]:
        """A segment's results in the order they were added, a chunk at a time (each as the tuple of its fields, in
        Result's order, when flat)."""
        return self._records.segment(segment, flat)

    def picked(self, segment: int, positions: Sequence[int], flat: bool = False) -> list[Any]:
        """The results added at `positions` of a segment, in that order (as tuples of their fields, when flat)."""
        return self._records.picked(segment, positions, flat)

    def added(self, segment: int) -> int:
        """Results added to a segment."""
        return self._records.added(segment)

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
        tally.failed_hosts = self._failed_hosts  # handed over, not copied: a fleet's report is made once
        return tally


#: Results a reader puts in host order at once: a segment added out of host order is read back a window of this
#: many hosts at a time, each window picked from the chunks that hold it (hosts finish roughly in name order, so a
#: chunk is seldom read for more than one or two windows), never the whole segment at once.
WINDOW = 16 * CHUNK


def in_order(spill: Spill, segment: int, order: Sequence[int], flat: bool = False) -> Iterator[list[Any]]:
    """A segment's results, a list at a time, with its first len(order) put in host order (`order`: the position
    each was added in); each as the tuple of its fields when flat."""
    if not order:
        yield from spill.segment(segment, flat)
        return
    for start in range(0, len(order), WINDOW):
        yield spill.picked(segment, order[start:start + WINDOW], flat)
    yield spill.picked(segment, range(len(order), spill.added(segment)), flat)


def reasons_in_order(spill: Spill, segment: int, order: Sequence[int]) -> Counter[str]:
    """A segment's results' reasons counted, each in the place it first takes in in_order(spill, segment, order),
    read in the order they were added (no window, no result held)."""
    rank = array("l", bytes(len(order) * array("l").itemsize))  # the place in host order of each position added
    for place, position in enumerate(order):
        rank[position] = place
    reasons = FirstPlaceCounts()
    for position, result in enumerate(chain.from_iterable(spill.segment(segment))):
        reasons.add(result.reason, rank[position] if position < len(rank) else position)
    return reasons.counter()


class FirstPlaceCounts:
    """Keys counted as they come, each remembering the first (smallest) place it took: counter() is the Counter of
    the keys as if read in place order, without holding them in that order."""

    def __init__(self) -> None:
        self._seen: dict[Any, list[Any]] = {}  # key -> [times, the first place]

    def add(self, key: Any, place: Any) -> None:
        held = self._seen.setdefault(key, [0, place])
        held[0] += 1
        held[1] = min(held[1], place)

    def counter(self) -> Counter[Any]:
        return Counter({key: n for key, (n, _) in sorted(self._seen.items(), key=lambda kv: kv[1][1])})


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

    def fields(self) -> Iterator[tuple[Any, ...]]:
        """The results in the same order, each as the tuple of its fields (Result's order): a reporter that only
        reads them skips making each Result again from the spill (1.8 us a result, ~112 a host)."""
        return chain.from_iterable(chain.from_iterable(in_order(self._spill, segment, order, flat=True)
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
