"""PCIe topology collector: `lspci -vvv` device blocks, bridge bus ranges and ACS control state."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from .. import tools
from .base import Collector, ParseError
from .fragments import array, boolean, integer, mapping, notes, obj, string
from .textutil import strip_ansi

# A device header starts at column 0: "[dddd:]bb:dd.f <rest>"; detail lines are indented.
_HEADER = re.compile(r"^(?P<bdf>(?:[0-9a-fA-F]{4,}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+(?P<rest>\S.*)$")
# `lspci -n`: "0680: 10de:1af1 (rev a1)"
_NUMERIC = re.compile(r"^(?P<cls>[0-9a-fA-F]{4}):\s+(?P<ven>[0-9a-fA-F]{4}):(?P<dev>[0-9a-fA-F]{4})\b(?P<tail>.*)$")
# `lspci -nn`: "Bridge [0680]: NVIDIA Corporation Device [10de:1af1] (rev a1)"
_NAMED_NUMERIC = re.compile(
    r"^(?P<cname>[^:\[]+?)\s+\[(?P<cls>[0-9a-fA-F]{4})\]:\s+(?P<desc>.*?)\s*"
    r"\[(?P<ven>[0-9a-fA-F]{4}):(?P<dev>[0-9a-fA-F]{4})\](?P<tail>.*)$"
)
# plain `lspci` / `lspci -vvv`: "PCI bridge: Broadcom / LSI PEX890xx PCIe Gen 5 Switch (rev b0)"
_NAMED = re.compile(r"^(?P<cname>[^:]+):\s+(?P<desc>.*)$")
# Each detail-line pattern below has a _NEEDLE: text every match contains. A cheap `in` test spares the ~700
# other detail lines of a GPU node (Control:, Status:, LnkCap:...) three regex calls each.
_BUS = re.compile(r"\bBus:\s*primary=([0-9a-fA-F]+),\s*secondary=([0-9a-fA-F]+),\s*subordinate=([0-9a-fA-F]+)")
_BUS_NEEDLE = "Bus:"
_ACS_LINE = re.compile(r"^\s*(ACSCap|ACSCtl):\s*(.*)$")
_ACS_NEEDLE = "ACSC"
_FLAG = re.compile(r"([A-Za-z][A-Za-z0-9]*)([+-])(?=\s|$)")
_DRIVER = re.compile(r"^\s*Kernel driver in use:\s*(\S+)")
_DRIVER_NEEDLE = "Kernel driver in use:"

NVIDIA_VENDOR = "10de"
MELLANOX_VENDOR = "15b3"
_GPU_CLASSES = {"3D controller", "VGA compatible controller"}
_GPU_CLASS_CODES = {"0300", "0302"}
_NIC_CLASSES = {"Ethernet controller", "Infiniband controller", "Network controller"}
_NIC_CLASS_CODES = {"0200", "0207", "0280"}


def parse_lspci_header(line: str) -> dict[str, Any] | None:
    """One lspci device header line in -n, -nn or named form; None if the line is not a header.

    Returns bdf (as printed), class_name (None in -n form), class_code, vendor_id and device_id
    (None in named form, which prints no ids), and description (the text after the class).
    """
    m = _HEADER.match(line.rstrip())
    if not m:
        return None
    fields = _header_fields(m.group("rest"))
    if fields is None:
        return None
    class_name, class_code, vendor_id, device_id, description = fields
    return {
        "bdf": m.group("bdf"),
        "class_name": class_name,
        "class_code": class_code,
        "vendor_id": vendor_id,
        "device_id": device_id,
        "description": description,
    }


@lru_cache(maxsize=512)  # identical devices (8 GPUs, switch ports, NICs) print the same text after the address
def _header_fields(rest: str) -> tuple[str | None, str | None, str | None, str | None, str] | None:
    """(class_name, class_code, vendor_id, device_id, description) of a header's text after the address."""
    if nm := _NUMERIC.match(rest):
        return None, nm["cls"].lower(), nm["ven"].lower(), nm["dev"].lower(), rest.strip()
    if nm := _NAMED_NUMERIC.match(rest):
        return (
            nm["cname"].strip(), nm["cls"].lower(), nm["ven"].lower(), nm["dev"].lower(),
            (nm["desc"] + nm["tail"]).strip(),
        )
    if nm := _NAMED.match(rest):
        return nm["cname"].strip(), None, None, None, nm["desc"].strip()
    return None


def split_bdf(bdf: str) -> tuple[int, int]:
    """(domain, bus) of a printed address; lspci omits domain 0000 unless -D is given."""
    parts = bdf.split(":")
    domain = int(parts[0], 16) if len(parts) == 3 else 0
    return domain, int(parts[-2], 16)


def is_nvidia(dev: dict[str, Any]) -> bool:
    return dev.get("vendor_id") == NVIDIA_VENDOR or dev.get("description", "").startswith("NVIDIA")


def is_gpu(dev: dict[str, Any]) -> bool:
    """An NVIDIA GPU: 3D or VGA controller from vendor 10de (the NVSwitch 'Bridge' class is not a GPU)."""
    return (dev.get("class_name") in _GPU_CLASSES or dev.get("class_code") in _GPU_CLASS_CODES) and is_nvidia(dev)


