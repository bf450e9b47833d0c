"""The perf checks: their fixtures are built from real outputs (each host's facts are an excerpt of what the
probe's parser makes of the corpus file the fixture names), the example baselines carry the published gates, and a
probe's check is skipped on a host the probe did not run on."""

from __future__ import annotations

from typing import Any

import pytest
from fabricproof.judging import baseline as baseline_mod
from fabricproof.judging.baseline import Baseline
from fabricproof.judging.catalog import load
from fabricproof.collectors import COLLECTORS
from fabricproof.probes import spec
from fabricproof.judging.evaluate import evaluate
from fabricproof.model import Outcome
from fabricproof.paths import inventories_dir
from fabricproof.judging.pointer import split_pointer
from catalogkit import shipped_checks

from .fixturelib import fixture_paths, load_fixture

PERF = [c for c in shipped_checks() if c.family == "perf"]
RUN_COMPUTED = ("pairing",)  # fragment keys the probe run adds to the parse


def _excerpt(part: Any, whole: Any, path: str = "") -> list[str]:
    """Where `part` is not an excerpt of `whole`: mappings keep a subset of keys, lists a subsequence of items."""
    if isinstance(part, dict):
        if not isinstance(whole, dict):
            return [f"{path}: a mapping where the parse has {type(whole).__name__}"]
        return [p for k, v in part.items() for p in
                (_excerpt(v, whole[k], f"{path}/{k}") if k in whole else [f"{path}/{k}: not in the parse"])]
    if isinstance(part, list):
        if not isinstance(whole, list):
            return [f"{path}: a list where the parse has {type(whole).__name__}"]
        rest = iter(enumerate(whole))
        for n, item in enumerate(part):
            if not any(not _excerpt(item, other) for _, other in rest):
                return [f"{path}/{n}: no later item of the parse matches"]
        return []
    return [] if part == whole else [f"{path}: {part!r} where the parse has {whole!r}"]


def test_every_perf_family_check_exists():
    assert sorted(c.id for c in PERF) == [
        "perf.collective_at_fault", "perf.collective_busbw",
        "perf.dcgm_diag", "perf.dcgm_diag_proven", "perf.ib_gdr_bw", "perf.ib_pair_at_fault", "perf.ib_pair_bw",
        "perf.ib_pair_lat",
        "perf.nccl_allreduce_busbw",
        "perf.nccl_wrong", "perf.nvbandwidth_pair_min", "perf.nvbandwidth_spread"]
    # the subnet.* checks are opt-in the same way: they judge the fabric plan's diff where one was made
    assert all(c.probe for c in PERF) and not any(c.probe for c in load() if c.family not in ("perf", "subnet"))


# A group probe's facts are its run's, from many launches and the search (probes.collective.host_facts, tested in
# tests/probes/test_collective.py): no single output holds them, as no single output holds the pairing's verdict.
@pytest.mark.parametrize("kind", ["pass", "fail"])
@pytest.mark.parametrize("check", [c for c in PERF if c.collector not in spec.GROUP_PROBES], ids=lambda c: c.id)
def test_fixture_facts_are_excerpts_of_real_outputs(corpus, check, kind):
    data = load_fixture(fixture_paths(check.id)[kind])
    collector = COLLECTORS[check.collector]
    assert set(data["corpus"]) == set(data["facts"]), "name the corpus file of every host"
    for host, rel in data["corpus"].items():
        parsed = collector.parse((corpus / rel).read_text(encoding="utf-8"))
        node = data["facts"][host]
        for seg in split_pointer(collector.provides):
            node = node[seg]
        # The pairing's verdict is the probe run's, from many hosts' pairs: no single output holds it.
        node = {k: v for k, v in node.items() if k not in RUN_COMPUTED}
        assert not _excerpt(node, parsed), (host, rel, _excerpt(node, parsed)[:5])


