"""What the `nvidia-smi nvlink` readers share: the GPU-block splitter, the link-line reader, notes, schema parts."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from ..base import ParseError
from ..fragments import array, boolean, integer, obj, string
from ..textutil import first_line, strip_ansi

# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"; some drivers print no UUID part.
_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*(?:\(UUID:\s*([^)]*?)\s*\))?\s*$")
# A link line is "Link <n>", then ":" (-s, -e) or "," (-c), then a tail. Every GPU of a node prints the same link
# lines, and the tails repeat for every link ("P2P is supported: true", "26.562 GB/s"), so lines (_link_line) and
# tails (_link_tail) are read once each and looked up after that (bounded caches). The tail patterns are the rest
# of the full-line patterns "^Link\s+(\d+):\s*([^:]+?)\s*$" (status), "^Link\s+(\d+):\s*([^:]+?):\s*(.*?)\s*$"
# (counter) and "^Link\s+(\d+),\s*(.+?):\s*(\S+)\s*$" (capability): "Link\s+(\d+)" can only end right before the
# separator, so splitting there changes no match.
_LINK_HEAD = re.compile(r"Link\s+(\d+)([:,].*)")
_STATUS_TAIL = re.compile(r"\s*([^:]+?)\s*$")  # "Link 4: 26.562 GB/s" / "Link 4: <inactive>"
_COUNTER_TAIL = re.compile(r"\s*([^:]+?):\s*(.*?)\s*$")  # "Link 0: Replay Errors: 0"
_CAP_TAIL = re.compile(r"\s*(.+?):\s*(\S+)\s*$")  # "Link 0, P2P is supported: true"
_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*GB/s$", re.IGNORECASE)
_ELIDED = {"[...]", "...", "…"}


@dataclass
class GpuBlock:
    """The lines printed under one `GPU N:` header (merged when a header repeats)."""

    index: int
    name: str | None
    uuid: str | None
    lines: list[str] = field(default_factory=list)
    implicit: bool = False  # no header: an excerpt that starts at the link lines
    elided: bool = False  # an elision marker ([...], ...) cut this GPU's lines: its link list is incomplete


@dataclass
class Split:
    gpus: list[GpuBlock]
    headers: int
    elided: bool


def split_gpu_blocks(text: str) -> Split:
    blocks: dict[int, GpuBlock] = {}
    current: GpuBlock | None = None
    headers = 0
    elided = False
    cut: GpuBlock | None = None
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        if line in _ELIDED:
            elided = True
            cut = current  # which GPU the marker cut is known only from the line after it
            continue
        match = _GPU_LINE.match(line) if line.startswith("GPU") else None
        if cut is not None:
            # A marker followed by a header that skips GPU numbers stands for whole GPUs ("GPU 2 ... GPU 6");
            # followed by link lines, the next GPU or the end of the text, it cut the GPU above it short.
            cut.elided = not (match and int(match[1]) > cut.index + 1)
            cut = None
        if match:
            headers += 1
            index = int(match[1])
            current = blocks.setdefault(index, GpuBlock(index, None, None))
            current.name = current.name or (match[2] or None)
            current.uuid = current.uuid or (match[3] or None)
            continue
        if current is None:
            current = blocks.setdefault(0, GpuBlock(0, None, None, implicit=True))
        current.lines.append(line)
    if cut is not None:
        cut.elided = True
    return Split(sorted(blocks.values(), key=lambda b: b.index), headers, elided)


def _unsupported(line: str) -> bool:
    lower = line.lower()
    # "Nvlink queries are not supported for Devices in MIG mode",
    # "Device does not have or support Nvlink" (driver 595+ on boards without NVLink).
    return "not supported" in lower or "does not have or support" in lower


def _known_message(line: str) -> bool:
    """Messages nvidia-smi nvlink prints in place of link lines (they make the output readable)."""
    return _unsupported(line) or "all links are inactive" in line.lower()


ELIDED_NOTE = "link list elided in the source: link counts unknown"


def parse_notes(split: Split, foreign: int, tool: str) -> list[str]:
    notes = []
    if any(b.implicit for b in split.gpus):
        notes.append("no 'GPU N:' header before the first link lines: they are attributed to GPU 0")
    if split.elided:
        notes.append("output elided in the source ([...] or ...): link lists are incomplete")
    if foreign:
        notes.append(f"{foreign} lines of another nvlink sub-command ignored (not {tool} output)")
    return notes


def require_output(split: Split, recognised: int, foreign: int, text: str, tool: str) -> None:
    """Refuse output with no GPU header and no line of this sub-command, or only another one's lines."""
    if (not split.headers and not recognised) or (foreign and not recognised):
        raise ParseError(f"not nvidia-smi nvlink {tool} output: {first_line(text)!r}")


