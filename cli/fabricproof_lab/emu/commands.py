"""The registry of emulated tools that run Python: tool name -> handler(node_dir, argv) -> (stdout, stderr, rc)."""

from __future__ import annotations

import importlib
from pathlib import Path

from .tooling import Abort, Handler, HangRequested, Result

# Where each tool's handler lives (module, attribute[, the factory's argument]): a tool call imports only its own
# module, since every state-changing call is a fresh process and the other handlers' imports were most of its CPU.
_WHERE: dict[str, tuple[str, ...]] = {
    "apt-get": ("packages", "apt_get"),
    "apt": ("packages", "apt"),
    "apt-mark": ("packages", "apt_mark"),
    "dpkg-query": ("packages", "dpkg_query"),
    "dpkg": ("packages", "dpkg"),
    "systemctl": ("services", "systemctl"),
    "journalctl": ("services", "journalctl"),
    "reboot": ("services", "reboot"),
    "poweroff": ("services", "reboot"),
    "shutdown": ("services", "shutdown"),
    "modprobe": ("hosttools", "modprobe"),
    "rmmod": ("hosttools", "rmmod"),
    "setpci": ("hosttools", "setpci"),
    "scontrol": ("hosttools", "scontrol"),
    "mlxfwmanager": ("firmware", "mlxfwmanager"),
    "flint": ("firmware", "flint"),
    "mstflint": ("firmware", "flint"),
    "mlxfwreset": ("firmware", "mlxfwreset"),
    "mlxlink": ("firmware", "mlxlink"),
    "nvfwupd": ("firmware", "nvfwupd"),
    "nvidia-smi": ("nvsmi", "nvidia_smi"),
    "ibstat": ("ibtools", "ibstat"),
    "ibv_devinfo": ("ibtools", "ibv_devinfo"),
    "ibv_devices": ("ibtools", "ibv_devices"),
    # load probes (issue 11): their figures come from the node model (perfmodel), their wait is slept
    "all_reduce_perf": ("probetools", "nccl_tests", "all_reduce_perf"),
    "all_gather_perf": ("probetools", "nccl_tests", "all_gather_perf"),
    "alltoall_perf": ("probetools", "nccl_tests", "alltoall_perf"),
    "nvbandwidth": ("probetools", "nvbandwidth"),
    "ib_write_bw": ("probetools", "perftest", "ib_write_bw"),
    "ib_write_lat": ("probetools", "perftest", "ib_write_lat"),
    "dcgmi": ("probetools", "dcgmi"),
    # fabric scope (issue 21): Debian's real infiniband-diags against the lab's ibsim, where the lab has a fabric
}


def handler(tool: str) -> Handler | None:
    """The handler of `tool`, importing only its module; None if the lab does not emulate it in Python."""
    where = _WHERE.get(tool)
    if where is None:
        # fabric scope (issue 21): Debian's real infiniband-diags against the lab's ibsim, where the lab has a fabric
        from . import simtools

        return simtools.HANDLERS.get(tool)
    module, name, *arg = where
    found = getattr(importlib.import_module(f".{module}", __package__), name)
    return found(*arg) if arg else found


def run(found: Handler, node_dir: Path, args: list[str]) -> Result:
    """Run one handler; a refusal (Abort) becomes the tool's error output with the node left unchanged."""
    try:
        return found(node_dir, args)
    except Abort as abort:
        return abort.result


__all__ = ["HangRequested", "handler", "run"]
