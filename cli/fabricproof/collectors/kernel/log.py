"""`journalctl -k` (or dmesg): Xid (NVLink5, recovery actions), SXid, fallen-off-the-bus and IB lost-carrier events."""

from __future__ import annotations

import json
import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..fragments import array, boolean, integer, mapping, notes, obj, string
from ..textutil import strip_ansi

# A kernel log line starts with one of: dmesg "[  38.17]", `dmesg -T` "[Sun Feb 23 16:24:18 2025]", a journal or
# syslog "Jan 05 14:44:41 host" (short-precise "Jan 05 14:44:41.123456 host"; the month as the locale spells it,
# "kwi 15 07:56:59" in Polish), ISO time (short-iso, dmesg --time-format iso), short-full "Mon 2025-03-03 08:00:01
# UTC host", short-unix "1741000801.123456 host", `dmesg --decode`/`-x` "kern  :err   :", a raw "<3>" printk level,
# a journal marker, the bare "kernel: " a grep or a paste leaves when it cuts time and host, `talosctl dmesg`
# "10.5.0.2: kern:    info: [ISO]:" (node address, facility, level), or a /dev/kmsg record "6,1234,5678,-;".
_LOG_PREFIX = re.compile(
    r"^(?:\[\s*\d+\.\d+\]"
    r"|\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d{1,2} \d{2}:\d{2}:\d{2} \d{4}\]"
    r"|[^\W\d_]{2,9}\.? +\d{1,2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s"
    r"|\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}"
    r"|[^\W\d_]{2,9}\.? \d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}"
    r"|\d{9,}\.\d+ "
    r"|[a-z]+\s*:[a-z]+\s*:"
    r"|<\d+>"
    r"|-- .* --$"
    r"|kernel: "
    r"|(?:\S+: )?kern:\s*[a-z]+: \["
    r"|\d+,\d+,\d+,[^;]*;)"
)
# `journalctl -o json` (one record a line), json-pretty or json-seq: the fields a journal record always has
_JOURNAL_FIELDS = ("__REALTIME_TIMESTAMP", "__CURSOR", "_TRANSPORT", "__MONOTONIC_TIMESTAMP")
# A driver message pasted without its timestamp (a ticket, an issue): read, with a note.
_BARE = re.compile(r"^(?:NVRM: |nvidia-nvswitch\d*: )")
_XID = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f:.]+)\): (\d+)(?:,\s*(.*))?$")
# NVRM's message name of the Xids the checks single out (Xid catalog mnemonics).
XID_NAMES = {
    48: "DBE (double-bit ECC error)", 63: "ECC page retirement or row remapping", 64: "ECC page retirement or row "
    "remapping failure", 74: "NVLINK_ERROR", 79: "GPU has fallen off the bus", 94: "Contained ECC error",
    95: "Uncontained ECC error", 119: "GSP RPC timeout", 120: "GSP error", 144: "NVLINK_SAW_ERROR",
    145: "NVLINK_RLW_ERROR", 146: "NVLINK_TLW_ERROR", 147: "NVLINK_TREX_ERROR", 148: "NVLINK_NVLPW_CTRL_ERROR",
    149: "NVLINK_NETIR_ERROR", 150: "NVLINK_MSE_ERROR", 154: "GPU_RECOVERY_ACTION_CHANGED",
}
_FATAL = re.compile(r"\b(non-?fatal|fatal)\b", re.IGNORECASE)
_LINK = re.compile(r"\bLink (-?\d+)\b")
# Xid 154: "GPU recovery action changed from 0x0 (None) to 0x4 (Drain and Reset)"
_RECOVERY = re.compile(r"recovery action changed from\s+0x[0-9a-fA-F]+\s*\(([^)]*)\)\s*to\s+0x([0-9a-fA-F]+)\s*\(([^)]*)\)",
                       re.IGNORECASE)
