"""The fault catalog: named, stable faults a lab node can carry, and the checks that must catch each.

Three kinds of fault:
* overlay: the stored state stays healthy; every render applies the fault to a copy (hardware that
  stays broken until the fault is cleared: a dead link, a degraded port);
* state: injecting changes the stored state the way the real failure would (a package at the wrong
  version, a service that died, a module unloaded), so the real remediation (apt-get, systemctl,
  modprobe, setpci, a firmware burn) fixes it; clearing restores the healthy value;
* trigger: arms a behaviour of a mutating tool (upgrade-breaks-fm), consumed when it fires.

`catches` lists exactly the host checks that fail on one snapshot of a node with the fault against its
profile's baseline, on every profile the fault applies to; `catches_by_profile` gives the exact list per
profile where it differs (fabric checks do not exist on A100). `catches_over_time` are the counter-delta
checks (two snapshots). `catches_fleet` are the fleet checks that fail once the faulty node is compared
with healthy peers. `breaks` names collectors whose command hangs or prints garbage. `catches_probes` are the
perf.* checks (probes: NCCL, nvbandwidth, perftest, DCGM) that fail on the node once the probes run on it: a fault
with no `catches` but some `catches_probes` is one only a load test finds. `blocks_probes` marks a node that is
not idle (a GPU process, a Slurm job step): a probe must not start there.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from fabricproof import tools

from . import model
from .model import Node
from .profiles import DRIVER_RELEASES, PROFILES, deb_version

ALL = ("dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72")
FM_PROFILES = ("dgx-a100", "dgx-h100", "hgx-h200")
FABRIC_PROFILES = ("dgx-h100", "hgx-h200", "gb200-nvl72")
X86 = FM_PROFILES
HGX_H = ("dgx-h100", "hgx-h200")

#: The collectors that run nvidia-smi (a tool's key is the id of the collector that runs it).
NVSMI_COLLECTORS = tuple(t.key for t in tools.TOOLS.values() if t.argv[0] == "nvidia-smi")


@dataclass(frozen=True)
class Fault:
    """One catalog entry (see the module docstring for the meaning of each list)."""

    name: str
    description: str
    kind: str  # overlay | state | trigger
    profiles: tuple[str, ...] = ALL
    catches: tuple[str, ...] = ()
    catches_by_profile: dict[str, tuple[str, ...]] = field(default_factory=dict)
    catches_over_time: tuple[str, ...] = ()
    catches_fleet: tuple[str, ...] = ()
    catches_fleet_by_profile: dict[str, tuple[str, ...]] = field(default_factory=dict)
    breaks: tuple[str, ...] = ()
    catches_probes: tuple[str, ...] = ()
    catches_probes_by_profile: dict[str, tuple[str, ...]] = field(default_factory=dict)
    blocks_probes: bool = False
    apply: Callable[[Node], None] | None = None  # overlay: change the render view
    inject: Callable[[Node], None] | None = None  # state: change the stored node
    clear: Callable[[Node], None] | None = None  # state: put the healthy value back

    def catches_for(self, profile: str) -> tuple[str, ...]:
        """Exact single-snapshot checks that fail on a node of `profile` with this fault."""
        return self.catches_by_profile.get(profile, self.catches)

    def catches_fleet_for(self, profile: str) -> tuple[str, ...]:
        """Fleet checks that fail when a node of `profile` with this fault is compared with healthy peers."""
        return self.catches_fleet_by_profile.get(profile, self.catches_fleet)

    def catches_probes_for(self, profile: str) -> tuple[str, ...]:
        """perf.* checks that fail on a node of `profile` with this fault once the probes run on it."""
        return self.catches_probes_by_profile.get(profile, self.catches_probes)

    def to_dict(self) -> dict[str, Any]:
        """JSON form for `lab fault list --format json`."""
        return {
            "name": self.name,
            "description": self.description,
            "kind": self.kind,
            "profiles": list(self.profiles),
            "catches": list(self.catches),
            "catches_by_profile": {p: list(self.catches_for(p)) for p in self.profiles},
            "catches_over_time": list(self.catches_over_time),
            "catches_fleet": list(self.catches_fleet),
            "catches_fleet_by_profile": {p: list(self.catches_fleet_for(p)) for p in self.profiles},
            "breaks": list(self.breaks),
            "catches_probes": list(self.catches_probes),
            "catches_probes_by_profile": {p: list(self.catches_probes_for(p)) for p in self.profiles},
            "blocks_probes": self.blocks_probes,
        }


# ---------------------------------------------------------------------------------------------
# helpers
# ---------------------------------------------------------------------------------------------

def _profile(node: Node) -> dict[str, Any]:
    return PROFILES[node["profile"]]


def _compute_ib(node: Node) -> list[dict[str, Any]]:
    return [h for h in node["hcas"] if h["role"] == "compute"]


def _port(node: Node, n: int) -> dict[str, Any]:
    hcas = _compute_ib(node)
    return hcas[n % len(hcas)]["ports"][0]


def _other_release(version: str, step: int) -> str:
    """Another release of the same branch: step -1 = the one before (or after, at the oldest)."""
    rel = DRIVER_RELEASES[model.branch_of(version)]
    i = rel.index(version) if version in rel else 0
    j = i + step
    if not 0 <= j < len(rel):
        j = i - step
    return rel[j]


def _set_branch_pkg(node: Node, stem: str, version: str) -> None:
    br = model.branch_of(version)
    for name in [n for n in node["packages"] if n.startswith(stem)]:
        del node["packages"][name]
    name = f"{stem}{br}"
    node["packages"][name] = deb_version(name, version)


def _healthy(node: Node) -> Node:
    return model.new_node(node["profile"], node["index"], node["rack"], node["hostname"], node["address"])


# ---------------------------------------------------------------------------------------------
# Fabric Manager
# ---------------------------------------------------------------------------------------------

def _fm_down(node: Node) -> None:
    svc = node["services"]["nvidia-fabricmanager"]
    model.advance(node, 5)
    model.journal(node, "fm", "systemd[1]",
                  "nvidia-fabricmanager.service: Main process exited, code=killed, status=9/KILL")
    model.journal(node, "fm", "systemd[1]", "nvidia-fabricmanager.service: Failed with result 'signal'.")
    svc.update(active="failed", sub="failed", result="signal", exit_status=9, since=node["clock"])


def _fm_restart(node: Node) -> None:
    model.advance(node, 5)
    model.fm_stop(node)
    model.fm_start(node)


def _fm_mismatch(node: Node) -> None:
    fm = model.installed_fm(node) or node["driver"]["loaded"]
    old = _other_release(fm, -1)
    _set_branch_pkg(node, "nvidia-fabricmanager-", old)
    _fm_restart(node)


def _fm_mismatch_clear(node: Node) -> None:
    _set_branch_pkg(node, "nvidia-fabricmanager-", node["driver"]["loaded"])
    _fm_restart(node)


def _fm_restarts(node: Node) -> None:
    node["services"]["nvidia-fabricmanager"]["restarts"] = 3


def _fm_restarts_clear(node: Node) -> None:
    node["services"]["nvidia-fabricmanager"]["restarts"] = 0


def _fm_config_drift(node: Node) -> None:
    node["fm_config"].update(FABRIC_MODE="1", FM_STAY_RESIDENT_ON_FAILURES="1")


def _fm_config_clear(node: Node) -> None:
    node["fm_config"] = dict(_profile(node)["fm"]["config"])


# ---------------------------------------------------------------------------------------------
# Fabric state (overlays)
# ---------------------------------------------------------------------------------------------

def _fabric_in_progress(view: Node) -> None:
    for gpu in view["gpus"]:
        gpu["fabric"].update(state="In Progress", status="N/A")


def _insufficient(view: Node) -> None:
    for gpu in view["gpus"]:
        gpu["fabric"].update(state="Completed", status="Insufficient Resources", clique_id=0,
                             cluster_uuid="00000000-0000-0000-0000-000000000000")


def _cluster_mismatch(view: Node) -> None:
    other = model.rack_fabric(view["profile"], (view["rack"] or 0) + 1)
    assert other is not None  # the fault only applies to per-rack (GB200) profiles
    for gpu in view["gpus"]:
        gpu["fabric"]["cluster_uuid"] = other[1]


# ---------------------------------------------------------------------------------------------
# NVLink / NVSwitch
# ---------------------------------------------------------------------------------------------

def _nvlink_inactive(view: Node) -> None:
    links = view["gpus"][1]["nvlinks"]
    for n in (3, 7):
        links[n].update(active=False, gbps=None)


def _nvlink_slow(view: Node) -> None:
    for link in view["gpus"][2]["nvlinks"]:
        link["gbps"] = round(link["gbps"] / 2, 3)


# Per read of `nvidia-smi nvlink -e`, GPU 0 link 4 gains these errors (enough to cross any
# per-soak threshold: CRC > 10 is CRITICAL per domain.md A.2).
ERROR_STEP = {"replay": 2, "recovery": 1, "crc_flit": 24, "crc_data": 6}


def _nvlink_errors(view: Node) -> None:
    link = view["gpus"][0]["nvlinks"][4]
    for key, step in ERROR_STEP.items():
        link[key] += step * (1 + view["ticks"])


# Per read on Blackwell, GPU 0 link 4 also fails link recoveries and passes errors FEC could not correct.
NVLINK5_STEP = {"recovery_failed": 1, "effective_errors": 3}


def _nvlink5_errors(view: Node) -> None:
    _nvlink_errors(view)
    link = view["gpus"][0]["nvlinks"][4]
    for key, step in NVLINK5_STEP.items():
        link[key] = link.get(key, 0) + step * (1 + view["ticks"])


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
    _fm_restart(node)


def _nvswitch_missing_clear(node: Node) -> None:
    sw = node["nvswitches"][MISSING_SWITCH]
    sw["present"] = True
    gbps = _profile(node)["nvlink"]["gbps"]
    for dev in node["pcie"]:
        dev.pop("present", None)
    for gpu in node["gpus"]:
        for n in _switch_links(node, MISSING_SWITCH):
            gpu["nvlinks"][n].update(active=True, gbps=gbps)
    _fm_restart(node)


_OLD_NVSWITCH_FW = {"92.10.18.00.01": "92.10.14.00.01", "96.10.6D.00.01": "96.10.55.00.01",
                    "96.10.73.00.01": "96.10.6D.00.01"}


def _nvswitch_fw_drift(node: Node) -> None:
    sw = node["nvswitches"][1]
    sw["firmware"] = _OLD_NVSWITCH_FW.get(sw["firmware"], "96.10.55.00.01")


def _nvswitch_fw_clear(node: Node) -> None:
    for sw in node["nvswitches"]:
        sw["firmware"], sw["firmware_pending"] = _profile(node)["nvswitch"]["firmware"], None


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


def _drop_log(node: Node, unit: str, needle: str) -> None:
    node["journal"][unit] = [r for r in node["journal"][unit] if needle not in r[2]]


def _sxid_clear(node: Node) -> None:
    _drop_log(node, "kernel", "SXid")
    node["fm_log"] = [r for r in node["fm_log"] if "fatal error" not in r[2]]


# ---------------------------------------------------------------------------------------------
# InfiniBand
# ---------------------------------------------------------------------------------------------

def _ib_down(view: Node) -> None:
    _port(view, 2).update(state="Down", phys_state="Disabled", rate=10, width="4X SDR", base_lid=65535, sm_lid=0)


def _ib_polling(view: Node) -> None:
    _port(view, 2).update(state="Down", phys_state="Polling", rate=10, width="4X SDR", base_lid=65535, sm_lid=0)


def _ib_no_sm(view: Node) -> None:
    for hca in view["hcas"]:
        for port in hca["ports"]:
            if port["link_layer"] == "InfiniBand":
                port.update(state="Initializing", base_lid=0, sm_lid=0)


def _ib_slow(view: Node) -> None:
    port = _port(view, 1)
    if port["rate"] >= 400:
        port.update(rate=200, width="4X HDR")
    else:
        port.update(rate=100, width="4X EDR")


def _pkey_missing(view: Node) -> None:
    """mlx5_0 is only a limited member of the default partition: not in the site's."""
    _port(view, 0)["pkeys"] = ["0x7fff"]


