"""`flint` / `mstflint -d <dev> q`: firmware image details (FS layout, PSID, ROMs, GUIDs) of the first adapter."""

from __future__ import annotations

import re
from typing import Any

from ..base import Collector, ParseError
from ..fragments import array, integer, mapping, obj, string
from ..textutil import na_to_none, split_kv, strip_ansi

_FLINT_FIELDS = {
    "Image type": "image_type",
    "FW Version": "fw_version",
    "FW Release Date": "fw_release_date",
    "Product Version": "product_version",
    "Part Number": "part_number",
    "PSID": "psid",
    "Device ID": "device_id",
    "Security Attributes": "security_attributes",
    "Default Update Method": "default_update_method",
    "Image VSD": "image_vsd",
    "Device VSD": "device_vsd",
    "VSD": "vsd",
    "MIC Version": "mic_version",
    "PRS Name": "prs_name",
}
# FS3/FS4 list "<Base|Orig Base> GUID|MAC: <value> <count>" rows; FS2 lists one "GUIDs:" and one "MACs:" row laid out
# under the column header printed in the "Description:" line (Node, Port1, Port2, Sys image).
_FS3_ID_ROW = re.compile(r"^(?P<which>(?:Orig )?Base) (?P<kind>GUID|MAC)$")

FLINT_SCHEMA = obj(
    "Firmware image query of one adapter (flint / mstflint -d <dev> q).",
    {
        "image_type": string("Image layout: FS2 (ConnectX-3), FS3 (ConnectX-4/5), FS4 (ConnectX-6 and later).", True),
        "fw_version": string("FW version in flash.", True),
        "fw_release_date": string("FW release date as printed (d.m.yyyy).", True),
        "product_version": string("Product version.", True),
        "part_number": string("Part number ('q full' only).", True),
        "description": string("Board description ('q full' only).", True),
        "psid": string("PSID.", True),
        "device_id": string("PCI device id (FS2 layout only).", True),
        "security_attributes": string("Security attributes, e.g. secure-fw; null when N/A.", True),
        "default_update_method": string("Default update method, e.g. fw_ctrl.", True),
        "image_vsd": string("Image VSD; null when N/A.", True),
        "device_vsd": string("Device VSD; null when N/A.", True),
        "vsd": string("VSD (FS2 layout); null when empty.", True),
        "mic_version": string("MIC version (FS2 'q full').", True),
        "config_sectors": integer("Config sectors (FS2 'q full').", True),
        "prs_name": string("PRS name (FS2 'q full').", True),
        "rom_info": array(
            "Expansion ROMs (one per Rom Info line).",
            obj(
                "One expansion ROM.",
                {
                    "type": string("ROM type: UEFI, PXE, CLP...", True),
                    "version": string("ROM version (version_id for CLP).", True),
                    "cpu": string("CPU architectures as printed, e.g. AMD64,AARCH64.", True),
                },
            ),
        ),
        "base_guid": string("Base GUID (FS3/FS4); the node GUID on FS2.", True),
        "base_mac": string("Base MAC (FS3/FS4); the port 1 MAC on FS2.", True),
        "guids": mapping(
            "Every GUID shown, by role: base, orig_base (FS3/FS4); node, port1, port2, sys_image (FS2).",
            string("GUID; null when N/A.", True),
        ),
        "macs": mapping(
            "Every MAC shown, by role: base, orig_base (FS3/FS4); port1, port2 (FS2).",
            string("MAC; null when N/A.", True),
        ),
        "id_counts": mapping(
            "How many GUIDs/MACs each FS3/FS4 base reserves, e.g. {'base_guid': 16}.", integer("Count.")
        ),
        "fields": mapping("Every 'Key: value' line as printed (first occurrence).", string("Raw value.")),
    },
)


def _column_spans(header: str, offset: int) -> list[tuple[str, int]]:
    """('node', start column) for each header cell; cells are separated by 2+ spaces ('Sys image' is one cell)."""
    return [
        (m.group(0).lower().replace(" ", "_"), offset + m.start())
        for m in re.finditer(r"\S+(?: \S+)*", header)
    ]


def _assign_columns(raw_line: str, value_start: int, columns: list[tuple[str, int]]) -> dict[str, str | None]:
    """Map each value token to the header column its first character falls under (FS2 MACs skip the Node column)."""
    out: dict[str, str | None] = {}
    for m in re.finditer(r"\S+", raw_line[value_start:]):
        start = value_start + m.start()
        name = None
        for col, col_start in columns:
            if start >= col_start:
                name = col
        if name is not None:
            out[name] = na_to_none(m.group(0))
    return out


