"""The /subnet facts: each host's share of the fabric's diff against its cabling plan (fabric scope, never run here)."""

from __future__ import annotations

from typing import Any

from ..subnet.checks import CHECKS, COLLECTOR
from . import fragments as f
from .base import Collector, ParseError

_WHAT = {
    "cable_placement": "cables of this host or its leaf in another port than the plan's (a swap of two is one)",
    "cable_present": "planned cables of this host or its leaf that are missing or down",
    "cable_unplanned": "cables of this host or its leaf that the plan does not have",
    "link_width": "cables of this host or its leaf running narrower than planned or than both ends could",
    "link_speed": "cables of this host or its leaf running slower than planned or than both ends could",
    "rail_aligned": "HCAs of this host on a leaf of another rail",
    "names_unique": "node descriptions shared by several nodes, that this host's cables reach",
    "switch_errors": "switch ports of this host's cables whose error counters grew over the window",
    "sm_master": "subnet manager trouble (not exactly one master)",
}

SCHEMA = f.obj("The fabric's diff against its cabling plan, this host's share: each list holds the findings' "
               "sentences, in an operator's words; empty on a host the diff found clean.", {
                   "plan": f.string("The plan's name."),
                   "cables": f.integer("Planned cables with an end on this host's HCAs."),
                   **{c: f.array(_WHAT[c].capitalize() + ".", f.string("One finding.")) for c in CHECKS},
               })


def _not_parsed(text: str) -> Any:
    raise ParseError("the /subnet facts come from the fabric plan diff, not from a command's output")


COLLECTORS = (
    Collector(id=COLLECTOR, argv=(), parse=_not_parsed, provides="/subnet", schema=SCHEMA, family="subnet",
              description="The fabric's diff against its cabling plan (validate --fabric-plan), per host.",
              default=False, fabric_scope=True),
)
