"""GPU fabric faults (registration, ClusterUUID, health) and the IMEX domain's, as the checks' fabric family."""

from __future__ import annotations

from .. import model
from ..model import Node
from .base import FABRIC_PROFILES, NOT_READY, Fault


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


def _route_unhealthy(view: Node) -> None:
    view["gpus"][1]["fabric"]["health"].update(summary="Unhealthy", route_recovery_in_progress="True",
                                               route_unhealthy="True")


def _access_timeout(view: Node) -> None:
    # "Insufficient NVLinks": NVML's INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS as nvidia-smi would spell it (no
    # real sample of a set value is in the corpus: documented-only).
    view["gpus"][2]["fabric"]["health"].update(access_timeout_recovery="True",
                                               incorrect_configuration="Insufficient NVLinks")


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


FAULTS: tuple[Fault, ...] = (
    Fault("fabric-in-progress", "GPU fabric registration stuck: every GPU shows State In Progress, Status N/A.",
          "overlay", FABRIC_PROFILES, catches=("fabric.state_completed",), catches_probes=NOT_READY,
          apply=_fabric_in_progress),
    Fault("fabric-insufficient-resources", "GB200 tray completed registration with an error: Status Insufficient "
          "Resources, CliqueId 0, all-zero ClusterUUID (Azure GB node sample).", "overlay", ("gb200-nvl72",),
          catches=("fabric.status_success", "fabric.clique_id_set", "fabric.cluster_uuid_set"),
          catches_fleet=("fabric.cluster_uuid_consistent", "fabric.clique_id_consistent"), apply=_insufficient),
    Fault("cluster-uuid-mismatch", "This tray reports another rack's ClusterUUID (valid, non-zero): only the fleet "
          "comparison within the rack can see it.", "overlay", ("gb200-nvl72",),
          catches_fleet=("fabric.cluster_uuid_consistent",), apply=_cluster_mismatch),
    Fault("fabric-route-unhealthy", "GB200 GPU 1: fabric Health Summary Unhealthy, Route Recovery in progress True, Route "
          "Unhealthy True.", "overlay", ("gb200-nvl72",),
          catches=("fabric.health_summary", "fabric.health_route_recovery", "fabric.health_route_unhealthy"),
          apply=_route_unhealthy),
    Fault("fabric-access-timeout", "GB200 GPU 2: fabric Health Access Timeout Recovery True and Incorrect Configuration "
          "Insufficient NVLinks (the Summary stays Healthy).", "overlay", ("gb200-nvl72",),
          catches=("fabric.health_access_timeout_recovery", "fabric.health_incorrect_configuration"),
          apply=_access_timeout),
    Fault("imex-not-ready", "Two IMEX peers of the rack are UNAVAILABLE (domain DEGRADED).", "overlay",
          ("gb200-nvl72",), catches=("imex.nodes_ready",), apply=_imex_not_ready),
    Fault("imex-down", "nvidia-imex exited with status 1; nvidia-imex-ctl cannot reach it.", "state",
          ("gb200-nvl72",), catches=("imex.service_active",), breaks=("imex_nodes",), inject=_imex_down,
          clear=_imex_up),
    Fault("imex-channel-missing", "/dev/nvidia-caps-imex-channels/channel0 is gone (a reboot without "
          "NVreg_CreateImexChannel0=1): CUDA cannot import memory across trays.", "state", ("gb200-nvl72",),
          catches=("imex.channel0_present",), inject=_imex_channel_lost, clear=_imex_channel_back),
)
