"""`journalctl -k` (or dmesg): Xid, NVSwitch SXid and InfiniBand 'lost carrier' events since boot."""

from __future__ import annotations

import re
from typing import Any

from ..base import Collector, ParseError
from ..fragments import array, boolean, integer, mapping, obj, string
from ..textutil import strip_ansi

# A kernel log line starts with one of: dmesg "[  38.17]", journal "Jan 05 14:44:41 host",
# ISO time, `dmesg --decode` "kern  :err   :", a raw "<3>" printk level, or a journal marker.
_LOG_PREFIX = re.compile(
    r"^(?:\[\s*\d+\.\d+\]"
    r"|[A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2}\s"
    r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"
    r"|[a-z]+\s*:[a-z]+\s*:"
    r"|<\d+>"
    r"|-- .* --$)"
)
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)")
_SXID = re.compile(r"(nvidia-nvswitch\d*): SXid(?: \((?:PCI:)?([0-9A-Fa-f:.]+)\))?: (\d+),\s*(.*)$")
_SEVERITY = re.compile(r"^(Fatal|Non-fatal)\b", re.IGNORECASE)
_LOST_CARRIER = re.compile(r"\b(ib[\w.-]*):.*\blost carrier\b", re.IGNORECASE)


def parse_kernel_log(text: str) -> dict[str, Any]:
    """Xids, NVSwitch SXids and InfiniBand 'lost carrier' events from `journalctl -k` or dmesg.

    The nvswitch driver reports one SXid event over several lines: an optional "Data {...}"
    line, the "Fatal, ..." / "Non-fatal, ..." line and a "Severity ..." line. An event is the
    line that states its severity; when a (device, code) shows no such line at all (a grep or
    a truncated log), each of its non-Severity lines counts once as non-fatal, because the
    driver always prints "Fatal" for fatal SXids.
    """
    lines = strip_ansi(text).replace("\r", "").split("\n")
    content = [line for line in lines if line.strip()]
    if not content:
        raise ParseError("empty output")
    if not any(_LOG_PREFIX.match(line.strip()) for line in content):
        raise ParseError("no kernel log lines found")

    xids: list[dict[str, Any]] = []
    raw_sxids: list[tuple[str, str | None, int, str, str]] = []
    carrier: dict[str, int] = {}
    for line in content:
        if m := _XID.search(line):
            xids.append({"bdf": m.group(1), "code": int(m.group(2)), "line": line.strip()})
        if m := _SXID.search(line):
            raw_sxids.append((m.group(1), m.group(2), int(m.group(3)), m.group(4).strip(), line.strip()))
        if m := _LOST_CARRIER.search(line):
            carrier[m.group(1)] = carrier.get(m.group(1), 0) + 1
    sxids = _sxid_events(raw_sxids)
    return {
        "lines": len(content),
        "xids": xids,
        "xid_codes": sorted({x["code"] for x in xids}),
        "sxids": sxids,
        "sxid_codes": sorted({s["code"] for s in sxids}),
        "sxid_fatal_count": sum(1 for s in sxids if s["fatal"]),
        "sxid_nonfatal_count": sum(1 for s in sxids if not s["fatal"]),
        "ib_lost_carrier": sum(carrier.values()),
        "ib_lost_carrier_by_netdev": carrier,
    }


def _sxid_events(raw: list[tuple[str, str | None, int, str, str]]) -> list[dict[str, Any]]:
    classified = {(dev, code) for dev, _, code, detail, _ in raw if _SEVERITY.match(detail)}
    events = []
    for dev, bdf, code, detail, line in raw:
        sev = _SEVERITY.match(detail)
        if sev:
            severity = "Fatal" if sev.group(1).lower() == "fatal" else "Non-fatal"
        elif (dev, code) in classified or detail.startswith("Severity"):
            continue  # the Data/Severity companion lines of an event counted by its severity line
        else:
            severity = None
        link = re.search(r"\bLink (\d+)", detail)
        events.append(
            {
                "device": dev,
                "bdf": bdf,
                "code": code,
                "fatal": severity == "Fatal",
                "severity": severity,
                "link": int(link.group(1)) if link else None,
                "line": line,
            }
        )
    return events


KERNEL_LOG_SCHEMA = obj(
    "GPU, NVSwitch and InfiniBand events in the kernel log since boot.",
    {
        "lines": integer("Non-empty log lines read."),
        "xids": array(
            "NVRM Xid reports.",
            obj(
                "One Xid.",
                {
                    "bdf": string("GPU PCI address as printed (e.g. 0000:34:00)."),
                    "code": integer("Xid code."),
                    "line": string("The log line."),
                },
            ),
        ),
        "xid_codes": array("Distinct Xid codes, sorted.", integer("Error code.")),
        "sxids": array(
            "NVSwitch SXid events.",
            obj(
                "One SXid event.",
                {
                    "device": string("Kernel device name, e.g. nvidia-nvswitch3."),
                    "bdf": string("NVSwitch PCI address.", True),
                    "code": integer("SXid code."),
                    "fatal": boolean("Reported as Fatal."),
                    "severity": string(
                        "'Fatal' or 'Non-fatal' as printed; null when the log shows no severity line.", True
                    ),
                    "link": integer("NVLink port named by the event.", True),
                    "line": string("The log line."),
                },
            ),
        ),
        "sxid_codes": array("Distinct SXid codes, sorted.", integer("Error code.")),
        "sxid_fatal_count": integer("Fatal SXid events."),
        "sxid_nonfatal_count": integer("Non-fatal SXid events."),
        "ib_lost_carrier": integer("'lost carrier' messages of ib* interfaces (link flaps)."),
        "ib_lost_carrier_by_netdev": mapping("lost carrier count per interface.", integer("Count.")),
    },
)

KERNEL_LOG = Collector(
    id="kernel_log",
    argv=("journalctl", "-k", "-b", "--no-pager"),
    parse=parse_kernel_log,
    provides="/kernel/log",
    schema=KERNEL_LOG_SCHEMA,
    family="kernel",
    description="Xid, SXid and IB link-flap events in the kernel log since boot.",
    corpus=("nvswitch",),
)

COLLECTORS = (KERNEL_LOG,)
