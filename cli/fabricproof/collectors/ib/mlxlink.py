"""`mlxlink -m -c` per RDMA device: link state, FEC, cable/module, effective and raw BER (NVIDIA MFT, if installed)."""

from __future__ import annotations

import re
from typing import Any

from ..base import HOST_ROOT_ENV, Collector, ParseError
from ..fragments import array, boolean, integer, number, notes, obj, string
from ..textutil import first_line, na_to_none
from .values import int_any, text_lines

NOT_INSTALLED = "mlxlink: not installed (NVIDIA MFT)"
# A fixed script: mlxlink once per RDMA device under /sys/class/infiniband ($FABRICPROOF_HOST_ROOT), port 1, module
# info (-m) and counters with BER (-c). Where MFT is not installed it says so and the checks skip (nothing broke).
MLXLINK_SCRIPT = (
    "export LC_ALL=C; "
    f'command -v mlxlink >/dev/null 2>&1 || {{ echo "{NOT_INSTALLED}"; exit 0; }}; '
    f'cd "${{{HOST_ROOT_ENV}:-}}/sys/class/infiniband" || exit 1; '
    'for d in *; do [ -e "$d" ] || continue; echo "=== $d"; mlxlink -d "$d" -m -c 2>&1; done'
)

# A device's heading: the collector's loop prints "=== mlx5_0"; operators' loops print their own, e.g.
# "========== mt4123_pciconf0 ==========", "========== mlx5_3 FEC Counters ==========" or "---- mlx5_1 ----". The
# first word names it; mlxlink's own rules ("--------") name nothing.
_DEVICE = re.compile(r"^(?:={3,}|-{3,}|#{3,})\s*([^\s=#-]\S*)(?:\s+[^=#]*?)?\s*(?:[=#-]{3,})?$")
_KV = re.compile(r"^([^:]+?)\s*:\s*(.*)$")
_RULE = re.compile(r"^-{3,}$")
_BER = re.compile(r"^(\d+(?:\.\d+)?)[eE]([-+]?\d+)$")
_SECTIONS = {"Operational Info", "Supported Info", "Troubleshooting Info", "Tool Information", "Module Info",
             "Physical Counters and BER Info", "Port Info", "Test Mode Info"}
_MODULE = {"Identifier": "identifier", "Compliance": "compliance", "Cable Type": "cable_type",
           "Vendor Name": "vendor_name", "Vendor Part Number": "vendor_part_number",
           "Vendor Serial Number": "vendor_serial_number", "Transfer Distance [m]": "length_m",
           "FW Version": "fw_version", "Module State": "module_state"}


def _ber(value: str | None) -> float | None:
    """'15E-255' (the floor mlxlink prints for no error), '1E-13' -> float; anything else -> None."""
    v = na_to_none(value)
    m = _BER.match(v) if v else None
    return float(f"{m.group(1)}e{m.group(2)}") if m else None


def _device(name: str | None, lines: list[str]) -> dict[str, Any]:
    sections: dict[str, dict[str, str]] = {}
    section = ""
    errors: list[str] = []
    for i, line in enumerate(lines):
        if line in _SECTIONS or (i + 1 < len(lines) and _RULE.match(lines[i + 1]) and ":" not in line):
            if line in sections and sections[line]:
                raise _merged(name, f"section {line!r} twice")
            section = line
            sections.setdefault(section, {})
        elif line.startswith("-E-"):
            errors.append(line)
        elif not _RULE.match(line) and (m := _KV.match(line)):
            key = m.group(1).strip()
            if key in sections.get(section, {}):
                raise _merged(name, f"{key!r} twice")
            sections.setdefault(section, {})[key] = m.group(2).strip()
    op = sections.get("Operational Info", {})
    counters = sections.get("Physical Counters and BER Info", {})
    module = sections.get("Module Info")
    get = lambda d, k: na_to_none(d.get(k))  # noqa: E731
    return {
        "device": name,
        "state": get(op, "State"),
        "physical_state": get(op, "Physical state"),
        "speed": get(op, "Speed"),
        "width": get(op, "Width"),
        "fec": get(op, "FEC"),
        "recommendation": get(sections.get("Troubleshooting Info", {}), "Recommendation"),
        "firmware": get(sections.get("Tool Information", {}), "Firmware Version"),
        "effective_errors": int_any(counters.get("Effective Physical Errors")),
        "effective_ber": _ber(counters.get("Effective Physical BER")),
        "raw_ber": _ber(counters.get("Raw Physical BER")),
        "link_down_counter": int_any(counters.get("Link Down Counter")),
        "link_error_recovery_counter": int_any(counters.get("Link Error Recovery Counter")),
        "module": {key: get(module, title) for title, key in _MODULE.items()} if module is not None else None,
        "errors": errors,
    }


