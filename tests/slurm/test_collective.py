"""Multi-node collectives through a real Slurm (issue 22.1, 22.5, 22.6): every collective is a real `srun` job step
on 16 lab trays of one GB200 rack, each task the emulated all_reduce_perf on its node, the tasks meeting over
loopback and rank 0 printing the multi-node format; the search (probes.isolation) finds the faulty trays through
probes.collective's runner; Ctrl-C and the per-test timeout leave no job step and no task; a node running a job is
never used; a rollout with a collective: gate (issue 22.7) rolls back the wave whose change slows one tray."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fabricproof import inventory, transport
from fabricproof.probes import collective, isolation, spec
from fabricproof.transport import RunContext
from fabricproof_lab import manager
from labkit import LabFactory
from slurmkit import Interrupted, wait_for

from .slurmlab import REPO, SlurmLab, running

pytestmark = [pytest.mark.lab, pytest.mark.slurm]

NODES = 16
HOSTS = [f"gb200-{i:04d}" for i in range(1, NODES + 1)]
WAIT_S = 120.0
# Lab figures (render_perf/multinode): over one rack's NVLink domain ~833 GB/s avg busbw (the published 745.53 is
# the threshold); over InfiniBand (MNNVL off) 4 x NDR 400 per tray ~165, one HCA at half ~145.
THRESHOLDS = {"domain": 745.53, "domain_ib": 155.0, "all": 745.53}


@pytest.fixture(scope="module")
def rack(lab_factory: LabFactory) -> Iterator[SlurmLab]:
    with running(lab_factory, nodes=NODES, health=False) as sl:
        yield sl


def node_bin(sl: SlurmLab) -> Path:
    """nccl-tests' bin_dir on every node: each binary runs as the lab node slurmd started the task on."""
    d = sl.cluster.root / "nccl-bin"
    if not d.exists():
        d.mkdir()
        for test in collective.TESTS:
            p = d / test
            p.write_text(f"#!/bin/sh\nexec {shlex.quote(str(sl.as_lab_node))} "
                         f"{shlex.quote(str(sl.lab.dir / 'bin' / test))} \"$@\"\n")
            p.chmod(0o755)
    return d


def values(sl: SlurmLab, **over: object) -> dict:
    c = {"mpi": "none", "tasks_per_node": "one", "thresholds": THRESHOLDS, "timeout_s": 120, **over}
    return {"gpu": {"count": 4}, "perf": {"probes": {"nccl_tests": {"bin_dir": str(node_bin(sl))}, "collective": c}}}


def idle(sl: SlurmLab) -> None:
    """No job, no fault: what each test starts from and leaves."""
    c = sl.cluster
    if c.jobs():
        c.run("scancel", "--quiet", "--user=root")
        wait_for(lambda: not c.jobs(), WAIT_S, "the cancelled jobs to end")
    sl.give_nodes_back()
    wait_for(lambda: set(c.states().values()) == {"idle"}, WAIT_S, "every node idle", lambda: str(c.states()))


def emulators(sl: SlurmLab) -> list[str]:
    """Processes running an emulated nccl-tests binary as a node of this lab (ps, then each one's environment)."""
    ps = subprocess.run(["ps", "-ww", "-eo", "pid=,args="], capture_output=True, text=True, check=True).stdout
    found = []
    for line in ps.splitlines():
        pid, _, args = line.strip().partition(" ")
        if "_perf" not in args:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if str(sl.lab.dir).encode() in environ or str(sl.cluster.root).encode() in environ or \
                str(sl.cluster.root).encode() in args.encode():
            found.append(line)
    return found