def _guid_duplicate(node: Node) -> None:
    """mlx5_2's port GUID is mlx5_1's (a cloned or mis-programmed adapter GUID): two ports, one identity."""
    hcas = _compute_ib(node)
    hcas[2]["ports"][0]["port_guid"] = hcas[1]["ports"][0]["port_guid"]


def _guid_restore(node: Node) -> None:
    healthy = {h["name"]: h for h in _healthy(node)["hcas"]}
    for hca in node["hcas"]:
        hca["ports"][0]["port_guid"] = healthy[hca["name"]]["ports"][0]["port_guid"]


def _ber_high(view: Node) -> None:
    # "Bad signal integrity": mlxlink's verdict on such a link (as a real capture prints it, red, in a public test)
    _port(view, 3)["phy"] = {"effective_errors": 1834, "effective_ber": "2E-10", "raw_ber": "3E-5",
                             "recommendation": "Bad signal integrity"}


def _mtu(view: Node) -> None:
    for hca in _compute_ib(view):
        hca["ports"][0]["active_mtu"] = 2048


_OLD_HCA_FW = {"20.39.1002": "20.37.1700", "28.41.1000": "28.39.2048", "28.42.1000": "28.40.1000",
               "28.44.1036": "28.42.1000"}


def _hca_fw_drift(node: Node) -> None:
    hca = _compute_ib(node)[3]
    hca["fw"] = _OLD_HCA_FW.get(hca["fw"], "28.39.2048")
    hca["fw_pending"] = None


