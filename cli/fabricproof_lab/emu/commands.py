"""The registry of emulated tools that run Python: tool name -> handler(node_dir, argv) -> (stdout, stderr, rc)."""

from __future__ import annotations

from pathlib import Path

from . import firmware, hosttools, ibtools, nvsmi, packages, probetools, services, simtools
from .tooling import Abort, Handler, HangRequested, Result

HANDLERS: dict[str, Handler] = {
    "apt-get": packages.apt_get,
    "apt": packages.apt,
    "apt-mark": packages.apt_mark,
    "dpkg-query": packages.dpkg_query,
    "dpkg": packages.dpkg,
    "systemctl": services.systemctl,
    "journalctl": services.journalctl,
    "reboot": services.reboot,
    "poweroff": services.reboot,
    "shutdown": services.shutdown,
    "modprobe": hosttools.modprobe,
    "rmmod": hosttools.rmmod,
    "setpci": hosttools.setpci,
    "scontrol": hosttools.scontrol,
    "mlxfwmanager": firmware.mlxfwmanager,
    "flint": firmware.flint,
    "mstflint": firmware.flint,
    "mlxfwreset": firmware.mlxfwreset,
    "mlxlink": firmware.mlxlink,
    "nvfwupd": firmware.nvfwupd,
    "nvidia-smi": nvsmi.nvidia_smi,
    "ibstat": ibtools.ibstat,
    "ibv_devinfo": ibtools.ibv_devinfo,
    "ibv_devices": ibtools.ibv_devices,
    # load probes (issue 11): their figures come from the node model (perfmodel), their wait is slept
    "all_reduce_perf": probetools.nccl_tests("all_reduce_perf"),
    "all_gather_perf": probetools.nccl_tests("all_gather_perf"),
    "alltoall_perf": probetools.nccl_tests("alltoall_perf"),
    "nvbandwidth": probetools.nvbandwidth,
    "ib_write_bw": probetools.perftest("ib_write_bw"),
    "ib_write_lat": probetools.perftest("ib_write_lat"),
    "dcgmi": probetools.dcgmi,
    # fabric scope (issue 21): Debian's real infiniband-diags against the lab's ibsim, where the lab has a fabric
    **simtools.HANDLERS,
}


def run(tool: str, node_dir: Path, args: list[str]) -> Result:
    """Run one handler; a refusal (Abort) becomes the tool's error output with the node left unchanged."""
    try:
        return HANDLERS[tool](node_dir, args)
    except Abort as abort:
        return abort.result


__all__ = ["HANDLERS", "HangRequested", "run"]
