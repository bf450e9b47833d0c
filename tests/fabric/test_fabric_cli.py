"""Bad input to the fabric's commands and options exits 2 with one line naming the file, line and JSON path, before
any host is touched: the inventory's hosts are unreachable addresses, so any attempt to reach one would show as a
collection (a run directory, exit 3), never as exit 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.helpers import H100_BASELINE, run

BAD_PLAN = "kind: FabricPlan\nversion: 1\nname: t\nlinks:\n  - {a: node01 mlx5_0, a_port: one, b: leaf-1, b_port: 1}\n"


@pytest.fixture
def world(tmp_path: Path) -> Path:
    (tmp_path / "inv.yml").write_text("all:\n  hosts:\n    n1: {ansible_host: 127.0.0.1, ansible_port: 1}\n")
    (tmp_path / "bad-plan.yaml").write_text(BAD_PLAN)
    return tmp_path


@pytest.mark.parametrize("command", [
    ("validate", "-i", "{w}/inv.yml", "-b", str(H100_BASELINE), "--fabric-plan", "{w}/bad-plan.yaml",
     "--run-dir", "{w}/run"),
    ("fabric", "diff", "-i", "{w}/inv.yml", "--plan", "{w}/bad-plan.yaml", "--run-dir", "{w}/run"),
])
def test_a_bad_plan_is_exit_2_with_its_file_line_and_path_and_nothing_touched(world, command):
    res = run(*(a.format(w=world) for a in command))
    assert res.exit_code == 2, res.output
    assert f"{world}/bad-plan.yaml:5: at /links/0/a_port" in res.stderr
    assert not (world / "run").exists()


def test_the_window_and_the_sources_are_checked_before_anything_runs(world):
    res = run("validate", "-i", f"{world}/inv.yml", "-b", H100_BASELINE, "--fabric-plan", f"{world}/bad-plan.yaml",
              "--fabric-window", "-1", "--run-dir", f"{world}/run")
    assert res.exit_code == 2 and "--fabric-window -1: give seconds from 0 to 3600" in res.stderr
    (world / "plan.yaml").write_text("kind: FabricPlan\nversion: 1\nname: t\nlinks: []\n")
    (world / "facts").mkdir()
    res = run("validate", "--facts", f"{world}/facts", "-b", H100_BASELINE, "--fabric-plan", f"{world}/plan.yaml")
    assert res.exit_code == 2 and "--fabric-plan reads the fabric from a live vantage host" in res.stderr
    res = run("fabric", "import-csv", f"{world}/none.csv", "-o", f"{world}/out.yaml")
    assert res.exit_code == 2 and "none.csv: not found" in res.stderr
    assert not (world / "run").exists() and not (world / "out.yaml").exists()


def test_import_csv_writes_a_plan_of_every_row_and_refuses_a_bad_row_with_its_line(tmp_path):
    corpus = Path(__file__).resolve().parents[2].parent / "shared" / "corpus" / "ib-fabric"
    res = run("fabric", "import-csv", corpus / "ndt-plan-switch-to-host-2223-links-director-fabric.csv",
              "-o", tmp_path / "plan.yaml")
    assert res.exit_code == 0, res.output
    assert "wrote a plan of 2223 cables" in res.stderr
    from fabricproof.subnet.plan import load_plan

    assert len(load_plan(tmp_path / "plan.yaml").links) == 2223
    bad = corpus / "ndt-plan-NEGATIVE-invalid-port-names.csv"
    res = run("fabric", "import-csv", bad, "-o", tmp_path / "bad.yaml")
    assert res.exit_code == 2 and f"{bad}:" in res.stderr and not (tmp_path / "bad.yaml").exists()
