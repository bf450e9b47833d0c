"""How long the real tools take on a real 8-GPU node (published measurements or documented estimates, each with its
source): collector timeouts and lanes come from here, and so does the lab's realistic latency."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

#: No collector times out sooner than this: a loaded node answers slowly, and a timeout is a collector error.
MIN_TIMEOUT_S = 30.0
#: A timeout leaves this much room above the slowest healthy run on record.
SLOW_MARGIN = 1.25
#: Without a slow healthy run on record, a command may take this many times its typical duration.
TYPICAL_FACTOR = 10.0


@dataclass(frozen=True)
class Duration:
    """A tool's duration on a real node: typical, and (when one is on record) a slow but healthy run."""

    typical_s: float
    source: str
    slow_s: float | None = None
    slow_source: str = ""

    @property
    def timeout_s(self) -> float:
        """The default timeout: above the slowest healthy run, never below MIN_TIMEOUT_S; whole seconds."""
        bound = self.slow_s * SLOW_MARGIN if self.slow_s is not None else self.typical_s * TYPICAL_FACTOR
        return float(max(MIN_TIMEOUT_S, math.ceil(bound)))


_TELEGRAF = "influxdata/telegraf#8534: `nvidia-smi -q -x` took 0.588 s on an 8-GPU machine"
_QUERY_GPU = "influxdata/telegraf#8534: `nvidia-smi --query-gpu=... --format=csv` took 0.071 s on 8 GPUs"
_NVML_EST = ("estimate: per-link NVML reads of 8 GPUs x 18 links, about half the driver round trips of "
             "`nvidia-smi -q` (0.588 s on 8 GPUs, influxdata/telegraf#8534)")
# Without persistence mode every nvidia-smi call initializes the GPUs again.
_GPU_INIT = ("NVIDIA driver persistence guide: GPU initialization costs 'order of 1-3 second' per GPU without "
             "persistence mode, 8 GPUs x 3 s")
_JOURNAL = "systemd/systemd#7963: `journalctl -b` took 0.10-0.33 s"
_BIG_JOURNAL = ("estimate: sosreport/sos#246 read a whole 4.1 GB journal for this boot in ~2 min; one unit's or the "
                "kernel's entries come from the journal's field index, a fraction of that")
_BMC = ("dsx-ai-factory/infra-controller#6419: DGX H100 BMCs answered the Redfish FirmwareInventory query (what "
        "`nvfwupd show_version` reads) within 20 s; others timed out")
_SMALL = "estimate: one small read of sysfs, /proc or a daemon; milliseconds"

#: argv -> duration. Keyed by the exact argv a collector runs, so the lab delays exactly those calls.
DURATIONS: dict[tuple[str, ...], Duration] = {
    ("nvidia-smi", "-q"): Duration(0.6, _TELEGRAF, 24.0, _GPU_INIT),
    ("nvidia-smi", "-q", "-x"): Duration(0.6, _TELEGRAF, 24.0, _GPU_INIT),
    ("nvidia-smi", "--query-gpu=index,pci.bus_id,name,uuid,driver_version,vbios_version,persistence_mode,"
                   "ecc.mode.current,power.limit,clocks_throttle_reasons.active,pcie.link.gen.current,"
                   "pcie.link.width.current,fabric.state,fabric.status", "--format=csv"):
        Duration(0.07, _QUERY_GPU, 24.0, _GPU_INIT),
    ("nvidia-smi", "nvlink", "-s"): Duration(0.3, _NVML_EST, 24.0, _GPU_INIT),
    ("nvidia-smi", "nvlink", "-e"): Duration(0.3, _NVML_EST, 24.0, _GPU_INIT),
    ("nvidia-smi", "nvlink", "-c"): Duration(0.3, _NVML_EST, 24.0, _GPU_INIT),
    ("nvidia-smi", "nvlink", "-info"): Duration(0.3, _NVML_EST, 24.0, _GPU_INIT),
    ("nvidia-smi", "nvlink", "-gt", "d"): Duration(0.3, _NVML_EST, 24.0, _GPU_INIT),
    ("nvidia-smi", "topo", "-m"): Duration(0.3, _NVML_EST, 24.0, _GPU_INIT),
    ("nv-fabricmanager", "--version"): Duration(0.01, "estimate: prints its version string"),
    ("systemctl", "show", "nvidia-fabricmanager", "--property=LoadState,ActiveState,SubState,UnitFileState,NRestarts"):
        Duration(0.02, "systemd/systemd#7963: a `systemctl status` without journal lines took 0.008 s"),
    ("systemctl", "show", "nvidia-imex", "--property=LoadState,ActiveState,SubState,UnitFileState,NRestarts"):
        Duration(0.02, "systemd/systemd#7963: a `systemctl status` without journal lines took 0.008 s"),
    ("journalctl", "-u", "nvidia-fabricmanager", "-b", "--no-pager"): Duration(0.1, _JOURNAL, 48.0, _BIG_JOURNAL),
    ("journalctl", "-k", "-b", "--no-pager"): Duration(0.3, _JOURNAL, 48.0, _BIG_JOURNAL),
    ("nvidia-imex-ctl", "-N", "-j"): Duration(0.1, "estimate: one query of the local nvidia-imex daemon"),
    ("lspci", "-n", "-d", "10de:"): Duration(0.02, _SMALL),
    ("lspci", "-vvv"): Duration(0.5, "estimate: reads the config space of every PCI function (~300 on an HGX node)"),
    ("nvfwupd", "-c", "/etc/fabricproof/nvfwupd.yaml", "show_version"): Duration(
        20.0, _BMC, 144.0, "estimate: the slow BMCs of infra-controller#6419 (8 CX7 entries more) took several times "
                           "longer; the timeout stays at the 180 s it had"),
    ("lsmod",): Duration(0.01, _SMALL),
    ("ibstat",): Duration(0.05, "estimate: sysfs reads of 8 HCAs"),
    ("ibstatus",): Duration(0.05, "estimate: sysfs reads of 8 HCAs"),
    ("ibv_devinfo", "-v"): Duration(0.2, "estimate: opens each of 8 HCAs through libibverbs and queries every port"),
    ("ibdev2netdev",): Duration(0.1, "estimate: a shell script walking sysfs for 8 HCAs"),
    ("ofed_info", "-s"): Duration(0.01, "estimate: prints a version string"),
    ("show_gids",): Duration(1.0, "estimate: a bash loop that forks cat for every GID of every port of 8 HCAs"),
    ("rdma", "link", "show"): Duration(0.05, _SMALL),
    ("perfquery",): Duration(0.05, "estimate: one PerfMgt MAD to the local port's PMA and its answer"),
    ("sh", "-c", "exec sminfo 2>&1"): Duration(0.05, "estimate: one SubnSet/Get(SMInfo) MAD to the master SM"),
    ("mlxfwmanager", "--query"): Duration(
        4.0, "estimate: ~0.5 s per adapter to read its flash through MST, 8 HCAs", 96.0,
        "estimate: 12 adapters on a slow config space; the timeout stays at the 120 s it had"),
}


def of(argv: Sequence[str]) -> Duration | None:
    """The recorded duration of exactly this argv, if any."""
    return DURATIONS.get(tuple(argv))
