"""Faults of the tools themselves: a hanging nvidia-smi, garbage or a flood from ibstat."""

from __future__ import annotations

from fabricproof import tools

from ..digest import sha256
from ..model import Node
from .base import Fault, noop


#: The collectors that run nvidia-smi (a tool's key is the id of the collector that runs it).
NVSMI_COLLECTORS = tuple(t.key for t in tools.TOOLS.values() if t.argv[0] == "nvidia-smi")


def garbage(seed: str, size: int = 600) -> str:
    """Deterministic binary noise (what a tool with a corrupted library or terminal prints), as the lab's str of
    bytes (surrogateescape: the tools write those bytes back unchanged). It starts with \\xff\\xfe, a UTF-16
    byte-order mark, which is never valid UTF-8: evidence must keep it byte for byte."""
    raw = b"\xff\xfe"
    block = seed.encode()
    while len(raw) < size:
        block = sha256(block).digest()
        raw += block
    return raw[:size].decode("utf-8", "surrogateescape")


#: What the tool-floods fault prints, unless its record says `mib`: past the collector's 256 MiB cap per host.
FLOOD_MIB = 300


def flood_mib(node: Node) -> int:
    """How many MiB the flooding tool prints on this node."""
    return int((node["faults"].get("tool-floods") or {}).get("mib", FLOOD_MIB))


FAULTS: tuple[Fault, ...] = (
    Fault("tool-hangs", "`nvidia-smi` (every subcommand) hangs for an hour, as on a GPU stuck in a bad state; the "
          "process exits when its SSH session goes away.", "overlay", catches=(), breaks=NVSMI_COLLECTORS,
          apply=noop),
    Fault("tool-garbage", "`ibstat` prints binary garbage and exits 0.", "overlay", breaks=("ibstat",), apply=noop),
    Fault("tool-floods", f"`ibstat` prints {FLOOD_MIB} MiB of text (a tool, or a host, gone mad), as fast as the "
          "reader takes it, and exits 0; the size is the fault record's `mib`.", "overlay", breaks=("ibstat",),
          apply=noop),
)
