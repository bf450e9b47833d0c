"""The lab fabric's share of a collective across nodes (pure): rail traffic within one leaf stays there, traffic across
leaves is bounded by the uplinks those leaves have now against their plan, and a crossed rail sends its traffic up
through the spines."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

#: What the lab runtime keeps in the fabric directory, written again on every change of the fabric
#: (fabric.topology.paths): each host's compute HCAs by rail with the leaf each is cabled to now ("rails"), each
#: leaf's rail ("leaf_rail"), and each leaf's uplink rate present over planned ("uplinks").
PATHS_FILE = "paths.json"
#: The share a rail's traffic keeps when a crossed cable sends it through the spines: its flows land on another rail's
#: leaf and share that leaf's spine links with the flows of its own rail, two flows a link (the interference NCCL's
#: rail matching exists to avoid: NCCL_CROSS_NIC, NCCL environment variables documentation). A modelling choice of
#: the lab, not a measured figure.
SPINE_DETOUR = 0.5

Paths = Mapping[str, "Any"]


def load(fabric_dir: str | Path | None) -> Paths | None:
    """The fabric's paths as the runtime last wrote them; None for a lab without a fabric (or before its first)."""
    if not fabric_dir:
        return None
    try:
        return json.loads((Path(fabric_dir) / PATHS_FILE).read_text())
    except (OSError, ValueError):
        return None


def factor(paths: Paths | None, hosts: Iterable[str]) -> float:
    """The share of the hosts' HCA bandwidth the fabric carries for a collective over them: for each rail, 1 when
    every host's HCA of that rail is on one leaf (rail-local); else the traffic crosses the spines, at the least
    uplink share (present over planned, at most 1) of the leaves it leaves from, and at SPINE_DETOUR of that when a
    host's HCA sits on a leaf of another rail. The collective runs at its slowest rail's pace. A host the fabric
    does not know, or an HCA with no cable, adds no leaf (its own port state already lowers its HCAs)."""
    if not paths:
        return 1.0
    names = list(hosts)
    rails: dict[str, set[str]] = {}
    for host in names:
        for rail, leaf in (paths["rails"].get(host) or {}).items():
            if leaf is not None:
                rails.setdefault(rail, set()).add(leaf)
    worst = 1.0
    for rail, leaves in rails.items():
        if len(leaves) < 2:
            continue
        share = min(min(1.0, float(paths["uplinks"].get(leaf, 1.0))) for leaf in leaves)
        if any(str(paths["leaf_rail"].get(leaf)) != rail for leaf in leaves):
            share *= SPINE_DETOUR
        worst = min(worst, share)
    return worst
