"""What `lab up/down/status/fault` do for a lab with an InfiniBand fabric: generate it, cable the nodes, run ibsim and
opensm, and put fabric faults into the simulated subnet."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fabricproof.fsutil import atomic_write_text

from .. import emu
from ..emu.fabricpaths import PATHS_FILE
from ..errors import LabError
from ..topology import LabHost
from . import edits, netfile, plan, sim, topology
from .sim import FabricState

FABRIC_DIR = "fabric"


def new_state(lab_root: Path, hosts: Sequence[LabHost], spines: int = topology.DEFAULT_SPINES,
              uplinks: int = topology.DEFAULT_UPLINKS) -> FabricState:
    return FabricState(dir=str(lab_root / FABRIC_DIR), socket=sim.socket_name(lab_root),
                       su_size=topology.fitting_su_size(hosts, spines, uplinks), spines=spines, uplinks=uplinks)


def healthy(state: FabricState, hosts: Sequence[LabHost]) -> topology.Fabric:
    """The fabric as generated (and as its plan says): deterministic from the hosts and the sizes."""
    try:
        return topology.build(hosts, state.su_size, state.spines, state.uplinks)
    except topology.FabricShapeError as exc:
        raise LabError(f"--fabric: {exc}") from None


def current(state: FabricState, hosts: Sequence[LabHost]) -> topology.Fabric:
    """The fabric with the active faults in it."""
    return edits.apply(healthy(state, hosts), [(h, f) for h, f in state.faults])


def attachment(state: FabricState, fabric: topology.Fabric, host: LabHost, vantage: str) -> dict[str, Any] | None:
    cas = fabric.cas_of(host.name)
    if not cas:
        return None
    return {"socket": state.socket, "sim_host": cas[0].node_id, "dir": state.dir, "shifted": netfile.shifted(fabric),
            "vantage": host.name == vantage, "lids": {c.hca: c.lid for c in cas}}


def cabling(state: FabricState | None, hosts: Sequence[LabHost]) -> dict[str, dict[str, Any] | None]:
    """Each host's place on the fabric (None for every host of a lab without one)."""
    if state is None:
        return {h.name: None for h in hosts}
    fabric = healthy(state, hosts)
    return {h.name: attachment(state, fabric, h, hosts[0].name) for h in hosts}


def recable(lab_root: Path, hosts: Sequence[LabHost], places: dict[str, dict[str, Any] | None]) -> list[LabHost]:
    """Give each kept node its place on the fabric where it has another (or none), so its tools and ibstat agree
    with the fabric; returns the nodes changed."""
    changed = []
    for host in hosts:
        if emu.read_node(lab_root, host.address).get("fabric") != places[host.name]:
            emu.cable_node(lab_root, host.address, places[host.name])
            changed.append(host)
    return changed


def prepare(lab_root: Path, state: FabricState, hosts: Sequence[LabHost], owner: tuple[int, int]) -> topology.Fabric:
    """The plan beside the inventory and the fabric directory; returns the fabric of the moment."""
    atomic_write_text(lab_root / plan.PLAN_FILE, plan.render(healthy(state, hosts), str(lab_root)), mode=0o644)
    fabric = current(state, hosts)
    sim.prepare(state, fabric, owner)
    publish(state, hosts)
    return fabric


def publish(state: FabricState, hosts: Sequence[LabHost]) -> None:
    """The fabric's paths where the nodes' emulated collectives read them (emu.fabricpaths)."""
    atomic_write_text(state.path / PATHS_FILE, json.dumps(topology.paths(healthy(state, hosts),
                                                                         current(state, hosts))), mode=0o644)


def ensure_running(state: FabricState) -> bool:
    """Start ibsim and opensm unless both run; True when this call started them."""
    if all(sim.alive(state).values()):
        return False
    sim.stop(state)
    sim.start(state)
    return True


def stop(state: FabricState) -> list[int]:
    return sim.stop(state)


def inject(state: FabricState, hosts: Sequence[LabHost], host: LabHost, faults: Sequence[str],
           owner: tuple[int, int]) -> str:
    """Put fabric faults into the running subnet, in one change; returns how ibsim took it ("console" or
    "restart")."""
    new = [[host.name, f] for f in dict.fromkeys(faults) if [host.name, f] not in state.faults]
    if not new:
        return "none"
    old = current(state, hosts)
    state.faults.extend(new)
    try:
        return sim.change(state, old, current(state, hosts), owner)
    finally:
        publish(state, hosts)


def clear(state: FabricState, hosts: Sequence[LabHost], host: LabHost, names: Sequence[str],
          owner: tuple[int, int]) -> str:
    gone = [[host.name, n] for n in names if [host.name, n] in state.faults]
    if not gone:
        return "none"
    old = current(state, hosts)
    state.faults = [f for f in state.faults if f not in gone]
    try:
        return sim.change(state, old, current(state, hosts), owner)
    finally:
        publish(state, hosts)


def describe(state: FabricState, hosts: Sequence[LabHost], lab_root: Path) -> dict[str, Any]:
    """`lab status`'s fabric part."""
    fabric = healthy(state, hosts)
    running = sim.alive(state)
    return {"plan": str(lab_root / plan.PLAN_FILE), "speed": fabric.speed,
            "simulated_speed": netfile.sim_speed(fabric, fabric.speed), "vantage": hosts[0].name,
            **topology.counts(fabric), "ibsim": {"pid": state.ibsim_pid, "alive": running["ibsim"]},
            "opensm": {"pid": state.opensm_pid, "alive": running["opensm"]}, "faults": state.faults,
            "dir": state.dir}
