"""`mlxfwmanager --query` (or mlxup / mlnx-fw-updater query blocks): firmware of every ConnectX/BlueField adapter."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError, Requires, guarded
from ..fragments import array, boolean, integer, obj, string
from ..textutil import na_to_none, split_kv, strip_ansi

_DEVICE_HEADER = re.compile(r"^Device #(?P<n>\d+):$")
# The update transcript that mlxup / mlnx-fw-updater print after the query starts with one of these lines;
# "Device #1: Updating FW ..." must not be taken for a new query block.
_TRANSCRIPT_START = re.compile(r"^(Found \d+ device\(s\)|Perform FW update\?|Device #\d+: Updating)")
# What a line must start with for _TRANSCRIPT_START to match (a C-level test before the regex).
_TRANSCRIPT_PREFIXES = ("Found ", "Perform FW update?", "Device #")
_UPDATING = re.compile(r"^Device #\d+: Updating")
_VERSION_ROW = re.compile(r"^(?P<name>\S+(?: \([^)]*\))?)\s+(?P<current>\S+)(?:\s+(?P<available>\S+))?$")
_PORT_ID = re.compile(r"^Port(?P<port>\d+) (?P<kind>GUID|MAC)$")
_QUERY_FIELDS = {
    "Device Type": "device_type",
    "Part Number": "part_number",
    "Description": "description",
    "PSID": "psid",
    "PCI Device Name": "pci_device",
    "Base GUID": "base_guid",
    "Base MAC": "base_mac",
    "Status": "status",
}

_FW_DEVICE = obj(
    "One adapter from a 'Device #N:' query block.",
    {
        "index": integer("N of 'Device #N'."),
        "device_type": string("Device type, e.g. ConnectX7.", True),
        "part_number": string("Part number, e.g. MCX75310AAS-NEA_Ax.", True),
        "description": string("Board description.", True),
        "psid": string("PSID (board firmware identity), e.g. MT_0000000838.", True),
        "pci_device": string("PCI device name as printed: a BDF or an mst device path.", True),
        "base_guid": string("Base GUID; null on boards that list per-port GUIDs instead.", True),
        "base_mac": string("Base MAC.", True),
        "port_guids": array("PortN GUID rows (older boards), in port order.", string("GUID.")),
        "fw_current": string("FW version burned in flash (the 'FW' row, Current column).", True),
        "fw_running": string(
            "FW running now: the 'FW (Running)' row when printed (flash not yet activated), else fw_current.", True
        ),
        "fw_available": string("FW version in the tool's image bundle; null when N/A.", True),
        "fw_activation_pending": boolean("Running FW differs from the flash (a reset or reboot is needed)."),
        "status": string("Status as printed: 'Up to date', 'Update required', 'No matching image found'...", True),
        "versions": array(
            "Every row of the Versions table.",
            obj(
                "One Versions row.",
                {
                    "name": string("Component as printed: FW, FW (Running), PXE, UEFI, CLP..."),
                    "current": string("Current column.", True),
                    "available": string("Available column; null when N/A.", True),
                },
            ),
        ),
    },
)
FIRMWARE_SCHEMA = obj(
    "Adapter firmware inventory from mlxfwmanager --query (or mlxup / mlnx-fw-updater query blocks).",
    {
        "devices": array("Adapters in output order.", _FW_DEVICE),
        "count": integer("Number of adapters listed."),
        "errors": array("-E- lines the tool printed.", string("One line as printed (trimmed).")),
        "warnings": array("-W- lines the tool printed.", string("One line as printed (trimmed).")),
        "update_attempted": boolean("The output goes on to burn firmware ('Device #N: Updating FW', mlxup)."),
        "restart_needed": boolean("The transcript says 'Restart needed for updates to take effect'."),
    },
)


def _new_fw_device(index: int) -> dict[str, Any]:
    return {"index": index, **{v: None for v in _QUERY_FIELDS.values()}, "port_guids": [], "versions": []}


def _finish_fw_device(raw: dict[str, Any]) -> dict[str, Any]:
    rows = {row["name"]: row for row in raw["versions"]}
    flash = rows.get("FW", {})
    running_row = rows.get("FW (Running)")
    current = flash.get("current")
    running = running_row["current"] if running_row else current
    return {
        "index": raw["index"],
        "device_type": raw["device_type"],
        "part_number": raw["part_number"],
        "description": raw["description"],
        "psid": raw["psid"],
        "pci_device": raw["pci_device"],
        "base_guid": raw["base_guid"],
        "base_mac": raw["base_mac"],
        "port_guids": raw["port_guids"],
        "fw_current": current,
        "fw_running": running,
        "fw_available": flash.get("available"),
        "fw_activation_pending": running is not None and current is not None and running != current,
        "status": raw["status"],
        "versions": raw["versions"],
    }


def parse_mlxfwmanager(text: str) -> dict[str, Any]:
    """'Device #N:' blocks of 'Key: value' lines and a Versions table, optionally followed by an update transcript.

    Field lines are indented by two spaces in most captures and not at all in others; trailing spaces pad the
    Versions columns. Everything is matched on stripped lines.
    """
    devices: list[dict[str, Any]] = []
    errors: list[str] = []
    warnings: list[str] = []
    current: dict[str, Any] | None = None
    in_versions = False
    transcript = False
    updating = False
    restart = False
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if not line:
            in_versions = False
            continue
        if line.startswith("-E-"):
            errors.append(line)
            continue
        if line.startswith("-W-"):
            warnings.append(line)
            continue
        if transcript or (line.startswith(_TRANSCRIPT_PREFIXES) and _TRANSCRIPT_START.match(line)):
            transcript = True
            current = None
            updating = updating or bool(_UPDATING.match(line))
            restart = restart or line.startswith("Restart needed")
            continue
        if line.startswith("Device #") and (m := _DEVICE_HEADER.match(line)):
            current = _new_fw_device(int(m.group("n")))
            devices.append(current)
            in_versions = False
            continue
        if current is None or not line.strip("-"):  # an underline such as "----------"
            continue
        kv = split_kv(line)
        if in_versions and kv is None:
            if vm := _VERSION_ROW.match(line):
                current["versions"].append(
                    {
                        "name": vm.group("name"),
                        "current": na_to_none(vm.group("current")),
                        "available": na_to_none(vm.group("available")),
                    }
                )
            continue
        if kv is None:
            continue
        key, value = kv
        in_versions = key == "Versions"
        if key in _QUERY_FIELDS:
            current[_QUERY_FIELDS[key]] = na_to_none(value)
        elif (pm := _PORT_ID.match(key)) and pm.group("kind") == "GUID" and na_to_none(value):
            current["port_guids"].append(value)
    if not devices and not errors:
        raise ParseError("no 'Device #N:' block: not mlxfwmanager --query output")
    finished = [_finish_fw_device(d) for d in devices]
    return {
        "devices": finished,
        "count": len(finished),
        "errors": errors,
        "warnings": warnings,
        "update_attempted": updating,
        "restart_needed": restart,
    }


MFT_REQUIRES = Requires("command", "mlxfwmanager", "HCA firmware not checked (NVIDIA MFT)")

COLLECTORS = (
    Collector(
        id="mlxfwmanager",
        # NVIDIA MFT is optional (as for mlxlink): without it the HCA firmware is not checked, nothing broke.
        argv=guarded(MFT_REQUIRES, *tools.argv("mlxfwmanager")),
        requires=MFT_REQUIRES,
        parse=parse_mlxfwmanager,
        provides="/ib/firmware",
        schema=FIRMWARE_SCHEMA,
        family="ib",
        description="Adapter firmware inventory: PSID, running/flash/available FW per ConnectX (mlxfwmanager --query).",
        corpus=("mlxfwmanager",),
    ),
)
