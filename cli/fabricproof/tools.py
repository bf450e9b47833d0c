"""Each tool invocation the collectors make, written once: its argv, its key and its duration on a real node."""

# Plain data and the standard library only: the lab copies this file beside its emulator onto lab nodes, where
# nothing else of the product is installed (fabricproof_lab/emu/api.py).

from __future__ import annotations

import math
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


@dataclass(frozen=True)
class Tool:
    """One fixed invocation of a tool on a node, as a collector runs it and as the lab answers it."""

    #: The id of the collector that runs it, and the one name the lab's outputs, its latency model, the fault
    #: tables and the tests know it by.
    key: str
    #: The tool's own argv; a collector whose tool may be absent wraps it in its prerequisite guard.
    argv: tuple[str, ...]
    duration: Duration
    #: Other argvs the real tool answers with the same output (`nvlink --status` for `nvlink -s`); the lab
    #: answers them alike.
    spellings: tuple[tuple[str, ...], ...] = ()

    @property
    def answered(self) -> tuple[tuple[str, ...], ...]:
        """The argvs that reach the tool itself: an `sh -c 'exec tool ...'` wrapper arrives as one of its
        spellings, since the shell is the node's own."""
        return tuple(a for a in (self.argv, *self.spellings) if a[0] != "sh")


#: The 14 fields the --query-gpu collector asks for, in its order (nvidia_smi_query_gpu parses them by name).
QUERY_GPU_FIELDS = ("index", "pci.bus_id", "name", "uuid", "driver_version", "vbios_version", "persistence_mode",
                    "ecc.mode.current", "power.limit", "clocks_throttle_reasons.active", "pcie.link.gen.current",
                    "pcie.link.width.current", "fabric.state", "fabric.status")
#: The `systemctl show` properties collectors.systemd_unit reads, for the FM and IMEX units.
SHOW_PROPERTIES = ("LoadState", "ActiveState", "SubState", "UnitFileState", "NRestarts")
#: nvfwupd's BMC address and Redfish credentials (collectors/nvswitch/firmware.py says why a file).
NVFWUPD_CONFIG = "/etc/fabricproof/nvfwupd.yaml"

_SHOW = "--property=" + ",".join(SHOW_PROPERTIES)
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
_SYSTEMCTL = "systemd/systemd#7963: a `systemctl status` without journal lines took 0.008 s"
_HCAS = "estimate: sysfs reads of 8 HCAs"
_NVSMI = Duration(0.6, _TELEGRAF, 24.0, _GPU_INIT)
_NVLINK = Duration(0.3, _NVML_EST, 24.0, _GPU_INIT)