def test_a_collective_over_the_rack_is_one_srun_step_and_parses(rack, tmp_path):
    idle(rack)
    run = collective.Collective(values(rack), "all", tmp_path / "ev", env=rack.cluster.env())
    (domain,) = run([HOSTS])
    ib_run = collective.Collective(values(rack), "domain_ib", tmp_path / "ib", env=rack.cluster.env())
    (ib,) = ib_run([HOSTS])
    assert domain.failure is None and ib.failure is None, (domain, ib)
    # one NVLink domain: the rack's figure; NCCL_MNNVL_ENABLE=0: the trays' InfiniBand alone
    assert domain.figure > THRESHOLDS["domain"] * 1.05 and THRESHOLDS["domain_ib"] * 1.05 < ib.figure < 200
    (launch,) = run.launches
    assert launch.argv[:2] == ("srun", f"--nodelist={','.join(HOSTS)}") and "--label" in launch.argv
    assert launch.parsed["hosts"] == HOSTS and launch.parsed["ranks"] == NODES * 4
    text = launch.evidence.read_text()
    assert text.startswith(" 0: # nccl-tests version") and "# Avg bus bandwidth" in text  # srun's --label prefix
    facts = json.loads(json.dumps(run.to_facts()))
    assert facts["launches"][0]["figure"] == domain.figure and facts["launches"][0]["ranks"] == 64
    assert not rack.cluster.jobs() and not emulators(rack)


@pytest.mark.parametrize("faulty", [("gb200-0006",), ("gb200-0003", "gb200-0012")], ids=["one", "two"])
def test_the_search_finds_exactly_the_trays_whose_hca_is_slow(rack, tmp_path, faulty):
    idle(rack)
    for host in faulty:
        manager.fault_inject(rack.lab.dir, host, "hca-degraded")
    try:
        lines: list[str] = []
        run = collective.Collective(values(rack), "domain_ib", tmp_path / "ev", env=rack.cluster.env(),
                                    progress=lines.append)
        verdict = isolation.search(HOSTS, run, collective.search_settings(values(rack), "domain_ib"))
    finally:
        idle(rack)
    assert verdict.hosts == tuple(sorted(faulty)), verdict.to_facts()
    # progress: a line per round, then one per group with its figure
    assert sum(line.startswith("round ") for line in lines) == verdict.rounds == run.rounds
    assert sum(" GB/s (" in line for line in lines) == verdict.tests
    assert not verdict.pairs and not verdict.paths
    assert len(run.launches) == verdict.tests and all(la.outcome.failure is None for la in run.launches)
    assert all(la.argv[0] == "srun" for la in run.launches)


def test_a_bad_tray_and_imex_down_at_the_nvlink_domain_scale(rack, tmp_path):
    """A tray whose NVLink carries half slows the rack's all-reduce; IMEX down on another turns multi-node NVLink
    off for any group it is in. The search over the domain names both trays."""
    idle(rack)
    manager.fault_inject(rack.lab.dir, "gb200-0004", "nvlink-degraded")
    manager.fault_inject(rack.lab.dir, "gb200-0015", "imex-down")
    try:
        (group,) = collective.groups("domain", HOSTS, facts={h: {"gpu": {"gpus": [{"fabric": {
            "cluster_uuid": "00000000-6e76-4c72-8a00-000000000000", "clique_id": 32766}}]}} for h in HOSTS})
        run = collective.Collective(values(rack), "domain", tmp_path / "ev", env=rack.cluster.env())
        verdict = isolation.search(group, run, collective.search_settings(values(rack), "domain"))
    finally:
        idle(rack)
    assert verdict.hosts == ("gb200-0004", "gb200-0015"), verdict.to_facts()


def test_the_rollout_gates_live_seam_measures_and_searches_through_srun(rack, tmp_path, monkeypatch):
    """The collective gate's default seam (what a rollout uses without test seams): the group's settings from the
    baseline values of its first host's inventory groups, the collective and the search as srun job steps."""
    from fabricproof.judging.baseline import Baseline
    from fabricproof.rollout.gates.collective import live_collective

    idle(rack)
    monkeypatch.setenv("SLURM_CONF", str(rack.cluster.conf))
    manager.fault_inject(rack.lab.dir, "gb200-0007", "hca-degraded")
    try:
        seam = live_collective(inventory.load(str(rack.inventory)), "domain_ib")
        after = Baseline("after", values(rack))
        group = HOSTS[:8]
        out = seam.measure(group, tmp_path / "m", after)
        verdict = seam.search(group, THRESHOLDS["domain_ib"], tmp_path / "s", after)
    finally:
        idle(rack)
    assert out.figure is not None and out.figure < THRESHOLDS["domain_ib"]
    assert verdict.hosts == ("gb200-0007",), verdict.to_facts()