def _hca_restore(node: Node) -> None:
    healthy = {h["name"]: h for h in _healthy(node)["hcas"]}
    for hca in node["hcas"]:
        ref = healthy[hca["name"]]
        hca.update(fw=ref["fw"], fw_pending=None, psid=ref["psid"])


def _psid_change(node: Node) -> None:
    _compute_ib(node)[-1]["psid"] = "DEL0000000036"  # an OEM PSID (corpus ibv_devinfo)


def _link_flap(node: Node) -> None:
    hca = _compute_ib(node)[1]
    nd = hca["ports"][0]["netdev"]
    for _ in range(3):
        model.advance(node, 40)
        model.journal(node, "kernel", "kernel", f"mlx5_core {hca['bdf']} {nd}: lost carrier")
        model.advance(node, 2)
        model.journal(node, "kernel", "kernel", f"mlx5_core {hca['bdf']} {nd}: carrier on")


def _link_flap_clear(node: Node) -> None:
    _drop_log(node, "kernel", "carrier")


# ---------------------------------------------------------------------------------------------
# RDMA / PCIe / host
# ---------------------------------------------------------------------------------------------

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
    hca = _compute_ib(view)[0]
    new_bus = 0xF4
    root = f"0000:{new_bus - 1:02x}:01.0"
    new_bdf = f"0000:{new_bus:02x}:00.0"
    for dev in view["pcie"]:
        if dev["bdf"] == hca["bdf"]:
            dev.update(bdf=new_bdf, parent=root, numa=1)
    view["pcie"].append({"bdf": root, "kind": "root_port", "name": _profile(view)["pcie"]["root_port"],
                         "parent": None, "secondary": new_bus, "subordinate": new_bus,
                         "acs": dict.fromkeys(("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd",
                                               "EgressCtrl", "DirectTrans"), False),
                         "acs_boot": None, "numa": 1, "speed": _profile(view)["pcie"]["link_speed"], "width": 16})
    view["pcie"].sort(key=lambda d: d["bdf"])
    hca["bdf"] = new_bdf