def test_a_probe_check_skips_a_host_the_probe_did_not_run_on():
    """A standard collection (no probes) neither passes nor fails the perf checks, and gates do not count them."""
    facts = {"node1": {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": "node1", "collectors": {}}}
    base = Baseline("b", {"platform": "h100", "perf": {"nccl": {"all_reduce_busbw_gbps": 460}}, "nvlink": {"links_per_gpu": 18}})
    checks = {c.id: c for c in load()}
    report = evaluate(facts, base, [checks["perf.nccl_allreduce_busbw"], checks["perf.dcgm_diag"], checks["nvlink.links_active"]])
    got = {r.check_id: (r.outcome, r.reason) for r in report.results}
    assert got["perf.nccl_allreduce_busbw"] == (Outcome.SKIP, "probe nccl_all_reduce was not run on this host")
    assert got["perf.dcgm_diag"] == (Outcome.SKIP, "probe dcgm_diag was not run on this host")
    assert got["nvlink.links_active"] == (Outcome.UNKNOWN, "collector nvlink_status did not run on this host")


def test_an_edited_figure_is_not_an_excerpt():
    real = {"targets": {"mlx5_0": {"bw_average_gbps": 140.4, "runs": [{"side": "client"}, {"side": "server"}]}}}
    assert not _excerpt({"targets": {"mlx5_0": {"runs": [{"side": "server"}]}}}, real)
    assert _excerpt({"targets": {"mlx5_0": {"bw_average_gbps": 400}}}, real)
    assert _excerpt({"targets": {"mlx5_0": {"runs": [{"side": "server"}, {"side": "client"}]}}}, real)  # order kept
    assert _excerpt({"targets": {"mlx5_1": {}}}, real)


@pytest.mark.parametrize("platform", ["dgx-a100", "dgx-h100", "hgx-h200", "gb200-nvl72"])
def test_example_baselines_set_the_published_gates(platform):
    values = baseline_mod.load(inventories_dir() / platform / "baseline.yaml").defaults
    perf = values["perf"]
    gates = {"dgx-a100": (228, 185), "dgx-h100": (460, 380), "hgx-h200": (431, 360), "gb200-nvl72": (432, 360)}
    assert (perf["nccl"]["all_reduce_busbw_gbps"], perf["ib"]["gdr_bw_gbps"]) == gates[platform]
    assert perf["regression_tolerance_pct"] == 5 and perf["nvbandwidth"]["min_over_median_pct"] == 97
    assert spec.config(values)["perftest"]["port"] == 18515  # defaults fill what the file leaves out


def test_a_probe_the_idle_guard_refused_is_skipped_with_its_reason():
    """The guard's NOT_RUN_EXIT and marker line become a skipped collector run, and its checks skip, saying why."""
    from fabricproof import facts as facts_mod
    from fabricproof.collectors.base import NOT_RUN_EXIT
    from fabricproof.model import CommandResult

    out = CommandResult(("sh",), "fabricproof: not run: 1 GPU compute process(es) running: 4242, python3\n",
                        exit_code=NOT_RUN_EXIT)
    doc = facts_mod.build("node1", {"nccl_all_reduce": out}, via="ssh")
    assert doc["collectors"]["nccl_all_reduce"]["status"] == "skipped"
    assert "perf" not in doc
    base = Baseline("b", {"platform": "h100", "perf": {"nccl": {"all_reduce_busbw_gbps": 460}}})
    checks = {c.id: c for c in load()}
    (r,) = evaluate({"node1": doc}, base, [checks["perf.nccl_allreduce_busbw"]]).results
    assert r.outcome is Outcome.SKIP
    assert r.reason == "collector nccl_all_reduce not run: 1 GPU compute process(es) running: 4242, python3"


def test_a_diag_that_ran_no_hardware_test_is_not_proven_and_says_which(corpus):
    """The real Blackwell run (DCGM 3.3.9 older than the GPU): every hardware test said Skip. perf.dcgm_diag, which
    accepts Skip, passes it; perf.dcgm_diag_proven leaves the host unknown (never passed), naming the skipped tests."""
    from fabricproof.facts import build
    from fabricproof.model import CommandResult

    text = (corpus / "dcgmi" / "blackwell-rtx-pro-6000-2gpu-diag-r3-dcgm3.3.9-all-SKIP-duplicated-table.txt").read_text()
    facts = {"node1": build("node1", {"dcgm_diag": CommandResult(("dcgmi", "diag", "-r", "3"), text)}, via="local")}
    checks = {c.id: c for c in load()}
    report = evaluate(facts, Baseline("b", {"platform": "a100"}), [checks["perf.dcgm_diag"],
                                                                  checks["perf.dcgm_diag_proven"]])
    got = {r.check_id: (r.outcome, r.reason) for r in report.results}
    assert got["perf.dcgm_diag"][0] is Outcome.PASS
    outcome, reason = got["perf.dcgm_diag_proven"]
    assert outcome is Outcome.UNKNOWN
    assert reason.endswith("dcgm_diag noted: not proven: 5 of 5 hardware tests skipped (PCIe, GPU Memory, "
                           "Targeted Stress, Targeted Power, Memory Bandwidth)")
    # the run is not called passed, and a rollout gate holds the host
    from fabricproof.reporters._common import status
    from fabricproof.rollout.gate import host_failures

    assert status(report) == "incomplete"
    (held,) = host_failures(report)["node1"]
    assert held.startswith("perf.dcgm_diag_proven could not be judged (unknown)") and "not proven" in held