def test_a_node_running_a_job_is_never_used(rack, tmp_path):
    idle(rack)
    c = rack.cluster
    c.run("sbatch", "--quiet", "--nodelist=gb200-0003", "--job-name=someone-else", "--wrap", "sleep 600")
    try:
        wait_for(lambda: c.states().get("gb200-0003") == "allocated", WAIT_S, "the job to start")
        run = collective.Collective(values(rack), "all", tmp_path / "ev", env=c.env())
        with pytest.raises(collective.Stopped, match="not idle: gb200-0003: Slurm shows it allocated"):
            run([HOSTS[:4]])
        assert run.launches == []  # nothing launched, on any node
        assert c.run("squeue", "-h", "-o", "%j").stdout.split() == ["someone-else"]
    finally:
        idle(rack)


def test_the_idle_guard_runs_on_every_host_of_a_round_and_a_gpu_process_keeps_it_from_starting(rack, tmp_path):
    """Slurm shows every node idle, but a training job outside Slurm holds gb200-0002's GPUs: the probes' idle guard,
    over SSH on each host of the round, refuses it and nothing is launched."""
    idle(rack)
    manager.fault_inject(rack.lab.dir, "gb200-0002", "gpu-busy")
    hosts = inventory.load(str(rack.inventory)).hosts
    options = transport.configure("ssh", inventory_path=str(rack.inventory))
    link, _fleet = transport.open_fleet("ssh", options, RunContext(run_dir=tmp_path / "run", run_id="idle", forks=4,
                                                                   host_timeout_s=600.0))
    try:
        guard = collective.idle_guard(link, hosts)
        run = collective.Collective(values(rack), "all", tmp_path / "ev", env=rack.cluster.env(), idle=guard)
        with pytest.raises(collective.Stopped, match=r"gb200-0002: 4 GPU compute process\(es\) running") as stopped:
            run([HOSTS[:2], HOSTS[2:4]])
        assert "gb200-0001" not in str(stopped.value) and run.launches == [] and not rack.cluster.jobs()
        manager.fault_clear(rack.lab.dir, "gb200-0002")
        (out,) = run([HOSTS[:2]])
        assert out.figure is not None
    finally:
        link.close()
        idle(rack)


CHILD = """\
import sys
from pathlib import Path
from fabricproof.probes import collective
values, hosts, ev = eval(sys.argv[1]), sys.argv[2].split(","), Path(sys.argv[3])
run = collective.Collective(values, "all", ev)
print("started", flush=True)
run([hosts])
"""


def test_ctrl_c_and_the_timeout_cancel_the_job_step_and_leave_no_task(rack, tmp_path):
    idle(rack)
    c = rack.cluster
    # probes last their real duration scaled to at most 15 s: long enough to interrupt
    env = c.env(FABRICPROOF_LAB_PROBE_SCALE="1", PYTHONPATH=str(REPO / "cli"))
    argv = [sys.executable, "-c", CHILD, repr(values(rack)), ",".join(HOSTS[:4]), str(tmp_path / "ev")]
    with Interrupted(argv, env) as child:
        wait_for(lambda: len(emulators(rack)) >= 4 and c.jobs(), WAIT_S, "the step's four tasks to run",
                 lambda: str(emulators(rack)))
        _out, err = child.ctrl_c(WAIT_S)
    assert "KeyboardInterrupt" in err and child.proc.returncode != 0
    assert c.jobs() == [] and emulators(rack) == []  # squeue and ps: no step, no task left

    run = collective.Collective(values(rack, timeout_s=3), "all", tmp_path / "t",
                                env=c.env(FABRICPROOF_LAB_PROBE_SCALE="1"))
    (out,) = run([HOSTS[:4]])
    assert out.kind == "timeout" and "job step was cancelled" in out.failure
    assert c.jobs() == [] and emulators(rack) == []
    idle(rack)