def is_mellanox_nic(dev: dict[str, Any]) -> bool:
    """A ConnectX/BlueField network function; the ConnectX-7 internal PCIe bridges are not NICs."""
    if dev.get("class_name") not in _NIC_CLASSES and dev.get("class_code") not in _NIC_CLASS_CODES:
        return False
    desc = dev.get("description", "")
    return dev.get("vendor_id") == MELLANOX_VENDOR or "Mellanox" in desc or "ConnectX" in desc


@lru_cache(maxsize=256)  # ACSCap/ACSCtl lines repeat across the ports of a node and across nodes
def _flag_items(text: str) -> tuple[tuple[str, bool], ...]:
    return tuple((name, sign == "+") for name, sign in _FLAG.findall(text))


def _flags(text: str) -> dict[str, bool]:
    """'SrcValid+ TransBlk-' -> {'SrcValid': True, 'TransBlk': False} (a new dict each time: callers own it)."""
    return dict(_flag_items(text))


def parse_lspci_vvv(text: str) -> dict[str, Any]:
    """Parse `lspci -vvv` (also plain/-nn listings, which simply carry no detail lines).

    A bridge here is a PCI-to-PCI bridge: one that prints a "Bus: primary=.., secondary=..,
    subordinate=.." range (root and switch ports). The NVSwitch shows as class "Bridge" (0680)
    but routes no PCI buses, so it is an endpoint for path purposes. A device's upstream bridges
    are the bridges in its PCI domain whose secondary..subordinate range holds its bus, nearest first.
    """
    lines = strip_ansi(text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    devices: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    denied = False
    loose_acs: list[bool] = []  # ACSCtl lines before any device header (`lspci -vvv | grep ACSCtl` pasted)
    for line in lines:
        header = parse_lspci_header(line) if line[:1] not in (" ", "\t", "") else None
        if header:
            current = {
                **header,
                "is_bridge": False,
                "acs_cap": None,
                "acs_ctl": None,
                "acs_enabled": None,
                "primary_bus": None,
                "secondary_bus": None,
                "subordinate_bus": None,
                "kernel_driver": None,
                "upstream": [],
            }
            devices.append(current)
            continue
        if current is None:
            if _ACS_NEEDLE in line and (acs := _ACS_LINE.match(line)) and acs.group(1) == "ACSCtl":
                loose_acs.append(any(_flags(acs.group(2)).values()))
            continue
        if not line.strip():
            continue
        if "<access denied>" in line:
            denied = True
        if _BUS_NEEDLE in line and (bus := _BUS.search(line)):
            current["primary_bus"], current["secondary_bus"], current["subordinate_bus"] = (int(g, 16) for g in bus.groups())
            current["is_bridge"] = True
        elif _ACS_NEEDLE in line and (acs := _ACS_LINE.match(line)):
            flags = _flags(acs.group(2))
            if acs.group(1) == "ACSCtl":
                current["acs_ctl"] = flags
                current["acs_enabled"] = any(flags.values())
            else:
                current["acs_cap"] = flags
        elif _DRIVER_NEEDLE in line and (drv := _DRIVER.match(line)):
            current["kernel_driver"] = drv.group(1)
    if not devices:
        if loose_acs:
            return _acs_lines_only(loose_acs)
        raise ParseError("no lspci device header lines found")

    for dev in devices:
        # Without a bus range a "PCI bridge" header (plain listing) is still a bridge by class.
        if dev["class_name"] == "PCI bridge" or dev["class_code"] == "0604":
            dev["is_bridge"] = True
    _link_upstream(devices)

    bridges = [d for d in devices if d["is_bridge"]]
    gpus = [d["bdf"] for d in devices if is_gpu(d)]
    nics = [d["bdf"] for d in devices if is_mellanox_nic(d)]
    acs_on = [b["bdf"] for b in bridges if b["acs_enabled"]]
    endpoints = {*gpus, *nics}
    on_path: set[str] = set()
    for d in devices:
        if d["bdf"] in endpoints:
            on_path.update(d["upstream"])
    return {
        "devices": devices,
        "bridges": bridges,
        "acs_enabled_bridges": acs_on,
        "gpu_nic_path_acs_enabled": [bdf for bdf in acs_on if bdf in on_path],
        "gpus": gpus,
        "nics": nics,
        "capabilities_denied": denied,
        "acs_ctl_lines": sum(1 for d in devices if d["acs_ctl"] is not None),
        "notes": [],
    }


def _acs_lines_only(enabled: list[bool]) -> dict[str, Any]:
    """ACSCtl lines without the device headers (`lspci -vvv | grep ACSCtl`, pasted into a ticket).

    Without headers no line can be placed on a GPU/NIC path. All flags '-' on every line proves no bridge has
    ACS on; one '+' line proves some bridge has it, but not whether it sits between a GPU and a NIC: unknown.
    """
    on = sum(enabled)
    noted = [f"{len(enabled)} ACSCtl lines without device headers (a grep of lspci -vvv): bridges are not named"]
    if on:
        noted.append(f"{on} of them have ACS flags on; whether on a GPU-NIC path is unknown without the headers")
    return {
        "devices": [],
        "bridges": [],
        "acs_enabled_bridges": None if on else [],
        "gpu_nic_path_acs_enabled": None if on else [],
        "gpus": [],
        "nics": [],
        "capabilities_denied": False,
        "acs_ctl_lines": len(enabled),
        "notes": noted,
    }


def _link_upstream(devices: list[dict[str, Any]]) -> None:
    # (bridge, secondary, subordinate) per PCI domain in listing order: addresses are split once, not once per pair.
    spans: dict[int, list[tuple[dict[str, Any], int, int]]] = {}
    for d in devices:
        if d["secondary_bus"] is not None and d["subordinate_bus"] is not None:
            spans.setdefault(split_bdf(d["bdf"])[0], []).append((d, d["secondary_bus"], d["subordinate_bus"]))
    for dev in devices:
        domain, bus = split_bdf(dev["bdf"])
        parents = [b for b, first, last in spans.get(domain, ()) if first <= bus <= last and b is not dev]
        # Nested ranges: the narrowest range is the nearest bridge.
        parents.sort(key=lambda b: (b["subordinate_bus"] - b["secondary_bus"], -b["secondary_bus"]))
        dev["upstream"] = [b["bdf"] for b in parents]


def _flag_map(description: str) -> dict[str, Any]:
    return mapping(description, boolean("true when lspci prints the flag with '+'."), nullable=True)


def _bdf_list(description: str, nullable: bool = False) -> dict[str, Any]:
    return array(description, string("PCI address as printed."), nullable)


_DEVICE = obj(
    "One PCI function.",
    {
        "bdf": string("PCI address as printed (domain omitted by lspci when it is 0000)."),
        "class_name": string(
            "Device class as printed, e.g. 'PCI bridge', '3D controller' (null in `lspci -n` form).", True
        ),
        "class_code": string("Four hex digit class code when printed (-n/-nn), e.g. '0604'.", True),
        "vendor_id": string("Four hex digit vendor id when printed (-n/-nn), e.g. '10de'.", True),
        "device_id": string("Four hex digit device id when printed (-n/-nn), e.g. '22a3'.", True),
        "description": string("Header text after the class: vendor, device and revision."),
        "is_bridge": boolean("PCI-to-PCI bridge (prints a bus range or has class 'PCI bridge')."),
        "acs_cap": _flag_map("ACSCap flags (what the port supports); null without an ACS capability."),
        "acs_ctl": _flag_map(
            "ACSCtl flags (what is enabled); null without an ACS capability or when access was denied."
        ),
        "acs_enabled": boolean("Any ACSCtl flag is '+'; null when ACSCtl is not shown.", True),
        "primary_bus": integer("Bridge primary bus number.", True),
        "secondary_bus": integer("Bridge secondary bus number (first bus behind the bridge).", True),
        "subordinate_bus": integer("Bridge subordinate bus number (last bus behind the bridge).", True),
        "kernel_driver": string("'Kernel driver in use' (nvidia, mlx5_core, pcieport, nvidia-nvswitch...).", True),
        "upstream": _bdf_list("Bridges above this device in its PCI domain, nearest first."),
    },
)

LSPCI_VVV_SCHEMA: dict[str, Any] = obj(
    "PCIe devices, bridges and ACS state from lspci -vvv.",
    {
        "devices": array("Every PCI function in listing order.", _DEVICE),
        "bridges": array("The devices that are PCI-to-PCI bridges.", _DEVICE),
        "acs_enabled_bridges": _bdf_list("Bridges with any ACSCtl flag '+'; null when ACS is on somewhere but the "
                                         "output names no bridge (ACSCtl lines without headers).", nullable=True),
        "gpu_nic_path_acs_enabled": _bdf_list(
            "ACS-enabled bridges upstream of an NVIDIA GPU or a Mellanox/ConnectX NIC (these throttle GPUDirect P2P); "
            "null when that cannot be told (ACSCtl lines without headers, one of them with a flag on).", nullable=True,
        ),
        "gpus": _bdf_list("NVIDIA GPUs (3D/VGA controllers of vendor NVIDIA)."),
        "nics": _bdf_list("Mellanox/ConnectX network functions."),
        "capabilities_denied": boolean(
            "lspci printed '<access denied>' (not run as root): ACS state is unknown, not off."
        ),
        "acs_ctl_lines": integer("ACSCtl lines read."),
        "notes": notes(),
    },
    optional=("acs_ctl_lines", "notes"),
)

LSPCI_VVV = Collector(
    id="lspci_vvv",
    argv=tools.argv("lspci_vvv"),
    parse=parse_lspci_vvv,
    provides="/pcie",
    schema=LSPCI_VVV_SCHEMA,
    family="pcie",
    description="PCIe topology with bridge bus ranges and ACS control flags on GPU/NIC paths.",
    corpus=("lspci",),
)

COLLECTORS = (LSPCI_VVV,)