def _merged(name: str | None, what: str) -> ParseError:
    """Several devices' outputs under one heading (or none) would read as one device, the worst BER hidden among
    them: refused, never merged."""
    where = f"under the heading {name!r}" if name else "without a device heading"
    return ParseError(f"mlxlink output of several devices {where} ({what}): one record per device needs a "
                      "'=== <device>' heading before each")


def parse_mlxlink(text: str) -> dict[str, Any]:
    """`=== <dev>` chunks of the collector's loop (or an operator's `==== <dev> ... ====` headings): one record per
    device; one pasted mlxlink output without a heading is one device with no name."""
    lines = [line.strip() for line in text_lines(text) if line.strip()]
    if not lines:
        raise ParseError("empty output")
    if lines == [NOT_INSTALLED]:
        return {"available": False, "devices": [], "notes": ["mlxlink is not installed: link BER and cable not read"]}
    chunks: list[tuple[str | None, list[str]]] = []
    for line in lines:
        if m := _DEVICE.match(line):
            chunks.append((m.group(1), []))
        elif chunks:
            chunks[-1][1].append(line)
        else:
            chunks.append((None, [line]))
    noted: list[str] = []
    if len(chunks) > 1 and chunks[0][0] is None:
        # lines before the first heading (a shell prompt, the loop itself) belong to no device
        lead = _device(None, chunks.pop(0)[1])
        if _read_anything(lead):
            raise _merged(None, "a device's output before the first heading")
        noted.append("lines before the first device heading ignored")
    devices = [_device(name, body) for name, body in chunks]
    if not any(_read_anything(d) for d in devices):
        raise ParseError(f"not mlxlink output: {first_line(text)!r}")
    noted += [f"{d['device'] or 'device'}: {e}" for d in devices for e in d["errors"]]
    return {"available": True, "devices": devices, "notes": noted}


def _read_anything(device: dict[str, Any]) -> bool:
    return bool(device["state"] or device["errors"] or device["effective_ber"] is not None
                or device["raw_ber"] is not None)


_MODULE_SCHEMA = obj(
    "Cable or transceiver (Module Info, -m); null when not shown.",
    {key: string(f"{title} as printed.", True) for title, key in _MODULE.items()},
    nullable=True,
)

MLXLINK_SCHEMA = obj(
    "Per-device link, FEC, BER and module information (mlxlink -m -c, port 1).",
    {
        "available": boolean("mlxlink (NVIDIA MFT) is installed; false: nothing was read, the checks skip."),
        "devices": array("One record per RDMA device.", obj("One device's port 1.", {
            "device": string("RDMA device name (mlx5_0); null for a pasted output without the loop's header.", True),
            "state": string("Operational Info State (Active, ...).", True),
            "physical_state": string("Physical state (LinkUp, Polling, Disabled...).", True),
            "speed": string("Speed as printed (IB-NDR, IB-HDR, 100G...).", True),
            "width": string("Width as printed (4x; 2x on an HDR port is a degraded link).", True),
            "fec": string("FEC mode as printed, e.g. 'Standard RS-FEC - RS(528,514)'.", True),
            "recommendation": string("mlxlink's troubleshooting verdict ('No issue was observed' when healthy).", True),
            "firmware": string("Adapter firmware version (Tool Information).", True),
            "effective_errors": integer("Effective Physical Errors: errors left after FEC.", True),
            "effective_ber": number("Effective Physical BER (15E-255 is the floor: no error).", True),
            "raw_ber": number("Raw Physical BER, before FEC.", True),
            "link_down_counter": integer("Link Down Counter.", True),
            "link_error_recovery_counter": integer("Link Error Recovery Counter.", True),
            "module": _MODULE_SCHEMA,
            "errors": array("'-E-' lines mlxlink printed for this device.", string("One error line.")),
        })),
        "notes": notes(),
    },
)

MLXLINK = Collector(
    id="mlxlink",
    argv=("sh", "-c", MLXLINK_SCRIPT),
    parse=parse_mlxlink,
    provides="/ib/mlxlink",
    schema=MLXLINK_SCHEMA,
    family="ib",
    description="Per-port effective/raw BER, FEC mode and cable/module info from mlxlink (where MFT is installed).",
    timeout_s=120.0,
    corpus=("mlxlink", "ib-diag"),
)

COLLECTORS = (MLXLINK,)
