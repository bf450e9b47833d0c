"""The lab's InfiniBand fabric as data: a rail-optimised fat tree generated from the lab's nodes (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..emu.faults.subnet import RATE_4X
from ..emu.model import compute_hca_identities, ib_base_lid
from ..emu.profiles import PROFILES
from ..emu.render_ib import SM_GUID
from ..topology import LabHost

#: Switch model and port count per fabric speed (NVIDIA Quantum-2 for NDR, Quantum for HDR).
SWITCH_MODELS = {"NDR": ("MQM9700", 64), "HDR": ("MQM8700", 40)}
#: Lab sizes: hosts per scalable unit, spines, uplinks per leaf (spread over the spines).
DEFAULT_SU_SIZE = 4
DEFAULT_SPINES = 2
DEFAULT_UPLINKS = 2
#: Switch LIDs start here, above every HCA LID a lab of at most 2,000 nodes gives (emu.model.ib_base_lid).
SWITCH_LID_BASE = 48000
#: ibsim's own limits (its defaults: 2,048 nodes, 256 switches).
MAX_SIM_NODES, MAX_SIM_SWITCHES = 2048, 256


class FabricShapeError(ValueError):
    """A fabric that cannot be built from these nodes and sizes."""


@dataclass(frozen=True)
class Switch:
    """A leaf or spine: its operator name ("leaf-su1-r0"), GUID, LID and role."""

    name: str
    guid: str  # "0x" + 16 hex digits
    lid: int
    ports: int
    model: str
    tier: str  # leaf | spine
    su: int | None = None
    rail: int | None = None

    @property
    def node_id(self) -> str:
        return "S-" + self.guid[2:]

    @property
    def desc(self) -> str:
        return f"MF0;{self.name}:{self.model}/U1"


@dataclass(frozen=True)
class Ca:
    """One compute HCA of a lab node: its node GUID is the one the node's ibstat shows."""

    host: str
    hca: str
    rail: int
    guid: str
    lid: int
    speed: str  # what the HCA trains at on a healthy cable
    desc: str = ""

    @property
    def node_id(self) -> str:
        return "H-" + self.guid[2:]

    @property
    def port_guid(self) -> str:
        """ibsim gives a CA port the node GUID plus the port number (a real ConnectX port 1 has the node GUID)."""
        return f"0x{int(self.guid, 16) + 1:016x}"

    @property
    def name(self) -> str:
        return self.desc or f"{self.host} {self.hca}"


End = tuple[str, int]  # (node id, port)


@dataclass(frozen=True)
class Cable:
    a: End
    b: End
    width: str = "4x"
    speed: str = "NDR"

    def touches(self, end: End) -> bool:
        return end in (self.a, self.b)


@dataclass(frozen=True)
class Fabric:
    """Switches (the SM's spine first), CAs and cables; `speed` is the fabric's nominal speed."""

    speed: str
    su_size: int
    spines: int
    uplinks: int
    switches: tuple[Switch, ...]
    cas: tuple[Ca, ...]
    cables: tuple[Cable, ...]
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    #: switch ports whose error counters grow on every read (fault subnet-switch-errors)
    growing: tuple[End, ...] = ()

    def switch(self, name: str) -> Switch:
        return next(s for s in self.switches if s.name == name)

    def ca(self, host: str, hca: str) -> Ca:
        return next(c for c in self.cas if c.host == host and c.hca == hca)

    def cas_of(self, host: str) -> list[Ca]:
        return [c for c in self.cas if c.host == host]

    def cable_at(self, end: End) -> Cable | None:
        return next((c for c in self.cables if c.touches(end)), None)

    def peer(self, end: End) -> End | None:
        cable = self.cable_at(end)
        if cable is None:
            return None
        return cable.b if cable.a == end else cable.a

    def names(self) -> dict[str, str]:
        """node id -> operator name (switch short name, or the CA's node description)."""
        out = {s.node_id: s.name for s in self.switches}
        out.update({c.node_id: c.name for c in self.cas})
        return out

    def with_cables(self, cables: Sequence[Cable]) -> Fabric:
        return replace(self, cables=tuple(cables))

    @property
    def leaf_down_ports(self) -> int:
        """Leaf ports 1..half face hosts; the upper half are uplinks."""
        return self.switches[0].ports // 2

    def leaf_of(self, ca: Ca) -> Switch:
        """The leaf the plan cables this CA to: rail `ca.rail` of its host's scalable unit."""
        su = self.extra["su_of"][ca.host]
        return next(s for s in self.switches if s.tier == "leaf" and s.su == su and s.rail == ca.rail)


