"""Kernel collectors: Xid/SXid and IB carrier events from the kernel log, loaded modules, and the boot command line."""

from __future__ import annotations

import re
import shlex
from typing import Any

from .base import Collector, ParseError, read_host_file
from .fragments import array, boolean, choice, integer, mapping, obj, string
from .textutil import strip_ansi

# ---------------------------------------------------------------- kernel log

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


# ---------------------------------------------------------------- lsmod

_LSMOD_HEADER = re.compile(r"^\s*Module\s+Size\s+Used by\s*$")
_LSMOD_ROW = re.compile(r"^\s*([A-Za-z0-9_]+)\s+(\d+)\s+(-|\d+)(?:\s+(\S+))?")


def parse_lsmod(text: str) -> dict[str, Any]:
    """`lsmod` (or a grep of it): module rows 'name size refcount [users,]'."""
    modules = []
    header = False
    for line in strip_ansi(text).replace("\r", "").split("\n"):
        if not line.strip():
            continue
        if _LSMOD_HEADER.match(line):
            header = True
            continue
        if m := _LSMOD_ROW.match(line):
            users = [u for u in (m.group(4) or "").split(",") if u and u not in ("[permanent]", "-")]
            modules.append(
                {
                    "name": m.group(1),
                    "size": int(m.group(2)),
                    "refcount": int(m.group(3)) if m.group(3).isdigit() else None,
                    "used_by": users,
                }
            )
    if not modules and not header:
        raise ParseError("no lsmod module rows found")
    names = [mod["name"] for mod in modules]
    return {
        "loaded": names,
        "modules": modules,
        "nvidia_peermem": "nvidia_peermem" in names,
        "nv_peer_mem": "nv_peer_mem" in names,
    }


# ---------------------------------------------------------------- /proc/cmdline

# What makes shlex.split (posix, whitespace_split) differ from str.split(): quotes, backslash escapes, and
# whitespace other than space/TAB (shlex splits only at those; str.split also at \v, \f, \xa0...). A cmdline
# without any is split by str.split(), ~50x cheaper than the shlex tokenizer.
_SHLEX_SPECIAL = re.compile(r"['\"\\]|[^\S \t]")


def parse_cmdline(text: str) -> dict[str, Any]:
    """/proc/cmdline: parameters and the IOMMU mode they select.

    iommu: "pt" with iommu=pt (or arm64 iommu.passthrough=1); "off" with intel_iommu=off,
    amd_iommu=off or iommu=off; "on" with intel_iommu=on/amd_iommu=on without passthrough;
    "default" otherwise (the kernel's build-time default applies).
    """
    lines = [line.strip() for line in strip_ansi(text).replace("\r", "").split("\n") if line.strip()]
    if not lines:
        raise ParseError("empty output")
    if len(lines) > 1:
        raise ParseError("more than one line: not /proc/cmdline")
    raw = lines[0]
    if not _SHLEX_SPECIAL.search(raw):
        tokens = raw.split()
    else:
        try:
            tokens = shlex.split(raw)  # the kernel honours double quotes around values with spaces
        except ValueError:
            tokens = raw.split()
    params: dict[str, str] = {}
    for tok in tokens:
        key, _, value = tok.partition("=")
        params[key] = value  # the kernel applies the last occurrence
    return {"raw": raw, "iommu": _iommu_mode(params), "params": params}


def _iommu_mode(params: dict[str, str]) -> str:
    iommu, intel, amd = params.get("iommu"), params.get("intel_iommu", ""), params.get("amd_iommu", "")
    if iommu == "pt" or params.get("iommu.passthrough") in ("1", "y", "Y", "on"):
        return "pt"
    if "off" in (iommu, *intel.split(","), *amd.split(",")):
        return "off"
    if "on" in intel.split(",") or "on" in amd.split(","):
        return "on"
    return "default"


# ---------------------------------------------------------------- schemas

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

LSMOD_SCHEMA = obj(
    "Loaded kernel modules.",
    {
        "loaded": array("Module names in listing order.", string("Module name.")),
        "modules": array(
            "Module rows.",
            obj(
                "One module.",
                {
                    "name": string("Module name."),
                    "size": integer("Size in bytes."),
                    "refcount": integer("Use count ('-' when not applicable).", True),
                    "used_by": array("Modules using this one.", string("Module name.")),
                },
            ),
        ),
        "nvidia_peermem": boolean("nvidia_peermem (GPUDirect RDMA) is loaded."),
        "nv_peer_mem": boolean("Legacy nv_peer_mem (deprecated) is loaded."),
    },
)

CMDLINE_SCHEMA = obj(
    "Kernel boot command line.",
    {
        "raw": string("/proc/cmdline as read."),
        "iommu": choice("IOMMU mode selected by the parameters.", ["off", "pt", "on", "default"]),
        "params": mapping(
            "Parameter -> value (empty string for flags without '='); the last occurrence wins.", string("Value.")
        ),
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
    timeout_s=60.0,
    corpus=("nvswitch",),
)

LSMOD = Collector(
    id="lsmod",
    argv=("lsmod",),
    parse=parse_lsmod,
    provides="/kernel/modules",
    schema=LSMOD_SCHEMA,
    family="kernel",
    description="Loaded kernel modules (nvidia_peermem for GPUDirect RDMA).",
    corpus=("lsmod",),
)

CMDLINE = Collector(
    id="cmdline",
    argv=read_host_file("/proc/cmdline"),
    parse=parse_cmdline,
    provides="/kernel/cmdline",
    schema=CMDLINE_SCHEMA,
    family="kernel",
    description="Kernel command line and IOMMU mode.",
)

COLLECTORS = (KERNEL_LOG, LSMOD, CMDLINE)
