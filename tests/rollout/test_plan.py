"""Rollout plans: validation errors with file:line and JSON path, and wave computation (counts, percentages,
patterns, batches, GB200 racks as units). Pure: plans in tmp files, inventories from ansible-inventory JSON."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from fabricproof.errors import InputError
from fabricproof.inventory import from_list_json
from fabricproof.rollout.plan import (
    Budget,
    compute_waves,
    describe,
    load,
    parse_duration,
    units_of,
)
from catalogkit import shipped_checks

REPO = Path(__file__).resolve().parents[2]
LAB_BASELINE = REPO / "inventories" / "lab" / "baseline.yaml"
CATALOG = shipped_checks()

HOSTS = [f"h{i:02d}" for i in range(1, 21)]
TRAYS = [f"gb{i:02d}" for i in range(1, 10)]  # 3 racks of 3 trays
INV = from_list_json({
    "_meta": {"hostvars": {h: {} for h in HOSTS + TRAYS}},
    "all": {"children": ["dgx_h100", "gb200_nvl72"]},
    "dgx_h100": {"hosts": HOSTS},
    "gb200_nvl72": {"hosts": TRAYS},
    "rack_01": {"hosts": TRAYS[0:3]},
    "rack_02": {"hosts": TRAYS[3:6]},
    "rack_03": {"hosts": TRAYS[6:9]},
    "canary": {"hosts": ["h07", "h13"]},
}, "inv.yml")


def write_plan(tmp_path: Path, spec: str, name: str = "plan.yml") -> Path:
    """A plan whose spec continues with `spec`; GATES + an indented block are dedented piece by piece."""
    (tmp_path / "apply.yml").write_text("- hosts: all\n  tasks: []\n")
    (tmp_path / "rollback.yml").write_text("- hosts: all\n  tasks: []\n")
    body = textwrap.dedent(f"""\
        apiVersion: fabricproof/v1
        kind: RolloutPlan
        metadata:
          name: test-change
        spec:
          target: dgx_h100
          change:
            apply: {{playbook: apply.yml, vars: {{driver_version: 535.183.01}}}}
            rollback: {{playbook: rollback.yml}}
          baseline:
            before: {LAB_BASELINE}
            after: {LAB_BASELINE}
        """) + textwrap.indent(spec, "  ")
    path = tmp_path / name
    path.write_text(body)
    return path


GATES = """\
gates:
  checks: [fm.version, driver.version]
  retry_interval: 5s
  timeout: 2m
