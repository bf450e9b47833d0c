"""Helpers shared by the InfiniBand/RDMA parser tests: which collector reads each corpus file, read and parse one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fabricproof.collectors.ib import (
    ibdev2netdev,
    ibstat,
    ibstatus,
    ibv_devinfo,
    mlxlink,
    ofed_info,
    perfquery,
    rdma_link,
    show_gids,
    sminfo,
    sysfs_counters,
)

from ..contract import assert_valid

# Same location as the `corpus` fixture (tests/conftest.py); only used to list files at collection time.
CORPUS = Path(__file__).resolve().parents[3].parent / "shared" / "corpus"
IB_COLLECTORS = (
    *ibstat.COLLECTORS,
    *ibstatus.COLLECTORS,
    *ibv_devinfo.COLLECTORS,
    *ibdev2netdev.COLLECTORS,
    *sysfs_counters.COLLECTORS,
    *ofed_info.COLLECTORS,
    *show_gids.COLLECTORS,
    *rdma_link.COLLECTORS,
    *sminfo.COLLECTORS,
    *perfquery.COLLECTORS,
    *mlxlink.COLLECTORS,
)
COLLECTORS = {c.id: c for c in IB_COLLECTORS}
FAMILIES = ("ibstat", "ibv_devinfo", "ibdev2netdev", "rdma", "sysfs-infiniband", "ib-diag", "mlxlink")
_IB_DIAG = (("sminfo-", "sminfo"), ("perfquery-", "perfquery"), ("mlxlink-", "mlxlink"))


def collector_for(family: str, name: str) -> str | None:
    """Which collector reads a corpus file; None means nobody claimed it (the coverage test then fails)."""
    if family == "ibstat":
        return "ibstatus" if name.startswith("ibstatus") else "ibstat"
    if family == "rdma":
        return "show_gids" if name.startswith("show_gids") else "rdma_link" if name.startswith("rdma-link") else None
    if family == "ib-diag":
        return next((cid for prefix, cid in _IB_DIAG if name.startswith(prefix)), None)
    return {"ibv_devinfo": "ibv_devinfo", "ibdev2netdev": "ibdev2netdev", "sysfs-infiniband": "ib_counters",
            "mlxlink": "mlxlink"}.get(family)


def cases() -> list[tuple[str, str, str | None]]:
    cases = []
    for family in FAMILIES:
        folder = CORPUS / family
        if folder.is_dir():
            cases += [(family, p.name, collector_for(family, p.name)) for p in sorted(folder.iterdir())]
    return cases


def read(corpus: Path, family: str, name: str) -> str:
    return (corpus / family / name).read_text(encoding="utf-8")


def parse(corpus: Path, family: str, name: str, collector_id: str) -> dict[str, Any]:
    collector = COLLECTORS[collector_id]
    fragment = collector.parse(read(corpus, family, name))
    assert_valid(collector.schema, fragment)
    return fragment
