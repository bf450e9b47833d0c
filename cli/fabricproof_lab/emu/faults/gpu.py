"""GPU and driver faults: driver drift, Xids and recovery actions, memory errors, throttling, persistence, PCIe."""

from __future__ import annotations

from .. import model
from ..model import Node, profile_of
from .base import FM_PROFILES, PCIE_PROBES, Fault, drop_log, other_release, restart_fm, set_branch_pkg


def _driver_drift(node: Node) -> None:
    ver = other_release(node["driver"]["loaded"], +1)
    _set_versions(node, ver)


def _set_versions(node: Node, ver: str) -> None:
    for stem in ("nvidia-driver-", "libnvidia-nscq-"):
        set_branch_pkg(node, stem, ver)
    if profile_of(node)["fm"]["present"]:
        set_branch_pkg(node, "nvidia-fabricmanager-", ver)
        set_branch_pkg(node, "cuda-drivers-fabricmanager-", ver)
    if profile_of(node)["imex"]["present"]:
        set_branch_pkg(node, "nvidia-imex-", ver)
    node["driver"]["loaded"] = ver
    if "nvidia-fabricmanager" in node["services"]:
        restart_fm(node)


def _driver_restore(node: Node) -> None:
    _set_versions(node, profile_of(node)["driver"]["version"])


def _xid79(node: Node) -> None:
    gpu = node["gpus"][4 % len(node["gpus"])]
    model.advance(node, 60)
    bus = gpu["bus_id"][4:-2].lower()  # 00000000:9B:00.0 -> 0000:9b:00
    model.journal(node, "kernel", "kernel",
                  f"NVRM: Xid (PCI:{bus}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")


def _xid_clear(node: Node) -> None:
    drop_log(node, "kernel", "NVRM: Xid")


def _netir_fatal(node: Node) -> None:
    """GB200 GPU 1: a fatal NVLink5 NETIR error (Xid 149, as the corpus line prints it) and the recovery action the
    driver then asks for (Xid 154 and nvidia-smi's GPU Recovery Action)."""
    gpu = node["gpus"][1]
    bus = gpu["bus_id"][4:-2].lower()  # 00000009:01:00.0 -> 0009:01:00
    model.advance(node, 45)
    model.journal(node, "kernel", "kernel", f"NVRM: Xid (PCI:{bus}): 149, NETIR Fatal XC0 i0 Link -1 (0x000fe406 "
                  "0x00000000 0x00000000 0x00000000 0x00000000 0x00000000)")
    model.journal(node, "kernel", "kernel", f"NVRM: Xid (PCI:{bus}): 154, GPU recovery action changed from 0x0 "
                  "(None) to 0x4 (Drain and Reset)")
    gpu["recovery_action"] = "Drain and Reset"


def _netir_clear(node: Node) -> None:
    _xid_clear(node)
    for gpu in node["gpus"]:
        gpu["recovery_action"] = "None"


def _remap_pending(view: Node) -> None:
    view["gpus"][5 % len(view["gpus"])]["remapped_rows"].update(pending=True, uncorrectable=1)


def _ecc_uncorrectable(view: Node) -> None:
    """Two uncorrectable DRAM errors on GPU 6 since the driver loaded (and so in its lifetime count)."""
    gpu = view["gpus"][6 % len(view["gpus"])]
    ecc = gpu.setdefault("ecc", {})
    for scope in ("volatile", "aggregate"):
        ecc.setdefault(scope, {})["dram_uncorrectable"] = 2


def _throttle(view: Node) -> None:
    gpu = view["gpus"][-1]
    gpu["throttle_reasons"] = ["hw_slowdown", "hw_power_brake_slowdown"]


def _persistence_off(node: Node) -> None:
    svc = node["services"]["nvidia-persistenced"]
    svc.update(active="inactive", sub="dead", since=node["clock"])
    for gpu in node["gpus"]:
        gpu["persistence_mode"] = "Disabled"


def _persistence_on(node: Node) -> None:
    node["services"]["nvidia-persistenced"].update(active="active", sub="running", since=node["clock"])
    for gpu in node["gpus"]:
        gpu["persistence_mode"] = "Enabled"


def _pcie_down(view: Node) -> None:
    gpu = view["gpus"][3 % len(view["gpus"])]
    gpu["pcie_gen"], gpu["pcie_width"] = gpu["pcie_gen"] - 1, 8


FAULTS: tuple[Fault, ...] = (
    Fault("driver-drift", "This node runs the next driver release of the branch (with matching FM/IMEX).", "state",
          catches=("driver.version",),
          catches_by_profile={p: ("driver.version", "fm.version") for p in FM_PROFILES},
          catches_fleet=("driver.version_consistent",),
          catches_fleet_by_profile={p: ("driver.version_consistent", "fm.version_consistent") for p in FM_PROFILES},
          inject=_driver_drift,
          clear=_driver_restore),
    Fault("gpu-xid-79", "Kernel log: Xid 79 (GPU has fallen off the bus) on GPU 4 since boot.", "state",
          catches=("gpu.xid", "gpu.fallen_off_bus"), inject=_xid79, clear=_xid_clear),
    Fault("nvlink5-netir-fatal", "GB200 GPU 1: kernel log Xid 149 'NETIR Fatal ... Link -1' then Xid 154 'to 0x4 (Drain "
          "and Reset)'; nvidia-smi shows GPU Recovery Action Drain and Reset.", "state", ("gb200-nvl72",),
          # Xid 149's catalogue resolution (WORKFLOW_NVLINK5_ERR) is in the default gpu.xid_policy.fail
          catches=("nvlink.xid_nvlink5_fatal", "gpu.xid_recovery_action", "gpu.recovery_action", "gpu.xid"),
          inject=_netir_fatal, clear=_netir_clear),
    Fault("remapped-rows-pending", "GPU 5 has a row remapping pending (reset required).", "overlay",
          catches=("gpu.remapped_rows_pending",), catches_probes=("perf.dcgm_diag",),
          apply=_remap_pending),
    Fault("ecc-uncorrectable", "GPU 6 counted two uncorrectable DRAM ECC errors since the driver loaded (volatile and "
          "aggregate).", "overlay", catches=("gpu.ecc_uncorrectable",), apply=_ecc_uncorrectable),
    Fault("gpu-throttle", "The last GPU is held by HW Slowdown / HW Power Brake.", "overlay",
          catches=("gpu.throttle",), apply=_throttle),
    Fault("persistence-off", "nvidia-persistenced stopped: persistence mode Disabled on every GPU.", "state",
          catches=("gpu.persistence",), catches_probes=("perf.dcgm_diag",),
          inject=_persistence_off, clear=_persistence_on),
    Fault("pcie-downtrained", "GPU 3's PCIe link trained one generation lower at x8.", "overlay",
          catches=("gpu.pcie_link_gen", "gpu.pcie_link_width"),
          catches_probes=PCIE_PROBES,
          catches_probes_by_profile={"gb200-nvl72": ("perf.dcgm_diag",)},
          apply=_pcie_down),
)