def test_the_collective_command_runs_the_search_through_srun_and_judges_the_host_at_fault(rack, tmp_path):
    """`fabricproof collective run --search` as an operator types it: the groups as srun job steps, the search names
    the tray whose NVLink carries half, its facts fail perf.collective_at_fault on it alone (exit 1), and the run
    directory holds the search's path, as do report.json's collective section and the HTML page."""
    import yaml

    idle(rack)
    base = tmp_path / "baseline.yaml"
    base.write_text(yaml.safe_dump({"apiVersion": "fabricproof/v1", "kind": "Baseline", "metadata": {"name": "t"},
                                    "spec": {"defaults": values(rack)}}))
    manager.fault_inject(rack.lab.dir, "gb200-0004", "nvlink-degraded")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "fabricproof", "collective", "run", "-i", str(rack.inventory), "-b", str(base),
             "--scale", "all", "--search", "--limit", ",".join(HOSTS[:8]), "-o", str(tmp_path / "run"),
             "-f", f"json={tmp_path / 'report.json'}", "-f", f"html={tmp_path / 'report.html'}"],
            env=rack.cluster.env(PYTHONPATH=str(REPO / "cli")), capture_output=True, text=True, timeout=900)
    finally:
        idle(rack)
    assert proc.returncode == 1, proc.stderr
    assert "round 1: 1 group(s) at once (all)" in proc.stderr and "search: at fault" in proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    failed = {(r["check_id"], r["host"]) for r in report["results"] if r["outcome"] == "fail"}
    assert ("perf.collective_at_fault", "gb200-0004") in failed
    assert {h for c, h in failed if c == "perf.collective_at_fault"} == {"gb200-0004"}
    path = json.loads((tmp_path / "run" / "collective.json").read_text())
    assert path["search"]["hosts"] == ["gb200-0004"] and path["launches"][0]["hosts"] == HOSTS[:8]
    # the report beside the evidence carries every srun step and the search's path to the tray
    section = json.loads((tmp_path / "run" / "report.json").read_text())["collective"]
    assert section == report["collective"] and (section["scale"], section["launcher"]) == ("all", "srun")
    assert [t["hosts"] for t in section["tests"]] == [la["hosts"] for la in path["launches"]]
    assert [t["busbw_gbps"] for t in section["tests"]] == [la["figure"] for la in path["launches"]]
    assert all(t["algbw_gbps"] for t in section["tests"])  # read from each step's own table
    assert (section["tests"][0]["outcome"], section["tests"][0]["round"]) == ("slow", 1)
    (finding,) = section["search"]["findings"]
    assert (finding["kind"], finding["members"]) == ("host", ["gb200-0004"])
    assert [k["test"] for k in section["search"]["confirmations"] if k["suspects"] == ["gb200-0004"]
            and k["outcome"] == "slow"] == finding["evidence"][-2:]
    assert section["sentence"].startswith("gb200-0004 is at fault: slow with two hosts that passed")
    page = (tmp_path / "report.html").read_text()
    assert f'<p class="coll-verdict at-fault"><b>Verdict</b> {section["sentence"]}</p>' in page
    assert page.count('<tr class="coll-test') == len(section["tests"]) == section["search"]["tests"]
    assert 'data-kind="host" data-members="gb200-0004"' in page
    doc = json.loads((tmp_path / "run" / "facts" / "gb200-0004.json").read_text())
    assert doc["perf"]["collective"]["isolation"]["verdict"] == "at fault"
    assert not rack.cluster.jobs() and not emulators(rack)


