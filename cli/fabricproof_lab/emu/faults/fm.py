"""Fabric Manager faults: the service, its package against the driver, its restarts and its config."""

from __future__ import annotations

from .. import model
from ..model import Node, profile_of
from .base import FM_PROFILES, NOT_READY, NOT_READY_A100, Fault, noop, other_release, restart_fm, set_branch_pkg


def _fm_down(node: Node) -> None:
    svc = node["services"]["nvidia-fabricmanager"]
    model.advance(node, 5)
    model.journal(node, "fm", "systemd[1]",
                  "nvidia-fabricmanager.service: Main process exited, code=killed, status=9/KILL")
    model.journal(node, "fm", "systemd[1]", "nvidia-fabricmanager.service: Failed with result 'signal'.")
    svc.update(active="failed", sub="failed", result="signal", exit_status=9, since=node["clock"])


def _fm_mismatch(node: Node) -> None:
    fm = model.installed_fm(node) or node["driver"]["loaded"]
    old = other_release(fm, -1)
    set_branch_pkg(node, "nvidia-fabricmanager-", old)
    restart_fm(node)


def _fm_mismatch_clear(node: Node) -> None:
    set_branch_pkg(node, "nvidia-fabricmanager-", node["driver"]["loaded"])
    restart_fm(node)


def _fm_restarts(node: Node) -> None:
    node["services"]["nvidia-fabricmanager"]["restarts"] = 3


def _fm_restarts_clear(node: Node) -> None:
    node["services"]["nvidia-fabricmanager"]["restarts"] = 0


def _fm_config_drift(node: Node) -> None:
    node["fm_config"].update(FABRIC_MODE="1", FM_STAY_RESIDENT_ON_FAILURES="1")


def _fm_config_clear(node: Node) -> None:
    node["fm_config"] = dict(profile_of(node)["fm"]["config"])


_FM_MISMATCH = ("fm.service_active", "fm.version_matches_driver", "fm.version", "fm.log_version_mismatch")


FAULTS: tuple[Fault, ...] = (
    Fault("fm-down", "nvidia-fabricmanager was killed after the fabric came up: unit failed, GPUs keep their "
          "registration (State Completed); `systemctl start nvidia-fabricmanager` brings it back.",
          "state", FM_PROFILES, catches=("fm.service_active",), inject=_fm_down, clear=restart_fm),
    Fault("fm-driver-mismatch", "The Fabric Manager package is one release behind the loaded driver; FM refuses "
          "to start with the real 'don't match' line and GPUs stay In Progress. Fix: install the matching FM.",
          "state", FM_PROFILES, catches=_FM_MISMATCH,
          catches_by_profile={"dgx-h100": _FM_MISMATCH + ("fabric.state_completed",),
                              "hgx-h200": _FM_MISMATCH + ("fabric.state_completed",)},
          catches_fleet=("fm.version_consistent",),
          catches_probes=NOT_READY,
          catches_probes_by_profile={"dgx-a100": NOT_READY_A100},
          inject=_fm_mismatch, clear=_fm_mismatch_clear),
    Fault("fm-restarts", "systemd restarted nvidia-fabricmanager 3 times since boot (NRestarts=3).",
          "state", FM_PROFILES, catches=("fm.restarts",), inject=_fm_restarts, clear=_fm_restarts_clear),
    Fault("fm-config-drift", "fabricmanager.cfg edited: FABRIC_MODE=1 (shared NVSwitch) and "
          "FM_STAY_RESIDENT_ON_FAILURES=1.", "state", FM_PROFILES,
          catches=("fm.config_fabric_mode", "fm.config_stay_resident"), inject=_fm_config_drift,
          clear=_fm_config_clear),
    Fault("upgrade-breaks-fm", "The next apt-get run that upgrades the NVIDIA driver leaves the Fabric Manager "
          "package at its old version (as a stale mirror would); after the reboot FM fails with the version-mismatch "
          "line. For rehearsing a failed pilot.", "trigger", FM_PROFILES, apply=noop),
)