#: What reading one GPU block leaves on a LinkReader: recognised, foreign, supported, messages.
BlockCounts = tuple[int, int, bool, tuple[str, ...]]


class LinkReader:
    """Reads one sub-command's link lines out of the GPU blocks, counting every other line.

    recognised counts this sub-command's lines and the messages nvidia-smi nvlink prints instead of link lines
    (they make the output readable); foreign counts the link lines of another sub-command (or, with `accept`,
    lines of this kind the reader does not take). After a block is read, supported and messages describe it.
    """

    def __init__(self, kind: str, accept: Callable[[tuple[Any, ...]], bool] | None = None) -> None:
        self.kind = kind  # "status", "counter" or "cap" (see _link_tail)
        self.accept = accept
        self.recognised = 0
        self.foreign = 0
        self.supported = True
        self.messages: list[str] = []

    def counts(self) -> BlockCounts:
        """What reading its blocks counted, and what the last one noted, for took() on another reader."""
        return self.recognised, self.foreign, self.supported, tuple(self.messages)

    def took(self, counts: BlockCounts) -> None:
        """As if this reader had read the block another reader's counts() describe (a block read once, cached)."""
        recognised, foreign, self.supported, messages = counts
        self.recognised += recognised
        self.foreign += foreign
        self.messages = list(messages)

    def links(self, block: GpuBlock) -> Iterator[tuple[int, tuple[Any, ...], str]]:
        """(link number, what the line says, the line) for each of this sub-command's link lines, in order."""
        kind, accept = self.kind, self.accept
        supported, recognised, foreign = True, 0, 0
        messages: list[str] = []
        self.messages = messages  # the caller may add to them while it reads the links
        for line in block.lines:
            parsed = _link_line(line)
            if parsed is None:
                recognised += _known_message(line)
                supported = supported and not _unsupported(line)
                messages.append(line)
            elif parsed[1][0] == kind and (accept is None or accept(parsed[1])):
                recognised += 1
                yield int(parsed[0]), parsed[1], line
            else:
                foreign += 1
        self.supported = supported
        self.recognised += recognised
        self.foreign += foreign

    def note(self) -> str | None:
        """The messages of the block last read, as one note."""
        return "; ".join(self.messages) or None

    def gpu_summary(self, block: GpuBlock, links: int) -> dict[str, Any]:
        """The per-GPU record of the block last read (GPU_SUMMARY); an elided block's link count is unknown."""
        if block.elided:
            self.messages.append(ELIDED_NOTE)
        return {"index": block.index, "name": block.name, "uuid": block.uuid, "supported": self.supported,
                "links": None if block.elided else links, "note": self.note()}

    def fragment(self, split: Split, text: str, tool: str, gpus: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
        """The sub-command's fragment: supported, gpus, its own fields, elided and notes; refuses unreadable output."""
        require_output(split, self.recognised, self.foreign, text, tool)
        return {
            # False when any GPU cannot be queried (MIG mode, no NVLink): checks skip instead of guessing.
            "supported": bool(gpus) and all(g["supported"] for g in gpus),
            "gpus": gpus,
            **fields,
            "elided": split.elided,
            "notes": parse_notes(split, self.foreign, tool),
        }


def min_or_none(values: Iterable[float]) -> float | None:
    return min(values, default=None)


def max_or_none(values: Iterable[float]) -> float | None:
    return max(values, default=None)


@lru_cache(maxsize=1024)
def _link_tail(sep_tail: str) -> tuple[Any, ...] | None:
    """What a link line says after "Link <n>" (separator included), read once per distinct tail.

    ("status", state, GB/s or None, state understood), ("counter", name, value as printed, field), ("cap", title,
    field, flag), or None for a line of no nvlink sub-command. The patterns exclude one another (separator,
    colons). Nothing here can raise: a parser that only counts another sub-command's lines must not fail on them.
    """
    sep, tail = sep_tail[0], sep_tail[1:]
    if sep == ",":
        cap = _CAP_TAIL.match(tail)
        if cap is None:
            return None
        title = cap[1].strip()
        return ("cap", title, CAPABILITIES.get(title.lower()), _bool(cap[2]))
    if status := _STATUS_TAIL.match(tail):
        rate = _RATE.match(status[1])
        return ("status", status[1], float(rate[1]) if rate else None, bool(rate) or status[1].lower() == "<inactive>")
    if counter := _COUNTER_TAIL.match(tail):
        return ("counter", counter[1], counter[2], _counter_field(counter[1]))
    return None


@lru_cache(maxsize=4096)  # every GPU of a node prints the same link lines (18 links x 6 capabilities on H100)
def _link_line(line: str) -> tuple[str, tuple[Any, ...]] | None:
    """(link number as printed, _link_tail) of a link line of any nvlink sub-command, else None.

    The number stays text: a parser converts it only for its own lines, as the full-line patterns did.
    """
    head = _LINK_HEAD.match(line)
    if head is None:
        return None
    tail = _link_tail(head[2])
    return (head[1], tail) if tail else None


def _counter_field(name: str) -> str | None:
    """The fixed field a counter name feeds (Replay, Recovery, flit/data CRC, CRC), if any."""
    lower = name.lower()
    if "replay" in lower:
        return "replay"
    if "recovery" in lower:
        return "recovery"
    if "crc" in lower and "flit" in lower:
        return "crc_flit"
    if "crc" in lower and "data" in lower:
        return "crc_data"
    if "crc" in lower:
        return "crc"
    return None


CAPABILITIES = {
    "p2p is supported": "p2p_supported",
    "access to system memory supported": "sysmem_access_supported",
    "p2p atomics supported": "p2p_atomics_supported",
    "system memory atomics supported": "sysmem_atomics_supported",
    "sli is supported": "sli_supported",
    "link is supported": "link_supported",
}


_BOOLS = {"true": True, "false": False}


def _bool(value: str) -> bool | None:
    return _BOOLS.get(value.strip().lower())


# Schema parts of the sub-command fragments

GPU_ID = {
    "index": integer("nvidia-smi GPU index."),
    "name": string("Product name from the GPU header.", True),
    "uuid": string("GPU UUID from the GPU header.", True),
}
LINK_ID = {
    "gpu": integer("GPU index."),
    "link": integer("Link number."),
}
COMMON = {
    "elided": boolean("The source elided lines ([...]); lists are incomplete."),
    "notes": array("What the parser noticed about partial or odd output.", {"type": "string"}),
}
GPU_SUMMARY = obj(
    "One GPU as the sub-command reported it.",
    {
        **GPU_ID,
        "supported": boolean("False when the GPU cannot be queried (MIG mode, no NVLink)."),
        "links": integer("Links listed for this GPU; null when the source elided some of them.", True),
        "note": string("Message printed instead of (or besides) link lines.", True),
    },
    optional=("name", "uuid", "links"),
)
