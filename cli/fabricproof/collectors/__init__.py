"""The collector registry: an explicit dict from collector id to Collector (no import side effects)."""

from __future__ import annotations

import dataclasses

from .. import tools
from . import fabric_plan, pcie, topo
from .base import Collector, ParseError
from .fm import config as fm_config
from .fm import log as fm_log
from .fm import service as fm_service
from .fm import version as fm_version
from .gpu import driver_version, nvidia_smi_q, nvidia_smi_q_xml, nvidia_smi_query_gpu
from .ib import (
    flint,
    ibdev2netdev,
    ibstat,
    ibstatus,
    ibv_devinfo,
    mlxfwmanager,
    mlxlink,
    ofed_info,
    perfquery,
    rdma_link,
    show_gids,
    sminfo,
    sysfs_counters,
)
from .imex import channels as imex_channels
from .imex import nodes as imex_nodes
from .imex import service as imex_service
from .kernel import cmdline, lsmod
from .kernel import log as kernel_log
from .nvlink import caps as nvlink_caps
from .nvlink import errors as nvlink_errors
from .nvlink import info as nvlink_info
from .nvlink import status as nvlink_status
from .nvlink import throughput as nvlink_throughput
from .nvswitch import firmware as nvswitch_firmware
from .nvswitch import pci as nvswitch_pci
from .probes import collective, dcgmi, nccl_tests, nvbandwidth, perftest

# Registry order is the order raw/ evidence and facts are written in: keep new modules next to their family.
_MODULES = (
    nvidia_smi_q, nvidia_smi_q_xml, nvidia_smi_query_gpu, driver_version,
    nvlink_status, nvlink_errors, nvlink_caps, nvlink_info, nvlink_throughput,
    topo,
    fm_version, fm_service, fm_config, fm_log,
    imex_service, imex_nodes, imex_channels,
    nvswitch_pci, nvswitch_firmware,
    kernel_log, lsmod, cmdline,
    pcie,
    ibstat, ibstatus, ibv_devinfo, ibdev2netdev, sysfs_counters, ofed_info, show_gids, rdma_link, sminfo, perfquery,
    mlxfwmanager, flint, mlxlink,
    nccl_tests, nvbandwidth, perftest, dcgmi, collective,
    fabric_plan,
)



def _timed(c: Collector) -> Collector:
    """A collector with its typical duration and default timeout from its tool's, measured on real nodes."""
    tool = tools.TOOLS.get(c.id)
    if tool is None:
        return c
    d = tool.duration  # a guard around the tool costs nothing
    return dataclasses.replace(c, typical_s=d.typical_s, timeout_s=d.timeout_s)


COLLECTORS: dict[str, Collector] = {c.id: _timed(c) for m in _MODULES for c in m.COLLECTORS}


def default_collectors() -> tuple[Collector, ...]:
    """The standard collection set: one collector per facts location."""
    return tuple(c for c in COLLECTORS.values() if c.default)


def probe_collectors() -> tuple[Collector, ...]:
    """The collectors that load the fabric (probes.PROBES says how each is laid out over hosts and run)."""
    return tuple(c for c in COLLECTORS.values() if c.loads_fabric)


__all__ = ["COLLECTORS", "Collector", "ParseError", "default_collectors", "probe_collectors"]
