"""The fabric's reading of the inventory: which host is the vantage point, and each host's HCA rail map."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..model import Host

#: The host var that names a vantage host, and the group that does the same for its members.
VANTAGE_VAR = "fabricproof_fabric_vantage"
VANTAGE_GROUP = "fabric_vantage"
_TRUE = {"true", "yes", "on", "1"}


@dataclass(frozen=True)
class Vantage:
    """The host the fabric is read from and why it was chosen; host None: none could be, and `why` says so."""

    host: Host | None
    why: str


def _declared(host: Host) -> bool:
    value = host.vars.get(VANTAGE_VAR)
    # Ansible hands an INI inventory's `true` over as a string; YAML's as a boolean.
    return value is True or (isinstance(value, str) and value.strip().lower() in _TRUE)


def active_ib(facts: Mapping[str, Any] | None) -> bool:
    """Whether a host's facts show an InfiniBand port Active (it sees the subnet)."""
    ports = ((((facts or {}).get("ib") or {}).get("ibstat") or {}).get("ports")) or ()
    return any(isinstance(p, dict) and p.get("state") == "Active" and p.get("link_layer", "InfiniBand") == "InfiniBand"
               for p in ports)


def choose(hosts: Sequence[Host], facts: Mapping[str, Mapping[str, Any]]) -> Vantage:
    """The vantage: the first host (by name) with `fabricproof_fabric_vantage: true`, else the first in group
    `fabric_vantage`, else the first collected host whose facts show an Active InfiniBand port."""
    ordered = sorted(hosts, key=lambda h: h.name)
    for host in ordered:
        if _declared(host):
            return Vantage(host, f"host var {VANTAGE_VAR}")
    for host in ordered:
        if VANTAGE_GROUP in host.groups:
            return Vantage(host, f"group {VANTAGE_GROUP}")
    for host in ordered:
        if active_ib(facts.get(host.name)):
            return Vantage(host, "the first host with an Active InfiniBand port")
    return Vantage(None, f"no fabric vantage host: no host has {VANTAGE_VAR}: true or is in group {VANTAGE_GROUP}, "
                         "and no collected host shows an Active InfiniBand port")


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def rails(facts: Mapping[str, Any] | None) -> dict[str, int]:
    """A host's rail map, HCA -> rail: its InfiniBand HCAs in name order (mlx5_0 is rail 0, mlx5_10 follows
    mlx5_9), as a rail-optimised node cables them."""
    ports = ((((facts or {}).get("ib") or {}).get("ibstat") or {}).get("ports")) or ()
    names = {p["ca"] for p in ports if isinstance(p, dict) and isinstance(p.get("ca"), str)
             and p.get("link_layer", "InfiniBand") == "InfiniBand"}
    return {name: rail for rail, name in enumerate(sorted(names, key=_natural))}