def test_the_readmes_expansion_acceptance_run_passes_at_every_scale_as_printed(rack, tmp_path):
    """The README's expansion acceptance block, each command as printed (bash, `fabricproof` on PATH), in a directory
    holding the lab's inventory, a baseline with its thresholds and a cabling plan of two scalable units of 8 trays:
    on the healthy rack every scale runs its groups as srun job steps and passes."""
    import yaml
    from cli import readme_examples

    idle(rack)
    block = readme_examples.section(REPO / "README.md", "#### An expansion acceptance run at all scales")
    (snippet,) = [b for b in block.split("```yaml\n")[1:]]
    thresholds = yaml.safe_load(snippet.split("```")[0])["perf"]["probes"]["collective"]["thresholds"]
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "inventory.yml").write_text(rack.inventory.read_text())
    (ws / "baseline.yaml").write_text(yaml.safe_dump({
        "apiVersion": "fabricproof/v1", "kind": "Baseline", "metadata": {"name": "t"},
        "spec": {"defaults": spec.merge(values(rack), {"perf": {"probes": {"collective": {"thresholds": thresholds}}}})}}))
    (ws / "fabric-plan.yaml").write_text(yaml.safe_dump({
        "kind": "FabricPlan", "version": 1, "name": "lab", "defaults": {"width": "4x", "speed": "NDR"},
        "links": [{"a": f"{h} mlx5_{r}", "a_port": 1, "b": f"leaf-su{1 + i // 8}-r{r}", "b_port": 1 + i % 8}
                  for i, h in enumerate(HOSTS) for r in range(4)]
        + [{"a": f"leaf-su{su}-r{r}", "a_port": 33, "b": "spine-1", "b_port": 1 + 4 * (su - 1) + r}
           for su in (1, 2) for r in range(4)]}))
    steps = readme_examples.commands(block)
    assert [s.split()[1:4] for s in steps][1:] == [["collective", "run", "-i"]] * 5
    bin_dir = readme_examples.shim(tmp_path / "bin")
    try:
        for step in steps:
            res = readme_examples.run(step, ws, bin_dir, rack.cluster.env(PYTHONPATH=str(REPO / "cli")), timeout=600)
            assert res.returncode == 0, (step, res.stdout[-2000:], res.stderr[-2000:])
    finally:
        idle(rack)
    groups = {d: len(json.loads((ws / "runs" / d / "collective.json").read_text())["launches"])
              for d in ("expansion-domain", "expansion-domain-ib", "expansion-leaf", "expansion-cross-leaf",
                        "expansion-all")}
    # each group once, all at once; when every group passes the search runs the whole set once (a pair split by
    # the screening): 2 leaves + 1, 8 cross-leaf groups + 1; one domain is already the whole set
    assert groups == {"expansion-domain": 1, "expansion-domain-ib": 1, "expansion-leaf": 3,
                      "expansion-cross-leaf": 9, "expansion-all": 1}
    assert not rack.cluster.jobs() and not emulators(rack)


def test_faults_only_a_collective_finds_an_hca_slow_under_load_and_a_bad_pair_path(rack, tmp_path):
    """hca-multinode-slow (its HCAs fine alone and to one peer) and path-slow-pair (two trays slow only together):
    the lab's faults that only a multi-node collective shows, each declaring perf.collective_at_fault. The search
    through real srun names the tray and the pair, and the check fails exactly those three trays."""
    from fabricproof.judging.baseline import Baseline
    from fabricproof.judging.catalog import load
    from fabricproof.judging.evaluate import evaluate
    from fabricproof.model import Outcome
    from fabricproof_lab.emu.faults import FAULTS

    idle(rack)
    manager.fault_inject(rack.lab.dir, "gb200-0003", "hca-multinode-slow")
    manager.fault_inject(rack.lab.dir, "gb200-0010", "path-slow-pair")  # with gb200-0011
    try:
        run = collective.Collective(values(rack), "domain_ib", tmp_path / "ev", env=rack.cluster.env())
        verdict = isolation.search(HOSTS, run, collective.search_settings(values(rack), "domain_ib"))
    finally:
        idle(rack)
    assert verdict.hosts == ("gb200-0003",) and verdict.pairs == (("gb200-0010", "gb200-0011"),), verdict.to_facts()
    assert not verdict.paths and all(la.argv[0] == "srun" for la in run.launches)
    docs = collective.facts_documents(run, verdict, {})
    checks = [c for c in load() if c.id in FAULTS["hca-multinode-slow"].catches_collective
              + FAULTS["path-slow-pair"].catches_collective]
    report = evaluate(docs, Baseline("b", values(rack)), checks)
    assert {r.host for r in report.results if r.outcome is Outcome.FAIL} == {"gb200-0003", "gb200-0010", "gb200-0011"}


# -- a rollout with a collective gate, through real Slurm --------------------------------------------------------