def _driver_drift(node: Node) -> None:
    ver = _other_release(node["driver"]["loaded"], +1)
    _set_versions(node, ver)


def _set_versions(node: Node, ver: str) -> None:
    for stem in ("nvidia-driver-", "libnvidia-nscq-"):
        _set_branch_pkg(node, stem, ver)
    if _profile(node)["fm"]["present"]:
        _set_branch_pkg(node, "nvidia-fabricmanager-", ver)
        _set_branch_pkg(node, "cuda-drivers-fabricmanager-", ver)
    if _profile(node)["imex"]["present"]:
        _set_branch_pkg(node, "nvidia-imex-", ver)
    node["driver"]["loaded"] = ver
    if "nvidia-fabricmanager" in node["services"]:
        _fm_restart(node)


def _driver_restore(node: Node) -> None:
    _set_versions(node, _profile(node)["driver"]["version"])


def _imex_not_ready(view: Node) -> None:
    peers = view["imex_peers"] or [view["address"]]
    others = [p for p in peers if p != view["address"]]
    view["imex_unready"] = (others[-2:] if others else [view["address"]])


def _imex_down(node: Node) -> None:
    model.advance(node, 5)
    model.journal(node, "imex", "systemd[1]", "nvidia-imex.service: Main process exited, code=exited, status=1/FAILURE")
    model.journal(node, "imex", "systemd[1]", "nvidia-imex.service: Failed with result 'exit-code'.")
    node["services"]["nvidia-imex"].update(active="failed", sub="failed", result="exit-code", exit_status=1,
                                           since=node["clock"])


def _imex_up(node: Node) -> None:
    model.advance(node, 5)
    model.journal(node, "imex", "systemd[1]", "Started nvidia-imex.service - NVIDIA IMEX service.")
    node["services"]["nvidia-imex"].update(active="active", sub="running", result="success", exit_status=0,
                                           since=node["clock"])


def _imex_channel_lost(node: Node) -> None:
    node["imex_channel0"] = False


def _imex_channel_back(node: Node) -> None:
    node.pop("imex_channel0", None)


def _xid79(node: Node) -> None:
    gpu = node["gpus"][4 % len(node["gpus"])]
    model.advance(node, 60)
    bus = gpu["bus_id"][4:-2].lower()  # 00000000:9B:00.0 -> 0000:9b:00
    model.journal(node, "kernel", "kernel",
                  f"NVRM: Xid (PCI:{bus}): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.")


def _xid_clear(node: Node) -> None:
    _drop_log(node, "kernel", "NVRM: Xid")


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


def _route_unhealthy(view: Node) -> None:
    view["gpus"][1]["fabric"]["health"].update(summary="Unhealthy", route_recovery_in_progress="True",
                                               route_unhealthy="True")


def _access_timeout(view: Node) -> None:
    # "Insufficient NVLinks": NVML's INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS as nvidia-smi would spell it (no
    # real sample of a set value is in the corpus: documented-only).
    view["gpus"][2]["fabric"]["health"].update(access_timeout_recovery="True",
                                               incorrect_configuration="Insufficient NVLinks")


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


def _iommu(node: Node) -> None:
    node["cmdline"] = node["cmdline"].replace(" iommu=pt", "")


def _iommu_clear(node: Node) -> None:
    node["cmdline"] = _healthy(node)["cmdline"]


# ---------------------------------------------------------------------------------------------
# Only a load test sees these (the probes read the hidden factors; collectors see a healthy node)
# ---------------------------------------------------------------------------------------------

DEGRADED_GPU = 5
DEGRADED_HCA = 0  # mlx5_0: the device a pairwise perftest without -d uses, so every pair it is in slows too
X8_GPU = 6


def _nvlink_degraded(view: Node) -> None:
    """Every link of GPU 5 Active at full rate, yet it carries half (a marginal link retraining under load)."""
    view["gpus"][DEGRADED_GPU % len(view["gpus"])]["nvlink_bw"] = 0.5


def _hca_degraded(view: Node) -> None:
    """mlx5_0 reports Active at its full rate but moves half the data (a bad cable or a PCIe-starved adapter)."""
    _compute_ib(view)[DEGRADED_HCA]["bw_factor"] = 0.5


def _pcie_x8(view: Node) -> None:
    """GPU 6 trained at x8 at its normal generation: its GPUDirect traffic to its rail NIC halves."""
    view["gpus"][X8_GPU % len(view["gpus"])]["pcie_width"] = 8


def _gpu_busy(view: Node) -> None:
    """A training job holds every GPU: one python3 process each, most of the memory in use."""
    mem = _profile(view)["gpu"]["memory_mib"]
    view["gpu_procs"] = [{"gpu": g["index"], "pid": 12345 + g["index"], "name": "/usr/bin/python3",
                          "used_mib": int(mem * 0.87)} for g in view["gpus"]]


