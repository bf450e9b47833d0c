"""InfiniBand faults: port states and rates, the subnet manager, HCA firmware and identity, P_Keys, BER, MTU."""

from __future__ import annotations

from .. import model
from ..model import Node
from .base import GDR, GDR_BUT_GB200, Fault, compute_hcas, compute_port, drop_log, healthy_node


def _ib_down(view: Node) -> None:
    compute_port(view, 2).update(state="Down", phys_state="Disabled", rate=10, width="4X SDR", base_lid=65535, sm_lid=0)


def _ib_polling(view: Node) -> None:
    compute_port(view, 2).update(state="Down", phys_state="Polling", rate=10, width="4X SDR", base_lid=65535, sm_lid=0)


def _ib_no_sm(view: Node) -> None:
    for hca in view["hcas"]:
        for port in hca["ports"]:
            if port["link_layer"] == "InfiniBand":
                port.update(state="Initializing", base_lid=0, sm_lid=0)


def _ib_slow(view: Node) -> None:
    port = compute_port(view, 1)
    if port["rate"] >= 400:
        port.update(rate=200, width="4X HDR")
    else:
        port.update(rate=100, width="4X EDR")


def _pkey_missing(view: Node) -> None:
    """mlx5_0 is only a limited member of the default partition: not in the site's."""
    compute_port(view, 0)["pkeys"] = ["0x7fff"]


def _guid_duplicate(node: Node) -> None:
    """mlx5_2's port GUID is mlx5_1's (a cloned or mis-programmed adapter GUID): two ports, one identity."""
    hcas = compute_hcas(node)
    hcas[2]["ports"][0]["port_guid"] = hcas[1]["ports"][0]["port_guid"]


def _guid_restore(node: Node) -> None:
    healthy = {h["name"]: h for h in healthy_node(node)["hcas"]}
    for hca in node["hcas"]:
        hca["ports"][0]["port_guid"] = healthy[hca["name"]]["ports"][0]["port_guid"]


def _ber_high(view: Node) -> None:
    # "Bad signal integrity": mlxlink's verdict on such a link (as a real capture prints it, red, in a public test)
    compute_port(view, 3)["phy"] = {"effective_errors": 1834, "effective_ber": "2E-10", "raw_ber": "3E-5",
                             "recommendation": "Bad signal integrity"}


def _mtu(view: Node) -> None:
    for hca in compute_hcas(view):
        hca["ports"][0]["active_mtu"] = 2048


_OLD_HCA_FW = {"20.39.1002": "20.37.1700", "28.41.1000": "28.39.2048", "28.42.1000": "28.40.1000",
               "28.44.1036": "28.42.1000"}


def _hca_fw_drift(node: Node) -> None:
    hca = compute_hcas(node)[3]
    hca["fw"] = _OLD_HCA_FW.get(hca["fw"], "28.39.2048")
    hca["fw_pending"] = None


def _hca_restore(node: Node) -> None:
    healthy = {h["name"]: h for h in healthy_node(node)["hcas"]}
    for hca in node["hcas"]:
        ref = healthy[hca["name"]]
        hca.update(fw=ref["fw"], fw_pending=None, psid=ref["psid"])


def _psid_change(node: Node) -> None:
    compute_hcas(node)[-1]["psid"] = "DEL0000000036"  # an OEM PSID (corpus ibv_devinfo)


def _link_flap(node: Node) -> None:
    hca = compute_hcas(node)[1]
    nd = hca["ports"][0]["netdev"]
    for _ in range(3):
        model.advance(node, 40)
        model.journal(node, "kernel", "kernel", f"mlx5_core {hca['bdf']} {nd}: lost carrier")
        model.advance(node, 2)
        model.journal(node, "kernel", "kernel", f"mlx5_core {hca['bdf']} {nd}: carrier on")


def _link_flap_clear(node: Node) -> None:
    drop_log(node, "kernel", "carrier")


FAULTS: tuple[Fault, ...] = (
    Fault("ib-port-down", "mlx5_2 port 1: State Down, Physical state Disabled (no LID, SM lid 0, rate falls back to 10).",
          "overlay", catches=("ib.port_active", "ib.phys_linkup", "ib.rate"),
          catches_probes=GDR,
          catches_probes_by_profile=GDR_BUT_GB200,
          apply=_ib_down),
    Fault("ib-port-polling", "mlx5_2 port 1: State Down, Physical state Polling (no peer: cable or switch port).",
          "overlay", catches=("ib.port_active", "ib.phys_linkup", "ib.rate"),
          catches_probes=GDR,
          catches_probes_by_profile=GDR_BUT_GB200,
          apply=_ib_polling),
    Fault("ib-no-sm", "No subnet manager: every InfiniBand port is Initializing/LinkUp with SM lid 0, and sminfo's "
          "query goes unanswered.", "overlay", catches=("ib.port_active", "ib.sm_present", "ib.sm_master"),
          # no pair connects at all: the pair probe errors, so its at-fault check is not judged either
          catches_probes=("perf.ib_gdr_bw", "perf.ib_pair_bw", "perf.ib_pair_at_fault"),
          apply=_ib_no_sm),
    Fault("ib-rate-degraded", "mlx5_1 trained at half rate (200 on a 400 fabric; 100 on HDR).", "overlay",
          catches=("ib.rate",), catches_probes=GDR, catches_probes_by_profile=GDR_BUT_GB200,
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
)
