"""The collector registry: an explicit dict from collector id to Collector (no import side effects)."""

from __future__ import annotations

from . import (
    fabricmanager,
    ib,
    imex,
    kernel,
    mellanox_fw,
    nvidia_smi,
    nvlink,
    nvswitch,
    pcie,
    topo,
)
from .base import Collector, ParseError

_MODULES = (nvidia_smi, nvlink, topo, fabricmanager, imex, nvswitch, kernel, pcie, ib, mellanox_fw)

COLLECTORS: dict[str, Collector] = {c.id: c for m in _MODULES for c in m.COLLECTORS}


def default_collectors() -> tuple[Collector, ...]:
    """The standard collection set: one collector per facts location."""
    return tuple(c for c in COLLECTORS.values() if c.default)


__all__ = ["COLLECTORS", "Collector", "ParseError", "default_collectors"]
