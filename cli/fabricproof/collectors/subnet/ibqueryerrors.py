"""`ibqueryerrors`: the error counters of every switch port that has any, read into Subnet.counters."""

from __future__ import annotations

import re

from ...subnet.model import End, Subnet
from ..base import ParseError
from .words import DIAGNOSTIC, guid

# infiniband-diags ibqueryerrors.c: a switch's block names its GUID, a CA's only its description.
_SWITCH = re.compile(r'^Errors for (0x[0-9a-fA-F]+) "(.*)"$')
_CA = re.compile(r'^Errors for "(.*)"$')
_PORT = re.compile(r"^GUID (0x[0-9a-fA-F]+) port (\d+|ALL):((?:\s*\[\w+ == \d+\])+)\s*$")
_COUNTER = re.compile(r"\[(\w+) == (\d+)\]")
_SUMMARY = re.compile(r"^## Summary: (\d+) nodes checked, (\d+) bad nodes found$")
_PORTS = re.compile(r"^##\s+(\d+) ports checked, (\d+) ports have errors beyond threshold$")
_SETTINGS = re.compile(r"^## (?:Thresholds|Suppressed):")

#: PortCounters field widths (InfiniBand Architecture Specification vol. 1, PortCounters attribute): a counter at its
#: ceiling has stopped counting, so a delta of 0 between two snapshots of it proves nothing.
COUNTER_BITS = {"SymbolErrorCounter": 16, "LinkErrorRecoveryCounter": 8, "LinkDownedCounter": 8, "PortRcvErrors": 16,
                "PortRcvRemotePhysicalErrors": 16, "PortRcvSwitchRelayErrors": 16, "PortXmitDiscards": 16,
                "PortXmitConstraintErrors": 8, "PortRcvConstraintErrors": 8, "LocalLinkIntegrityErrors": 4,
                "ExcessiveBufferOverrunErrors": 4, "VL15Dropped": 16, "PortXmitWait": 32}


def saturated(name: str, value: int) -> bool:
    """The counter `name` stands at its ceiling (65535 for SymbolErrorCounter): it no longer grows, whatever happens."""
    bits = COUNTER_BITS.get(name)
    return bits is not None and value >= (1 << bits) - 1


def parse(text: str) -> Subnet:
    """Subnet.counters: {End(switch GUID, port): {counter: value}} for every switch port ibqueryerrors printed.

    It prints a port only when a counter is past its threshold (0 unless --threshold-file raised it), so a port or
    counter it does not print is at or below its threshold. Counters are kept as printed, saturated ones too
    (SymbolErrorCounter stops at 65535, PortXmitWait at 4294967295). The `port ALL` line sums a switch's ports and is
    not a port. CA ports (named by port GUID only) are the node-side collectors' business and are left out. The
    closing summary must be there and agree with the blocks printed: without it the output was cut."""
    sub = Subnet()
    switch: str | None = None
    blocks = ports = 0
    in_block = False
    summary: tuple[int, int] | None = None
    bad_ports: int | None = None
    for n, raw in enumerate(text.split("\n"), 1):
        line = raw.strip()
        if not line or DIAGNOSTIC.match(line):
            continue
        if m := _SWITCH.match(line):
            switch, in_block, blocks = guid(m[1]), True, blocks + 1
        elif _CA.match(line):
            switch, in_block, blocks = None, True, blocks + 1
        elif m := _PORT.match(line):
            if not in_block:
                raise ParseError(f"line {n}: a port line outside any 'Errors for' block: {line[:120]!r}")
            if m[2] == "ALL":
                continue
            ports += 1
            if switch is not None:
                sub.counters[End(switch, int(m[2]))] = {k: int(v) for k, v in _COUNTER.findall(m[3])}
        elif m := _SUMMARY.match(line):
            summary, in_block = (int(m[1]), int(m[2])), False
        elif m := _PORTS.match(line):
            bad_ports = int(m[2])
        elif _SETTINGS.match(line):
            continue
        else:
            raise ParseError(f"line {n}: not ibqueryerrors output: {line[:120]!r}")
    if summary is None:
        raise ParseError("no '## Summary' line: the ibqueryerrors output was cut or is not one")
    if summary[1] != blocks or (bad_ports is not None and bad_ports != ports):
        raise ParseError(f"the summary counts {summary[1]} bad nodes and {bad_ports} bad ports, the output lists "
                         f"{blocks} and {ports}: lines are missing")
    return sub
