"""`ibv_devinfo -v`: RDMA devices (firmware, board id/PSID) and their ports (state, MTU, LIDs, GIDs)."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..fragments import array, integer, obj, string
from ..textutil import na_to_none
from .values import int_any, text_lines

_ENUM_SUFFIX = re.compile(r"\s*\(\d+\)$")


def _strip_code(value: str | None) -> str | None:
    """'PORT_ACTIVE (4)' -> 'PORT_ACTIVE': ibv_devinfo appends the numeric enum in parentheses."""
    v = na_to_none(value)
    return _ENUM_SUFFIX.sub("", v) if v else None


_DEVINFO_DEVICE = obj(
    "One RDMA device (hca_id block).",
    {
        "name": string("hca_id, e.g. mlx5_0 or rocep1s0f0."),
        "transport": string("Transport as printed without the enum, e.g. InfiniBand.", True),
        "fw_ver": string("Firmware version.", True),
        "node_guid": string("Node GUID as printed (colon-grouped hex).", True),
        "sys_image_guid": string("System image GUID as printed.", True),
        "vendor_id": string("PCI vendor id as printed, e.g. 0x02c9.", True),
        "vendor_part_id": integer("Vendor part id, e.g. 4129 (ConnectX-7).", True),
        "hw_ver": string("Hardware version as printed.", True),
        "board_id": string("Board id (PSID), e.g. MT_0000000838.", True),
        "phys_port_cnt": integer("Number of physical ports.", True),
    },
)
_DEVINFO_GID = obj(
    "One GID table entry (ibv_devinfo -v).",
    {
        "index": integer("GID index."),
        "gid": string("GID as printed."),
        "type": string("GID type suffix when printed (e.g. 'RoCE v2'), else null.", True),
    },
)
_DEVINFO_PORT = obj(
    "One port of an RDMA device.",
    {
        "device": string("Owning hca_id."),
        "port": integer("Port number."),
        "state": string("Port state without the enum, e.g. PORT_ACTIVE, PORT_DOWN.", True),
        "max_mtu": integer("Maximum MTU in bytes.", True),
        "active_mtu": integer("Active MTU in bytes (4096 expected on IB).", True),
        "sm_lid": integer("Subnet manager LID.", True),
        "port_lid": integer("Port LID (65535 when the port is down).", True),
        "port_lmc": integer("LID mask control.", True),
        "link_layer": string("InfiniBand or Ethernet.", True),
        "active_width": string("Active link width without the enum, e.g. 4X (-v only).", True),
        "active_speed": string("Active per-lane speed without the enum, e.g. '50.0 Gbps' (-v only).", True),
        "phys_state": string("Physical state without the enum, e.g. LINK_UP, DISABLED (-v only).", True),
        "gids": array("GID table entries printed with -v.", _DEVINFO_GID),
    },
)
DEVINFO_SCHEMA = obj(
    "RDMA devices and ports from ibv_devinfo (plain, -v or -vv).",
    {
        "devices": array("Devices in output order.", _DEVINFO_DEVICE),
        "ports": array("All ports of all devices.", _DEVINFO_PORT),
        "errors": array("Diagnostics such as 'No IB devices found'.", string("One line as printed.")),
    },
)

_DEVINFO_DEVICE_KEYS = (
    "transport",
    "fw_ver",
    "node_guid",
    "sys_image_guid",
    "vendor_id",
    "vendor_part_id",
    "hw_ver",
    "board_id",
    "phys_port_cnt",
)
_GID_KEY = re.compile(r"^GID\[\s*(\d+)\]$")


def _devinfo_device(name: str, kv: dict[str, str]) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name}
    for key in _DEVINFO_DEVICE_KEYS:
        d[key] = na_to_none(kv.get(key))
    d["transport"] = _strip_code(d["transport"])
    d["vendor_part_id"] = int_any(d["vendor_part_id"])
    d["phys_port_cnt"] = int_any(d["phys_port_cnt"])
    return d


def _devinfo_port(device: str, port: int, kv: dict[str, str], gids: list[dict[str, Any]]) -> dict[str, Any]:
    speed = _strip_code(kv.get("active_speed"))
    return {
        "device": device,
        "port": port,
        "state": _strip_code(kv.get("state")),
        "max_mtu": int_any(kv.get("max_mtu")),
        "active_mtu": int_any(kv.get("active_mtu")),
        "sm_lid": int_any(kv.get("sm_lid")),
        "port_lid": int_any(kv.get("port_lid")),
        "port_lmc": int_any(kv.get("port_lmc")),
        "link_layer": na_to_none(kv.get("link_layer")),
        "active_width": _strip_code(kv.get("active_width")),
        # "invalid speed (0)" on a disabled port is not a speed
        "active_speed": None if speed and speed.startswith("invalid") else speed,
        "phys_state": _strip_code(kv.get("phys_state")),
        "gids": gids,
    }


def parse_ibv_devinfo(text: str) -> dict[str, Any]:
    """ibv_devinfo: "hca_id:" blocks with device keys, then "port:" sub-blocks; -v/-vv add capability lines.

    Only the fields below are read, so the extra -v/-vv capability lists (bare flag lines, nested caps) are
    skipped; everything after a "port:" line belongs to that port until the next port or hca_id.
    """
    devices: list[dict[str, Any]] = []
    ports: list[dict[str, Any]] = []
    errors: list[str] = []
    dev: tuple[str, dict[str, str]] | None = None
    port: tuple[int, dict[str, str], list[dict[str, Any]]] | None = None

    def close_port() -> None:
        nonlocal port
        if dev and port:
            ports.append(_devinfo_port(dev[0], port[0], port[1], port[2]))
        port = None

    def close_device() -> None:
        nonlocal dev
        close_port()
        if dev:
            devices.append(_devinfo_device(*dev))
        dev = None

    for raw in text_lines(text):
        line = raw.strip()
        if not line:
            continue
        if "No IB devices found" in line:
            errors.append(line)
            continue
        key, colon, value = line.partition(":")  # textutil.split_kv, inlined: ~800 lines per 8-HCA node
        if not colon:
            continue  # capability flag lines of -v/-vv
        key, value = key.strip(), value.strip()
        if key == "hca_id":
            close_device()
            dev = (value, {})
        elif key == "port" and dev and value.isdigit():
            close_port()
            port = (int(value), {}, [])
        elif port is not None:
            if key.startswith("GID[") and (gm := _GID_KEY.match(key)):
                gid, _, gtype = value.partition(",")
                port[2].append({"index": int(gm.group(1)), "gid": gid.strip(), "type": gtype.strip() or None})
            else:
                port[1].setdefault(key, value)
        elif dev is not None:
            dev[1].setdefault(key, value)
    close_device()
    if not devices and not errors:
        raise ParseError("no 'hca_id:' block: not ibv_devinfo output")
    return {"devices": devices, "ports": ports, "errors": errors}


COLLECTORS = (
    Collector(
        id="ibv_devinfo",
        argv=tools.argv("ibv_devinfo"),
        parse=parse_ibv_devinfo,
        provides="/ib/devinfo",
        schema=DEVINFO_SCHEMA,
        family="ib",
        description="RDMA devices (firmware, board id/PSID) and ports (state, MTU, LIDs, link layer) from ibv_devinfo.",
        corpus=("ibv_devinfo",),
    ),
)
