"""GPUDirect RDMA faults: the peer-memory kernel modules."""

from __future__ import annotations

from ..model import Node
from .base import GDR, Fault


def _peermem_missing(node: Node) -> None:
    if "nvidia_peermem" in node["modules"]:
        node["modules"].remove("nvidia_peermem")


def _peermem_restore(node: Node) -> None:
    if "nvidia_peermem" not in node["modules"]:
        node["modules"].insert(0, "nvidia_peermem")


def _legacy_peermem(node: Node) -> None:
    if "nv_peer_mem" not in node["modules"]:
        node["modules"].insert(0, "nv_peer_mem")


def _legacy_clear(node: Node) -> None:
    if "nv_peer_mem" in node["modules"]:
        node["modules"].remove("nv_peer_mem")


FAULTS: tuple[Fault, ...] = (
    Fault("peermem-missing", "nvidia_peermem is not loaded (GPUDirect RDMA off); `modprobe nvidia_peermem` fixes it.",
          "state", catches=("rdma.peermem_loaded",), catches_probes=GDR,
          inject=_peermem_missing, clear=_peermem_restore),
    Fault("legacy-peermem", "The deprecated nv_peer_mem module is loaded.", "state",
          catches=("rdma.legacy_peer_mem_absent",), inject=_legacy_peermem, clear=_legacy_clear),
)