def fitting_su_size(hosts: Sequence[LabHost], spines: int = DEFAULT_SPINES, uplinks: int = DEFAULT_UPLINKS) -> int:
    """The scalable-unit size for these hosts: DEFAULT_SU_SIZE, or larger when that many units' leaves would not
    fit the spines' ports (8 rails, 2 spines, 2 uplinks: up to 7 units of up to 31 hosts, 217 H100s)."""
    rails = max((len(compute_hca_identities(h.profile, h.index)) for h in hosts), default=1) or 1
    speeds = {_speed_of(h.profile)[1] for h in hosts}
    _model, ports = SWITCH_MODELS["NDR" if "NDR" in speeds else "HDR"]
    units = max(1, (ports - 1) // (rails * math.ceil(uplinks / spines)))
    return max(DEFAULT_SU_SIZE, math.ceil(len(hosts) / units))


def _speed_of(profile: str) -> tuple[str, str]:
    width, speed = PROFILES[profile]["hcas"]["compute"]["width"].split()
    return width.lower(), speed


def build(hosts: Sequence[LabHost], su_size: int = DEFAULT_SU_SIZE, spines: int = DEFAULT_SPINES,
          uplinks: int = DEFAULT_UPLINKS) -> Fabric:
    """A rail-optimised fat tree over the hosts' compute HCAs: per scalable unit of `su_size` hosts (in address
    order) one leaf per rail, HCA rail N of each host on its unit's rail-N leaf (host k of the unit on port k);
    `uplinks` per leaf spread round the spines. The SM runs on spine-1 (the first node ibsim's file names)."""
    if su_size < 1 or spines < 1 or uplinks < 1:
        raise FabricShapeError("scalable-unit size, spines and uplinks must each be at least 1")
    cas: list[Ca] = []
    su_of: dict[str, int] = {}
    speeds = set()
    for k, host in enumerate(hosts):
        su_of[host.name] = k // su_size + 1
        width, speed = _speed_of(host.profile)
        speeds.add(speed)
        # LIDs by the host's place in the lab, not its index within its profile: a mixed lab's profiles each count
        # from 0, and a subnet's LIDs are unique (the nodes take these: model.attach_fabric)
        for name, rail, guid, _lid in compute_hca_identities(host.profile, host.index):
            cas.append(Ca(host=host.name, hca=name, rail=rail, guid="0x" + guid, lid=ib_base_lid(k, rail),
                          speed=speed))
    if not cas:
        raise FabricShapeError("no lab node has an InfiniBand compute HCA")
    fabric_speed = "NDR" if "NDR" in speeds else "HDR"
    model, ports = SWITCH_MODELS[fabric_speed]
    half = ports // 2
    if su_size >= half:
        raise FabricShapeError(f"a scalable unit of {su_size} hosts does not fit a {model} leaf's {half} host ports "
                               f"(one is kept spare)")
    if uplinks > half:
        raise FabricShapeError(f"{uplinks} uplinks per leaf exceed a {model} leaf's {half} uplink ports")
    rails = max(c.rail for c in cas) + 1
    sus = max(su_of.values())
    per_spine = math.ceil(uplinks / spines)
    if sus * rails * per_spine > ports - 1:  # the last spine port is kept spare
        raise FabricShapeError(f"{sus * rails} leaves with {uplinks} uplinks over {spines} spine(s) need "
                               f"{sus * rails * per_spine} ports per spine; a {model} has {ports}")
    switches = [Switch(name=f"spine-{s + 1}", guid=_spine_guid(s), lid=1 if s == 0 else SWITCH_LID_BASE + s,
                       ports=ports, model=model, tier="spine") for s in range(spines)]
    leaves: dict[tuple[int, int], Switch] = {}
    for su in range(1, sus + 1):
        for rail in range(rails):
            leaf = Switch(name=f"leaf-su{su}-r{rail}", guid=f"0x7cfe900300b1{su:02x}{rail:02x}",
                          lid=SWITCH_LID_BASE + 100 + len(leaves), ports=ports, model=model, tier="leaf", su=su,
                          rail=rail)
            leaves[(su, rail)] = leaf
    switches += list(leaves.values())
    if len(switches) > MAX_SIM_SWITCHES or len(switches) + len(cas) > MAX_SIM_NODES:
        raise FabricShapeError(f"{len(switches)} switches and {len(cas)} HCAs exceed ibsim's default limits "
                               f"({MAX_SIM_SWITCHES} switches, {MAX_SIM_NODES} nodes)")
    position = {host.name: k % su_size for k, host in enumerate(hosts)}
    cables: list[Cable] = []
    for ca in cas:
        leaf = leaves[(su_of[ca.host], ca.rail)]
        cables.append(Cable((ca.node_id, 1), (leaf.node_id, position[ca.host] + 1), "4x", ca.speed))
    for n, leaf in enumerate(leaves.values()):
        for k in range(uplinks):
            spine = switches[k % spines]
            cables.append(Cable((leaf.node_id, half + 1 + k), (spine.node_id, n * per_spine + k // spines + 1),
                                "4x", fabric_speed))
    return Fabric(speed=fabric_speed, su_size=su_size, spines=spines, uplinks=uplinks, switches=tuple(switches),
                  cas=tuple(cas), cables=tuple(cables), extra={"su_of": su_of})


def _spine_guid(s: int) -> str:
    """spine-1 carries the GUID the lab's nodes name as their SM's (render_ib.SM_GUID)."""
    return f"{SM_GUID[:-4]}{int(SM_GUID[-4:], 16) + s:04x}"


def counts(fabric: Fabric) -> dict[str, int]:
    """What an operator counts: switches by tier, HCAs, cables by kind."""
    ids = {c.node_id for c in fabric.cas}
    host_cables = sum(1 for c in fabric.cables if c.a[0] in ids or c.b[0] in ids)
    return {"leaves": sum(s.tier == "leaf" for s in fabric.switches),
            "spines": sum(s.tier == "spine" for s in fabric.switches), "cas": len(fabric.cas),
            "host_cables": host_cables, "uplinks": len(fabric.cables) - host_cables,
            "cables": len(fabric.cables)}


def paths(planned: Fabric, fabric: Fabric) -> dict[str, Any]:
    """What a collective across nodes meets on `fabric` (emu.fabricpaths reads it): each host's compute HCAs by rail
    with the leaf each is cabled to now (None: no cable), each leaf's rail, and each leaf's uplink rate (width x
    speed of its cables to spines) present now over what `planned` gives it."""
    leaves = {s.node_id: s for s in planned.switches if s.tier == "leaf"}
    spines = {s.node_id for s in planned.switches if s.tier == "spine"}

    def uplink_rates(f: Fabric) -> dict[str, float]:
        out = dict.fromkeys((s.name for s in leaves.values()), 0.0)
        for c in f.cables:
            for leaf, far in ((c.a[0], c.b[0]), (c.b[0], c.a[0])):
                if leaf in leaves and far in spines:
                    out[leaves[leaf].name] += RATE_4X.get(c.speed, 0) * int(c.width.rstrip("x")) / 4
        return out

    now, plan = uplink_rates(fabric), uplink_rates(planned)
    rails: dict[str, dict[str, str | None]] = {}
    for ca in fabric.cas:
        peer = fabric.peer((ca.node_id, 1))
        rails.setdefault(ca.host, {})[str(ca.rail)] = leaves[peer[0]].name if peer and peer[0] in leaves else None
    return {"rails": rails, "leaf_rail": {s.name: s.rail for s in leaves.values()},
            "uplinks": {leaf: round(now[leaf] / plan[leaf], 4) if plan[leaf] else 1.0 for leaf in plan}}
