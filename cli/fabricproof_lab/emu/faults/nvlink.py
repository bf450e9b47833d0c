"""NVLink faults: inactive and slow links, and error counters that grow on every read."""

from __future__ import annotations

from ..model import Node
from .base import FM_PROFILES, NVLINK_PROBES, NVLINK_PROBES_BY, Fault


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


FAULTS: tuple[Fault, ...] = (
    Fault("nvlink-inactive", "GPU 1 has NVLinks 3 and 7 <inactive>; its GPU pairs drop below the baseline NV#.",
          "overlay", catches=("nvlink.links_active", "nvlink.topology"),
          catches_probes=("perf.dcgm_diag",) + NVLINK_PROBES,
          catches_probes_by_profile={"dgx-a100": ("perf.dcgm_diag",) + NVLINK_PROBES_BY["dgx-a100"],
              "gb200-nvl72": ("perf.dcgm_diag", "perf.nvbandwidth_pair_min", "perf.nvbandwidth_spread")},
          apply=_nvlink_inactive),
    Fault("nvlink-speed-degraded", "Every NVLink of GPU 2 trained at half the platform rate.", "overlay",
          catches=("nvlink.speed",), catches_probes=NVLINK_PROBES, catches_probes_by_profile=NVLINK_PROBES_BY,
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
)
