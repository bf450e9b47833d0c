"""/sys/class/infiniband read by one fixed script: port state, rate and error counters per RDMA port."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..base import Collector, ParseError
from ..fragments import array, integer, mapping, number, obj, string
from ..textutil import natural_key
from .values import coded, int_or_float, text_lines

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
    # The P_Key tables (pkeys/0..127) are read by a second grep that drops the empty 0x0000 entries.
    'cd "${FABRICPROOF_HOST_ROOT:-}' + _SYSFS + '" || exit 1; { grep -H -s "" '
    + " ".join(f"*/{a}" for a in _DEVICE_ATTRS)
    + " "
    + " ".join(f"*/ports/*/{a}" for a in _PORT_ATTRS)
    + " */ports/*/counters/* */ports/*/hw_counters/*"
    + '; grep -H -s -v -x "0x0000" */ports/*/pkeys/*; }'
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
    "One port's sysfs attributes, counters and P_Keys.",
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
        "pkeys": array("The port's P_Key table (ports/N/pkeys/*) without its empty entries, in index order, as 0x-hex: "
                       "0xffff/0x7fff the default partition as full/limited member; null when not read.",
                       string("One P_Key."), nullable=True),
    },
    optional=("pkeys",),
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
    for raw in text_lines(text):
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
        elif attr.startswith("pkeys/") and name.isdigit():
            pkey = _pkey(value)
            if pkey is not None and pkey != "0x0000":
                port.setdefault("pkey_table", {})[int(name)] = pkey
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
                "state_name": coded(p["state"])[1],
                "phys_state": p["phys_state"],
                "phys_state_name": coded(p["phys_state"])[1],
                "rate": p["rate"],
                "rate_gbps": int_or_float(p["rate"]),
                "link_layer": p["link_layer"],
                "counters": p["counters"],
                "hw_counters": p["hw_counters"],
                # null when the listing has no pkeys/ line for the port (an older capture): unknown, not empty
                "pkeys": [table[i] for i in sorted(table)] if (table := p.get("pkey_table")) else None,
            }
        )
    return {
        "devices": [devices[d] for d in sorted(devices, key=natural_key)],
        "ports": out_ports,
        "totals": _sum(p["counters"] for p in out_ports),
        "hw_totals": _sum(p["hw_counters"] for p in out_ports),
    }


_PKEY = re.compile(r"^0[xX]([0-9a-fA-F]{1,4})$")


def _pkey(value: str) -> str | None:
    """'0xFFFF' -> '0xffff': the 16-bit key, top bit set for a full member."""
    m = _PKEY.match(value.strip())
    return f"0x{int(m.group(1), 16):04x}" if m else None


def _sum(maps: Iterable[dict[str, int]]) -> dict[str, int]:
    total: dict[str, int] = {}
    for m in maps:
        for k, v in m.items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


COLLECTORS = (
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
)
