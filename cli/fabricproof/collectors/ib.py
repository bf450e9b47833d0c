"""InfiniBand / RoCE host facts: ibstat, ibv_devinfo, ibdev2netdev, sysfs counters, ofed_info, show_gids, rdma link."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from .base import Collector, ParseError
from .fragments import array, boolean, integer, mapping, number, obj, string
from .textutil import Node, indent_tree, na_to_none, natural_key, split_kv, strip_ansi, to_float

# --- small shared helpers --------------------------------------------------------------------------------------------

_INT_ANY = re.compile(r"^(0[xX][0-9a-fA-F]+|[-+]?\d+)")
_ENUM_SUFFIX = re.compile(r"\s*\(\d+\)$")
_CODED = re.compile(r"^(\d+)\s*:\s*(.*)$")
_GID_GROUP = re.compile(r"[0-9a-fA-F]{1,4}")


def _lines(text: str) -> list[str]:
    """Lines without ANSI escapes or CR; splitlines() already copes with CRLF."""
    return strip_ansi(text).splitlines()


def _num(value: str | None) -> int | float | None:
    """'400' -> 400, '2.5 Gb/sec' -> 2.5: integral rates stay ints so facts compare equal to baseline ints."""
    f = to_float(value)
    if f is None:
        return None
    return int(f) if f.is_integer() else f


def _int_any(value: str | None) -> int | None:
    """Decimal or 0x-hex integer ('0x33bf' LIDs in ibstatus, '0x00' LMC in ibv_devinfo), else None.

    Not textutil.to_int, which reads decimal only ('0x33bf' would be 0) and drops thousands commas.
    """
    v = na_to_none(value)
    if v is None:
        return None
    m = _INT_ANY.match(v)
    return int(m.group(1), 0) if m else None


def _strip_code(value: str | None) -> str | None:
    """'PORT_ACTIVE (4)' -> 'PORT_ACTIVE': ibv_devinfo appends the numeric enum in parentheses."""
    v = na_to_none(value)
    return _ENUM_SUFFIX.sub("", v) if v else None


# Names ibstat prints for the PortInfo enums (infiniband-diags ibstat.c); ibstatus and sysfs print "N: NAME"
# instead, and the ibstatus parser maps the number to these names so both land in one fragment shape.
_IBSTAT_STATE = {1: "Down", 2: "Initializing", 3: "Armed", 4: "Active"}
_IBSTAT_PHYS = {
    1: "Sleep",
    2: "Polling",
    3: "Disabled",
    4: "PortConfigurationTraining",
    5: "LinkUp",
    6: "LinkErrorRecovery",
    7: "Phy Test",
}


def _coded(value: str | None) -> tuple[int | None, str | None]:
    """'4: ACTIVE' -> (4, 'ACTIVE'); a bare 'ACTIVE' -> (None, 'ACTIVE')."""
    v = na_to_none(value)
    if v is None:
        return None, None
    m = _CODED.match(v)
    return (int(m.group(1)), m.group(2).strip() or None) if m else (None, v)


# --- ibstat / ibstatus -----------------------------------------------------------------------------------------------

_CA_HEADER = re.compile(r"^CA '(?P<name>[^']+)'$")
_PORT_HEADER = re.compile(r"^Port (?P<port>\d+)$")
# libibumad/infiniband-diags report failures as "ibpanic: ...", "ibwarn: ...", "iberror: ..." at column 0.
_IB_DIAG = re.compile(r"^ib(panic|warn|error)\b")
_IBSTATUS_HEADER = re.compile(r"^Infiniband device '(?P<dev>[^']+)' port (?P<port>\d+) status:\s*$")

_IBSTAT_HCA = obj(
    "One channel adapter (CA) as ibstat lists it.",
    {
        "name": string("Device name, e.g. mlx5_0."),
        "ca_type": string("CA type (PCI device id), e.g. MT4129 for ConnectX-7; null from ibstatus.", True),
        "ports_count": integer("Number of ports ibstat reports (ibstatus: port blocks seen)."),
        "fw_version": string("Firmware version, e.g. 28.41.1000; null from ibstatus.", True),
        "hw_version": string("Hardware revision; null from ibstatus.", True),
        "node_guid": string("Node GUID as printed (0x-prefixed hex); null from ibstatus.", True),
        "system_image_guid": string("System image GUID as printed; null from ibstatus.", True),
    },
)
_IBSTAT_PORT = obj(
    "One CA port (flat list: one record per CA port).",
    {
        "ca": string("Owning CA name."),
        "ca_type": string(
            "CA type of the owning CA (repeated so a port record stands alone); null from ibstatus.", True
        ),
        "port": integer("Port number (1-based)."),
        "state": string("Logical port state as ibstat prints it: Down, Initializing, Armed, Active.", True),
        "phys_state": string("Physical port state as ibstat prints it: LinkUp, Polling, Disabled, Sleep...", True),
        "rate": number("Link rate in Gb/s, e.g. 400 (NDR), 200 (HDR); ports Down often show 40 or 10.", True),
        "base_lid": integer("Base LID (0 on Ethernet / RoCE ports).", True),
        "sm_lid": integer("LID of the subnet manager; 0 means no SM seen (IB) or Ethernet.", True),
        "lmc": integer("LID mask control; null from ibstatus.", True),
        "capability_mask": string("Port capability mask as printed (hex); null from ibstatus.", True),
        "port_guid": string("Port GUID as printed; from ibstatus the low 64 bits of the IB default GID.", True),
        "link_layer": string("InfiniBand or Ethernet (RoCE).", True),
        "default_gid": string("Default GID (ibstatus only).", True),
    },
    optional=("default_gid",),
)
IBSTAT_SCHEMA = obj(
    "Channel adapters and their ports from ibstat (or ibstatus).",
    {
        "hcas": array("Channel adapters in output order.", _IBSTAT_HCA),
        "ports": array("All ports of all CAs.", _IBSTAT_PORT),
        "count": integer("Number of CAs listed."),
        "ports_active": integer("Ports whose state is Active."),
        "errors": array(
            "Diagnostics the tool printed (e.g. the ibpanic line when ibstat dies on a vanished device).",
            string("One diagnostic line as printed."),
        ),
    },
)


def _ibstat_fragment(hcas: list[dict[str, Any]], ports: list[dict[str, Any]], errors: list[str]) -> dict[str, Any]:
    return {
        "hcas": hcas,
        "ports": ports,
        "count": len(hcas),
        "ports_active": sum(1 for p in ports if p["state"] == "Active"),
        "errors": errors,
    }


def _ibstat_port(ca: str, ca_type: str | None, port: int, node: Node) -> dict[str, Any]:
    def get(key: str) -> str | None:
        return na_to_none(node.get(key))

    return {
        "ca": ca,
        "ca_type": ca_type,
        "port": port,
        "state": get("State"),
        "phys_state": get("Physical state"),
        "rate": _num(get("Rate")),
        "base_lid": _int_any(get("Base lid")),
        "sm_lid": _int_any(get("SM lid")),
        "lmc": _int_any(get("LMC")),
        "capability_mask": get("Capability mask"),
        "port_guid": get("Port GUID"),
        "link_layer": get("Link layer"),
    }


def parse_ibstat(text: str) -> dict[str, Any]:
    """ibstat: "CA 'name'" blocks with nested "Port N:" blocks; TAB or 8-space indentation.

    When a device vanishes mid-listing ibstat dies with "ibpanic: ... stat of IB device 'mlx5_8' failed"
    (exit 255) after printing the CAs it could read: those CAs are kept and the line goes to errors.
    """
    if not text.strip():
        raise ParseError("empty ibstat output")
    hcas: list[dict[str, Any]] = []
    ports: list[dict[str, Any]] = []
    errors: list[str] = []
    diagnostics = 0
    for ca_node in indent_tree(strip_ansi(text)).children:
        m = _CA_HEADER.match(ca_node.key) if ca_node.value is None else None
        if not m:
            line = ca_node.key if ca_node.value is None else f"{ca_node.key}: {ca_node.value}"
            errors.append(line)
            diagnostics += bool(_IB_DIAG.match(line))
            continue
        name = m.group("name")
        ca_type = na_to_none(ca_node.get("CA type"))
        own_ports = [
            _ibstat_port(name, ca_type, int(pm.group("port")), child)
            for child in ca_node.children
            if (pm := _PORT_HEADER.match(child.key))
        ]
        count = _int_any(ca_node.get("Number of ports"))
        hcas.append(
            {
                "name": name,
                "ca_type": ca_type,
                "ports_count": count if count is not None else len(own_ports),
                "fw_version": na_to_none(ca_node.get("Firmware version")),
                "hw_version": na_to_none(ca_node.get("Hardware version")),
                "node_guid": na_to_none(ca_node.get("Node GUID")),
                "system_image_guid": na_to_none(ca_node.get("System image GUID")),
            }
        )
        ports.extend(own_ports)
    if not hcas and not diagnostics:
        if any(_IBSTATUS_HEADER.match(line) for line in _lines(text)):
            raise ParseError("ibstatus output, not ibstat (use the ibstatus collector)")
        raise ParseError("no \"CA '<name>'\" block: not ibstat output")
    return _ibstat_fragment(hcas, ports, errors)


def _guid_from_gid(gid: str | None) -> str | None:
    """An IB port's default GID (index 0) is subnet prefix + port GUID; return the GUID the way ibstat prints it."""
    if not gid:
        return None
    groups = gid.split(":")
    if len(groups) != 8 or not all(_GID_GROUP.fullmatch(g) for g in groups):
        return None
    return "0x" + "".join(g.zfill(4) for g in groups[4:]).lower()