DEGRADED = "gb200-0004"
# The lab's change: a version file written on each tray over SSH; on DEGRADED it also slows the HCAs under a
# collective's load (hca-multinode-slow: links, GPUDirect and a pairwise perftest unchanged), as a bad firmware would.
CHANGE = """\
- name: A lab change that, on one tray, slows its HCAs under a collective's load
  hosts: all
  gather_facts: false
  tasks:
    - name: Write the new version on the tray
      ansible.builtin.command:
        argv: [sh, -c, 'mkdir -p "$FABRICPROOF_HOST_ROOT/etc" && echo 2 > "$FABRICPROOF_HOST_ROOT/etc/lab-change"']
    - name: hca-multinode-slow
      when: inventory_hostname == {degraded!r}
      delegate_to: localhost
      vars: {{ansible_connection: local}}
      environment: {{PYTHONPATH: {cli!r}}}
      ansible.builtin.command:
        argv: [{python!r}, -m, fabricproof, lab, fault, {verb}, --dir, {lab!r}, "{{{{ inventory_hostname }}}}",
               hca-multinode-slow]
"""
UNDO = CHANGE.replace("Write the new version on the tray", "Remove the new version").replace(
    'mkdir -p "$FABRICPROOF_HOST_ROOT/etc" && echo 2 > "$FABRICPROOF_HOST_ROOT/etc/lab-change"',
    'rm -f "$FABRICPROOF_HOST_ROOT/etc/lab-change"').replace("when: inventory_hostname == {degraded!r}\n      ", "")


def rollout_plan(sl: SlurmLab, directory: Path) -> Path:
    """Three waves over the rack's trays (a pilot of three; two more, the first of which the change slows; the
    other eleven), paused before the second; a checks gate and a collective gate over InfiniBand (domain_ib, where
    the slow HCAs show) with two proven hosts; the baseline the lab's, with this rack's collective settings."""
    import yaml

    from .slurmlab import BASELINE

    base = yaml.safe_load(BASELINE.read_text())
    base["spec"]["defaults"] = spec.merge(base["spec"]["defaults"], {"perf": values(sl)["perf"]})
    (directory / "baseline.yaml").write_text(yaml.safe_dump(base, sort_keys=False))
    fill = {"degraded": DEGRADED, "cli": str(REPO / "cli"), "python": sys.executable, "lab": str(sl.lab.dir)}
    (directory / "apply.yml").write_text(CHANGE.format(verb="inject", **fill))
    (directory / "rollback.yml").write_text(UNDO.format(verb="clear", **fill))
    plan = {
        "apiVersion": "fabricproof/v1", "kind": "RolloutPlan",
        "metadata": {"name": "lab-collective", "description": "A lab change gated by a collective over InfiniBand."},
        "spec": {
            "target": "gb200_nvl72",
            "change": {"apply": {"playbook": "apply.yml", "vars": {"ansible_become": False}},
                       "rollback": {"playbook": "rollback.yml", "vars": {"ansible_become": False}}},
            "baseline": {"before": "baseline.yaml", "after": "baseline.yaml"},
            "waves": [{"name": "pilot", "size": {"pattern": "gb200-0001:gb200-0002:gb200-0003"}},
                      {"name": "second", "size": {"pattern": f"{DEGRADED}:gb200-0005"}, "pause": True},
                      {"name": "rest", "size": "rest"}],
            "gates": {"checks": ["gpu.count"], "retry_interval": "1s", "timeout": "10s", "max_failed_hosts": 0,
                      "collective": {"scale": "domain_ib", "tolerance_pct": 10, "proven_hosts": 2}},
            "on_failure": "rollback_wave",
            "reports": ["json"],
        },
    }
    path = directory / "plan.yml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


def changed(sl: SlurmLab, host: str) -> bool:
    return (sl.lab.dir / "nodes" / "by-name" / host / "root" / "etc" / "lab-change").exists()


