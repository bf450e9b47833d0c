"""`nvidia-smi --query-gpu=... --format=csv` -> the /gpu fragment."""

from __future__ import annotations

import csv
import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..textutil import first_line, to_float, to_int
from .fragment import (
    GPU_SCHEMA,
    HEALTH_KEYS,
    THROTTLE_BITS,
    THROTTLE_NAMES,
    fabric_record,
    gpu_fragment,
    gpu_record,
    mode,
    na,
    ordered_reasons,
    ecc_errors,
    remapped,
    retired,
    yes_no,
)

_UNIT = re.compile(r"\s*\[[^\]]*\]\s*$")  # "power.limit [W]" -> "power.limit"
_ELIDED = {"[...]", "...", "…"}
# Query aliases print under their canonical header; accept both spellings.
_CSV_ALIASES = {
    "gpu_name": "name",
    "gpu_bus_id": "pci.bus_id",
    "gpu_uuid": "uuid",
    "clocks_event_reasons": "clocks_throttle_reasons",
}


def _csv_key(header: str) -> str:
    head, dot, rest = _UNIT.sub("", header.strip()).lower().partition(".")
    return _CSV_ALIASES.get(head, head) + dot + rest


def _csv_reasons(row: dict[str, str]) -> list[str]:
    mask = na(row.get("clocks_throttle_reasons.active"))
    if mask and re.fullmatch(r"0[xX][0-9A-Fa-f]+", mask):
        bits = int(mask, 16)
        return [name for name, bit in THROTTLE_BITS if bits & bit]
    # No mask column: fall back to the per-reason "Active"/"Not Active" columns.
    return ordered_reasons(
        name for name in THROTTLE_NAMES if (row.get(f"clocks_throttle_reasons.{name}") or "").strip() == "Active"
    )


def _csv_power_limit(row: dict[str, str]) -> float | None:
    limit = to_float(row.get("power.limit"))
    return limit if limit is not None else to_float(row.get("enforced.power.limit"))


# --query-gpu ECC fields per scope: ecc.errors.{corrected,uncorrected}.{volatile,aggregate}.{sram,dram,total}
# (sram.parity / sram.secded split the uncorrected SRAM count from R550 on).
_CSV_ECC = {"sram_correctable": "corrected.{s}.sram", "sram_uncorrectable": "uncorrected.{s}.sram",
            "sram_uncorrectable_parity": "uncorrected.{s}.sram.parity",
            "sram_uncorrectable_secded": "uncorrected.{s}.sram.secded",
            "dram_correctable": "corrected.{s}.dram", "dram_uncorrectable": "uncorrected.{s}.dram"}


def _csv_ecc(row: dict[str, str]) -> dict[str, Any] | None:
    if not any(k.startswith("ecc.errors.") for k in row):
        return None
    scopes = {}
    for scope in ("volatile", "aggregate"):
        counts = {key: to_int(row.get("ecc.errors." + field.format(s=scope))) for key, field in _CSV_ECC.items()}
        totals = (to_int(row.get(f"ecc.errors.corrected.{scope}.total")),
                  to_int(row.get(f"ecc.errors.uncorrected.{scope}.total")))
        if all(v is None for v in counts.values()):
            # a --query-gpu list with only the totals: they are the single/double-bit sums of that scope
            counts.update(single_bit=totals[0], double_bit=totals[1])
        scopes[scope] = counts
    flags = {"sram_threshold_exceeded": yes_no(row.get("ecc.errors.uncorrected.aggregate.sram.thresholdexceeded"))}
    return ecc_errors(scopes["volatile"], scopes["aggregate"], flags)


def _csv_gpu(position: int, row: dict[str, str]) -> dict[str, Any]:
    index = to_int(row.get("index"))
    return gpu_record(
        position if index is None else index,
        name=na(row.get("name")),
        uuid=na(row.get("uuid")),
        bus_id=na(row.get("pci.bus_id")),
        vbios=na(row.get("vbios_version")),
        persistence_mode=mode(row.get("persistence_mode")),
        ecc_mode=mode(row.get("ecc.mode.current")),
        mig_mode=mode(row.get("mig.mode.current")),
        power_limit_w=_csv_power_limit(row),
        throttle_reasons=_csv_reasons(row),
        pcie_gen=to_int(row.get("pcie.link.gen.current")),
        pcie_width=to_int(row.get("pcie.link.width.current")),
        remapped_rows=remapped(
            yes_no(row.get("remapped_rows.pending")),
            yes_no(row.get("remapped_rows.failure")),
            to_int(row.get("remapped_rows.uncorrectable")),
            to_int(row.get("remapped_rows.correctable")),
        ),
        ecc_errors=_csv_ecc(row),
        retired_pages=retired(to_int(row.get("retired_pages.single_bit_ecc.count")),
                              to_int(row.get("retired_pages.double_bit.count")),
                              yes_no(row.get("retired_pages.pending")))
        if any(k.startswith("retired_pages.") for k in row) else None,
        recovery_action=na(row.get("gpu_recovery_action")),
        fabric=fabric_record(
            state=na(row.get("fabric.state")),
            status=na(row.get("fabric.status")),
            clique_id=to_int(row.get("fabric.cliqueid")),
            cluster_uuid=na(row.get("fabric.clusteruuid")),
            health={k: na(row.get(f"fabric.health.{k}")) for k in HEALTH_KEYS},
        ),
    )


def parse_query_gpu_csv(text: str) -> dict[str, Any]:
    """Parse `nvidia-smi --query-gpu=... --format=csv` (with header; any field subset and order)."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise ParseError("empty output")
    header = [_csv_key(h) for h in next(csv.reader([lines[0]], skipinitialspace=True))]
    if not {"index", "name", "pci.bus_id", "uuid", "driver_version"} & set(header):
        raise ParseError(f"not nvidia-smi --query-gpu CSV: {first_line(text)!r}")
    gpus: list[dict[str, Any]] = []
    rows: list[dict[str, str]] = []
    notes: list[str] = []
    for lineno, line in enumerate(lines[1:], start=2):
        if line.strip() in _ELIDED:
            notes.append(f"line {lineno}: rows elided in the source ({line.strip()})")
            continue
        cells = [c.strip() for c in next(csv.reader([line], skipinitialspace=True))]
        if len(cells) != len(header):
            notes.append(f"line {lineno}: {len(cells)} cells for {len(header)} columns, skipped")
            continue
        row = dict(zip(header, cells, strict=True))
        rows.append(row)
        gpus.append(_csv_gpu(len(gpus), row))
    if notes and "index" not in header:
        notes.append("no index column: indexes are row positions")
    first = rows[0] if rows else {}
    return gpu_fragment(
        gpus,
        driver_version=na(first.get("driver_version")),
        cuda_version=None,  # not a --query-gpu field
        attached_gpus=to_int(first.get("count")),
        notes=notes,
    )


COLLECTORS = (
    Collector(
        id="nvidia_smi_query_gpu",
        argv=tools.argv("nvidia_smi_query_gpu"),
        parse=parse_query_gpu_csv,
        provides="/gpu",
        schema=GPU_SCHEMA,
        family="gpu",
        description="Same facts as nvidia_smi_q from selected --query-gpu fields (CSV).",
        default=False,
        corpus=("misc",),
    ),
)