_TOOLS = (
    Tool("nvidia_smi_q", ("nvidia-smi", "-q"), _NVSMI),
    Tool("nvidia_smi_q_xml", ("nvidia-smi", "-q", "-x"), _NVSMI),
    Tool("nvidia_smi_query_gpu", ("nvidia-smi", "--query-gpu=" + ",".join(QUERY_GPU_FIELDS), "--format=csv"),
         Duration(0.07, _QUERY_GPU, 24.0, _GPU_INIT)),
    Tool("nvlink_status", ("nvidia-smi", "nvlink", "-s"), _NVLINK, (("nvidia-smi", "nvlink", "--status"),)),
    Tool("nvlink_errors", ("nvidia-smi", "nvlink", "-e"), _NVLINK, (("nvidia-smi", "nvlink", "--errorcounters"),)),
    Tool("nvlink_caps", ("nvidia-smi", "nvlink", "-c"), _NVLINK, (("nvidia-smi", "nvlink", "--capabilities"),)),
    Tool("nvlink_info", ("nvidia-smi", "nvlink", "-info"), _NVLINK),
    Tool("nvlink_throughput", ("nvidia-smi", "nvlink", "-gt", "d"), _NVLINK,
         (("nvidia-smi", "nvlink", "--getthroughput", "d"),)),
    Tool("topo", ("nvidia-smi", "topo", "-m"), _NVLINK),
    Tool("fm_version", ("nv-fabricmanager", "--version"), Duration(0.01, "estimate: prints its version string"),
         (("nv-fabricmanager", "-v"),)),
    Tool("fm_service", ("systemctl", "show", "nvidia-fabricmanager", _SHOW), Duration(0.02, _SYSTEMCTL)),
    Tool("fm_journal", ("journalctl", "-u", "nvidia-fabricmanager", "-b", "--no-pager"),
         Duration(0.1, _JOURNAL, 48.0, _BIG_JOURNAL)),
    Tool("imex_service", ("systemctl", "show", "nvidia-imex", _SHOW), Duration(0.02, _SYSTEMCTL)),
    Tool("imex_nodes", ("nvidia-imex-ctl", "-N", "-j"), Duration(0.1, "estimate: one query of the local nvidia-imex daemon")),
    Tool("nvswitch_pci", ("lspci", "-n", "-d", "10de:"), Duration(0.02, _SMALL)),
    Tool("nvswitch_firmware", ("nvfwupd", "-c", NVFWUPD_CONFIG, "show_version"), Duration(
        20.0, _BMC, 144.0, "estimate: the slow BMCs of infra-controller#6419 (8 CX7 entries more) took several times "
                           "longer; the timeout stays at the 180 s it had"),
         (("nvfwupd", "show_version"),)),
    Tool("kernel_log", ("journalctl", "-k", "-b", "--no-pager"), Duration(0.3, _JOURNAL, 48.0, _BIG_JOURNAL)),
    Tool("lsmod", ("lsmod",), Duration(0.01, _SMALL)),
    Tool("lspci_vvv", ("lspci", "-vvv"),
         Duration(0.5, "estimate: reads the config space of every PCI function (~300 on an HGX node)")),
    Tool("ibstat", ("ibstat",), Duration(0.05, _HCAS)),
    Tool("ibstatus", ("ibstatus",), Duration(0.05, _HCAS)),
    Tool("ibv_devinfo", ("ibv_devinfo", "-v"),
         Duration(0.2, "estimate: opens each of 8 HCAs through libibverbs and queries every port")),
    Tool("ibdev2netdev", ("ibdev2netdev",), Duration(0.1, "estimate: a shell script walking sysfs for 8 HCAs")),
    Tool("ofed_info", ("ofed_info", "-s"), Duration(0.01, "estimate: prints a version string")),
    Tool("show_gids", ("show_gids",),
         Duration(1.0, "estimate: a bash loop that forks cat for every GID of every port of 8 HCAs")),
    Tool("rdma_link", ("rdma", "link", "show"), Duration(0.05, _SMALL)),
    # sminfo prints its failures (ibwarn/iberror) on stderr and exits 255: both are the answer.
    Tool("sminfo", ("sh", "-c", "exec sminfo 2>&1"),
         Duration(0.05, "estimate: one SubnSet/Get(SMInfo) MAD to the master SM"), (("sminfo",),)),
    Tool("perfquery", ("perfquery",), Duration(0.05, "estimate: one PerfMgt MAD to the local port's PMA and its answer")),
    Tool("mlxfwmanager", ("mlxfwmanager", "--query"), Duration(
        4.0, "estimate: ~0.5 s per adapter to read its flash through MST, 8 HCAs", 96.0,
        "estimate: 12 adapters on a slow config space; the timeout stays at the 120 s it had")),
)

#: key -> Tool, in the collectors' order.
TOOLS: dict[str, Tool] = {t.key: t for t in _TOOLS}

_SIM = ("measured on this machine against ibsim + opensm with the 2,728-node director dump of the corpus (8,723 "
        "links): {} s wall; the simulator answers MADs at memory speed, a real fabric slower")
_REAL = ("estimate: a real fabric of that size answers slower than the simulator, and 10,000-node fabrics have "
         "several times its ports")
#: The fabric-scope invocations (collectors.subnet): run once per run on the vantage host, never per host, so they
#: are not in TOOLS, whose records are per-host collectors the lab's nodes answer.
_FABRIC_TOOLS = (
    Tool("ibnetdiscover", ("ibnetdiscover",), Duration(2.0, _SIM.format("1.95"), 60.0, _REAL)),
    Tool("iblinkinfo", ("iblinkinfo",), Duration(3.5, _SIM.format("3.43"), 90.0, _REAL)),
    # it exits 1 when it prints errors (collectors.subnet accepts that status)
    Tool("ibqueryerrors", ("ibqueryerrors",), Duration(3.5, _SIM.format("3.49") + " (one PMA query per port)",
                                                       120.0, _REAL)),
)
FABRIC_TOOLS: dict[str, Tool] = {t.key: t for t in _FABRIC_TOOLS}


def argv(key: str) -> tuple[str, ...]:
    """The argv of the tool invocation `key` (a collector's own id)."""
    return TOOLS[key].argv