def parse_ibstatus(text: str) -> dict[str, Any]:
    """ibstatus (a sysfs-reading script): one "Infiniband device 'X' port N status:" block per port.

    It prints no CA type, firmware or GUIDs, so those are null; "N: NAME" states are mapped to the names ibstat
    prints so the fragment is interchangeable with parse_ibstat's.
    """
    blocks: list[tuple[str, int, dict[str, str]]] = []
    for line in _lines(text):
        if not line.strip():
            continue
        if m := _IBSTATUS_HEADER.match(line.strip()):
            blocks.append((m.group("dev"), int(m.group("port")), {}))
        elif blocks and (kv := split_kv(line)):
            blocks[-1][2][kv[0].lower()] = kv[1]
    if not blocks:
        raise ParseError("no \"Infiniband device '<dev>' port N status:\" block: not ibstatus output")
    hcas: dict[str, dict[str, Any]] = {}
    ports: list[dict[str, Any]] = []
    for dev, port, kv in blocks:
        hca = hcas.setdefault(
            dev,
            {
                "name": dev,
                "ca_type": None,
                "ports_count": 0,
                "fw_version": None,
                "hw_version": None,
                "node_guid": None,
                "system_image_guid": None,
            },
        )
        hca["ports_count"] += 1
        state_code, state = _coded(kv.get("state"))
        phys_code, phys = _coded(kv.get("phys state"))
        link_layer = na_to_none(kv.get("link_layer"))
        gid = na_to_none(kv.get("default gid"))
        gid = None if gid == "unknown" else gid
        ports.append(
            {
                "ca": dev,
                "ca_type": None,
                "port": port,
                "state": _IBSTAT_STATE.get(state_code, state) if state_code is not None else state,
                "phys_state": _IBSTAT_PHYS.get(phys_code, phys) if phys_code is not None else phys,
                "rate": _num(kv.get("rate")),
                "base_lid": _int_any(kv.get("base lid")),
                "sm_lid": _int_any(kv.get("sm lid")),
                "lmc": None,
                "capability_mask": None,
                "port_guid": _guid_from_gid(gid) if link_layer == "InfiniBand" else None,
                "link_layer": link_layer,
                "default_gid": gid,
            }
        )
    return _ibstat_fragment(list(hcas.values()), ports, [])


