"""`sminfo`: the InfiniBand subnet manager this node's port reaches, and whether it answers as MASTER."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError, Requires, guarded
from ..fragments import boolean, integer, notes, obj, string
from ..textutil import first_line
from .values import int_any, text_lines

# "sminfo: sm lid 37 sm guid 0x7cfe90030016aef1, activity count 4484381 priority 14 state 3 SMINFO_MASTER"
_SMINFO = re.compile(
    r"^sminfo: sm lid (?P<lid>0x[0-9a-fA-F]+|\d+) sm guid (?P<guid>0x[0-9a-fA-F]+), activity count (?P<act>\d+)"
    r" priority (?P<prio>\d+)(?: state (?P<state>\d+)(?: (?P<name>\w+))?)?\s*$"
)
# libibmad reports its failures as "ibwarn: ..." and "sminfo: iberror: ..." lines. A port that cannot be opened
# (no umad device, not root) says nothing about the SM; a query nobody answered means no SM manages the port.
_LOCAL = re.compile(r"can't open UMAD port|Failed to open|umad_open_port|Permission denied", re.IGNORECASE)
_QUERY = re.compile(r"^sminfo: iberror: .*(?:query|SMINFO)", re.IGNORECASE)
_DIAG = re.compile(r"^(?:ibwarn|ibpanic|sminfo: iberror):")
SM_STATES = {0: "SMINFO_NOTACTIVE", 1: "SMINFO_DISCOVER", 2: "SMINFO_STANDBY", 3: "SMINFO_MASTER"}


def parse_sminfo(text: str) -> dict[str, Any]:
    """The SM's LID, GUID, activity count, priority and state; `master` is false when no SM answered the query,
    null when sminfo could not open the local port (that proves nothing about the SM)."""
    lines = [line.strip() for line in text_lines(text) if line.strip()]
    if not lines:
        raise ParseError("empty output")
    for line in lines:
        if m := _SMINFO.match(line):
            state = int(m["state"]) if m["state"] else None
            return {"lid": int_any(m["lid"]), "guid": m["guid"].lower(), "activity_count": int(m["act"]),
                    "priority": int(m["prio"]), "state": state,
                    "state_name": m["name"] or SM_STATES.get(state) if state is not None else None,
                    "master": state == 3 if state is not None else None, "error": None, "notes": []}
    diagnostics = [line for line in lines if _DIAG.match(line)]
    if not diagnostics:
        raise ParseError(f"not sminfo output: {first_line(text)!r}")
    error = next((line for line in diagnostics if line.startswith("sminfo:")), diagnostics[-1])
    local = any(_LOCAL.search(line) for line in diagnostics)
    master = None if local else (False if any(_QUERY.match(line) for line in diagnostics) else None)
    note = ("sminfo could not open the local InfiniBand port (umad): the SM was not asked" if local
            else "no subnet manager answered the SMInfo query" if master is False else "sminfo failed")
    return {"lid": None, "guid": None, "activity_count": None, "priority": None, "state": None, "state_name": None,
            "master": master, "error": error, "notes": [f"{note}: {error}"]}


SMINFO_SCHEMA = obj(
    "The subnet manager sminfo reaches from this node (the SM LID of the first InfiniBand port).",
    {
        "lid": integer("LID of the SM.", True),
        "guid": string("Port GUID of the SM (lower-case hex with 0x).", True),
        "activity_count": integer("SM activity count (grows while the SM sweeps).", True),
        "priority": integer("SM priority (0-15).", True),
        "state": integer("SMInfo state: 0 not active, 1 discovering, 2 standby, 3 master.", True),
        "state_name": string("State name as printed, e.g. SMINFO_MASTER.", True),
        "master": boolean("The SM answered as MASTER; false when no SM answered; null when sminfo could not run "
                          "the query (local port, permissions).", True),
        "error": string("The error line sminfo printed instead of an answer.", True),
        "notes": notes(),
    },
)

SMINFO_REQUIRES = Requires("command", "sminfo", "subnet manager not checked")

SMINFO = Collector(
    id="sminfo",
    # sminfo prints its failures (ibwarn/iberror) on stderr and exits 255: both are the answer.
    # infiniband-diags is optional on a node (sysfs already gives port state); without it the SM is not checked.
    argv=guarded(SMINFO_REQUIRES, *tools.argv("sminfo")),
    requires=SMINFO_REQUIRES,
    parse=parse_sminfo,
    provides="/ib/sminfo",
    schema=SMINFO_SCHEMA,
    family="ib",
    description="The InfiniBand subnet manager this node reaches and its state (sminfo): reachable and MASTER.",
    ok_exit_codes=(0, 255),
    corpus=("ib-diag",),
)

COLLECTORS = (SMINFO,)