def _slurm_job(view: Node) -> None:
    """Slurm job 4242 runs step 0 on the node: one task per GPU, and a helper one of them forked."""
    view["slurm_steps"] = [{"job": 4242, "step": "0", "child_pid": 23001,
                            "pids": [23010 + g["index"] for g in view["gpus"]]}]
    # slurmctld sees the node allocated to the job (a drained node keeps the flag: DRAINING until the job ends)
    view["slurm"]["state"] = view["slurm"]["state"].replace("IDLE", "ALLOCATED")


# ---------------------------------------------------------------------------------------------
# tools
# ---------------------------------------------------------------------------------------------

def garbage(seed: str, size: int = 600) -> str:
    """Deterministic binary noise (what a tool with a corrupted library or terminal prints), as the lab's str of
    bytes (surrogateescape: the tools write those bytes back unchanged). It starts with \\xff\\xfe, a UTF-16
    byte-order mark, which is never valid UTF-8: evidence must keep it byte for byte."""
    raw = b"\xff\xfe"
    block = seed.encode()
    while len(raw) < size:
        block = hashlib.sha256(block).digest()
        raw += block
    return raw[:size].decode("utf-8", "surrogateescape")


#: What the tool-floods fault prints, unless its record says `mib`: past the collector's 256 MiB cap per host.
FLOOD_MIB = 300


def flood_mib(node: Node) -> int:
    """How many MiB the flooding tool prints on this node."""
    return int((node["faults"].get("tool-floods") or {}).get("mib", FLOOD_MIB))


def _noop(_: Node) -> None:
    """Tool faults change how a tool answers, not the node: outputs.render_key and cli.py act on their names."""
    return None


# ---------------------------------------------------------------------------------------------
# the catalog
# ---------------------------------------------------------------------------------------------

#: What a GPU with less NVLink bandwidth costs the probes: the all-reduce busbw and the nvbandwidth pairs it is in
#: (its pairs fall below the weakest-pair gate and the median). A100 baselines set no pair minimum (no published figure).
_NVLINK_PROBES = ("perf.nccl_allreduce_busbw", "perf.nvbandwidth_pair_min", "perf.nvbandwidth_spread")
_NVLINK_PROBES_BY = {"dgx-a100": ("perf.nccl_allreduce_busbw", "perf.nvbandwidth_spread")}

#: A fabric that is not ready (GPUs In Progress, or FM never up on A100): CUDA does not start, so NCCL and
#: nvbandwidth fail (their checks error) while host-memory perftest runs on.
_NOT_READY = ("perf.nccl_allreduce_busbw", "perf.nccl_wrong", "perf.nvbandwidth_pair_min", "perf.nvbandwidth_spread")
_NOT_READY_A100 = ("perf.nccl_allreduce_busbw", "perf.nccl_wrong", "perf.nvbandwidth_spread")
#: GB200 trays see every NIC as SYS from every GPU, so ib_gdr_bw (HCAs from `topo -m`'s nearest NIC) covers mlx5_0 only.
_GDR = ("perf.ib_gdr_bw",)
_GDR_BUT_GB200 = {"gb200-nvl72": ()}
_PCIE_PROBES = ("perf.dcgm_diag", "perf.ib_gdr_bw")

_FM_MISMATCH = ("fm.service_active", "fm.version_matches_driver", "fm.version", "fm.log_version_mismatch")

