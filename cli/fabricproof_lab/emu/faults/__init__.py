"""The fault catalog: named, stable faults a lab node can carry, and the checks that must catch each.

Four kinds of fault:
* overlay: the stored state stays healthy; every render applies the fault to a copy (hardware that
  stays broken until the fault is cleared: a dead link, a degraded port);
* state: injecting changes the stored state the way the real failure would (a package at the wrong
  version, a service that died, a module unloaded), so the real remediation (apt-get, systemctl,
  modprobe, setpci, a firmware burn) fixes it; clearing restores the healthy value;
* trigger: arms a behaviour of a mutating tool (upgrade-breaks-fm), consumed when it fires;
* fabric: changes the lab's InfiniBand fabric (a cable moved, missing, narrow or slow; switch-port counters that
  grow; a duplicate node description), applied by the lab runtime to ibsim (fabricproof_lab.fabric.edits); its
  overlay is what the node itself then shows (a slower link lowers its ibstat rate). Needs `lab up --fabric`.

`catches` lists exactly the host checks that fail on one snapshot of a node with the fault against its
profile's baseline, on every profile the fault applies to; `catches_by_profile` gives the exact list per
profile where it differs (fabric checks do not exist on A100). `catches_over_time` are the counter-delta
checks (two snapshots). `catches_subnet` (fabric faults) are the subnet.* checks that fail on the host once
the fabric is diffed against the lab's fabric-plan.yaml. `catches_fleet` are the fleet checks that fail once the faulty node is compared
with healthy peers. `breaks` names collectors whose command hangs or prints garbage. `catches_probes` are the
perf.* checks (probes: NCCL, nvbandwidth, perftest, DCGM) that fail on the node once the probes run on it: a fault
with no `catches` but some `catches_probes` is one only a load test finds. `blocks_probes` marks a node that is
not idle (a GPU process, a Slurm job step): a probe must not start there.
"""

from __future__ import annotations

from .. import model
from ..model import Node

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .base import Fault

# FAMILIES (the families, in the order `lab fault list` shows them) and FAULTS (every fault by name) are made on
# first use: an emulated tool on a node without faults (a probe's every task, most calls) never needs the families'
# modules, whose imports (dataclasses among them) were a third of such a call's CPU.


def _registry() -> dict[str, Fault]:
    found = globals().get("FAULTS")
    if found is None:
        from . import fabric, fm, gpu, ib, nvlink, nvswitch, pcie, perf, rdma, subnet, tool

        families = (fm, fabric, nvlink, nvswitch, ib, rdma, pcie, gpu, perf, subnet, tool)
        found = {f.name: f for family in families for f in family.FAULTS}
        globals().update(FAMILIES=families, FAULTS=found)
    return found


def __getattr__(name: str) -> object:
    if name in ("FAULTS", "FAMILIES"):
        _registry()
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class FaultError(ValueError):
    """Unknown fault, or a fault that does not apply to the node's profile."""


def check_applicable(node: Node, name: str) -> Fault:
    """The fault, if it exists and applies to this node's profile."""
    registry = _registry()
    fault = registry.get(name)
    if fault is None:
        raise FaultError(f"unknown fault {name!r}; known: {', '.join(sorted(registry))}")
    if node["profile"] not in fault.profiles:
        raise FaultError(f"fault {name!r} does not apply to profile {node['profile']} "
                         f"(applies to: {', '.join(fault.profiles)})")
    return fault


def inject(node: Node, name: str) -> None:
    """Give the stored node a fault (idempotent)."""
    fault = check_applicable(node, name)
    if name in node["faults"]:
        return
    if fault.inject is not None:
        fault.inject(node)
    node["faults"][name] = {"since": node["clock"]}


def clear(node: Node, name: str | None = None) -> list[str]:
    """Remove one fault (or all) and restore the healthy state; returns the names cleared."""
    names = [name] if name is not None else sorted(node["faults"])
    registry = _registry()
    for n in names:
        fault = registry.get(n)
        if fault is None:
            raise FaultError(f"unknown fault {n!r}")
        if n not in node["faults"]:
            continue
        if fault.clear is not None:
            fault.clear(node)
        del node["faults"][n]
    return names


def view(node: Node) -> Node:
    """The node as the tools show it: a copy with every overlay fault applied (the node itself when none is)."""
    if not node["faults"]:
        return node
    registry = _registry()
    overlays = [registry[n] for n in sorted(node["faults"]) if n in registry
                and registry[n].kind in ("overlay", "fabric") and registry[n].apply is not None]
    if not overlays:
        return node
    v = model.copy_node(node)
    for fault in overlays:
        fault.apply(v)  # type: ignore[misc]
    return v
