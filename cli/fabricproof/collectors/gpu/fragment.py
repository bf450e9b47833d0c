"""The /gpu fragment the three nvidia-smi readers share: GPU record and fragment builders, value readers, schema."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from ..fragments import array, boolean, integer, number, obj, string

# Clock event (formerly "throttle") reasons in NVML bit order; the CSV reports them as a hex mask.
THROTTLE_BITS: tuple[tuple[str, int], ...] = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("display_clocks_setting", 0x100),
)
THROTTLE_NAMES = tuple(name for name, _ in THROTTLE_BITS)

HEALTH_KEYS = (
    "summary",
    "bandwidth",
    "route_recovery_in_progress",
    "route_unhealthy",
    "access_timeout_recovery",
    "incorrect_configuration",
    "partition_assigned",
)

# nvidia-smi spells "no value" in several ways; "None" is NOT among them (it is a real state,
# e.g. health.incorrect_configuration "None" means no misconfiguration was found), which is why string
# fields go through na rather than textutil.na_to_none. Numbers use to_int/to_float directly: no missing
# spelling starts with a digit, so both read the same.
_MISSING = {"", "N/A", "NA", "REQUESTED FUNCTIONALITY HAS BEEN DEPRECATED", "NOT SUPPORTED", "UNKNOWN ERROR"}


def na(value: str | None) -> str | None:
    """Printed value, or None for N/A, [N/A], [Not Supported], [Requested functionality ...]."""
    if value is None:
        return None
    v = value.strip()
    if v.startswith("[") and v.endswith("]"):
        return None
    return None if v.upper() in _MISSING else v


def mode(value: str | None) -> str | None:
    v = (na(value) or "").lower()
    return {"enabled": "Enabled", "disabled": "Disabled"}.get(v)


def yes_no(value: str | None) -> bool | None:
    v = (na(value) or "").lower()
    return {"yes": True, "true": True, "no": False, "false": False}.get(v)


def ordered_reasons(active: Iterable[str]) -> list[str]:
    found = set(active)
    return [name for name in THROTTLE_NAMES if name in found]


def remapped(pending: bool | None, failure: bool | None, uncorrectable: int | None,
             correctable: int | None = None) -> dict[str, Any] | None:
    if pending is None and failure is None and uncorrectable is None and correctable is None:
        return None  # pre-Ampere boards and MIG-mode views have no row remapper data
    return {"pending": pending, "failure": failure, "uncorrectable": uncorrectable, "correctable": correctable}


#: The per-scope ECC counters, in every layout nvidia-smi has printed: Ampere and later split SRAM and DRAM
#: (SRAM uncorrectable once more into parity and SEC-DED from R550), Volta and older count single- and
#: double-bit errors. correctable/uncorrectable are the totals over whichever layout the GPU reported.
ECC_COUNTERS = ("sram_correctable", "sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded",
                "dram_correctable", "dram_uncorrectable", "single_bit", "double_bit")
ECC_FLAGS = ("sram_threshold_exceeded", "channel_repair_pending", "tpc_repair_pending", "unrepairable_memory")


def _total(*values: int | None) -> int | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def ecc_scope(counts: dict[str, int | None]) -> dict[str, int | None]:
    """One scope (volatile or aggregate) with every counter key and its correctable/uncorrectable totals."""
    c = {k: counts.get(k) for k in ECC_COUNTERS}
    if c["sram_uncorrectable"] is None:
        c["sram_uncorrectable"] = _total(c["sram_uncorrectable_parity"], c["sram_uncorrectable_secded"])
    c["correctable"] = _total(c["sram_correctable"], c["dram_correctable"], c["single_bit"])
    c["uncorrectable"] = _total(c["sram_uncorrectable"], c["dram_uncorrectable"], c["double_bit"])
    return c


def ecc_errors(volatile: dict[str, int | None], aggregate: dict[str, int | None],
               flags: dict[str, bool | None]) -> dict[str, Any]:
    return {"volatile": ecc_scope(volatile), "aggregate": ecc_scope(aggregate),
            **{k: flags.get(k) for k in ECC_FLAGS}}


def retired(single_bit: int | None, double_bit: int | None, pending: bool | None) -> dict[str, Any]:
    """The Retired Pages section as printed; Ampere and later remap rows instead and print every field N/A (null),
    which tells a check that page retirement does not apply, where an absent section tells nothing."""
    return {"single_bit": single_bit, "double_bit": double_bit, "pending": pending}


def pci_device_id(printed: str | None) -> str | None:
    """The device half of a printed PCI id: 0x233010DE (text), 233010DE (XML) or 0x2330 (CSV) -> '2330'."""
    m = re.fullmatch(r"(?:0x)?([0-9a-fA-F]{4})(?:10de)?", (printed or "").strip(), re.IGNORECASE)
    return m.group(1).lower() if m else None


def fabric_record(
    state: str | None = None,
    status: str | None = None,
    clique_id: int | None = None,
    cluster_uuid: str | None = None,
    health: dict[str, str | None] | None = None,
) -> dict[str, Any]:
    health = health or {}
    return {
        "state": state,
        "status": status,
        "clique_id": clique_id,
        "cluster_uuid": cluster_uuid,
        "health": {k: health.get(k) for k in HEALTH_KEYS},
    }


def gpu_record(index: int, **fields: Any) -> dict[str, Any]:
    """One GPU record with every key present, so all three front-ends emit the same shape."""
    record: dict[str, Any] = {
        "index": index,
        "name": None,
        "uuid": None,
        "bus_id": None,
        "pci_device_id": None,
        "vbios": None,
        "architecture": None,
        "persistence_mode": None,
        "ecc_mode": None,
        "mig_mode": None,
        "mig_devices": None,
        "power_limit_w": None,
        "throttle_reasons": [],
        "pcie_gen": None,
        "pcie_width": None,
        "remapped_rows": None,
        "ecc_errors": None,
        "retired_pages": None,
        "recovery_action": None,
        "fabric": fabric_record(),
    }
    unknown = set(fields) - set(record)
    if unknown:
        raise TypeError(f"unknown GPU fields {sorted(unknown)}")
    record.update(fields)
    return record


def gpu_fragment(
    gpus: list[dict[str, Any]],
    driver_version: str | None,
    cuda_version: str | None,
    attached_gpus: int | None,
    notes: list[str],
) -> dict[str, Any]:
    if attached_gpus is not None and attached_gpus != len(gpus):
        notes.append(f"tool reports {attached_gpus} attached GPUs but lists {len(gpus)}")
    return {
        "count": len(gpus),
        "attached_gpus": attached_gpus,
        "driver_version": driver_version,
        "cuda_version": cuda_version,
        "gpus": gpus,
        "notes": notes,
    }


_MODES = ["Enabled", "Disabled", None]

_HEALTH_DESC = {
    "summary": "Fabric health summary as printed (Healthy, Unhealthy).",
    "bandwidth": "Fabric bandwidth state as printed (Full, Degraded).",
    "route_recovery_in_progress": "Whether NVLink route recovery is in progress (True/False as printed).",
    "route_unhealthy": "Whether a fabric route is unhealthy (True/False as printed).",
    "access_timeout_recovery": "Whether access-timeout recovery happened (True/False as printed).",
    "incorrect_configuration": "Incorrect fabric configuration reason as printed (None when correct).",
    "partition_assigned": "Whether an NVLink partition is assigned (as printed; newer drivers only).",
}

FABRIC_SCHEMA = obj(
    "GPU fabric registration (H100 and later; GB200 adds clique, cluster and health).",
    {
        "state": string("Registration state as printed: Not Started, In Progress, Completed.", True),
        "status": string("Registration result as printed: Success or an error such as Insufficient Resources.", True),
        "clique_id": integer("NVLink clique id; 0 on single-node NVSwitch systems.", True),
        "cluster_uuid": string("NVLink cluster UUID; all zero outside a multi-node NVLink domain.", True),
        "health": obj(
            "Fabric health sub-block (driver 560 and later).",
            {k: string(d, True) for k, d in _HEALTH_DESC.items()},
            optional=("partition_assigned",),
        ),
    },
)

_ECC_DESC = {
    "sram_correctable": "Corrected SRAM errors.",
    "sram_uncorrectable": "Uncorrected SRAM errors (parity plus SEC-DED where they are split).",
    "sram_uncorrectable_parity": "Uncorrected SRAM parity errors (R550 and later).",
    "sram_uncorrectable_secded": "Uncorrected SRAM SEC-DED errors (R550 and later).",
    "dram_correctable": "Corrected DRAM (HBM) errors.",
    "dram_uncorrectable": "Uncorrected DRAM (HBM) errors.",
    "single_bit": "Single-bit (corrected) errors, total (Volta and older layout).",
    "double_bit": "Double-bit (uncorrected) errors, total (Volta and older layout).",
    "correctable": "All corrected errors of the scope, whichever layout the GPU reported.",
    "uncorrectable": "All uncorrected errors of the scope, whichever layout the GPU reported.",
}


def _ecc_scope_schema(desc: str) -> dict[str, Any]:
    return obj(desc, {k: integer(d, True) for k, d in _ECC_DESC.items()})


GPU_RECORD_SCHEMA = obj(
    "One GPU.",
    {
        "index": integer("nvidia-smi index (order of enumeration)."),
        "name": string("Product name; null when the output has no name (-q -d <section>, excerpts).", True),
        "uuid": string("GPU UUID.", True),
        "bus_id": string("PCI bus id as printed, e.g. 00000000:19:00.0.", True),
        "pci_device_id": string("PCI device id, four lower-case hex digits (Device Id 0x233010DE -> 2330): what "
                                "platforms.py matches platforms by.", True, pattern="^[0-9a-f]{4}$"),
        "vbios": string("VBIOS version.", True),
        "architecture": string("Product architecture (Hopper, Blackwell...).", True),
        "persistence_mode": string("Persistence mode.", True, enum=_MODES),
        "ecc_mode": string("Current ECC mode.", True, enum=_MODES),
        "mig_mode": string("Current MIG mode.", True, enum=_MODES),
        "mig_devices": integer("MIG devices listed; null when the source cannot list them (CSV).", True),
        "power_limit_w": number("Current (enforced) GPU power limit in watts.", True),
        "throttle_reasons": array(
            "Active clock event (throttle) reasons.", {"type": "string", "enum": list(THROTTLE_NAMES)}
        ),
        "pcie_gen": integer("Current PCIe link generation.", True),
        "pcie_width": integer("Current PCIe link width (lanes).", True),
        "remapped_rows": obj(
            "Row remapper state (Ampere and later); null when not reported.",
            {
                "pending": boolean("A remap is pending until the GPU is reset.", True),
                "failure": boolean("A remapping failure occurred.", True),
                "uncorrectable": integer("Rows remapped for uncorrectable errors.", True),
                "correctable": integer("Rows remapped for correctable errors.", True),
            },
            optional=("correctable",),
            nullable=True,
        ),
        "ecc_errors": obj(
            "ECC error counters; null when the output has no ECC Errors block.",
            {
                "volatile": _ecc_scope_schema("Since the driver loaded (the last reboot or GPU reset)."),
                "aggregate": _ecc_scope_schema("Over the GPU's lifetime (kept in the InfoROM)."),
                "sram_threshold_exceeded": boolean("Aggregate SRAM errors crossed the RMA threshold.", True),
                "channel_repair_pending": boolean("A memory channel repair waits for a GPU reset.", True),
                "tpc_repair_pending": boolean("A TPC repair waits for a GPU reset.", True),
                "unrepairable_memory": boolean("The GPU has memory it cannot repair (RMA).", True),
            },
            nullable=True,
        ),
        "retired_pages": obj(
            "Dynamic page retirement (Volta and older; Ampere and later print N/A: they remap rows); null when the "
            "output has no Retired Pages section.",
            {
                "single_bit": integer("Pages retired for multiple single-bit errors.", True),
                "double_bit": integer("Pages retired for double-bit errors.", True),
                "pending": boolean("A retirement waits for the next GPU reset or reboot.", True),
            },
            nullable=True,
        ),
        "recovery_action": string(
            "GPU Recovery Action the driver asks for (R570 and later): None, GPU Reset, Node Reboot, Drain P2P, "
            "Drain and Reset...", True),
        "fabric": FABRIC_SCHEMA,
    },
    optional=("architecture", "mig_mode", "mig_devices", "ecc_errors", "retired_pages", "recovery_action",
              "pci_device_id"),
)

GPU_SCHEMA = obj(
    "GPUs as reported by nvidia-smi.",
    {
        "count": integer("Number of GPU records parsed."),
        "attached_gpus": integer("Attached GPUs as the tool reports it.", True),
        "driver_version": string("Driver version, e.g. 535.161.08.", True),
        "cuda_version": string("CUDA version the driver supports, e.g. 12.2.", True),
        "gpus": array("One record per GPU.", GPU_RECORD_SCHEMA),
        "notes": array("What the parser noticed about partial or odd output.", {"type": "string"}),
    },
    optional=("attached_gpus", "notes"),
)