_FALLEN = "fallen off the bus"
# "NVRM: The NVIDIA GPU 0000:b3:00.0" starts the driver's multi-line fallen-off-the-bus message (no Xid line)
_GPU_NAMED = re.compile(r"NVRM: The NVIDIA GPU ([0-9A-Fa-f:.]+)")
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
    text = strip_ansi(text).replace("\r", "")
    records = _journal_json(text)
    lines = records if records is not None else text.split("\n")
    content = [line for line in lines if line.strip()]
    if not content:
        raise ParseError("empty output")
    noted: list[str] = []
    if records is None and not any(_LOG_PREFIX.match(line.strip()) for line in content):
        if not any(_BARE.match(line.strip()) for line in content):
            raise ParseError("no kernel log lines found")
        noted.append("driver messages without timestamps (pasted lines): read as one boot's log")

    xids: list[dict[str, Any]] = []
    raw_sxids: list[tuple[str, str | None, int, str, str]] = []
    carrier: dict[str, int] = {}
    fallen: list[str] = []
    named: str | None = None  # the GPU the last "NVRM: The NVIDIA GPU <bdf>" line named
    for line in content:
        if m := _GPU_NAMED.search(line):
            named = m.group(1)
        if _FALLEN in line:
            xid = _XID.search(line)
            bdf = xid.group(1) if xid else named
            if bdf and bdf not in fallen:
                fallen.append(bdf)
        if m := _XID.search(line):
            xids.append(_xid(m, line.strip()))
        if m := _SXID.search(line):
            raw_sxids.append((m.group(1), m.group(2), int(m.group(3)), m.group(4).strip(), line.strip()))
        if m := _LOST_CARRIER.search(line):
            carrier[m.group(1)] = carrier.get(m.group(1), 0) + 1
    sxids = _sxid_events(raw_sxids)
    latest: dict[str, dict[str, Any]] = {}
    for x in xids:
        if x["recovery_action"] is not None:
            latest[x["bdf"]] = {"bdf": x["bdf"], "action": x["recovery_action"], "line": x["line"]}
    return {
        "lines": len(content),
        "xids": xids,
        "xid_codes": sorted({x["code"] for x in xids}),
        "recovery_actions": list(latest.values()),
        "fallen_off_bus": fallen,
        "notes": noted,
        "sxids": sxids,
        "sxid_codes": sorted({s["code"] for s in sxids}),
        "sxid_fatal_count": sum(1 for s in sxids if s["fatal"]),
        "sxid_nonfatal_count": sum(1 for s in sxids if not s["fatal"]),
        "ib_lost_carrier": sum(carrier.values()),
        "ib_lost_carrier_by_netdev": carrier,
    }


def _journal_json(text: str) -> list[str] | None:
    """The MESSAGE of each record of `journalctl -o json` (or json-pretty, json-seq), as "IDENTIFIER: message" lines;
    None when the text is not journal records. A MESSAGE journald could not store as text is a list of bytes."""
    body = text.lstrip("\x1e \t\n")
    if not body.startswith("{"):
        return None
    decoder, pos, lines = json.JSONDecoder(), 0, []
    while pos < len(body):
        try:
            record, end = decoder.raw_decode(body, pos)
        except ValueError:
            return None
        if not isinstance(record, dict) or not any(k in record for k in _JOURNAL_FIELDS):
            return None
        message = record.get("MESSAGE")
        if isinstance(message, list) and all(isinstance(b, int) and 0 <= b < 256 for b in message):
            message = bytes(message).decode("utf-8", errors="replace")
        if isinstance(message, str):
            # every line of a multi-line message is its own log line (the fallen-off-the-bus message spans three)
            lines += [f"{record.get('SYSLOG_IDENTIFIER') or '-'}: {part}" for part in message.split("\n")]
        pos = end
        while pos < len(body) and body[pos] in "\x1e \t\n":
            pos += 1
    return lines


def _xid(m: re.Match[str], line: str) -> dict[str, Any]:
    """One Xid line: code, its catalog name, the Fatal/Non-fatal word and the link NVLink Xids name, and for
    Xid 154 the recovery action the driver now asks for."""
    code, message = int(m.group(2)), m.group(3) or ""
    fatal = _FATAL.search(message)
    link = _LINK.search(message)
    action = _RECOVERY.search(message) if code == 154 else None
    return {
        "bdf": m.group(1),
        "code": code,
        "name": XID_NAMES.get(code),
        "fatal": None if fatal is None else not fatal.group(1).lower().startswith("non"),
        "link": int(link.group(1)) if link else None,
        "recovery_action": action.group(3).strip() if action else None,
        "line": line,
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
                    "name": string("Catalog name of the Xids the checks single out (NVLINK_NETIR_ERROR...).", True),
                    "fatal": boolean("The message says Fatal (true) or Non-fatal (false); null when it says neither.",
                                     True),
                    "link": integer("NVLink the message names ('Link -1': the whole GPU).", True),
                    "recovery_action": string("Xid 154: the GPU Recovery Action the driver now asks for.", True),
                    "line": string("The log line."),
                },
                optional=("name", "fatal", "link", "recovery_action"),
            ),
        ),
        "xid_codes": array("Distinct Xid codes, sorted.", integer("Error code.")),
        "recovery_actions": array(
            "The latest GPU Recovery Action each GPU announced by Xid 154 since boot.",
            obj("One GPU's latest Xid 154.", {
                "bdf": string("GPU PCI address as printed."),
                "action": string("Recovery action named in the message: None, GPU Reset, Node Reboot, Drain P2P, "
                                 "Drain and Reset..."),
                "line": string("The log line."),
            }),
        ),
        "fallen_off_bus": array("GPUs the driver reported 'fallen off the bus' (Xid 79, or its multi-line message "
                                "without an Xid line).", string("GPU PCI address as printed.")),
        "notes": notes(),
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
    optional=("recovery_actions", "fallen_off_bus", "notes"),
)

KERNEL_LOG = Collector(
    id="kernel_log",
    argv=tools.argv("kernel_log"),
    parse=parse_kernel_log,
    provides="/kernel/log",
    schema=KERNEL_LOG_SCHEMA,
    family="kernel",
    description="Xid (NVLink5 and recovery actions too), SXid, fallen-off-the-bus and IB link-flap events since boot.",
    corpus=("nvswitch", "kernel-log"),
)

COLLECTORS = (KERNEL_LOG,)
