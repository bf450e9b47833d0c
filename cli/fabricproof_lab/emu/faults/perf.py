"""Faults only a load test sees (the probes read hidden factors; collectors see a healthy node), and busy nodes."""

from __future__ import annotations

import re

from ..model import Node, profile_of
from .base import NVLINK_PROBES, NVLINK_PROBES_BY, PCIE_PROBES, Fault, compute_hcas


DEGRADED_GPU = 5
DEGRADED_HCA = 0  # mlx5_0: the device a pairwise perftest without -d uses, so every pair it is in slows too
X8_GPU = 6


def _nvlink_degraded(view: Node) -> None:
    """Every link of GPU 5 Active at full rate, yet it carries half (a marginal link retraining under load)."""
    view["gpus"][DEGRADED_GPU % len(view["gpus"])]["nvlink_bw"] = 0.5


def _hca_degraded(view: Node) -> None:
    """mlx5_0 reports Active at its full rate but moves half the data (a bad cable or a PCIe-starved adapter)."""
    compute_hcas(view)[DEGRADED_HCA]["bw_factor"] = 0.5


def _pcie_x8(view: Node) -> None:
    """GPU 6 trained at x8 at its normal generation: its GPUDirect traffic to its rail NIC halves."""
    view["gpus"][X8_GPU % len(view["gpus"])]["pcie_width"] = 8


def _multinode_slow(view: Node) -> None:
    """Its HCAs move their full rate alone and to one peer, and half under a collective's many-node load (an adapter
    starved of PCIe credits or throttled by congestion control with many queue pairs)."""
    view["multinode_bw"] = 0.5


def next_host(hostname: str) -> str:
    """The lab node after this one by number (gb200-0004 -> gb200-0005): the far end of its bad path."""
    m = re.fullmatch(r"(.*?)(\d+)", hostname)
    return f"{m.group(1)}{int(m.group(2)) + 1:0{len(m.group(2))}d}" if m else hostname


def _path_slow(view: Node) -> None:
    """The path between this node and the next one (a cable or switch port between their leaves) carries 40%: each
    is fine alone and with any other node, slow only together."""
    view["slow_peers"] = [next_host(view["hostname"])]


def _gpu_busy(view: Node) -> None:
    """A training job holds every GPU: one python3 process each, most of the memory in use."""
    mem = profile_of(view)["gpu"]["memory_mib"]
    view["gpu_procs"] = [{"gpu": g["index"], "pid": 12345 + g["index"], "name": "/usr/bin/python3",
                          "used_mib": int(mem * 0.87)} for g in view["gpus"]]


def _slurm_job(view: Node) -> None:
    """Slurm job 4242 runs step 0 on the node: one task per GPU, and a helper one of them forked."""
    view["slurm_steps"] = [{"job": 4242, "step": "0", "child_pid": 23001,
                            "pids": [23010 + g["index"] for g in view["gpus"]]}]
    # slurmctld sees the node allocated to the job (a drained node keeps the flag: DRAINING until the job ends)
    view["slurm"]["state"] = view["slurm"]["state"].replace("IDLE", "ALLOCATED")


#: What names a fault only a multi-node collective shows: the search's verdict on the node.
COLLECTIVE = ("perf.collective_at_fault",)

FAULTS: tuple[Fault, ...] = (
    Fault("hca-multinode-slow", "The node's HCAs pass their GPUDirect and pairwise perftest at full rate, but carry "
          "half under a multi-node collective's load: only a collective across nodes, and its search, single it "
          "out.", "overlay", catches_collective=COLLECTIVE, apply=_multinode_slow),
    Fault("path-slow-pair", "The path between this node and the next lab node by number carries 40%: both are fine "
          "alone and with any other node; the collective search names the pair.", "overlay",
          catches_collective=COLLECTIVE, apply=_path_slow),
    Fault("gpu-busy", "A training job runs on the node: one /usr/bin/python3 compute process per GPU "
          "(`nvidia-smi --query-compute-apps` lists them); no probe may start here.", "overlay",
          blocks_probes=True, apply=_gpu_busy),
    Fault("slurm-job", "Slurm job 4242 step 0 runs on the node (`scontrol listpids` lists its tasks); no probe may "
          "start here.", "overlay", blocks_probes=True, apply=_slurm_job),
    Fault("nvlink-degraded", "GPU 5's NVLinks are all Active at full rate, yet carry half the bandwidth: only load "
          "shows it (NCCL busbw, GPU 5's nvbandwidth pairs).", "overlay",
          catches_probes=NVLINK_PROBES, catches_probes_by_profile=NVLINK_PROBES_BY, apply=_nvlink_degraded),
    Fault("hca-degraded", "mlx5_0 is Active at its full rate but moves half the data: its GPUDirect run and every "
          "host pair it is in fall below the gate.", "overlay",
          catches_probes=("perf.ib_gdr_bw", "perf.ib_pair_bw"), apply=_hca_degraded),
    Fault("pcie-x8", "GPU 6's PCIe link trained at x8 (same generation): GPUDirect RDMA through its rail NIC halves, "
          "and DCGM's PCIe test flags the width.", "overlay", catches=("gpu.pcie_link_width",),
          catches_probes=PCIE_PROBES, catches_probes_by_profile={"gb200-nvl72": ("perf.dcgm_diag",)}, apply=_pcie_x8),
)
