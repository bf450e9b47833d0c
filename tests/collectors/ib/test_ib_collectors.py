"""Every InfiniBand/RDMA corpus file parses with its collector; the collector declarations and schema conventions."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabricproof.collectors.base import Collector
from fabricproof.collectors.ib.mlxlink import MLXLINK_SCRIPT
from fabricproof.collectors.ib.sysfs_counters import IB_COUNTERS_SCRIPT

from ..contract import assert_closed_and_described, assert_collector_table
from .iblib import COLLECTORS, FAMILIES, IB_COLLECTORS, cases, parse


# --- every corpus file parses and matches its collector's schema ----------------------------------------------------


@pytest.mark.parametrize(("family", "name", "collector_id"), cases(), ids=lambda v: str(v))
def test_every_corpus_file_parses_and_validates(corpus: Path, family: str, name: str, collector_id: str | None) -> None:
    assert collector_id is not None, f"no collector reads {family}/{name}"
    fragment = parse(corpus, family, name, collector_id)
    assert fragment, "empty fragment"
    assert family in COLLECTORS[collector_id].corpus


def test_case_list_covers_every_family(corpus: Path) -> None:
    listed = {(f, n) for f, n, _ in cases()}
    on_disk = {(f, p.name) for f in FAMILIES for p in (corpus / f).iterdir()}
    assert listed == on_disk and len(on_disk) >= 20


# --- declarations and schema conventions -----------------------------------------------------------------------------


@pytest.mark.parametrize("collector", IB_COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


def test_collector_table_matches_the_contract() -> None:
    assert_collector_table(
        IB_COLLECTORS,
        {
            "ibstat": (("ibstat",), "/ib/ibstat", True),
            "ibstatus": (("ibstatus",), "/ib/ibstat", False),
            "ibv_devinfo": (("ibv_devinfo", "-v"), "/ib/devinfo", True),
            "ibdev2netdev": (("ibdev2netdev",), "/ib/netdev", True),
            "ib_counters": (("sh", "-c", IB_COUNTERS_SCRIPT), "/ib/counters", True),
            "ofed_info": (("ofed_info", "-s"), "/ofed", True),
            "show_gids": (("show_gids",), "/roce/gids", True),
            "rdma_link": (("rdma", "link", "show"), "/ib/rdma_link", False),
            "sminfo": (("sh", "-c", "exec sminfo 2>&1"), "/ib/sminfo", True),
            "perfquery": (("perfquery",), "/ib/perfquery", False),
            "mlxlink": (("sh", "-c", MLXLINK_SCRIPT), "/ib/mlxlink", True),
        },
    )
    assert 255 in COLLECTORS["ibstat"].ok_exit_codes and 0 in COLLECTORS["ibstat"].ok_exit_codes
    # alternatives that land on one pointer must agree on the fragment schema
    assert COLLECTORS["ibstatus"].schema is COLLECTORS["ibstat"].schema
