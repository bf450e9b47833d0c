"""What the node model can do under load: the figures the emulated probes print, from its state (pure, stdlib only).

Each figure is a platform's nominal value (from a real capture in ../shared/corpus where one exists, else an
estimate that says so), lowered by what the node's state costs it, with a small seeded noise (about +-1%) so
repeated runs look measured and stay reproducible.
"""

from __future__ import annotations

import random

from .digest import sha256
from .model import Node, profile_of

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

#: Nominal figures per profile.
#: all_reduce: busbw (GB/s) at 8 GiB on the node's GPUs. H100: 481.39/481.20 at 8589934592 B in
#:   corpus nccl-tests/all-reduce-h100-1node-8gpu-tests2.17.8-...; A100: 235.26/235.03 at 8 GiB in
#:   all-reduce-a100-sxm4-40gb-1proc-8gpu-...; H200 has H100's NVLink 4 (same figure); GB200: OCI's 2-tray MNNVL
#:   run reaches algbw 480 GB/s at 8 GiB (blackwell-gb200-oci-2tray-...), busbw = algbw x 2(n-1)/n = 720 for a
#:   4-GPU tray (estimate).
#: all_gather / alltoall: A100 alltoall 224.31/226.16 at 8 GiB (alltoall-a100-sxm4-40gb-1proc-8gpu-...); the others
#:   are estimates (about 0.75 of all_reduce busbw on NVSwitch systems).
#: d2d: nvbandwidth device_to_device_memcpy_read_ce per pair (GB/s). H100 395.05-395.25 (nvbandwidth/h100-8gpu-v0.10-
#:   ...); GB200 797.7-798.3 (blackwell-gb200-oci-...); A100: estimate (no A100 matrix in the corpus; 12 NVLink 3
#:   links = 300 GB/s one way, CE copies reach about 250).
#: h2d: host_to_device_memcpy_ce per GPU (GB/s): PCIe Gen5 x16 55.3 (nvbandwidth/h800-8gpu-...), Gen4 x16 about
#:   half (estimate); GB200 over NVLink-C2C (estimate).
NOMINAL: dict[str, dict[str, float]] = {
    "dgx-a100": {"all_reduce": 235.1, "all_gather": 178.0, "alltoall": 225.2, "d2d": 250.0, "h2d": 26.0},
    "dgx-h100": {"all_reduce": 481.3, "all_gather": 361.0, "alltoall": 362.0, "d2d": 395.1, "h2d": 55.3},
    "hgx-h200": {"all_reduce": 481.3, "all_gather": 361.0, "alltoall": 362.0, "d2d": 395.1, "h2d": 55.3},
    "gb200-nvl72": {"all_reduce": 720.0, "all_gather": 540.0, "alltoall": 545.0, "d2d": 798.0, "h2d": 380.0},
}

#: ib_write_bw average (Gb/s) at 8 MiB by port rate: HDR 200 gives 23317.65 MB/sec = 195.6 Gb/s (corpus perftest/
#: ib_write_bw-a-cx6-hdr2x-...); NDR 400 twice that (DGX H100 acceptance runs report 390-393).
IB_BW_GBPS: dict[int, float] = {400: 391.2, 200: 195.6, 100: 97.8, 10: 9.8}
#: ib_write_lat typical (usec) at 2 B: 1.87 on HDR (corpus perftest/ib_write_lat-a-cx6-hdr2x-...); NDR the same
#: (estimate: the switch hop and the PCIe round trip dominate, not the rate).
IB_LAT_US = 1.87
#: Effective PCIe bandwidth per lane (Gb/s) by generation (about 87% of 8/16/32 GT/s after encoding and TLPs):
#: a GPU at x16 Gen5 (448) or Gen4 (224) does not limit its NIC; one that trained at x8 does.
PCIE_LANE_GBPS: dict[int, float] = {3: 7.0, 4: 14.0, 5: 28.0}
#: GPUDirect RDMA through the root complex instead of the PCIe switch (ACS redirecting peer requests): about half.
ACS_FACTOR = 0.5
NOISE = 0.01


def noise(*seed: object) -> float:
    """A reproducible factor in [1 - NOISE, 1 + NOISE] for one figure of one node."""
    digest = sha256("/".join(str(s) for s in seed).encode()).digest()
    return 1.0 + NOISE * (2.0 * random.Random(digest).random() - 1.0)


def nominal(view: Node, key: str) -> float:
    return NOMINAL[view["profile"]][key]