# --- ibv_devinfo -----------------------------------------------------------------------------------------------------

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
    d["vendor_part_id"] = _int_any(d["vendor_part_id"])
    d["phys_port_cnt"] = _int_any(d["phys_port_cnt"])
    return d


def _devinfo_port(device: str, port: int, kv: dict[str, str], gids: list[dict[str, Any]]) -> dict[str, Any]:
    speed = _strip_code(kv.get("active_speed"))
    return {
        "device": device,
        "port": port,
        "state": _strip_code(kv.get("state")),
        "max_mtu": _int_any(kv.get("max_mtu")),
        "active_mtu": _int_any(kv.get("active_mtu")),
        "sm_lid": _int_any(kv.get("sm_lid")),
        "port_lid": _int_any(kv.get("port_lid")),
        "port_lmc": _int_any(kv.get("port_lmc")),
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

    for raw in _lines(text):
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


# --- ibdev2netdev ----------------------------------------------------------------------------------------------------

_I2N_PLAIN = re.compile(r"^(?P<dev>\S+)\s+port\s+(?P<port>\d+)\s+==>\s+(?P<netdev>\S+)\s+\((?P<state>[^)]*)\)\s*$")
# -v: "<pci> <dev> (<MTxxxx> - <PSID/part>) <description> fw <fw> port <n> (<PORT_STATE>) ==> <netdev> (<Up|Down>)";
# the description may itself hold parentheses and runs of padding, so it is matched lazily up to " fw ".
_I2N_VERBOSE = re.compile(
    r"^(?P<pci>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])\s+(?P<dev>\S+)\s+"
    r"\((?P<hca_type>\S+)\s+-\s+(?P<part>[^)]*?)\s*\)\s*(?P<desc>.*?)\s*\bfw\s+(?P<fw>\S+)\s+"
    r"port\s+(?P<port>\d+)\s+\((?P<port_state>[^)]*?)\s*\)\s*==>\s+(?P<netdev>\S+)\s+\((?P<state>[^)]*)\)\s*$"
)

NETDEV_SCHEMA = obj(
    "RDMA device port to network interface mapping from ibdev2netdev (or -v).",
    {
        "entries": array(
            "One record per RDMA port.",
            obj(
                "One 'dev port N ==> netdev (State)' line.",
                {
                    "device": string("RDMA device name."),
                    "port": integer("Port number."),
                    "netdev": string("Network interface name, e.g. ib0 or enp4s0f0np0."),
                    "state": string("Netdev state as printed: Up or Down.", True),
                    "pci": string("PCI address (-v only).", True),
                    "hca_type": string("Device type, e.g. MT4123 (-v only).", True),
                    "part": string(
                        "Part number, serial or PSID in the type parentheses; null when NA (-v only).", True
                    ),
                    "description": string("Board description (-v only; null when empty, e.g. VFs).", True),
                    "fw": string("Firmware version (-v only).", True),
                    "port_state": string("RDMA port state as printed, e.g. ACTIVE, DOWN (-v only).", True),
                },
            ),
        ),
        "map": mapping('"<device>/<port>" -> netdev, e.g. {"mlx5_0/1": "ib0"}.', string("Netdev name.")),
    },
)


def parse_ibdev2netdev(text: str) -> dict[str, Any]:
    """ibdev2netdev and ibdev2netdev -v, one line per RDMA port."""
    entries: list[dict[str, Any]] = []
    for raw in _lines(text):
        line = raw.strip()
        if m := _I2N_VERBOSE.match(line):
            entries.append(
                {
                    "device": m.group("dev"),
                    "port": int(m.group("port")),
                    "netdev": m.group("netdev"),
                    "state": m.group("state").strip() or None,
                    "pci": m.group("pci"),
                    "hca_type": m.group("hca_type"),
                    "part": na_to_none(m.group("part")),
                    "description": m.group("desc").strip() or None,
                    "fw": m.group("fw"),
                    "port_state": m.group("port_state").strip() or None,
                }
            )
        elif m := _I2N_PLAIN.match(line):
            entries.append(
                {
                    "device": m.group("dev"),
                    "port": int(m.group("port")),
                    "netdev": m.group("netdev"),
                    "state": m.group("state").strip() or None,
                    "pci": None,
                    "hca_type": None,
                    "part": None,
                    "description": None,
                    "fw": None,
                    "port_state": None,
                }
            )
    if not entries:
        raise ParseError("no '<dev> port N ==> <netdev>' line: not ibdev2netdev output")
    return {"entries": entries, "map": {f"{e['device']}/{e['port']}": e["netdev"] for e in entries}}


# --- sysfs counters (/sys/class/infiniband) --------------------------------------------------------------------------

_SYSFS = "/sys/class/infiniband"
_DEVICE_ATTRS = ("fw_ver", "board_id", "hca_type", "node_guid")
_PORT_ATTRS = ("state", "phys_state", "rate", "link_layer")

# One `path: value` line per sysfs attribute, sorted (C locale) so the output reads like the corpus captures.
# The glob is fixed; `[ -f ]` drops unmatched patterns (no IB devices, no hw_counters) and `cat` failures
# (some hw counters refuse reads) drop that one file. sysfs attributes are single values, one line each.
IB_COUNTERS_SCRIPT = (
    # Globs relative to the class directory under $FABRICPROOF_HOST_ROOT, printed with the absolute sysfs path so
    # the output reads the same on the node, in a DaemonSet (/host) and in the lab. One grep reads every file:
    # a `cat` per file costs ~290 forks per host (0.6-0.9 s of node CPU), grep costs one.
    'cd "${FABRICPROOF_HOST_ROOT:-}' + _SYSFS + '" || exit 1; grep -H -s "" '
    + " ".join(f"*/{a}" for a in _DEVICE_ATTRS)
    + " "
    + " ".join(f"*/ports/*/{a}" for a in _PORT_ATTRS)
    + " */ports/*/counters/* */ports/*/hw_counters/*"
    + " | LC_ALL=C sort | sed 's|^|" + _SYSFS + "/|; s|:|: |'"
)

# `path: value` (our script) and `path:value` (grep -H . ...); relative paths (grep run inside the class dir) too.
_SYSFS_LINE = re.compile(r"^(?:/sys/class/infiniband/)?(?P<dev>[^/\s:]+)/(?P<rest>[^:\s]+):\s?(?P<value>.*)$")
_SYSFS_PORT = re.compile(r"^ports/(?P<port>\d+)/(?P<attr>.+)$")
_NO_DEVICE_ATTRS = dict.fromkeys(_DEVICE_ATTRS)
_NO_PORT_ATTRS = dict.fromkeys(_PORT_ATTRS)


@lru_cache(maxsize=1024)  # the same few dozen ports/N/... paths repeat under every device
def _sysfs_port_path(rest: str) -> tuple[int, str, str | None, str] | None:
    """A path under <dev>/: (port, attribute path, counter group, counter name) for ports/N/...; else None.

    'ports/1/counters/symbol_error' -> (1, 'counters/symbol_error', 'counters', 'symbol_error');
    'ports/1/state' -> (1, 'state', None, ''): the group is None unless the path is a counters/ or
    hw_counters/ file.
    """
    pm = _SYSFS_PORT.match(rest)
    if not pm:
        return None
    attr = pm.group("attr")
    group, _, name = attr.partition("/")
    is_counter = group in ("counters", "hw_counters") and bool(name) and "/" not in name
    return int(pm.group("port")), attr, group if is_counter else None, name


_COUNTERS_PORT = obj(
    "One port's sysfs attributes and counters.",
    {
        "device": string("RDMA device name."),
        "port": integer("Port number."),
        "state": string("ports/N/state as printed, e.g. '4: ACTIVE'.", True),
        "state_name": string("Name part of state, e.g. ACTIVE, DOWN, INIT.", True),
        "phys_state": string("ports/N/phys_state as printed, e.g. '5: LinkUp'.", True),
        "phys_state_name": string("Name part of phys_state, e.g. LinkUp, Polling, Disabled.", True),
        "rate": string("ports/N/rate as printed, e.g. '400 Gb/sec (4X NDR)'.", True),
        "rate_gbps": number("Numeric part of rate in Gb/s, e.g. 400.", True),
        "link_layer": string("ports/N/link_layer: InfiniBand or Ethernet.", True),
        "counters": mapping("ports/N/counters/* (IB PMA counters) by file name.", integer("Counter value.")),
        "hw_counters": mapping("ports/N/hw_counters/* (vendor counters) by file name.", integer("Counter value.")),
    },
)
COUNTERS_SCHEMA = obj(
    "Per-port state and error counters read from /sys/class/infiniband.",
    {
        "devices": array(
            "Device-level attributes.",
            obj(
                "One RDMA device.",
                {
                    "name": string("Device name."),
                    "fw_ver": string("Firmware version.", True),
                    "board_id": string("Board id (PSID).", True),
                    "hca_type": string("HCA type, e.g. MT4129.", True),
                    "node_guid": string("Node GUID as printed.", True),
                },
            ),
        ),
        "ports": array("All ports of all devices.", _COUNTERS_PORT),
        "totals": mapping("Sum over ports of each counters/* value.", integer("Summed counter.")),
        "hw_totals": mapping("Sum over ports of each hw_counters/* value.", integer("Summed counter.")),
    },
)


def parse_ib_counters(text: str) -> dict[str, Any]:
    """`path: value` lines for /sys/class/infiniband/<dev>/... files (a value line without a path continues the
    previous value, joined with a literal \\n as the corpus stores multi-line files)."""
    if not text.strip():
        raise ParseError("empty output: no RDMA device under /sys/class/infiniband")
    devices: dict[str, dict[str, Any]] = {}
    ports: dict[tuple[str, int], dict[str, Any]] = {}
    last: tuple[dict[str, Any], str] | None = None
    for raw in _lines(text):
        m = _SYSFS_LINE.match(raw.strip())
        if not m:
            if last and raw.strip():
                holder, key = last
                holder[key] = f"{holder[key]}\\n{raw.strip()}" if holder[key] else raw.strip()
            continue
        dev, rest, value = m.groups()
        value = value.strip()
        last = None
        if rest in _DEVICE_ATTRS:
            device = devices.get(dev)
            if device is None:
                device = devices[dev] = {"name": dev, **_NO_DEVICE_ATTRS}
            device[rest] = value or None
            last = (device, rest)
            continue
        in_port = _sysfs_port_path(rest)
        if in_port is None:
            continue  # other files (node_desc, pkeys, ...) are not part of these facts
        if dev not in devices:
            devices[dev] = {"name": dev, **_NO_DEVICE_ATTRS}
        port_no, attr, group, name = in_port
        port = ports.get((dev, port_no))
        if port is None:
            port = ports[dev, port_no] = {
                "device": dev, "port": port_no, **_NO_PORT_ATTRS, "counters": {}, "hw_counters": {},
            }
        if group:
            # a counter that reads "N/A" is left out rather than faked as 0
            if value.isascii() and value.isdigit():
                port[group][name] = int(value)
        elif attr in _PORT_ATTRS:
            port[attr] = value or None
            last = (port, attr)
    if not devices:
        raise ParseError("no '/sys/class/infiniband/<dev>/...: value' line")
    out_ports = []
    for p in sorted(ports.values(), key=lambda p: (natural_key(p["device"]), p["port"])):
        out_ports.append(
            {
                "device": p["device"],
                "port": p["port"],
                "state": p["state"],
                "state_name": _coded(p["state"])[1],
                "phys_state": p["phys_state"],
                "phys_state_name": _coded(p["phys_state"])[1],
                "rate": p["rate"],
                "rate_gbps": _num(p["rate"]),
                "link_layer": p["link_layer"],
                "counters": p["counters"],
                "hw_counters": p["hw_counters"],
            }
        )
    return {
        "devices": [devices[d] for d in sorted(devices, key=natural_key)],
        "ports": out_ports,
        "totals": _sum(p["counters"] for p in out_ports),
        "hw_totals": _sum(p["hw_counters"] for p in out_ports),
    }


def _sum(maps: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for m in maps:
        for k, v in m.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


# --- ofed_info -s ----------------------------------------------------------------------------------------------------

# Real `ofed_info -s` outputs (one line, trailing colon), found via the code index:
#   "MLNX_OFED_LINUX-23.10-1.1.9.0:"    Azure ND VM MLNX_OFED upgrade notes (code index file id 19926464626)
#   "OFED-internal-24.10-1.1.4.0.200:"  DOCA-OFED on a DGX image, DDN EXAScaler client notes (file id 48003245258)
#   "OFED-internal-25.10-1.7.1:"        DOCA-OFED host, TRex/DPDK notes (file id 3695655753)
# DOCA-OFED reports "OFED-internal-<release>" where MLNX_OFED reported "MLNX_OFED_LINUX-<release>".
_OFED_LINE = re.compile(r"^(?P<flavor>[A-Za-z][A-Za-z_]*(?:-[A-Za-z][A-Za-z_]*)*)-(?P<release>\d+\.\d[\w.-]*?):?\s*$")

OFED_SCHEMA = obj(
    "Installed OFED stack from ofed_info -s.",
    {
        "version": string("As printed without the trailing colon, e.g. MLNX_OFED_LINUX-23.10-1.1.9.0."),
        "flavor": string("Part before the release: MLNX_OFED_LINUX (MLNX_OFED) or OFED-internal (DOCA-OFED)."),
        "release": string("Release part, e.g. 23.10-1.1.9.0 or 24.10-1.1.4.0.200."),
        "doca": boolean("True for DOCA-OFED (OFED-internal-*)."),
    },
)


def parse_ofed_info(text: str) -> dict[str, Any]:
    """ofed_info -s: a single 'FLAVOR-RELEASE:' line."""
    for raw in _lines(text):
        line = raw.strip()
        if m := _OFED_LINE.match(line):
            flavor, release = m.group("flavor"), m.group("release")
            return {
                "version": f"{flavor}-{release}",
                "flavor": flavor,
                "release": release,
                "doca": flavor == "OFED-internal",
            }
    raise ParseError("no '<flavor>-<release>:' line: not ofed_info -s output")


# --- show_gids -------------------------------------------------------------------------------------------------------

_IPV4 = re.compile(r"^\d{1,3}(?:\.\d{1,3}){3}$")
_GID_VER = re.compile(r"^v\d$")

GIDS_SCHEMA = obj(
    "RoCE GID table from show_gids.",
    {
        "entries": array(
            "One record per GID row.",
            obj(
                "One show_gids row.",
                {
                    "device": string("RDMA device name."),
                    "port": integer("Port number."),
                    "index": integer("GID index (what NCCL_IB_GID_INDEX selects)."),
                    "gid": string("GID as printed."),
                    "ipv4": string("IPv4 address of an IPv4-mapped GID, else null.", True),
                    "version": string("RoCE version as printed: v1 or v2."),
                    "netdev": string("Network interface of the GID, null if none printed.", True),
                },
            ),
        ),
        "count": integer("Rows parsed."),
        "n_gids_found": integer("The tool's own n_gids_found= total, null if absent.", True),
        "rocev2_ipv4_indexes": array(
            "Sorted unique GID indexes with version v2 and an IPv4 address (the usual NCCL GID choice).",
            integer("GID index."),
        ),
    },
)


def parse_show_gids(text: str) -> dict[str, Any]:
    """show_gids: TAB-separated table (the IPv4 cell is empty for link-local GIDs); pasted copies may have spaces,
    so rows are read as whitespace tokens and the optional IPv4/netdev cells are recognised by shape."""
    entries: list[dict[str, Any]] = []
    n_found: int | None = None
    header = False
    for raw in _lines(text):
        line = raw.strip()
        if line.startswith("n_gids_found="):
            n_found = _int_any(line.partition("=")[2])
            continue
        tokens = line.split()
        header = header or tokens[:4] == ["DEV", "PORT", "INDEX", "GID"]
        if len(tokens) < 5 or not (tokens[1].isdigit() and tokens[2].isdigit()):
            continue  # header, dashes, blank
        dev, port, index, gid, rest = tokens[0], int(tokens[1]), int(tokens[2]), tokens[3], tokens[4:]
        ipv4 = rest.pop(0) if rest and _IPV4.match(rest[0]) else None
        if not rest or not _GID_VER.match(rest[0]):
            continue
        entries.append(
            {
                "device": dev,
                "port": port,
                "index": index,
                "gid": gid,
                "ipv4": ipv4,
                "version": rest[0],
                "netdev": rest[1] if len(rest) > 1 else None,
            }
        )
    if not entries and not (header and n_found is not None):
        # a RoCE-less host prints the header and n_gids_found=0: empty, but a real answer
        raise ParseError("no 'DEV PORT INDEX GID [IPv4] VER DEV' table: not show_gids output")
    return {
        "entries": entries,
        "count": len(entries),
        "n_gids_found": n_found,
        "rocev2_ipv4_indexes": sorted({e["index"] for e in entries if e["version"] == "v2" and e["ipv4"]}),
    }


# --- rdma link show ---------------------------------------------------------------------------------------------------

_RDMA_LINK = re.compile(r"^link\s+(?P<dev>[^/\s]+)/(?P<port>\d+)\s*(?P<rest>.*)$")
_RDMA_LINK_KEYS = ("subnet_prefix", "lid", "sm_lid", "lmc", "state", "physical_state", "netdev", "netdev_index")

RDMA_LINK_SCHEMA = obj(
    "RDMA port links from iproute2 `rdma link show`.",
    {
        "links": array(
            "One record per 'link <dev>/<port>' line.",
            obj(
                "One RDMA link.",
                {
                    "device": string("RDMA device name."),
                    "port": integer("Port number."),
                    "state": string("Port state as printed, e.g. ACTIVE, DOWN.", True),
                    "physical_state": string("Physical state as printed, e.g. LINK_UP, POLLING, DISABLED.", True),
                    "netdev": string("Attached netdev, null if none.", True),
                    "lid": integer("Port LID (IB only).", True),
                    "sm_lid": integer("Subnet manager LID (IB only).", True),
                    "lmc": integer("LID mask control (IB only).", True),
                    "subnet_prefix": string("GID subnet prefix (IB only).", True),
                },
            ),
        ),
    },
)


def parse_rdma_link(text: str) -> dict[str, Any]:
    """rdma link show: 'link mlx5_0/1 [key value]...' with keys depending on the link layer."""
    links: list[dict[str, Any]] = []
    for raw in _lines(text):
        m = _RDMA_LINK.match(raw.strip())
        if not m:
            continue
        tokens = m.group("rest").split()
        kv = {tokens[i]: tokens[i + 1] for i in range(0, len(tokens) - 1, 2) if tokens[i] in _RDMA_LINK_KEYS}
        links.append(
            {
                "device": m.group("dev"),
                "port": int(m.group("port")),
                "state": kv.get("state"),
                "physical_state": kv.get("physical_state"),
                "netdev": kv.get("netdev"),
                "lid": _int_any(kv.get("lid")),
                "sm_lid": _int_any(kv.get("sm_lid")),
                "lmc": _int_any(kv.get("lmc")),
                "subnet_prefix": kv.get("subnet_prefix"),
            }
        )
    if not links:
        raise ParseError("no 'link <dev>/<port>' line: not rdma link output")
    return {"links": links}


# --- registry --------------------------------------------------------------------------------------------------------

COLLECTORS = (
    Collector(
        id="ibstat",
        argv=("ibstat",),
        parse=parse_ibstat,
        provides="/ib/ibstat",
        schema=IBSTAT_SCHEMA,
        family="ib",
        description="InfiniBand CAs and ports: type, firmware, GUIDs, state, rate, LIDs, link layer (ibstat).",
        # ibstat exits 255 after an ibpanic yet has printed every CA it could read before dying
        ok_exit_codes=(0, 255),
        corpus=("ibstat",),
    ),
    Collector(
        id="ibstatus",
        argv=("ibstatus",),
        parse=parse_ibstatus,
        provides="/ib/ibstat",
        schema=IBSTAT_SCHEMA,
        family="ib",
        description="Same port facts as ibstat from the ibstatus script (no CA type, firmware or GUIDs).",
        default=False,
        corpus=("ibstat",),
    ),
    Collector(
        id="ibv_devinfo",
        argv=("ibv_devinfo", "-v"),
        parse=parse_ibv_devinfo,
        provides="/ib/devinfo",
        schema=DEVINFO_SCHEMA,
        family="ib",
        description="RDMA devices (firmware, board id/PSID) and ports (state, MTU, LIDs, link layer) from ibv_devinfo.",
        corpus=("ibv_devinfo",),
    ),
    Collector(
        id="ibdev2netdev",
        argv=("ibdev2netdev",),
        parse=parse_ibdev2netdev,
        provides="/ib/netdev",
        schema=NETDEV_SCHEMA,
        family="ib",
        description="Which network interface each RDMA port drives, and its link state (ibdev2netdev).",
        corpus=("ibdev2netdev",),
    ),
    Collector(
        id="ib_counters",
        argv=("sh", "-c", IB_COUNTERS_SCRIPT),
        parse=parse_ib_counters,
        provides="/ib/counters",
        schema=COUNTERS_SCHEMA,
        family="ib",
        description="Port state, rate and error counters straight from /sys/class/infiniband.",
        corpus=("sysfs-infiniband",),
    ),
    Collector(
        id="ofed_info",
        argv=("ofed_info", "-s"),
        parse=parse_ofed_info,
        provides="/ofed",
        schema=OFED_SCHEMA,
        family="ib",
        description="Installed MLNX_OFED / DOCA-OFED version (ofed_info -s).",
    ),
    Collector(
        id="show_gids",
        argv=("show_gids",),
        parse=parse_show_gids,
        provides="/roce/gids",
        schema=GIDS_SCHEMA,
        family="rdma",
        description="RoCE GID table: index, GID, IPv4, RoCE version and netdev per RDMA port (show_gids).",
        corpus=("rdma",),
    ),
    Collector(
        id="rdma_link",
        argv=("rdma", "link", "show"),
        parse=parse_rdma_link,
        provides="/ib/rdma_link",
        schema=RDMA_LINK_SCHEMA,
        family="rdma",
        description="RDMA port state, physical state and netdev from iproute2 (rdma link show).",
        default=False,
        corpus=("rdma",),
    ),
)
