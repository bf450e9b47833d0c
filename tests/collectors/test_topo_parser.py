"""nvidia-smi topo -m / -mp parser against the real-output corpus."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fabricproof.collectors import topo
from fabricproof.collectors.base import ParseError

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

# Same location as the `corpus` fixture (tests/conftest.py); only used to list files at collection time.
_CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
FAMILY = "nvidia-smi-topo"


def _names() -> list[str]:
    folder = _CORPUS / FAMILY
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


def _parse(text: str) -> dict[str, Any]:
    fragment = topo.parse_topo(text)
    assert_valid(topo.TOPO_SCHEMA, fragment)
    return fragment


def _file(corpus: Path, name: str) -> dict[str, Any]:
    return _parse((corpus / FAMILY / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", _names())
def test_every_topo_file_parses(corpus: Path, name: str) -> None:
    fragment = _file(corpus, name)
    gpus = fragment["gpus"]
    assert gpus and gpus == [f"GPU{i}" for i in range(len(gpus))]
    # A full square matrix with "X" on the diagonal: no column shifted by TABs, spaces or ANSI codes.
    devices = gpus + fragment["nics"]
    assert set(fragment["matrix"]) == set(devices)
    for row in devices:
        assert list(fragment["matrix"][row]) == devices
        assert fragment["matrix"][row][row] == "X"
    assert len(fragment["gpu_pairs"]) == len(gpus) * (len(gpus) - 1) // 2
    assert [a["gpu"] for a in fragment["gpu_affinity"]] == gpus
    assert all(a["cpu_affinity"] for a in fragment["gpu_affinity"])


def test_h100_nv18_twelve_nics_each_gpu_has_a_pix_nic(corpus: Path) -> None:
    fragment = _file(corpus, "h100-8gpu-nv18-12nic-cx7-mooncake-issue2039.txt")
    assert len(fragment["gpus"]) == 8
    assert fragment["nics"] == [f"NIC{i}" for i in range(12)]
    assert fragment["nic_names"]["NIC11"] == "mlx5_11"
    assert {p["link"] for p in fragment["gpu_pairs"]} == {"NV18"}
    assert fragment["nvlink_bonds_min"] == 18
    nearest = {n["gpu"]: (n["nic"], n["nic_name"], n["link"]) for n in fragment["gpu_nearest_nic"]}
    assert {link for _, _, link in nearest.values()} == {"PIX"}
    assert nearest["GPU0"] == ("NIC0", "mlx5_0", "PIX")  # NIC0..2 tie at PIX: the lowest wins
    assert nearest["GPU5"] == ("NIC9", "mlx5_9", "PIX")
    assert fragment["gpu_affinity"][4] == {
        "gpu": "GPU4", "cpu_affinity": "1,3,5,7,9,11", "numa_affinity": "1", "gpu_numa_id": None,
    }


def test_a100_oci_nv12_eighteen_nics_nearest_is_pxb(corpus: Path) -> None:
    fragment = _file(corpus, "a100-8gpu-nv12-18nic-8numa-oci-bm-gpu-a100.txt")
    assert fragment["nvlink_bonds_min"] == 12
    assert len(fragment["nics"]) == len(fragment["nic_names"]) == 18
    assert {n["link"] for n in fragment["gpu_nearest_nic"]} == {"PXB"}
    assert fragment["gpu_nearest_nic"][0]["nic_name"] == "mlx5_5"
    assert fragment["gpu_affinity"][4]["cpu_affinity"] == "112-127"
    assert fragment["gpu_affinity"][4]["numa_affinity"] == "7"


def test_compacted_spacing_without_nics(corpus: Path) -> None:
    fragment = _file(corpus, "a100-8gpu-nv12-2numa-compacted-spacing-mlengineering.txt")
    assert fragment["nvlink_bonds_min"] == 12
    assert fragment["nics"] == [] and fragment["gpu_nearest_nic"] == [] and fragment["nic_names"] == {}
    assert fragment["gpu_affinity"][7]["cpu_affinity"] == "24-47"


def test_ansi_underlined_header_single_gpu(corpus: Path) -> None:
    fragment = _file(corpus, "topo-m-h100-80gb-hbm3-1gpu-vm-590.48.01-ansi-underline-header.txt")
    assert fragment["gpus"] == ["GPU0"] and fragment["nics"] == []
    assert fragment["gpu_pairs"] == [] and fragment["nvlink_bonds_min"] is None
    assert fragment["gpu_affinity"] == [
        {"gpu": "GPU0", "cpu_affinity": "0-19", "numa_affinity": "0", "gpu_numa_id": None}
    ]


def test_mp_pcie_only_matrix_has_no_nvlink(corpus: Path) -> None:
    fragment = _file(corpus, "topo-mp-8gpu-12nic-dell-cx7-native-tabs-deepep-issue.txt")
    assert "NV#" not in fragment["legend"] and "PIX" in fragment["legend"]
    assert fragment["nvlink_bonds_min"] == 0  # -mp shows GPU pairs as NODE/SYS
    assert fragment["matrix"]["GPU0"]["GPU4"] == "SYS"
    assert fragment["matrix"]["NIC11"]["NIC11"] == "X"  # trailing empty TAB columns on NIC rows
    assert {n["link"] for n in fragment["gpu_nearest_nic"]} == {"PIX"}


def test_vm_all_phb(corpus: Path) -> None:
    fragment = _file(corpus, "h100-4gpu-vm-nv18-8nic-all-phb.txt")
    assert fragment["nvlink_bonds_min"] == 18
    assert [(n["gpu"], n["nic"], n["link"]) for n in fragment["gpu_nearest_nic"]] == [
        (f"GPU{i}", "NIC0", "PHB") for i in range(4)
    ]


def test_one_pcie_pair_makes_bonds_min_zero() -> None:
    text = (
        "\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tNV4\tPHB\t0-7\t0\n"
        "GPU1\tNV4\t X \tNV4\t0-7\t0\n"
        "GPU2\tPHB\tNV4\t X \t0-7\t0\n"
    )
    fragment = _parse(text)
    assert fragment["gpu_pairs"] == [
        {"a": "GPU0", "b": "GPU1", "link": "NV4"},
        {"a": "GPU0", "b": "GPU2", "link": "PHB"},
        {"a": "GPU1", "b": "GPU2", "link": "NV4"},
    ]
    assert fragment["nvlink_bonds_min"] == 0


@pytest.mark.parametrize(
    ("cell", "order"),
    [("X", 0), ("NV18", 1), ("NV4", 1), ("PIX", 2), ("PXB", 3), ("PHB", 4), ("NODE", 5), ("SYS", 6), ("SOC", 6)],
)
def test_rank_orders_connections(cell: str, order: int) -> None:
    assert topo.rank(cell) == order


@pytest.mark.parametrize(
    "text",
    ["bash: nvidia-smi: command not found\n", "", "\x8f\x02\xffrandom\x00bytes\n\x07", "No devices were found\n",
     "\tGPU0\tCPU Affinity\n\nLegend:\n"],
    ids=["not-found", "empty", "bytes", "no-devices", "header-only"],
)
def test_garbage_raises_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        topo.parse_topo(text)


def test_collector_matches_contract() -> None:
    assert_collector_table(topo.COLLECTORS, {"topo": (("nvidia-smi", "topo", "-m"), "/topo", True)})
    assert topo.COLLECTORS[0].schema is topo.TOPO_SCHEMA


def test_schema_is_closed_and_described() -> None:
    assert_closed_and_described(topo.TOPO_SCHEMA)


# --- a malformed matrix is not a fact (issue 10.2) --------------------------------------------------------------------


@pytest.mark.parametrize("name", _names())
def test_no_corpus_cell_is_taken_for_malformed(corpus: Path, name: str) -> None:
    fragment = _file(corpus, name)
    assert not any("not a topology code" in n or "malformed" in n for n in fragment["notes"])
    assert all(topo._CELL.match(cell) for row in fragment["matrix"].values() for cell in row.values())


def _fused(corpus: Path) -> str:
    """The real 4-GPU VM matrix with GPU0's last NIC cell glued to its CPU affinity ("PHB0-79"), as nvidia-smi
    prints a wide matrix when the column runs into the next one."""
    text = (corpus / FAMILY / "h100-4gpu-vm-nv18-8nic-all-phb.txt").read_text(encoding="utf-8")
    row = next(line for line in text.splitlines() if line.startswith("GPU0 "))
    fused = row.replace("PHB     0-79", "PHB0-79", 1)
    assert fused != row
    return text.replace(row, fused, 1)


def test_a_fused_cell_makes_the_derived_facts_unknown(corpus: Path) -> None:
    fragment = _parse(_fused(corpus))
    # before issue 10 the fused token was read as GPU0's relation to NIC7 and the affinity columns shifted by one
    assert fragment["gpu_nearest_nic"] is None and fragment["gpu_pairs"] is None
    assert fragment["gpu_affinity"] is None and fragment["nvlink_bonds_min"] is None
    assert "GPU0" not in fragment["matrix"] and "GPU1" in fragment["matrix"]
    assert any("line 2: GPU0 cell 'PHB0-79' under NIC7 is not a topology code" in n for n in fragment["notes"])


def test_a_fused_cell_leaves_the_checks_unknown_with_the_reason(corpus: Path) -> None:
    from fabricproof import facts
    from fabricproof.judging import catalog
    from fabricproof.judging.baseline import Baseline
    from fabricproof.judging.evaluate import evaluate
    from fabricproof.model import CommandResult, Outcome
    from fabricproof.paths import checks_dir

    doc = facts.build("vm", {"topo": CommandResult(("nvidia-smi", "topo", "-m"), _fused(corpus))}, via="replay")
    checks = [c for c in catalog.load(checks_dir()) if c.id in ("topo.gpu_nic_affinity", "nvlink.topology")]
    base = Baseline("b", {"topo": {"gpu_nic": ["PIX", "PXB"], "gpu_gpu": "NV18"}})
    for r in evaluate({"vm": doc}, base, checks).results:
        assert r.outcome is Outcome.UNKNOWN, (r.check_id, r.outcome, r.reason)
        assert "topo noted: line 2: GPU0 cell 'PHB0-79'" in r.reason
