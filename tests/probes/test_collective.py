"""probes.collective without I/O: the srun and mpirun argv from the baseline, node names refused before any launch,
the groups of each scale (NVLink domains from facts, leaves, pairs) and a launch's output as the search sees it."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import yaml
from fabricproof.collectors import COLLECTORS
from fabricproof.errors import InputError
from fabricproof.judging import baseline
from fabricproof.probes import collective, spec
from fabricproof.probes.isolation import search
from fabricproof.probes.isolation_sim import Fleet, Runner
from jsonschema import Draft202012Validator

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "nccl-tests"
VALUES = {"gpu": {"count": 4}, "perf": {"probes": {"nccl_tests": {"bin_dir": "/opt/nccl-tests/build"},
                                                   "collective": {"thresholds": {"domain": 700}}}}}


def test_srun_argv_is_fixed_from_the_baseline_one_task_per_gpu():
    argv = collective.srun_argv(VALUES, ["gb200-0001", "gb200-0002"], "fp-1")
    assert argv == ("srun", "--nodelist=gb200-0001,gb200-0002", "--nodes=2", "--ntasks-per-node=4", "--mpi=pmix",
                    "--label", "--job-name=fp-1", "--kill-on-bad-exit=1", "--immediate=30", "--export=ALL",
                    "/opt/nccl-tests/build/all_reduce_perf", "-b", "512M", "-e", "8G", "-f", "2", "-g", "1")
    ib = collective.srun_argv(spec.merge(VALUES, {"perf": {"probes": {"collective": {
        "tasks_per_node": "one", "mpi": "pmi2", "partition": "gpu"}}}}), ["a", "b"], "fp-2", "domain_ib")
    assert "--export=ALL,NCCL_MNNVL_ENABLE=0" in ib and "--ntasks-per-node=1" in ib and "--mpi=pmi2" in ib
    assert "--partition=gpu" in ib and ib[-2:] == ("-g", "4")
    # the leaf scales prove the InfiniBand fabric: with multi-node NVLink on, one rack's trays would bypass it
    for scale, env in (("leaf", "ALL,NCCL_MNNVL_ENABLE=0"), ("cross_leaf", "ALL,NCCL_MNNVL_ENABLE=0"),
                       ("domain", "ALL"), ("all", "ALL")):
        assert f"--export={env}" in collective.srun_argv(VALUES, ["a", "b"], "fp-3", scale), scale


def test_mpirun_argv_and_its_host_file_come_from_the_inventory_names(tmp_path):
    hf = tmp_path / "hosts"
    hosts = ["h100-0001", "h100-0002", "h100-0003"]
    values = spec.merge(VALUES, {"gpu": {"count": 8}})
    assert collective.hostfile(values, hosts) == "h100-0001 slots=8\nh100-0002 slots=8\nh100-0003 slots=8\n"
    argv = collective.mpirun_argv(values, hosts, hf, "domain_ib")
    assert argv[:9] == ("mpirun", "--hostfile", str(hf), "-np", "24", "--map-by", "ppr:8:node", "--tag-output", "-x")
    assert argv[9] == "NCCL_MNNVL_ENABLE=0" and argv[10] == "/opt/nccl-tests/build/all_reduce_perf"
    assert "--mca" not in argv  # no agent in the baseline: Open MPI's own ssh


def test_mpiruns_rsh_agent_is_the_baseline_value_as_one_argv_element(tmp_path):
    agent = "ssh -F /etc/fabricproof/ssh_config"
    values = spec.merge(VALUES, {"perf": {"probes": {"collective": {"launcher": "mpirun", "rsh_agent": agent}}}})
    argv = collective.mpirun_argv(values, ["h1", "h2"], tmp_path / "hosts")
    assert argv[8:11] == ("--mca", "plm_rsh_agent", agent) and argv[11] == "/opt/nccl-tests/build/all_reduce_perf"


@pytest.mark.parametrize("agent", ["ssh -o 'ProxyCommand=sh'", "ssh; reboot", "ssh $(id)", "ssh  -F x", " ssh", ""])
def test_an_rsh_agent_with_quotes_or_shell_text_is_a_baseline_error_naming_its_line_and_path(tmp_path, agent):
    path = tmp_path / "baseline.yaml"
    doc = {"apiVersion": "fabricproof/v1", "kind": "Baseline", "metadata": {"name": "t"},
           "spec": {"defaults": {"perf": {"probes": {"collective": {"launcher": "mpirun", "rsh_agent": agent}}}}}}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    with pytest.raises(InputError, match=rf"{path}:\d+: at /spec/defaults/perf/probes/collective/rsh_agent "):
        baseline.load(str(path))
    doc["spec"]["defaults"]["perf"]["probes"]["collective"]["rsh_agent"] = "ssh -F /lab/ssh_config -o BatchMode=yes"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    assert collective.config(baseline.load(str(path)).for_groups([]))["rsh_agent"].startswith("ssh -F ")


@pytest.mark.parametrize("bad", ["gb200-[0001-0004]", "a,b", "-w", "host name", "$(reboot)", "", "x;y"])
def test_a_name_that_is_not_one_node_is_refused_before_any_launch(bad):
    with pytest.raises(InputError, match="is not a node name"):
        collective.srun_argv(VALUES, ["gb200-0001", bad], "fp-1")
    with pytest.raises(InputError):
        collective.hostfile(VALUES, [bad])


def test_scales_group_hosts_by_nvlink_domain_leaf_and_pair():
    def tray(uuid, clique):
        return {"gpu": {"gpus": [{"fabric": {"cluster_uuid": uuid, "clique_id": clique}}] * 4}}

    facts = {"t1": tray("u0", 1), "t2": tray("u0", 1), "t3": tray("u1", 2), "t4": tray("u1", 2),
             "h1": {"gpu": {"gpus": [{"fabric": {"cluster_uuid": None, "clique_id": None}}]}}, "t5": tray("u2", 3)}
    assert collective.groups("domain", list(facts), facts) == [["t1", "t2"], ["t3", "t4"]]
    assert collective.domains(facts)["u0/1"] == ["t1", "t2"]
    leaves = {"a": "L1", "b": "L1", "c": "L2", "d": "L2", "e": "L2"}
    assert collective.groups("leaf", list(leaves), leaves=leaves) == [["a", "b"], ["c", "d", "e"]]
    assert collective.groups("cross_leaf", list(leaves), leaves=leaves) == [["a", "c"], ["b", "d"]]
    assert collective.groups("leaf", ["a", "b"]) == []  # no fabric plan: no leaf scale
    assert collective.groups("pair", ["a", "b", "c", "d", "e"]) == [["a", "b"], ["c", "d"]]
    assert collective.groups("all", ["a", "b"]) == [["a", "b"]]
    with pytest.raises(InputError, match="unknown scale"):
        collective.groups("rack", ["a"])


def test_thresholds_per_scale_come_from_the_baseline():
    assert collective.search_settings(VALUES, "domain").threshold == 700
    with pytest.raises(InputError, match="thresholds.leaf is not set"):
        collective.search_settings(VALUES, "leaf")


def test_a_launch_output_is_a_figure_or_the_tools_words():
    text = (CORPUS / "all-reduce-h100-10node-80gpu-multinode-tests2.17.8-nccl2.29.2.txt").read_text()
    out, frag = collective.outcome(text, [f"cnode3-{i:03d}" for i in range(2, 12)])
    assert out.figure == 265.631 and frag["ranks"] == 80
    missing, _ = collective.outcome(text, ["cnode3-002", "cnode9-999"])
    assert missing.figure is None and "cnode9-999" in missing.failure
    hang, _ = collective.outcome((CORPUS / "blackwell-b200-gke-2node-4rank-all-gather-HANG-header-only-no-rows.txt"
                                  ).read_text(), [])
    assert hang.kind == "hang" and "hung" in hang.failure


def test_no_round_starts_once_the_budget_is_spent(tmp_path):
    values = spec.merge(VALUES, {"perf": {"probes": {"collective": {"budget_s": 1e-9}}}})
    run = collective.Collective(values, "all", tmp_path / "ev", env={"PATH": "/nonexistent"})
    with pytest.raises(collective.Stopped, match="budget of 1e-09 s is spent"):
        run([["gb200-0001", "gb200-0002"]])
    assert run.launches == [] and run.rounds == 0


class _Modelled(collective.Collective):
    """A Collective whose rounds come from the modelled fleet instead of srun: its launch records, no process."""

    def __init__(self, fleet, tmp_path: Path) -> None:
        super().__init__(spec.merge(VALUES, {"perf": {"probes": {"collective": {"thresholds": {"all": 340}}}}}), "all",
                         tmp_path / "ev", env={})
        self.model = Runner(fleet, random.Random(0))

    def run(self, groups_):
        outs = self.model(groups_)
        self.rounds += 1
        for g, o in zip(groups_, outs, strict=True):
            self.launches.append(collective.Launch(len(self.launches), tuple(g), ("srun",), self.dir / "x.out",
                                                   "fp", outcome=o, seconds=1.0, round=self.rounds))
        return outs


def modelled_run(tmp_path: Path, **faults) -> tuple[collective.Collective, object]:
    hosts = [f"n{i:02d}" for i in range(16)]
    fleet = Fleet(hosts, {h: "leaf0" for h in hosts})
    for key, value in faults.items():
        setattr(fleet, key, value)
    run = _Modelled(fleet, tmp_path)
    return run, search(hosts, run, collective.search_settings(run.values, "all"), groups=[hosts])


def test_host_facts_give_each_host_its_figure_and_the_searchs_verdict_on_it(tmp_path):
    run, verdict = modelled_run(tmp_path, bad={"n05": 0.5}, pairs={frozenset(("n10", "n11")): 0.6})
    facts = collective.host_facts(run, verdict)
    assert set(facts) == {f"n{i:02d}" for i in range(16)}
    Draft202012Validator(COLLECTORS["collective"].schema).validate(facts["n05"])  # the schema the checks read
    assert {h: f["isolation"]["verdict"] for h, f in facts.items() if f["isolation"]["verdict"] != "ok"} == {
        "n05": "at fault", "n10": "pair only", "n11": "pair only"}
    n05 = facts["n05"]
    assert (n05["scale"], n05["threshold_gbps"]) == ("all", 340.0) and n05["busbw_gbps"] < 340
    (finding,) = n05["isolation"]["findings"]
    assert finding["members"] == ["n05"] and all("n05" in d["group"] for d in finding["evidence"])
    assert [la["index"] for la in n05["launches"]] == [la.index for la in run.launches if "n05" in la.group]
    assert facts["n00"]["isolation"]["findings"] == [] and facts["n00"]["isolation"]["search"] == "at fault"
    # a host carries its own share of the search's path, not every decision of it
    assert len(facts["n00"]["launches"]) < len(run.launches)


def test_without_a_search_the_hosts_carry_the_figure_and_no_verdict(tmp_path):
    run, _ = modelled_run(tmp_path)
    facts = collective.host_facts(run, None)
    assert all(f["isolation"] is None and f["busbw_gbps"] >= 340 and f["failure"] is None for f in facts.values())


def test_the_searchs_findings_cite_the_fabric_diffs_findings_that_bear_on_them():
    """A path (leaf, spines) cites the diff's findings naming a port of that leaf (not of a leaf whose name merely
    starts alike); a host cites those affecting it; the rest of the search's facts are kept."""
    from fabricproof.subnet.diff import Finding

    search = {"verdict": "at fault", "rounds": 4, "findings": [
        {"kind": "path", "members": ["leaf-su1-r0", "spines"], "why": "w", "evidence": [3]},
        {"kind": "host", "members": ["gb200-0007"], "why": "w", "evidence": [5]}]}
    uplink = Finding("subnet.cable_present", "missing", ("leaf-su1-r0 port 33", "spine-1 port 1"),
                     ("gb200-0001", "gb200-0002"), "leaf-su1-r0 port 33 to spine-1 port 1 is missing")
    other = Finding("subnet.cable_present", "missing", ("leaf-su1-r01 port 33", "spine-2 port 9"), ("x",), "other")
    swap = Finding("subnet.cable_placement", "swapped", ("gb200-0007 mlx5_0 port 1", "gb200-0007 mlx5_1 port 1"),
                   ("gb200-0007",), "gb200-0007 mlx5_0 and mlx5_1 are swapped")
    out = collective.with_fabric(search, [uplink, other, swap])
    assert [[f["sentence"] for f in found["fabric"]] for found in out["findings"]] == \
        [[uplink.sentence], [swap.sentence]]
    assert out["rounds"] == 4 and out["findings"][0]["evidence"] == [3] and out["fabric_error"] is None
    assert collective.with_fabric(search, [], "no vantage")["fabric_error"] == "no vantage"
