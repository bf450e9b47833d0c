"""A partial proof never passes (issue 19.1): baseline groups the inventory lacks, hosts not proven, and a run
directory's own manifest as the scope of `validate --facts`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from fabricproof import inventory as inventory_mod
from fabricproof_lab.inventory import dump_inventory, render_inventory
from fabricproof_lab.topology import PROFILES, profile_group
from fabricproof.runstore import RunStore, manifest_document

from .helpers import REPO, run

LAB = REPO / "inventories" / "lab"
INVENTORY = """\
all:
  children:
    dgx_a100: {hosts: {a100-0001: }}
    dgx_h100: {hosts: {h100-0001: }}
    hgx_h200: {hosts: {h200-0001: }}
    gb200_nvl72: {hosts: {gb200-0001: }}
"""


@pytest.fixture
def typo(tmp_path: Path) -> tuple[Path, int]:
    """The lab baseline with its H100 group misspelt (dgx_h10), and the line the group is on."""
    lines = (LAB / "baseline.yaml").read_text().splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line == "    dgx_h100:\n")
    lines[at] = "    dgx_h10:\n"
    path = tmp_path / "typo.yaml"
    path.write_text("".join(lines))
    return path, at + 1


@pytest.fixture
def inventory(tmp_path: Path) -> Path:
    path = tmp_path / "inventory.yml"
    path.write_text(INVENTORY)
    return path


def _json(res) -> dict:
    return json.loads(res.stdout)


def test_a_baseline_group_the_inventory_lacks_is_refused_with_a_suggestion(typo, inventory, tmp_path):
    baseline, line = typo
    where = f"{baseline}:{line}: at /spec/groups/dgx_h10 no group 'dgx_h10' in inventory {inventory}; did you mean 'dgx_h100'?"
    assert run("baseline", "lint", baseline).exit_code == 0  # without an inventory there is nothing to compare with
    lint = run("baseline", "lint", baseline, "-i", inventory)
    assert lint.exit_code == 2 and where in " ".join(lint.output.split()), lint.output
    out = tmp_path / "report.json"
    res = run("validate", "--facts", LAB / "facts", "-b", baseline, "-i", inventory, "--limit", "dgx_h100",
              "-f", f"json={out}")
    assert res.exit_code == 2 and where in " ".join(res.output.split()), res.output
    assert not out.exists()  # refused before anything was judged or written
    assert run("baseline", "lint", LAB / "baseline.yaml", "-i", inventory).exit_code == 0


def test_groups_without_hosts_are_groups_so_the_lab_baseline_fits_a_one_profile_lab(tmp_path):
    # `lab up --profile dgx-h100` has no A100 node, yet the lab baseline's dgx_a100 group is no typo.
    lab = render_inventory([], port=2222, user="lab", client_key=tmp_path / "key", known_hosts=tmp_path / "kh")
    lab["all"]["children"]["lab"]["children"]["dgx_h100"] = {"hosts": {"h100-0001": {"ansible_host": "127.0.0.2"}}}
    path = tmp_path / "lab.yml"
    path.write_text(dump_inventory(lab, tmp_path))
    inv = inventory_mod.load(path)
    assert inv.groups["dgx_a100"] == () and inv.groups["dgx_h100"] == ("h100-0001",)
    assert set(inv.groups) >= {profile_group(p) for p in PROFILES} == {"dgx_a100", "dgx_h100", "hgx_h200", "gb200_nvl72"}
    res = run("baseline", "lint", LAB / "baseline.yaml", "-i", path)
    assert res.exit_code == 0, res.output


def test_a_host_whose_hardware_went_unjudged_is_not_proven_in_every_format(typo, tmp_path):
    baseline, _ = typo
    facts = tmp_path / "facts"
    shutil.copytree(LAB / "facts", facts)
    # A degraded NVLink on the H100: with its group misspelt nothing judges it, so it must not pass.
    doc = json.loads((facts / "h100-0001.json").read_text())
    doc["nvlink"]["status"]["gpus"][5]["links_active"] = 17
    (facts / "h100-0001.json").write_text(json.dumps(doc))
    res = run("validate", "--facts", facts, "-b", baseline, "-f", "json")
    assert res.exit_code == 3, res.output
    report = _json(res)
    assert list(report["not_proven"]) == ["h100-0001"] and report["summary"]["hosts_not_proven"] == 1
    unproven = set(report["not_proven"]["h100-0001"])
    # An NVSwitch system's FM and fabric checks, an IB host's port checks, its NVLink checks.
    assert {"fm.version_matches_driver", "fm.service_active", "fabric.state_completed", "ib.rate", "ib.port_active",
            "nvlink.links_active", "nvswitch.count"} <= unproven
    # Opt-in checks and probes are not gaps; nor are the other hosts, whose groups are spelt right.
    assert not unproven & {"roce.gid_index", "gpu.throttle", "perf.nccl_allreduce_busbw"}
    skipped = {r["check_id"]: r["reason"] for r in report["results"]
               if r["host"] == "h100-0001" and r["outcome"] == "skip"}
    assert skipped["fm.version"].startswith("not proven: baseline sets no fm.required")
    table = run("validate", "--facts", facts, "-b", baseline)
    assert table.exit_code == 3 and "NOT PROVEN" in table.output and "Not proven (1)" in table.output
    assert "PASSED" not in table.output
    # The same facts against the right baseline: judged, and the degraded link fails.
    right = run("validate", "--facts", facts, "-b", LAB / "baseline.yaml", "-f", "json")
    assert right.exit_code == 1 and _json(right)["not_proven"] == {}


def test_the_shipped_baselines_leave_no_lab_host_unproven(tmp_path):
    res = run("validate", "--facts", LAB / "facts", "-b", LAB / "baseline.yaml", "-f", "json")
    assert res.exit_code == 0 and _json(res)["not_proven"] == {}, res.output
    for name, host in (("dgx-a100", "a100-0001"), ("dgx-h100", "h100-0001"), ("hgx-h200", "h200-0001"),
                       ("gb200-nvl72", "gb200-0001")):
        one = tmp_path / host
        one.mkdir()
        shutil.copy(LAB / "facts" / f"{host}.json", one)
        res = run("validate", "--facts", one, "-b", REPO / "inventories" / name / "baseline.yaml", "-f", "json")
        assert _json(res)["not_proven"] == {}, (name, res.output)


def _run_dir(tmp_path: Path, status: str, hosts: list[str], with_facts: list[str]) -> Path:
    """A run directory as `collect -o` leaves it: run.json naming every host, facts for some."""
    store = RunStore.create(tmp_path / "runs" / "T")
    store.begin()
    for host in with_facts:
        shutil.copy(LAB / "facts" / f"{host}.json", store.facts_path(host))
    store.write_manifest(manifest_document(
        run_id="T", status=status, via="ssh", tool_version="0", started_at="2026-12-02T05:00:00Z", finished_at="",
        duration_s=1.0, hosts=hosts, commands=[], collected=len(with_facts), errors={}, command_errors={},
        settings={}))
    return store.root


def test_a_killed_collection_is_not_passed_and_says_it_did_not_finish(tmp_path):
    run_dir = _run_dir(tmp_path, "running", ["h100-0001", "h200-0001"], ["h100-0001"])
    res = run("validate", "--facts", run_dir, "-b", LAB / "baseline.yaml", "-f", "json")
    assert res.exit_code == 3, res.output
    report = _json(res)
    assert report["hosts"] == ["h100-0001", "h200-0001"]
    assert report["collection_errors"]["h200-0001"].startswith("the run did not finish (run.json: status running)")
    warning = " ".join(res.stderr.split())
    assert f"{run_dir} holds an unfinished run (run.json: status running): 1 of 2 host(s) have facts" in warning


def test_a_finished_run_missing_a_hosts_facts_is_incomplete(tmp_path):
    run_dir = _run_dir(tmp_path, "complete", ["h100-0001", "h200-0001"], ["h100-0001"])
    res = run("validate", "--facts", run_dir, "-b", LAB / "baseline.yaml", "-f", "json")
    assert res.exit_code == 3, res.output
    assert _json(res)["collection_errors"] == {"h200-0001": f"no facts for this host in {run_dir}"}
    assert "unfinished" not in res.stderr
    whole = _run_dir(tmp_path / "b", "complete", ["h100-0001", "h200-0001"], ["h100-0001", "h200-0001"])
    assert run("validate", "--facts", whole, "-b", LAB / "baseline.yaml").exit_code == 0


def test_check_local_refuses_the_misspelt_group_before_it_collects(typo, inventory, tmp_path):
    baseline, line = typo
    res = run("check", "--local", "-b", baseline, "-i", inventory, "--node-name", "h100-0001",
              "--run-dir", tmp_path / "run")
    assert res.exit_code == 2, res.output
    assert f"{baseline}:{line}: at /spec/groups/dgx_h10 no group 'dgx_h10'" in " ".join(res.output.split())
    assert not (tmp_path / "run").exists()  # nothing ran on this node


def test_the_health_check_line_of_a_node_not_proven_names_it_and_is_not_ok(typo):
    from fabricproof.judging import catalog
    from fabricproof import facts as facts_mod
    from fabricproof.judging.baseline import load as load_baseline
    from fabricproof.commands.check import nhc_lines
    from fabricproof.judging.evaluate import evaluate, exit_code

    baseline, _ = typo
    doc = facts_mod.load_dir(LAB / "facts")["h100-0001"]
    report = evaluate({"h100-0001": doc}, load_baseline(baseline), catalog.load(), groups={"h100-0001": doc["groups"]})
    lines = nhc_lines(report, "h100-0001", "critical")
    assert exit_code(report) == 3  # check --local --drain leaves a node it could not prove as it is
    unjudged = report.not_proven["h100-0001"]
    assert len(unjudged) >= 40  # the H100 group's keys: FM, fabric, NVLink, IB, firmware ... (49 today)
    assert lines == [f"NOT PROVEN h100-0001: {len(unjudged)} check(s) its hardware needs had no baseline value (a baseline "
                     f"group that selects none of its groups?): {', '.join(unjudged[:8])} (+{len(unjudged) - 8} more)"]