"""


def D(text: str) -> str:
    return textwrap.dedent(text)


def line_of(tmp_path: Path, needle: str) -> int:
    """1-based line of the first line of plan.yml containing needle."""
    lines = (tmp_path / "plan.yml").read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)


def waves_of(tmp_path: Path, spec: str, target: list[str] | None = None):
    plan = load(write_plan(tmp_path, spec), CATALOG)
    return compute_waves(plan, INV, target)


# ------------------------------------------------------------------------------------------- waves


def test_counts_then_percent_then_rest(tmp_path):
    waves = waves_of(tmp_path, GATES + D("""\
        waves:
          - {name: pilot, size: 1}
          - {name: early, size: 25%}
          - {name: rest, size: rest}
        """))
    assert [w.name for w in waves] == ["pilot", "early", "rest"]
    assert waves[0].hosts == ("h01",)
    assert waves[1].hosts == tuple(HOSTS[1:6])  # 25% of all 20 target hosts, not of the 19 remaining
    assert waves[2].hosts == tuple(HOSTS[6:])
    assert sorted(h for w in waves for h in w.hosts) == HOSTS


def test_percent_rounds_down_but_takes_at_least_one_and_100_percent_takes_the_rest(tmp_path):
    waves = waves_of(tmp_path, GATES + D("""\
        waves:
          - {name: canary, size: 4%}
          - {name: small, size: 9%}
          - {name: all, size: 100%}
        """))
    assert [len(w.hosts) for w in waves] == [1, 1, 18]  # 4% of 20 = 0.8 -> 1; 9% = 1.8 -> 1


def test_pattern_wave_takes_matching_remaining_hosts(tmp_path):
    waves = waves_of(tmp_path, GATES + D("""\
        waves:
          - {name: pilot, size: {pattern: canary}}
          - {name: rest, size: rest}
        """))
    assert waves[0].hosts == ("h07", "h13")
    assert "h07" not in waves[1].hosts and len(waves[1].hosts) == 18


def test_batches_split_a_wave(tmp_path):
    waves = waves_of(tmp_path, GATES + D("""\
        waves:
          - {name: pilot, size: 1}
          - {name: big, size: 7, batch: 3}
          - {name: rest, size: rest, batch: 50%}
        """))
    assert waves[1].batches == (("h02", "h03", "h04"), ("h05", "h06", "h07"), ("h08",))
    assert [len(b) for b in waves[2].batches] == [6, 6]
    assert waves[0].batches == (("h01",),)


def test_gb200_racks_move_as_units(tmp_path):
    spec = GATES + D("""\
        units: {group: "rack_*"}
        waves:
          - {name: pilot, size: 1}
          - {name: rest, size: rest, batch: 1}
        """)
    path = write_plan(tmp_path, spec)
    path.write_text(path.read_text().replace("target: dgx_h100", "target: gb200_nvl72"))
    plan = load(path, CATALOG)
    waves = compute_waves(plan, INV)
    assert waves[0].units == (("gb01", "gb02", "gb03"),)
    assert waves[0].hosts == ("gb01", "gb02", "gb03")
    assert waves[1].batches == (("gb04", "gb05", "gb06"), ("gb07", "gb08", "gb09"))  # a batch is one whole rack


def test_units_host_outside_any_rack_is_its_own_unit_and_two_racks_is_an_error():
    groups = {"a": ("rack_1",), "b": ("rack_1",), "c": ()}
    assert units_of(["c", "b", "a"], groups, "rack_*") == [("a", "b"), ("c",)]
    with pytest.raises(InputError, match="host a is in 2 unit groups"):
        units_of(["a"], {"a": ("rack_1", "rack_2")}, "rack_*")


def test_waves_that_leave_hosts_out_are_an_error_at_the_last_wave_line(tmp_path):
    with pytest.raises(InputError) as exc:
        waves_of(tmp_path, GATES + D("""\
            waves:
              - {name: pilot, size: 1}
              - {name: half, size: 50%}
            """))
    problem = exc.value.problems[0]
    assert "place 11 of 20 target units" in problem.message and "h12" in problem.message
    assert problem.file.endswith("plan.yml") and problem.pointer == "/spec/waves/1"
    assert problem.line == line_of(tmp_path, "name: half")


def test_an_empty_wave_is_an_error(tmp_path):
    with pytest.raises(InputError, match="wave 'more' is empty: no unit is left"):
        waves_of(tmp_path, GATES + D("""\
            waves:
              - {name: pilot, size: 100%}
              - {name: more, size: 1}
            """))
    with pytest.raises(InputError, match="wave 'pilot' is empty: no remaining target unit matches its pattern"):
        waves_of(tmp_path, GATES + D("""\
            waves:
              - {name: pilot, size: {pattern: gb200_nvl72}}
              - {name: rest, size: rest}
            """))


# -------------------------------------------------------------------------------------- validation


def problems_of(tmp_path: Path, spec: str) -> list:
    with pytest.raises(InputError) as exc:
        load(write_plan(tmp_path, spec), CATALOG)
    return exc.value.problems


def test_schema_errors_name_file_line_and_pointer(tmp_path):
    probs = problems_of(tmp_path, GATES.replace("timeout: 2m", "timeout: 2 minutes") + D("""\
        waves:
          - {name: pilot, size: 0}
          - {name: rest, sise: rest}
        on_failure: rollback_everything
        """))
    by_pointer = {p.pointer: p for p in probs}
    assert by_pointer["/spec/gates/timeout"].line == line_of(tmp_path, "timeout: 2 minutes")
    assert "not a duration" in by_pointer["/spec/gates/timeout"].message
    assert by_pointer["/spec/waves/0/size"].line == line_of(tmp_path, "size: 0")
    assert "did you mean 'size'" in by_pointer["/spec/waves/1/sise"].message
    assert by_pointer["/spec/waves/1/sise"].line == line_of(tmp_path, "sise: rest")
    assert "rollback_everything" in by_pointer["/spec/on_failure"].message
    assert all(p.file.endswith("plan.yml") for p in probs)


def test_meaning_errors_name_lines(tmp_path):
    probs = problems_of(tmp_path, D("""\
        gates:
          checks: [fm.version, nosuch.check]
        soak:
          duration: 30s
          checks: [nvlink.crc_errors, fm.version]
        waves:
          - {name: pilot, size: 1, pause: true}
          - {name: pilot, size: rest}
          - {name: tail, size: 1}
        """))
    text = {p.pointer: (p.line, p.message) for p in probs}
    assert text["/spec/gates/checks/1"] == (line_of(tmp_path, "nosuch.check"),
                                            "'nosuch.check' matches no check id or family")
    assert "soak check fm.version compares one snapshot (eq)" in text["/spec/soak/checks/1"][1]
    assert text["/spec/waves/1/name"][1] == "wave name 'pilot' is already used by wave 1"
    assert "only the last wave" in text["/spec/waves/1/size"][1]
    assert "pilot cannot pause" in text["/spec/waves/0/pause"][1]


def test_missing_playbook_and_baseline(tmp_path):
    path = write_plan(tmp_path, GATES + "waves:\n  - {name: all, size: rest}\n")
    text = path.read_text().replace("rollback.yml", "nosuch.yml").replace(str(LAB_BASELINE) + "\n    after",
                                                                         "missing.yaml\n    after")
    path.write_text(text)
    with pytest.raises(InputError) as exc:
        load(path, CATALOG)
    msgs = {p.pointer: p.message for p in exc.value.problems}
    assert "playbook 'nosuch.yml' not found" in msgs["/spec/change/rollback/playbook"]
    assert "baseline 'missing.yaml' not found" in msgs["/spec/baseline/before"]


def test_shipped_playbooks_are_found_by_name(tmp_path):
    path = write_plan(tmp_path, GATES + "waves:\n  - {name: all, size: rest}\n")
    path.write_text(path.read_text().replace("playbook: rollback.yml", "playbook: changes/driver-fm-upgrade/rollback.yml"))
    plan = load(path, CATALOG)
    assert plan.rollback.path == REPO / "playbooks" / "changes" / "driver-fm-upgrade" / "rollback.yml"
    assert plan.apply.path == tmp_path / "apply.yml"  # next to the plan wins


def test_defaults_and_overrides(tmp_path):
    plan = load(write_plan(tmp_path, D("""\
        gates:
          max_failed_hosts: 2
          max_failed_percent: 10
        soak: {duration: 1h30m, interval: 10m}
        waves:
          - {name: pilot, size: 1, max_failed_hosts: 0, soak: 2h}
          - {name: rest, size: rest}
        """)), CATALOG)
    assert plan.gates.checks == () and plan.gates.retry_interval_s == 10 and plan.gates.timeout_s == 300
    assert plan.on_failure == "rollback_wave" and plan.reports == ("json",) and plan.drain is None
    assert plan.soak.duration_s == 5400 and plan.soak.interval_s == 600
    assert plan.soak.checks == ("nvlink.crc_errors", "nvlink.replay_errors", "nvlink.recovery_errors",
                                "ib.symbol_errors", "ib.link_downed")
    assert plan.waves[0].budget == Budget(0, 10) and plan.waves[0].soak_s == 7200
    assert plan.waves[1].budget == Budget(2, 10) and plan.waves[1].soak_s == 5400


def test_parse_duration():
    assert parse_duration(45) == 45
    assert parse_duration("90s") == 90
    assert parse_duration("5m") == 300
    assert parse_duration("1h30m") == 5400
    with pytest.raises(ValueError):
        parse_duration("")


# ------------------------------------------------------------------------------------------ budget


@pytest.mark.parametrize(("budget", "failed", "total", "ok"), [
    (Budget(0), 0, 10, True),
    (Budget(0), 1, 10, False),
    (Budget(1), 1, 10, True),       # at most: the limit itself passes
    (Budget(1), 2, 10, False),
    (Budget(5, 10.0), 1, 10, True),   # 10% of 10 = exactly the limit: passes
    (Budget(5, 10.0), 2, 10, False),  # 20% > 10%
    (Budget(5, 10.0), 1, 9, False),   # 11.1% > 10%
    (Budget(5, 10.0), 1, 11, True),   # 9.1%
    (Budget(1, 50.0), 2, 4, False),   # percent allows 2, count does not: both must hold
    (Budget(0, 100.0), 0, 1, True),
])
def test_budget_boundaries(budget, failed, total, ok):
    assert budget.allows(failed, total) is ok


def test_budget_tolerated():
    assert Budget(5, 10.0).tolerated(10) == 1
    assert Budget(5, 10.0).tolerated(9) == 0
    assert Budget(2).tolerated(1) == 1
    assert "at most 1 failed host and at most 10% of the wave" == Budget(1, 10.0).describe()


def test_describe_lists_waves_gates_and_rollback_steps(tmp_path):
    plan = load(write_plan(tmp_path, GATES + D("""\
        waves:
          - {name: pilot, size: 1}
          - {name: rest, size: rest}
        on_failure: rollback_all
        """)), CATALOG)
    waves = compute_waves(plan, INV)
    doc = describe(plan, waves, "inv.yml", [c for c in CATALOG if c.id in ("fm.version", "driver.version")], [])
    assert doc["hosts"] == 20 and [len(w["hosts"]) for w in doc["waves"]] == [1, 19]
    assert doc["gates"]["checks"] == ["driver.version", "fm.version"]
    assert doc["rollback_steps"][0] == "on a failed wave: roll back every changed host, newest wave first"
    assert "failed hosts <= max_failed_hosts" in doc["gates"]["boundary"]


def test_a_plan_runs_only_playbooks_kept_with_it_or_shipped(tmp_path):
    """A path out of the plan's directory and playbooks/ is refused, and so is a file that is no playbook."""
    (tmp_path / "notes.yml").write_text("just: a mapping\n")
    path = write_plan(tmp_path, GATES + "waves:\n  - {name: all, size: rest}\n")
    path.write_text(path.read_text().replace("rollback.yml", "../../../../../../../../etc/passwd")
                    .replace("apply.yml", "notes.yml"))
    with pytest.raises(InputError) as exc:
        load(path, CATALOG)
    msgs = {p.pointer: p.message for p in exc.value.problems}
    assert "is /etc/passwd, outside" in msgs["/spec/change/rollback/playbook"]
    assert "is not an Ansible playbook" in msgs["/spec/change/apply/playbook"]


