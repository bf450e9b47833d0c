"""The operator actions a failed check calls for, least disruptive first: the one list checks, reports and gates name."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Action:
    """One action: its id, what the operator does, and what it is in GPUd's repair actions and the AWS suites."""

    id: str
    meaning: str
    anchors: str


#: Ordered from least to most disruptive: each needs at least what the one before it takes (a driver update
#: reloads the driver, a firmware update needs a cold reset, a cable needs a person at the rack, an inspection
#: takes the node out until it is repaired). A host's action is the last of its failing checks' in this order.
ACTIONS: dict[str, Action] = {
    a.id: a
    for a in (
        Action("monitor", "Nothing to do now: keep the node in service and watch the trend; act if it grows.",
               "GPUd IGNORE_NO_ACTION_REQUIRED; AWS MONITOR"),
        Action("reconfigure", "Change a setting (baseline, service config, kernel parameter, BIOS, subnet manager) "
               "and apply it.", "GPUd CHECK_USER_APP_AND_GPU (configuration)"),
        Action("restart_service", "Restart a daemon (Fabric Manager, IMEX, subnet manager, persistence daemon) after "
               "stopping its GPU clients.", "AWS RESET (service level)"),
        Action("reset_gpu", "Drain the node and reset the GPU (nvidia-smi -r) with no process holding it.",
               "AWS RESET; NVIDIA Xid catalog RESET_GPU"),
        Action("reboot", "Drain the node and reboot it.", "GPUd REBOOT_SYSTEM; AWS REBOOT"),
        Action("update_software", "Drain the node and install the expected driver, Fabric Manager, OFED or CUDA "
               "version (a driver reload or reboot).", "none (GPUd and AWS leave versions to the operator)"),
        Action("update_firmware", "Drain the node and flash the expected firmware (HCA, NVSwitch, VBIOS); it takes "
               "effect after a cold reset or power cycle.", "none (GPUd and AWS leave versions to the operator)"),
        Action("reseat_cable", "Drain the node, reseat the cable or transceiver at both ends and replace it if the "
               "link stays down or noisy.", "GPUd HARDWARE_INSPECTION (cable); AWS ISOLATE"),
        Action("drain_and_inspect", "Drain the node and keep it out for hardware diagnosis (dcgmi diag -r 3, field "
               "diagnostics) and repair or RMA.", "GPUd HARDWARE_INSPECTION; AWS ISOLATE/REPLACE"),
    )
}

_RANK = {name: i for i, name in enumerate(ACTIONS)}


def rank(action: str) -> int:
    """Position in ACTIONS: higher is more disruptive; -1 for no action."""
    return _RANK.get(action, -1)


def most_severe(actions: Iterable[str]) -> str:
    """The most disruptive of some actions; "" when there is none."""
    return max(actions, key=rank, default="")


def host_actions(results: Iterable) -> dict[str, str]:
    """Host -> the most disruptive action among its failed results (model.Result), in host order of first failure;
    a host with no failed result has none."""
    out: dict[str, str] = {}
    for r in results:
        note_action(out, r.host, r.outcome, r.action)
    return out


def note_action(out: dict[str, str], host: str, outcome: str, action: str) -> None:
    """host_actions' step for one result (its host, outcome and action), for a reporter that meets the results once
    and cannot pass over them again (a fleet's are read back from disk)."""
    if outcome == "fail" and action and rank(action) > rank(out.get(host, "")):
        out[host] = action