CATALOG: tuple[Fault, ...] = (
    Fault("fm-down", "nvidia-fabricmanager was killed after the fabric came up: unit failed, GPUs keep their "
          "registration (State Completed); `systemctl start nvidia-fabricmanager` brings it back.",
          "state", FM_PROFILES, catches=("fm.service_active",), inject=_fm_down, clear=_fm_restart),
    Fault("fm-driver-mismatch", "The Fabric Manager package is one release behind the loaded driver; FM refuses "
          "to start with the real 'don't match' line and GPUs stay In Progress. Fix: install the matching FM.",
          "state", FM_PROFILES, catches=_FM_MISMATCH,
          catches_by_profile={"dgx-h100": _FM_MISMATCH + ("fabric.state_completed",),
                              "hgx-h200": _FM_MISMATCH + ("fabric.state_completed",)},
          catches_fleet=("fm.version_consistent",),
          catches_probes=_NOT_READY,
          catches_probes_by_profile={"dgx-a100": _NOT_READY_A100},
          inject=_fm_mismatch, clear=_fm_mismatch_clear),
    Fault("fm-restarts", "systemd restarted nvidia-fabricmanager 3 times since boot (NRestarts=3).",
          "state", FM_PROFILES, catches=("fm.restarts",), inject=_fm_restarts, clear=_fm_restarts_clear),
    Fault("fm-config-drift", "fabricmanager.cfg edited: FABRIC_MODE=1 (shared NVSwitch) and "
          "FM_STAY_RESIDENT_ON_FAILURES=1.", "state", FM_PROFILES,
          catches=("fm.config_fabric_mode", "fm.config_stay_resident"), inject=_fm_config_drift,
          clear=_fm_config_clear),
    Fault("fabric-in-progress", "GPU fabric registration stuck: every GPU shows State In Progress, Status N/A.",
          "overlay", FABRIC_PROFILES, catches=("fabric.state_completed",), catches_probes=_NOT_READY,
          apply=_fabric_in_progress),
    Fault("fabric-insufficient-resources", "GB200 tray completed registration with an error: Status Insufficient "
          "Resources, CliqueId 0, all-zero ClusterUUID (Azure GB node sample).", "overlay", ("gb200-nvl72",),
          catches=("fabric.status_success", "fabric.clique_id_set", "fabric.cluster_uuid_set"),
          catches_fleet=("fabric.cluster_uuid_consistent", "fabric.clique_id_consistent"), apply=_insufficient),
    Fault("cluster-uuid-mismatch", "This tray reports another rack's ClusterUUID (valid, non-zero): only the fleet "
          "comparison within the rack can see it.", "overlay", ("gb200-nvl72",),
          catches_fleet=("fabric.cluster_uuid_consistent",), apply=_cluster_mismatch),
    Fault("nvlink-inactive", "GPU 1 has NVLinks 3 and 7 <inactive>; its GPU pairs drop below the baseline NV#.",
          "overlay", catches=("nvlink.links_active", "nvlink.topology"),
          catches_probes=("perf.dcgm_diag",) + _NVLINK_PROBES,
          catches_probes_by_profile={"dgx-a100": ("perf.dcgm_diag",) + _NVLINK_PROBES_BY["dgx-a100"],
              "gb200-nvl72": ("perf.dcgm_diag", "perf.nvbandwidth_pair_min", "perf.nvbandwidth_spread")},
          apply=_nvlink_inactive),
    Fault("nvlink-speed-degraded", "Every NVLink of GPU 2 trained at half the platform rate.", "overlay",
          catches=("nvlink.speed",), catches_probes=_NVLINK_PROBES, catches_probes_by_profile=_NVLINK_PROBES_BY,
          apply=_nvlink_slow),
    Fault("nvlink-errors-growing", "GPU 0 link 4: replay, recovery and CRC counters grow on every read of "
          "`nvidia-smi nvlink -e` (only counter deltas between two snapshots show it).", "overlay", FM_PROFILES,
          catches_over_time=("nvlink.recovery_errors", "nvlink.crc_errors", "nvlink.crc_errors_burst",
                             "nvlink.replay_errors"), apply=_nvlink_errors),
    Fault("nvlink5-errors-growing", "GB200 GPU 0 link 4: NVLink5 counters (Link recovery failed events, Effective "
          "Errors, Rx and Symbol Errors) grow on every read of `nvidia-smi nvlink -e`.", "overlay", ("gb200-nvl72",),
          # the growing Symbol Errors print a Symbol BER (1e-12 and up) above the published 1e-25 at once
          catches=("nvlink.nvl5_symbol_ber",),
          catches_over_time=("nvlink.nvl5_recovery_failed", "nvlink.nvl5_effective_errors"), apply=_nvlink5_errors),
    Fault("nvswitch-missing", "NVSwitch 2 is not on the PCI bus: its GPU links are inactive and Fabric Manager "
          "aborts (NVSwitch count matches no known topology).", "state", FM_PROFILES,
          catches=("nvswitch.count", "fm.service_active", "nvlink.links_active", "nvlink.topology"),
          catches_by_profile={p: ("nvswitch.count", "fm.service_active", "nvlink.links_active", "nvlink.topology",
                                  "fabric.state_completed") for p in ("dgx-h100", "hgx-h200")},
          catches_probes=("perf.dcgm_diag",) + _NOT_READY,
          catches_probes_by_profile={"dgx-a100": ("perf.dcgm_diag",) + _NOT_READY_A100},
          inject=_nvswitch_missing, clear=_nvswitch_missing_clear),
    Fault("nvswitch-fw-drift", "NVSwitch 1 runs an older firmware than its peers (nvfwupd show_version). "
          "HGX H100/H200 only: A100 NVSwitch firmware ships in the DGX firmware container.", "state",
          HGX_H, catches=("nvswitch.firmware",), catches_fleet=("nvswitch.firmware_consistent",),
          inject=_nvswitch_fw_drift, clear=_nvswitch_fw_clear),
    Fault("nvswitch-sxid-fatal", "NVSwitch 1 reported fatal SXid 24007 (kernel log) and FM logged the fatal error.",
          "state", FM_PROFILES, catches=("nvswitch.sxid_fatal", "fm.log_nvswitch_fatal"), inject=_sxid_fatal,
          clear=_sxid_clear),
    Fault("ib-port-down", "mlx5_2 port 1: State Down, Physical state Disabled (no LID, SM lid 0, rate falls back to 10).",
          "overlay", catches=("ib.port_active", "ib.phys_linkup", "ib.rate"),
          catches_probes=_GDR,
          catches_probes_by_profile=_GDR_BUT_GB200,
          apply=_ib_down),
    Fault("ib-port-polling", "mlx5_2 port 1: State Down, Physical state Polling (no peer: cable or switch port).",
          "overlay", catches=("ib.port_active", "ib.phys_linkup", "ib.rate"),
          catches_probes=_GDR,
          catches_probes_by_profile=_GDR_BUT_GB200,
          apply=_ib_polling),
    Fault("ib-no-sm", "No subnet manager: every InfiniBand port is Initializing/LinkUp with SM lid 0, and sminfo's "
          "query goes unanswered.", "overlay", catches=("ib.port_active", "ib.sm_present", "ib.sm_master"),
          # no pair connects at all: the pair probe errors, so its at-fault check is not judged either
          catches_probes=("perf.ib_gdr_bw", "perf.ib_pair_bw", "perf.ib_pair_at_fault"),
          apply=_ib_no_sm),
    Fault("ib-rate-degraded", "mlx5_1 trained at half rate (200 on a 400 fabric; 100 on HDR).", "overlay",
          catches=("ib.rate",), catches_probes=_GDR, catches_probes_by_profile=_GDR_BUT_GB200,
          apply=_ib_slow),
    Fault("ib-link-flap", "ib1 lost carrier three times since boot (kernel log).", "state",
          catches=("ib.link_flap",), inject=_link_flap, clear=_link_flap_clear),
    Fault("hca-fw-drift", "mlx5_3 runs an older ConnectX firmware than the baseline; fix with mlxfwmanager -u "
          "(or flint burn) then mlxfwreset.", "state", catches=("ib.fw_version",), catches_fleet=("ib.fw_consistent",),
          inject=_hca_fw_drift, clear=_hca_restore),
    Fault("psid-change", "The last compute HCA carries an OEM PSID (DEL0000000036) instead of the baseline PSID.", "state",
          catches=("ib.psid",), inject=_psid_change, clear=_hca_restore),
    Fault("ib-pkey-missing", "mlx5_0's P_Key table holds only 0x7fff (limited default partition): it is not a member "
          "of the site partition 0x8001.", "overlay", catches=("ib.pkey_member",), apply=_pkey_missing),
    Fault("ib-guid-duplicate", "mlx5_2 reports mlx5_1's port GUID: one GUID twice in the subnet.", "state",
          catches_fleet=("ib.port_guid_unique",), inject=_guid_duplicate, clear=_guid_restore),
    Fault("ib-ber-high", "mlx5_3's mlxlink counters: 1834 effective (post-FEC) errors, effective BER 2E-10, "
          "Recommendation 'Bad signal integrity'.", "overlay", catches=("ib.effective_ber", "ib.link_recommendation"),
          apply=_ber_high),
    Fault("mtu-wrong", "Every compute port runs active_mtu 2048 instead of 4096.", "overlay", catches=("ib.mtu",),
          apply=_mtu),
    Fault("peermem-missing", "nvidia_peermem is not loaded (GPUDirect RDMA off); `modprobe nvidia_peermem` fixes it.",
          "state", catches=("rdma.peermem_loaded",), catches_probes=_GDR,
          inject=_peermem_missing, clear=_peermem_restore),
    Fault("legacy-peermem", "The deprecated nv_peer_mem module is loaded.", "state",
          catches=("rdma.legacy_peer_mem_absent",), inject=_legacy_peermem, clear=_legacy_clear),
    Fault("acs-enabled", "ACS is on (SrcValid+ ReqRedir+ CmpltRedir+ UpstreamFwd+) on the bridge above GPU 0, in the "
          "BIOS default too: `setpci ... ECAP_ACS+0x6.w=0000` fixes it until the next reboot.", "state",
          catches=("pcie.acs_disabled",), catches_probes=_GDR,
          inject=_acs_on, clear=_acs_off),
    Fault("gpu-nic-affinity", "Rail 0's NIC sits in a slot of the other socket: GPU 0's nearest NIC is NODE, not PIX.",
          "overlay", X86, catches=("topo.gpu_nic_affinity",), apply=_affinity),
    Fault("driver-drift", "This node runs the next driver release of the branch (with matching FM/IMEX).", "state",
          catches=("driver.version",),
          catches_by_profile={p: ("driver.version", "fm.version") for p in FM_PROFILES},
          catches_fleet=("driver.version_consistent",),
          catches_fleet_by_profile={p: ("driver.version_consistent", "fm.version_consistent") for p in FM_PROFILES},
          inject=_driver_drift,
          clear=_driver_restore),
    Fault("imex-not-ready", "Two IMEX peers of the rack are UNAVAILABLE (domain DEGRADED).", "overlay",
          ("gb200-nvl72",), catches=("imex.nodes_ready",), apply=_imex_not_ready),
    Fault("imex-down", "nvidia-imex exited with status 1; nvidia-imex-ctl cannot reach it.", "state",
          ("gb200-nvl72",), catches=("imex.service_active",), breaks=("imex_nodes",), inject=_imex_down,
          clear=_imex_up),
    Fault("imex-channel-missing", "/dev/nvidia-caps-imex-channels/channel0 is gone (a reboot without "
          "NVreg_CreateImexChannel0=1): CUDA cannot import memory across trays.", "state", ("gb200-nvl72",),
          catches=("imex.channel0_present",), inject=_imex_channel_lost, clear=_imex_channel_back),
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
    Fault("fabric-route-unhealthy", "GB200 GPU 1: fabric Health Summary Unhealthy, Route Recovery in progress True, Route "
          "Unhealthy True.", "overlay", ("gb200-nvl72",),
          catches=("fabric.health_summary", "fabric.health_route_recovery", "fabric.health_route_unhealthy"),
          apply=_route_unhealthy),
    Fault("fabric-access-timeout", "GB200 GPU 2: fabric Health Access Timeout Recovery True and Incorrect Configuration "
          "Insufficient NVLinks (the Summary stays Healthy).", "overlay", ("gb200-nvl72",),
          catches=("fabric.health_access_timeout_recovery", "fabric.health_incorrect_configuration"),
          apply=_access_timeout),
    Fault("gpu-throttle", "The last GPU is held by HW Slowdown / HW Power Brake.", "overlay",
          catches=("gpu.throttle",), apply=_throttle),
    Fault("persistence-off", "nvidia-persistenced stopped: persistence mode Disabled on every GPU.", "state",
          catches=("gpu.persistence",), catches_probes=("perf.dcgm_diag",),
          inject=_persistence_off, clear=_persistence_on),
    Fault("pcie-downtrained", "GPU 3's PCIe link trained one generation lower at x8.", "overlay",
          catches=("gpu.pcie_link_gen", "gpu.pcie_link_width"),
          catches_probes=_PCIE_PROBES,
          catches_probes_by_profile={"gb200-nvl72": ("perf.dcgm_diag",)},
          apply=_pcie_down),
    Fault("gpu-busy", "A training job runs on the node: one /usr/bin/python3 compute process per GPU "
          "(`nvidia-smi --query-compute-apps` lists them); no probe may start here.", "overlay",
          blocks_probes=True, apply=_gpu_busy),
    Fault("slurm-job", "Slurm job 4242 step 0 runs on the node (`scontrol listpids` lists its tasks); no probe may "
          "start here.", "overlay", blocks_probes=True, apply=_slurm_job),
    Fault("nvlink-degraded", "GPU 5's NVLinks are all Active at full rate, yet carry half the bandwidth: only load "
          "shows it (NCCL busbw, GPU 5's nvbandwidth pairs).", "overlay",
          catches_probes=_NVLINK_PROBES, catches_probes_by_profile=_NVLINK_PROBES_BY, apply=_nvlink_degraded),
    Fault("hca-degraded", "mlx5_0 is Active at its full rate but moves half the data: its GPUDirect run and every "
          "host pair it is in fall below the gate.", "overlay",
          catches_probes=("perf.ib_gdr_bw", "perf.ib_pair_bw"), apply=_hca_degraded),
    Fault("pcie-x8", "GPU 6's PCIe link trained at x8 (same generation): GPUDirect RDMA through its rail NIC halves, "
          "and DCGM's PCIe test flags the width.", "overlay", catches=("gpu.pcie_link_width",),
          catches_probes=_PCIE_PROBES, catches_probes_by_profile={"gb200-nvl72": ("perf.dcgm_diag",)}, apply=_pcie_x8),
    Fault("iommu-translated", "Kernel command line lost iommu=pt: the IOMMU translates (can force ACS on).", "state",
          X86, catches=("iommu.mode",), inject=_iommu, clear=_iommu_clear),
)