def _rom(value: str) -> dict[str, str | None]:
    kv = dict(tok.split("=", 1) for tok in value.split() if "=" in tok)
    return {"type": kv.get("type"), "version": kv.get("version") or kv.get("version_id"), "cpu": kv.get("cpu")}


def parse_flint(text: str) -> dict[str, Any]:
    """flint / mstflint 'q' and 'q full' in the FS2, FS3 and FS4 layouts."""
    lines = strip_ansi(text).splitlines()
    out: dict[str, Any] = {v: None for v in _FLINT_FIELDS.values()}
    out.update(description=None, config_sectors=None, rom_info=[], guids={}, macs={}, id_counts={}, fields={})
    columns: list[tuple[str, int]] = []
    last_key: str | None = None
    tool_errors: list[str] = []
    for raw in lines:
        if not raw.strip():
            continue
        if raw[0].isspace() and last_key == "Rom Info":
            out["rom_info"].append(_rom(raw))  # continuation line of the Rom Info cell
            continue
        if raw.strip().startswith("-E-"):
            tool_errors.append(raw.strip())
            continue
        kv = split_kv(raw)
        if kv is None:
            continue
        key, value = kv
        last_key = key
        value_start = raw.index(":") + 1
        if key == "Description" and value.split()[:1] in (["UID"], ["Node"]):
            columns = _column_spans(raw[value_start:], value_start)  # GUID table header, not the board text
            continue
        out["fields"].setdefault(key, value)
        if key in _FLINT_FIELDS:
            out[_FLINT_FIELDS[key]] = na_to_none(value)
        elif key == "Description":
            out["description"] = na_to_none(value)
        elif key == "Config Sectors":
            out["config_sectors"] = int(value) if value.isdigit() else None
        elif key == "Rom Info":
            out["rom_info"].append(_rom(value))
        elif m := _FS3_ID_ROW.match(key):
            role = m.group("which").lower().replace(" ", "_")
            tokens = value.split()
            target = out["guids"] if m.group("kind") == "GUID" else out["macs"]
            target[role] = na_to_none(tokens[0]) if tokens else None
            if len(tokens) > 1 and tokens[1].isdigit():
                out["id_counts"][f"{role}_{m.group('kind').lower()}"] = int(tokens[1])
        elif key in ("GUIDs", "MACs") and columns:
            target = out["guids"] if key == "GUIDs" else out["macs"]
            target.update(_assign_columns(raw, value_start, columns))
    if out["fw_version"] is None and out["image_type"] is None:
        if tool_errors:
            raise ParseError(f"flint failed: {tool_errors[0]}")
        raise ParseError("no 'FW Version:' or 'Image type:' line: not flint query output")
    out["base_guid"] = out["guids"].get("base", out["guids"].get("node"))
    out["base_mac"] = out["macs"].get("base", out["macs"].get("port1"))
    return out


# flint needs a device; the argv must stay fixed, so the script picks the first ConnectX/BlueField physical function
# lspci lists (VFs cannot be queried) and prefers MFT's flint, falling back to the inbox mstflint. Firmware for
# every adapter comes from mlxfwmanager; this collector is the per-image detail (FS layout, ROMs, security).
FLINT_SCRIPT = (
    "dev=$(lspci -D -d 15b3: 2>/dev/null | "
    "awk '/(Infiniband|Ethernet|Network) controller/ && !/Virtual Function/ {print $1; exit}'); "
    '[ -n "$dev" ] || { echo "-E- no Mellanox/NVIDIA adapter physical function found by lspci" >&2; exit 1; }; '
    'if command -v flint >/dev/null 2>&1; then exec flint -d "$dev" q; else exec mstflint -d "$dev" q; fi'
)


COLLECTORS = (
    Collector(
        id="flint",
        argv=("sh", "-c", FLINT_SCRIPT),
        parse=parse_flint,
        provides="/ib/flint",
        schema=FLINT_SCHEMA,
        family="ib",
        description="Firmware image details (FS layout, PSID, ROMs, GUIDs) of the first adapter (flint/mstflint q).",
        default=False,
        timeout_s=60.0,
        corpus=("flint",),
        # flint and mlxfwmanager both take the adapter's flash semaphore: never at once on one host.
        tool="mlxfwmanager",
    ),
)
