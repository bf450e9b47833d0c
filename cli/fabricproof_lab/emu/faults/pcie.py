"""PCIe and host faults: ACS on the GPU's bridge, a NIC on the wrong socket, the IOMMU translating."""

from __future__ import annotations


from ..model import Node, profile_of
from .base import GDR, X86, Fault, compute_hcas, healthy_node

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any


def acs_target(node: Node) -> dict[str, Any]:
    """The bridge right above GPU 0 (switch downstream port on x86, Grace root port on GB200)."""
    gpu = node["gpus"][0]
    bdf = f"{gpu['domain'].lower()}:{gpu['bus']}:00.0"
    parent = next(d for d in node["pcie"] if d["bdf"] == bdf)["parent"]
    return next(d for d in node["pcie"] if d["bdf"] == parent)


def _acs_on(node: Node) -> None:
    dev = acs_target(node)
    on = dict(dev["acs"], SrcValid=True, ReqRedir=True, CmpltRedir=True, UpstreamFwd=True)
    dev["acs"], dev["acs_boot"] = dict(on), dict(on)


def _acs_off(node: Node) -> None:
    dev = acs_target(node)
    off = dict.fromkeys(dev["acs"], False)
    dev["acs"], dev["acs_boot"] = dict(off), dict(off)


def _affinity(view: Node) -> None:
    """Rail 0's NIC sits in a slot of the other socket's root complex instead of GPU 0's PCIe switch."""
    hca = compute_hcas(view)[0]
    new_bus = 0xF4
    root = f"0000:{new_bus - 1:02x}:01.0"
    new_bdf = f"0000:{new_bus:02x}:00.0"
    for dev in view["pcie"]:
        if dev["bdf"] == hca["bdf"]:
            dev.update(bdf=new_bdf, parent=root, numa=1)
    view["pcie"].append({"bdf": root, "kind": "root_port", "name": profile_of(view)["pcie"]["root_port"],
                         "parent": None, "secondary": new_bus, "subordinate": new_bus,
                         "acs": dict.fromkeys(("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd",
                                               "EgressCtrl", "DirectTrans"), False),
                         "acs_boot": None, "numa": 1, "speed": profile_of(view)["pcie"]["link_speed"], "width": 16})
    view["pcie"].sort(key=lambda d: d["bdf"])
    hca["bdf"] = new_bdf


def _iommu(node: Node) -> None:
    node["cmdline"] = node["cmdline"].replace(" iommu=pt", "")


def _iommu_clear(node: Node) -> None:
    node["cmdline"] = healthy_node(node)["cmdline"]


FAULTS: tuple[Fault, ...] = (
    Fault("acs-enabled", "ACS is on (SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+) on the bridge above GPU 0, in the "
          "BIOS default too: `setpci ... ECAP_ACS+0x6.w=0000` fixes it until the next reboot.", "state",
          catches=("pcie.acs_disabled",), catches_probes=GDR,
          inject=_acs_on, clear=_acs_off),
    Fault("gpu-nic-affinity", "Rail 0's NIC sits in a slot of the other socket: GPU 0's nearest NIC is NODE, not PIX.",
          "overlay", X86, catches=("topo.gpu_nic_affinity",), apply=_affinity),
    Fault("iommu-translated", "Kernel command line lost iommu=pt: the IOMMU translates (can force ACS on).", "state",
          X86, catches=("iommu.mode",), inject=_iommu, clear=_iommu_clear),
)