_TOOL_FAULTS = (
    Fault("tool-hangs", "`nvidia-smi` (every subcommand) hangs for an hour, as on a GPU stuck in a bad state; the "
          "process exits when its SSH session goes away.", "overlay", catches=(), breaks=NVSMI_COLLECTORS,
          apply=_noop),
    Fault("tool-garbage", "`ibstat` prints binary garbage and exits 0.", "overlay", breaks=("ibstat",), apply=_noop),
    Fault("tool-floods", f"`ibstat` prints {FLOOD_MIB} MiB of text (a tool, or a host, gone mad), as fast as the "
          "reader takes it, and exits 0; the size is the fault record's `mib`.", "overlay", breaks=("ibstat",),
          apply=_noop),
    Fault("upgrade-breaks-fm", "The next apt-get run that upgrades the NVIDIA driver leaves the Fabric Manager "
          "package at its old version (as a stale mirror would); after the reboot FM fails with the version-mismatch "
          "line. For rehearsing a failed pilot.", "trigger", FM_PROFILES, apply=_noop),
)

FAULTS: dict[str, Fault] = {f.name: f for f in CATALOG + _TOOL_FAULTS}


class FaultError(ValueError):
    """Unknown fault, or a fault that does not apply to the node's profile."""


def check_applicable(node: Node, name: str) -> Fault:
    """The fault, if it exists and applies to this node's profile."""
    fault = FAULTS.get(name)
    if fault is None:
        raise FaultError(f"unknown fault {name!r}; known: {', '.join(sorted(FAULTS))}")
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
    for n in names:
        fault = FAULTS.get(n)
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
    overlays = [FAULTS[n] for n in sorted(node["faults"]) if n in FAULTS and FAULTS[n].kind == "overlay"
                and FAULTS[n].apply is not None]
    if not overlays:
        return node
    v = model.copy_node(node)
    for fault in overlays:
        fault.apply(v)  # type: ignore[misc]
    return v
