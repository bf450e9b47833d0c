"""How a fleet-sized evaluation holds what it keeps: host projections packed, repeated strings and tuples shared."""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

Facts = Mapping[str, Any]


class PackedFacts(Mapping[str, Facts]):
    """Each host's fleet projection as compressed JSON: about 0.9 KB a host where the dicts took about 14 KB,
    decoded again (tens of microseconds) each time a fleet-scope check reads the host. Facts are JSON by
    contract (the run store writes them so), so the round trip changes no verdict."""

    def __init__(self) -> None:
        self._blobs: dict[str, bytes] = {}

    def __setitem__(self, host: str, doc: Facts) -> None:
        self._blobs[host] = zlib.compress(json.dumps(doc, separators=(",", ":")).encode(), 1)

    def __getitem__(self, host: str) -> Facts:
        return json.loads(zlib.decompress(self._blobs[host]))

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
