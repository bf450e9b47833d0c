"""`fabricproof collective run` refuses bad input with one line and exit 2 before anything is launched or written;
the leaves of the leaf scales come from the fabric plan's roles."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from fabricproof.probes import collective
from fabricproof.subnet.plan import load_plan

from .helpers import run

INVENTORY = {"all": {"children": {"gb200": {"hosts": {f"gb200-000{i}": {} for i in range(1, 5)}}}}}
PLAN = {"kind": "FabricPlan", "version": 1, "name": "t", "defaults": {"width": "4x", "speed": "NDR"}, "links": [
    *({"a": f"gb200-000{i} mlx5_{r}", "a_port": 1, "b": f"leaf-su{1 + (i > 2)}-r{r}", "b_port": i} for i in range(1, 5)
      for r in (0, 1)),
    *({"a": f"leaf-su{s}-r{r}", "a_port": 33, "b": "spine-1", "b_port": 2 * s + r} for s in (1, 2) for r in (0, 1))]}


@pytest.fixture()
def inputs(tmp_path: Path) -> dict[str, Path]:
    files = {"inv": tmp_path / "inventory.yml", "base": tmp_path / "baseline.yaml", "plan": tmp_path / "plan.yaml"}
    files["inv"].write_text(yaml.safe_dump(INVENTORY))
    files["base"].write_text(yaml.safe_dump({"apiVersion": "fabricproof/v1", "kind": "Baseline",
                                             "metadata": {"name": "t"}, "spec": {"defaults": {}}}))
    files["plan"].write_text(yaml.safe_dump(PLAN))
    return files


@pytest.mark.parametrize("extra, words", [
    (["--scale", "rack"], "--scale 'rack': one of domain, domain_ib, leaf, cross_leaf, pair, all"),
    (["--scale", "all", "--via", "ssh"], "--via 'ssh': srun or mpirun"),
    (["--scale", "leaf"], "--scale leaf groups hosts by leaf: give --fabric-plan PLAN"),
    (["--scale", "domain"], "--scale domain groups hosts by NVLink domain: give --facts DIR"),
    (["--scale", "all", "--search"], "perf.probes.collective.thresholds.all is not set in the baseline"),
    (["--scale", "pair", "--limit", "gb200-0001"], "--scale pair: no group of two or more of the 1 host(s)"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_launch(inputs, tmp_path, extra, words):
    out = tmp_path / "run"
    result = run("collective", "run", "-i", inputs["inv"], "-b", inputs["base"], "-o", out, *extra)
    assert result.exit_code == 2, result.output
    assert words in result.output and result.output.count("error:") == 1
    assert not out.exists()  # nothing written, nothing launched


def test_the_leaf_scales_take_each_hosts_leaf_from_the_plans_roles(inputs):
    hosts = [f"gb200-000{i}" for i in range(1, 5)]
    leaves = collective.leaves(load_plan(inputs["plan"]), [h.upper() for h in hosts[:3]] + hosts[3:])
    assert leaves == {"GB200-0001": "leaf-su1-r0", "GB200-0002": "leaf-su1-r0", "GB200-0003": "leaf-su2-r0",
                      "gb200-0004": "leaf-su2-r0"}  # the lowest rail's leaf; hosts matched case-insensitively
    assert collective.groups("leaf", hosts, leaves=collective.leaves(load_plan(inputs["plan"]), hosts)) == [
        ["gb200-0001", "gb200-0002"], ["gb200-0003", "gb200-0004"]]
    assert collective.groups("cross_leaf", hosts, leaves=collective.leaves(load_plan(inputs["plan"]), hosts)) == [
        ["gb200-0001", "gb200-0003"], ["gb200-0002", "gb200-0004"]]
