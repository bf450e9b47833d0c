"""The GPU platforms fabricproof knows, and how a GPU maps to one: by its exact PCI device id, else its exact name."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PLATFORMS = ("a100", "h100", "h200", "b200", "gb200")

# PCI device id (nvidia-smi -q "Device Id" 0x<id>10DE) -> platform, or None for a GPU that belongs to none of them.
# Matched exactly: a substring of the product name took "NVIDIA GH200 480GB" for an H200 and H100 PCIe/NVL cards
# (NVLink bridges, no NVSwitch) for an HGX H100. Sources: pci.ids (pci-ids.ucw.cz, 2023-04-10) unless noted.
DEVICE_IDS: Mapping[str, str | None] = {
    "20b0": "a100",   # A100 SXM4 40GB
    "20b2": "a100",   # A100 SXM4 80GB
    "20b3": "a100",   # A100-SXM-64GB
    "20b1": None,     # A100 PCIe 40GB: a PCIe card, NVLink only over bridges, no NVSwitch
    "20b5": None,     # A100 PCIe 80GB: likewise
    "2330": "h100",   # H100 SXM5 80GB
    "2324": "h100",   # H800 (SXM)
    "2331": None,     # H100 PCIe: NVLink bridges, no NVSwitch
    "2321": None,     # H100 NVL (GPU Part Number 2321-886-A1, tests/falsepositives/h100-nvl-bridges)
    "2335": "h200",   # H200 SXM 141GB (lspci [10de:2335], easydiffusion/torchruntime#24; NVIDIA/mig-parted#120)
    "2342": None,     # GH200 480GB: a Grace Hopper superchip, not an HGX H200 (tests/falsepositives/gh200-not-h200)
    "2348": None,     # GH200 144G HBM3e (NVIDIA/mig-parted#139)
    "2901": "b200",   # B200 (k8s-test-infra qx-b200.xml, ../shared/corpus/nvidia-smi-q-xml)
    "2941": "gb200",  # GB200 (k8s-test-infra qx-gb200.xml; leptonai/gpud lspci.gb200)
    "31c2": "gb200",  # GB300: judged by GB200's baselines and checks until it has its own (qx-gb300.xml)
}

# GPUs that have no NVLink at all (PCIe cards without a bridge connector), by PCI device id: a host of them reports
# zero links by design, not "NVLink down" (the DCGM_FR_NVLINK_DOWN false positive, NVIDIA/NVSentinel#1481).
# nvlink.links_active's applies_when lists the same ids (tests/unit/test_vocabularies.py holds them equal).
# Sources: pci.ids (2023-04-10); 2bb4/2bb5 from ../shared/corpus (telegraf RTX PRO 6000 Blackwell XML, dcgmi sample).
NO_NVLINK_DEVICE_IDS = (
    "1eb8",  # Tesla T4
    "2236",  # A10
    "2237",  # A10G
    "2684",  # GeForce RTX 4090
    "26b1",  # RTX 6000 Ada Generation
    "26b5",  # L40
    "27b8",  # L4
    "2bb4",  # RTX PRO 6000 Blackwell Max-Q Workstation Edition
    "2bb5",  # RTX PRO 6000 Blackwell Server Edition
)

# Fallback for output without a device id (nvidia-smi --query-gpu, excerpts): the exact product name, never a part.
_GPU_NAMES: Mapping[str, str] = {
    "NVIDIA A100-SXM4-40GB": "a100",
    "NVIDIA A100-SXM4-80GB": "a100",
    "NVIDIA H100 80GB HBM3": "h100",
    "NVIDIA H800": "h100",
    "NVIDIA H200": "h200",
    "NVIDIA B200": "b200",
    "NVIDIA GB200": "gb200",
    "NVIDIA GB300": "gb200",
}


def platform_of_name(gpu_name: str) -> str | None:
    """The platform of a GPU by its exact nvidia-smi name, e.g. 'NVIDIA H100 80GB HBM3' -> 'h100'; None if unknown."""
    return _GPU_NAMES.get(gpu_name.strip())


def platform_of(gpu: Mapping[str, Any]) -> str | None:
    """The platform of one GPU record of the facts: by its PCI device id when printed, else by its exact name."""
    device_id = gpu.get("pci_device_id")
    if device_id:
        return DEVICE_IDS.get(str(device_id).lower())
    return platform_of_name(str(gpu.get("name") or ""))
