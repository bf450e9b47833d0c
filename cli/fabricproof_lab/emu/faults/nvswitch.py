"""NVSwitch faults: a switch off the bus, older firmware, a fatal SXid."""

from __future__ import annotations

from .. import model
from ..model import Node, profile_of
from .base import FM_PROFILES, HGX_H, NOT_READY, NOT_READY_A100, Fault, drop_log, restart_fm


def _switch_links(node: Node, switch: int) -> list[int]:
    """GPU link numbers wired to one NVSwitch (H100/H200: 4+5+5+4 over 4; A100: 2 per switch over 6)."""
    per = len(node["gpus"][0]["nvlinks"])
    count = len(node["nvswitches"])
    if per == 18 and count == 4:
        split = (4, 5, 5, 4)
    else:
        split = tuple([per // count] * count)
    start = sum(split[:switch])
    return list(range(start, start + split[switch]))


MISSING_SWITCH = 2


def _nvswitch_missing(node: Node) -> None:
    sw = node["nvswitches"][MISSING_SWITCH]
    sw["present"] = False
    for dev in node["pcie"]:
        if dev["bdf"] == sw["bdf"]:
            dev["present"] = False
    for gpu in node["gpus"]:
        for n in _switch_links(node, MISSING_SWITCH):
            gpu["nvlinks"][n].update(active=False, gbps=None)
    restart_fm(node)


def _nvswitch_missing_clear(node: Node) -> None:
    sw = node["nvswitches"][MISSING_SWITCH]
    sw["present"] = True
    gbps = profile_of(node)["nvlink"]["gbps"]
    for dev in node["pcie"]:
        dev.pop("present", None)
    for gpu in node["gpus"]:
        for n in _switch_links(node, MISSING_SWITCH):
            gpu["nvlinks"][n].update(active=True, gbps=gbps)
    restart_fm(node)


_OLD_NVSWITCH_FW = {"92.10.18.00.01": "92.10.14.00.01", "96.10.6D.00.01": "96.10.55.00.01",
                    "96.10.73.00.01": "96.10.6D.00.01"}


def _nvswitch_fw_drift(node: Node) -> None:
    sw = node["nvswitches"][1]
    sw["firmware"] = _OLD_NVSWITCH_FW.get(sw["firmware"], "96.10.55.00.01")


def _nvswitch_fw_clear(node: Node) -> None:
    for sw in node["nvswitches"]:
        sw["firmware"], sw["firmware_pending"] = profile_of(node)["nvswitch"]["firmware"], None


def _sxid_fatal(node: Node) -> None:
    sw = node["nvswitches"][1]
    model.advance(node, 30)
    bus = f"{sw['bdf']}"
    model.journal(node, "kernel", "kernel",
                  f"nvidia-nvswitch{sw['index']}: SXid (PCI:{bus}): 24007, Fatal, Link 44 sourcetrack timeout error "
                  "(First)")
    model.journal(node, "kernel", "kernel",
                  f"nvidia-nvswitch{sw['index']}: SXid (PCI:{bus}): 24007, Severity 1 Engine instance 44 "
                  "Sub-engine instance 00")
    model.fm_log(node, "ERROR", f"detected NVSwitch fatal error 24007 on fid 0 on NVSwitch pci bus id "
                                f"00000000:{sw['bus'].upper()}:00.0 physical id {sw['index']} port 44")


def _sxid_clear(node: Node) -> None:
    drop_log(node, "kernel", "SXid")
    node["fm_log"] = [r for r in node["fm_log"] if "fatal error" not in r[2]]


FAULTS: tuple[Fault, ...] = (
    Fault("nvswitch-missing", "NVSwitch 2 is not on the PCI bus: its GPU links are inactive and Fabric Manager "
          "aborts (NVSwitch count matches no known topology).", "state", FM_PROFILES,
          catches=("nvswitch.count", "fm.service_active", "nvlink.links_active", "nvlink.topology"),
          catches_by_profile={p: ("nvswitch.count", "fm.service_active", "nvlink.links_active", "nvlink.topology",
                                  "fabric.state_completed") for p in ("dgx-h100", "hgx-h200")},
          catches_probes=("perf.dcgm_diag",) + NOT_READY,
          catches_probes_by_profile={"dgx-a100": ("perf.dcgm_diag",) + NOT_READY_A100},
          inject=_nvswitch_missing, clear=_nvswitch_missing_clear),
    Fault("nvswitch-fw-drift", "NVSwitch 1 runs an older firmware than its peers (nvfwupd show_version). "
          "HGX H100/H200 only: A100 NVSwitch firmware ships in the DGX firmware container.", "state",
          HGX_H, catches=("nvswitch.firmware",), catches_fleet=("nvswitch.firmware_consistent",),
          inject=_nvswitch_fw_drift, clear=_nvswitch_fw_clear),
    Fault("nvswitch-sxid-fatal", "NVSwitch 1 reported fatal SXid 24007 (kernel log) and FM logged the fatal error.",
          "state", FM_PROFILES, catches=("nvswitch.sxid_fatal", "fm.log_nvswitch_fatal"), inject=_sxid_fatal,
          clear=_sxid_clear),
)