def test_a_slurm_drain_with_a_collective_gate_launched_by_srun_is_refused_at_its_line(tmp_path):
    """srun never gets a drained node, so the gate's first collective would fail on every wave: refused at load, at
    the drain's scheduler line, saying why and what to do; with the collective launched by mpirun it loads."""
    import yaml

    spec = GATES + D("""\
          collective: {scale: all, tolerance_pct: 10}
        waves:
          - {name: all, size: rest}
        drain:
          scheduler: slurm
        """)
    (problem,) = problems_of(tmp_path, spec)  # the lab baseline sets no launcher: srun, the default
    assert (problem.file, problem.line, problem.pointer) == (
        str(tmp_path / "plan.yml"), line_of(tmp_path, "scheduler: slurm"), "/spec/drain/scheduler")
    assert "srun never gets a drained node" in problem.message and "remove spec.drain" in problem.message
    assert "\n" not in problem.message

    def launched_by(defaults: str, group: str | None = None) -> Path:
        doc = yaml.safe_load(LAB_BASELINE.read_text())
        doc["spec"]["defaults"]["perf"] = {"probes": {"collective": {"launcher": defaults}}}
        if group:
            doc["spec"]["groups"]["gb200_nvl72"]["perf"] = {"probes": {"collective": {"launcher": group}}}
        path = tmp_path / "baseline.yaml"
        path.write_text(yaml.safe_dump(doc))
        plan = write_plan(tmp_path, spec)
        plan.write_text(plan.read_text().replace(str(LAB_BASELINE), str(path)))
        return plan

    plan = load(launched_by("mpirun"), CATALOG)
    assert plan.drain.scheduler == "slurm" and plan.gates.kinds["collective"].scale == "all"
    with pytest.raises(InputError) as exc:  # one group of the baseline launching by srun is enough
        load(launched_by("mpirun", group="srun"), CATALOG)
    assert [p.pointer for p in exc.value.problems] == ["/spec/drain/scheduler"]
    assert load(write_plan(tmp_path, spec.replace("scheduler: slurm", "scheduler: kubernetes")), CATALOG)
