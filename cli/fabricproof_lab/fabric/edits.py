"""The fabric side of the lab's subnet faults (emu/faults/subnet.py, by the same names): each turns the fabric of
the moment into the faulty one for one host (pure)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace

from ..emu.faults import subnet as faults
from .topology import Ca, Cable, Fabric

Edit = Callable[[Fabric, str], Fabric]


def _ca(fabric: Fabric, host: str, n: int) -> Ca:
    cas = fabric.cas_of(host)
    return cas[n % len(cas)]


def _cable_of(fabric: Fabric, ca: Ca) -> Cable | None:
    return fabric.cable_at((ca.node_id, 1))


def _swap(cables: Iterable[Cable], old: Cable, new: Cable | None) -> list[Cable]:
    out = [c for c in cables if c != old]
    return out + [new] if new is not None else out


def rails_swapped(fabric: Fabric, host: str) -> Fabric:
    a, b = (_ca(fabric, host, n) for n in faults.SWAPPED)
    ca_, cb_ = _cable_of(fabric, a), _cable_of(fabric, b)
    if ca_ is None or cb_ is None:
        return fabric
    leaf_a, leaf_b = fabric.peer((a.node_id, 1)), fabric.peer((b.node_id, 1))
    cables = [c for c in fabric.cables if c not in (ca_, cb_)]
    cables += [replace(ca_, a=(a.node_id, 1), b=leaf_b), replace(cb_, a=(b.node_id, 1), b=leaf_a)]
    return fabric.with_cables(cables)


def hca_wrong_port(fabric: Fabric, host: str) -> Fabric:
    """Onto the leaf's last host port, which the plan leaves spare (a scalable unit is smaller than a leaf's half)."""
    ca = _ca(fabric, host, faults.WRONG_PORT)
    cable = _cable_of(fabric, ca)
    leaf = fabric.peer((ca.node_id, 1))
    if cable is None or leaf is None or fabric.cable_at((leaf[0], fabric.leaf_down_ports)) is not None:
        return fabric
    return fabric.with_cables(_swap(fabric.cables, cable, replace(cable, a=(ca.node_id, 1),
                                                                  b=(leaf[0], fabric.leaf_down_ports))))


def uplink_missing(fabric: Fabric, host: str) -> Fabric:
    leaf = fabric.peer((_ca(fabric, host, faults.UPLINK_OF).node_id, 1))
    uplink = fabric.cable_at((leaf[0], fabric.leaf_down_ports + 1)) if leaf else None
    return fabric if uplink is None else fabric.with_cables(_swap(fabric.cables, uplink, None))


def link_1x(fabric: Fabric, host: str) -> Fabric:
    cable = _cable_of(fabric, _ca(fabric, host, faults.NARROW))
    return fabric if cable is None else fabric.with_cables(_swap(fabric.cables, cable, replace(cable, width="1x")))


def link_slow(fabric: Fabric, host: str) -> Fabric:
    cable = _cable_of(fabric, _ca(fabric, host, faults.SLOW))
    if cable is None or cable.speed not in faults.SLOWER:
        return fabric
    return fabric.with_cables(_swap(fabric.cables, cable, replace(cable, speed=faults.SLOWER[cable.speed])))


def switch_errors(fabric: Fabric, host: str) -> Fabric:
    leaf = fabric.peer((_ca(fabric, host, faults.ERRORS_ON).node_id, 1))
    return fabric if leaf is None or leaf in fabric.growing else replace(fabric, growing=(*fabric.growing, leaf))


def extra_link(fabric: Fabric, host: str) -> Fabric:
    """Leaf port and spine-1 port both the last: build() keeps them spare."""
    leaf = fabric.peer((_ca(fabric, host, faults.EXTRA_FROM).node_id, 1))
    if leaf is None:
        return fabric
    spine = fabric.switches[0]
    a, b = (leaf[0], fabric.switches[0].ports), (spine.node_id, spine.ports)
    if fabric.cable_at(a) is not None or fabric.cable_at(b) is not None:
        return fabric
    return fabric.with_cables([*fabric.cables, Cable(a, b, "4x", fabric.speed)])


def duplicate_desc(fabric: Fabric, host: str) -> Fabric:
    twin, original = (_ca(fabric, host, n) for n in faults.DUPLICATE)
    cas = tuple(replace(c, desc=original.name) if c == twin else c for c in fabric.cas)
    return replace(fabric, cas=cas)


def hca_unplugged(fabric: Fabric, host: str) -> Fabric:
    cable = _cable_of(fabric, _ca(fabric, host, faults.UNPLUGGED))
    return fabric if cable is None else fabric.with_cables(_swap(fabric.cables, cable, None))


#: Fault name -> its fabric edit; every fault of kind "fabric" has one.
EDITS: dict[str, Edit] = {
    "subnet-rails-swapped": rails_swapped, "subnet-hca-wrong-port": hca_wrong_port,
    "subnet-uplink-missing": uplink_missing, "subnet-link-1x": link_1x, "subnet-link-slow": link_slow,
    "subnet-switch-errors": switch_errors, "subnet-extra-link": extra_link, "subnet-duplicate-desc": duplicate_desc,
    "subnet-hca-unplugged": hca_unplugged,
}


def apply(fabric: Fabric, active: Iterable[tuple[str, str]]) -> Fabric:
    """The healthy fabric with every active (host, fault) applied, in the order they were injected."""
    for host, name in active:
        fabric = EDITS[name](fabric, host)
    return fabric
