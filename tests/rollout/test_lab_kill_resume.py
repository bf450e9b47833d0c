"""Kill -9 at every step boundary of a lab rollout, then resume: each resume goes on from where the kill left the
run, a resumed gate or soak starts a fresh attempt beside the old evidence, and no host is applied (or rolled
back) twice. The kill comes right after a step's decision record is durable and before state.json says the step
finished (entry.py's FABRICPROOF_TEST_KILL_AFTER), the moment a resume has the most to reconcile."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from fabricproof_lab import manager
from fabricproof.rollout import decisions
from fabricproof.rollout import state as st

from .rehearsal import (AFTER, BEFORE, ROLLBACKS, cli, derived_plan, driver_of, install_events, spawn, the_run, wait_for,
                        whats)

pytestmark = pytest.mark.lab

#: Generous: a step here takes seconds, but the machine may be loaded by the rest of the suite.
STEP_TIMEOUT_S = 240


def run_until_killed(args: list[object], kill_after: str | None, tmp_path: Path, n: int) -> int:
    """Run the CLI in its own process, dying right after decision `kill_after`; its return code."""
    log = tmp_path / f"step-{n}.log"
    env = {"FABRICPROOF_TEST_KILL_AFTER": kill_after} if kill_after else {}
    proc = spawn(*args, log=log, env=env)
    try:
        code = proc.wait(STEP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    if kill_after:
        assert code == -signal.SIGKILL, f"not killed after {kill_after} (exit {code}): {log.read_text()}"
    return code


def kill_at_each(boundaries: list[str], first: list[object], runs_dir: Path, tmp_path: Path) -> tuple[st.RunState, int]:
    """Start the run, kill it after each boundary in turn, resuming after each kill; then resume it to its end."""
    code = run_until_killed(first, boundaries[0], tmp_path, 0)
    run_id = the_run(runs_dir).run_id
    for n, boundary in enumerate([*boundaries[1:], None], 1):
        before = len(decisions.read(the_run(runs_dir).dir))
        code = run_until_killed(["rollout", "resume", run_id, "--runs-dir", runs_dir], boundary, tmp_path, n)
        story = decisions.read(the_run(runs_dir).dir)[before:]
        assert story[0]["what"] == "RESUME" and len(story) > 1, story  # every resume went on to do something
    return the_run(runs_dir), code


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_killed_at_every_step_of_a_wave_the_rollout_resumes_to_done(h100_lab, tmp_path):
    plan = derived_plan(tmp_path, "driver-fm-upgrade.yml", waves=[{"name": "pilot", "size": 1}])
    runs_dir = tmp_path / "runs"
    boundaries = ["PRE_GATE", "DRAIN", "APPLY", "APPLY_DONE", "POST_GATE", "SOAK", "PROCEED", "UNDRAIN"]
    run, code = kill_at_each(boundaries, ["rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir],
                             runs_dir, tmp_path)

    assert code == 0 and run.status == st.DONE
    node = h100_lab.node("h100-0001")
    assert driver_of(node) == (AFTER, AFTER, AFTER)
    assert node["boot_count"] == 2, f"rebooted {node['boot_count'] - 1} times"
    assert node["slurm"]["state"] == "IDLE"  # undrained once proven
    assert install_events(run.dir) == {"h100-0001": 1}
    story = whats(run.dir)
    assert story.count("RESUME") == len(boundaries) and "ERROR" not in story
    assert story.count("PROCEED") == 1 and story[-1] == "DONE"  # the verdict was not taken twice
    pilot = run.dir / "waves" / "1-pilot"
    # the killed gates' and soak's evidence is kept; the resumed ones started afresh beside it
    assert {p.name for p in (pilot / "pre-gate").iterdir()} == {"attempt-1", "attempt-2"}
    assert {p.name for p in (pilot / "post-gate").iterdir()} == {"attempt-1", "attempt-2"}
    assert (pilot / "soak" / "start").is_dir() and (pilot / "soak-2" / "start").is_dir()


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_killed_at_every_step_of_a_rollback_the_pilot_is_put_back_once(h100_lab, tmp_path):
    manager.fault_inject(h100_lab.dir, "h100-0001", "upgrade-breaks-fm")
    plan = derived_plan(tmp_path, "driver-fm-upgrade.yml", waves=[{"name": "pilot", "size": 1}],
                        gates={"checks": ["driver.version", "fm.version", "fm.service_active"],
                               "retry_interval": "1s", "timeout": "2s", "max_failed_hosts": 0})
    runs_dir = tmp_path / "runs"
    boundaries = ["ROLLBACK", "ROLLBACK_START", "ROLLBACK_APPLY", "ROLLBACK_APPLY_DONE", "ROLLBACK_GATE", "UNDRAIN"]
    run, code = kill_at_each(boundaries, ["rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir],
                             runs_dir, tmp_path)

    assert code == 4 and run.status == st.ROLLED_BACK
    pilot = h100_lab.node("h100-0001")
    assert driver_of(pilot) == (BEFORE, BEFORE, BEFORE) and pilot["slurm"]["state"] == "IDLE"
    assert pilot["boot_count"] == 3  # one reboot for the change, one for putting it back
    assert install_events(run.dir) == {"h100-0001": 2}  # applied once, put back once
    assert install_events(run.dir, ROLLBACKS) == {"h100-0001": 1}
    story = whats(run.dir)
    assert story.count("ROLLBACK") == 1 and story.count("ROLLBACK_START") == 1 and "ERROR" not in story
    assert story[-1] == "ROLLBACK_DONE"


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_a_run_halted_by_its_pre_gate_resumes_once_the_fault_is_fixed(h100_lab, tmp_path):
    """The pre-gate is re-proven in a fresh attempt beside the failed one; the run then goes on to done."""
    manager.fault_inject(h100_lab.dir, "h100-0001", "fm-down")
    plan = derived_plan(tmp_path, "driver-fm-upgrade.yml", waves=[{"name": "pilot", "size": 1}], drain=None)
    runs_dir = tmp_path / "runs"
    halted = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir)
    assert halted.exit_code == 1 and the_run(runs_dir).status == st.HALTED, halted.output
    manager.fault_clear(h100_lab.dir, "h100-0001")
    resumed = cli("rollout", "resume", "last", "--runs-dir", runs_dir)
    run = the_run(runs_dir)
    assert resumed.exit_code == 0 and run.status == st.DONE, resumed.output
    assert {p.name for p in (run.dir / "waves" / "1-pilot" / "pre-gate").iterdir()} == {"attempt-1", "attempt-2"}
    assert driver_of(h100_lab.node("h100-0001")) == (AFTER, AFTER, AFTER)


def _stopped(pid: int) -> bool:
    """The process is stopped (state T in /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat[stat.rindex(")") + 2] == "T"


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_sighup_mid_apply_is_recorded_as_interrupted_and_the_run_resumes(h100_lab, tmp_path):
    """A closed terminal (SIGHUP) stops the run at the next step boundary as SIGTERM does: an INTERRUPTED record,
    state interrupted, exit 130, never a run that just vanished mid-apply."""
    plan = derived_plan(tmp_path, "driver-fm-upgrade.yml", waves=[{"name": "pilot", "size": 1}], drain=None)
    runs_dir = tmp_path / "runs"
    log = tmp_path / "run.log"
    proc = spawn("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", runs_dir, log=log,
                 env={"FABRICPROOF_TEST_STOP_AFTER": "APPLY"})
    try:
        wait_for(lambda: proc.poll() is not None or _stopped(proc.pid), STEP_TIMEOUT_S, "the APPLY record", proc, log)
        proc.send_signal(signal.SIGHUP)  # delivered on SIGCONT, with the apply step under way
        proc.send_signal(signal.SIGCONT)
        code = proc.wait(STEP_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGCONT)
            proc.kill()
    run = the_run(runs_dir)
    assert code == 130, f"exit {code}: {log.read_text()}"
    assert run.status == st.INTERRUPTED
    last = decisions.read(run.dir)[-1]
    assert last["what"] == "INTERRUPTED" and last["why"].startswith("SIGHUP received"), last
    resumed = cli("rollout", "resume", run.run_id, "--runs-dir", runs_dir)
    assert resumed.exit_code == 0 and the_run(runs_dir).status == st.DONE, resumed.output
    assert install_events(the_run(runs_dir).dir) == {"h100-0001": 1}  # the apply cut short was not repeated