def gpu_nvlink_factor(view: Node, gpu: dict[str, Any]) -> float:
    """The share of its nominal NVLink bandwidth a GPU has: active links and their rate, times a hidden factor
    (nvlink_bw: links that report Active at full rate yet carry less, as only a load test shows)."""
    nv = profile_of(view)["nvlink"]
    full = nv["links_per_gpu"] * nv["gbps"]
    have = sum(link["gbps"] or 0.0 for link in gpu["nvlinks"] if link["active"])
    return (have / full if full else 0.0) * float(gpu.get("nvlink_bw", 1.0))


def nvlink_factor(view: Node) -> float:
    """The worst GPU's share: a collective runs at the pace of its slowest member."""
    return min((gpu_nvlink_factor(view, g) for g in view["gpus"]), default=0.0)


def pcie_gbps(view: Node, gpu: dict[str, Any]) -> float:
    """What the GPU's PCIe link carries (Gb/s) at its trained generation and width."""
    return PCIE_LANE_GBPS.get(int(gpu["pcie_gen"]), 7.0) * int(gpu["pcie_width"])


def pcie_factor(view: Node, gpu: dict[str, Any]) -> float:
    """The GPU's PCIe bandwidth as a share of the platform's (a GPU at x8 has half)."""
    g = profile_of(view)["gpu"]
    return pcie_gbps(view, gpu) / (PCIE_LANE_GBPS.get(int(g["pcie_gen"]), 7.0) * int(g["pcie_width"]))


def hca(view: Node, name: str | None) -> dict[str, Any] | None:
    """An RDMA device by name; the first one when None (perftest without -d takes the first device)."""
    if name is None:
        return view["hcas"][0] if view["hcas"] else None
    return next((h for h in view["hcas"] if h["name"] == name), None)


def hca_gbps(view: Node, dev: dict[str, Any]) -> float | None:
    """What the HCA's port 1 carries (Gb/s) host memory to host memory; None when the port is not Active."""
    port = dev["ports"][0]
    if port["state"] != "Active":
        return None
    base = IB_BW_GBPS.get(int(port["rate"]), port["rate"] * 0.978)
    return base * float(dev.get("bw_factor", 1.0))


def _ancestors(view: Node, bdf: str) -> list[dict[str, Any]]:
    by = {d["bdf"]: d for d in view["pcie"]}
    out, cur = [], by.get(bdf)
    while cur is not None and cur.get("parent"):
        cur = by.get(cur["parent"])
        if cur is not None:
            out.append(cur)
    return out


def _gpu_bdf(gpu: dict[str, Any]) -> str:
    return f"{gpu['domain'].lower()}:{gpu['bus'].lower()}:00.0"


def acs_redirects(view: Node, gpu: dict[str, Any], dev: dict[str, Any]) -> bool:
    """True when a bridge above the GPU or the NIC redirects peer requests upstream (ACS ReqRedir/CmpltRedir on)."""
    for bridge in _ancestors(view, _gpu_bdf(gpu)) + _ancestors(view, dev["bdf"]):
        acs = bridge.get("acs") or {}
        if acs.get("ReqRedir") or acs.get("CmpltRedir"):
            return True
    return False


def gdr_gbps(view: Node, dev: dict[str, Any], gpu: dict[str, Any]) -> float | None:
    """GPUDirect RDMA write bandwidth between a GPU's memory and an HCA: the HCA's, capped by the GPU's PCIe link,
    halved when ACS sends the peer traffic through the root complex."""
    ib = hca_gbps(view, dev)
    if ib is None:
        return None
    bw = min(ib, pcie_gbps(view, gpu) * 0.97)
    return bw * (ACS_FACTOR if acs_redirects(view, gpu, dev) or cross_socket(view, gpu, dev) else 1.0)


def cross_socket(view: Node, gpu: dict[str, Any], dev: dict[str, Any]) -> bool:
    """x86: the GPU and the NIC hang off different sockets, so GPUDirect traffic crosses the CPU interconnect
    (about the same loss as a trip through the root complex). Grace puts every device on its own root port."""
    if profile_of(view)["arch"] != "x86_64":
        return False
    by = {d["bdf"]: d for d in view["pcie"]}
    g, n = by.get(_gpu_bdf(gpu)), by.get(dev["bdf"])
    return g is not None and n is not None and g["numa"] != n["numa"]


def peermem(view: Node) -> bool:
    """GPU memory can be registered for RDMA (nvidia_peermem loaded)."""
    return "nvidia_peermem" in view["modules"]


def compute_apps(view: Node) -> list[dict[str, Any]]:
    """GPU compute processes on the node (fault gpu-busy), as nvidia-smi --query-compute-apps lists them."""
    return list(view.get("gpu_procs") or [])


def slurm_steps(view: Node) -> list[dict[str, Any]]:
    """Slurm job steps running on the node (fault slurm-job), as scontrol listpids lists their processes."""
    return list(view.get("slurm_steps") or [])