def test_a_rollout_with_a_collective_gate_rolls_back_the_wave_whose_change_slows_one_tray(rack, tmp_path):
    """`fabricproof rollout run` as an operator runs it: real ansible-runner changes the trays over SSH, every
    collective is an srun job step. The pilot passes; while the run is paused a job lands on a proven tray, which
    the next wave's collective passes over (named in the decision log); that wave's change halves one tray's
    figure under load, its collective gate fails it, the search names it first and the wave is rolled back (the
    rollback playbook clears the fault), the pilot keeps the change and the last wave never starts."""
    from fabricproof.model import ExitCode
    from fabricproof.rollout import decisions
    from fabricproof.rollout import state as st
    from fabricproof_lab.emu.api import active_faults

    idle(rack)
    c = rack.cluster
    plan, runs = rollout_plan(rack, tmp_path), tmp_path / "runs"

    def fabricproof(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "fabricproof", *args], capture_output=True, text=True,
                              timeout=900, stdin=subprocess.DEVNULL, cwd=tmp_path,
                              env=c.env(PYTHONPATH=str(REPO / "cli")))

    try:
        first = fabricproof("rollout", "run", str(plan), "-i", str(rack.inventory), "--runs-dir", str(runs))
        assert first.returncode == ExitCode.HALTED, first.stdout + first.stderr  # paused before the second wave
        # back in service, a proven tray runs someone's job
        c.run("sbatch", "--quiet", "--nodelist=gb200-0001", "--job-name=someone-else", "--wrap", "sleep 600")
        wait_for(lambda: c.states().get("gb200-0001") == "allocated", WAIT_S, "the job to start")
        second = fabricproof("rollout", "resume", "last", "--runs-dir", str(runs))
        assert c.run("squeue", "-h", "-o", "%j").stdout.split() == ["someone-else"]  # no step of ours is left
        assert not emulators(rack)
        (run_dir,) = [p for p in runs.iterdir() if p.is_dir()]
        faults = active_faults(rack.lab.dir, inventory.load(str(rack.inventory)).hosts[DEGRADED].vars["ansible_host"])
        marks = {h: changed(rack, h) for h in HOSTS}
    finally:
        for h in HOSTS:
            (rack.lab.dir / "nodes" / "by-name" / h / "root" / "etc" / "lab-change").unlink(missing_ok=True)
        idle(rack)
    assert second.returncode == ExitCode.ROLLED_BACK, second.stdout + second.stderr
    log = decisions.read(run_dir)
    story = [(d["what"], d.get("wave")) for d in log]
    gates = [d for d in log if d["what"] == "COLLECTIVE_GATE"]
    pilot, wave = gates  # the last wave never ran
    assert pilot["passed"] and pilot["group"] == ["gb200-0001", "gb200-0002", "gb200-0003"]
    # the wave's collective passed over the proven tray running a job, and said so
    pre = [d for d in log if d["what"] == "PRE_COLLECTIVE"][-1]
    assert pre["group"] == [DEGRADED, "gb200-0005", "gb200-0002", "gb200-0003"] and pre["figure"] is not None
    assert pre["passed_over"] == {"gb200-0001": "Slurm shows it allocated"}
    assert "proven hosts running jobs, passed over: gb200-0001: Slurm shows it allocated" in pre["why"]
    # the wave's gate: the degraded tray named first, both figures, the search and its evidence (srun's outputs)
    assert not wave["passed"] and wave["hosts"] == [DEGRADED] and wave["roll_back_first"] == [DEGRADED], wave
    assert wave["after"]["figure"] < 0.9 * wave["before"]["figure"], wave
    assert wave["search"]["hosts"] == [DEGRADED] and f"the search names {DEGRADED}: roll back first" in wave["why"]
    outputs = [p for ev in wave["evidence"] for p in (run_dir / ev).glob("**/*.out")]
    assert len(outputs) == 1 + wave["search"]["tests"] and all(
        "# Avg bus bandwidth" in p.read_text() for p in outputs), outputs
    # the wave rolled back (the rollback playbook cleared the fault), the pilot kept the change, the rest never ran
    assert ("ROLLBACK", "second") in story
    assert story[-1][0] == "ROLLBACK_DONE" and st.find_run(runs, "last").status == st.ROLLED_BACK
    assert faults == []
    assert marks == {h: h in ("gb200-0001", "gb200-0002", "gb200-0003") for h in HOSTS}
    assert not [d for d in log if d.get("wave") == "rest" and d["what"] in ("APPLY", "PRE_GATE", "PRE_COLLECTIVE")]
    print(f"\ncollective gate: {wave['before']['figure']} -> {wave['after']['figure']} GB/s over {len(wave['group'])} "
          f"trays, the search named {DEGRADED} in {wave['search']['rounds']} rounds, {wave['search']['tests']} tests")
