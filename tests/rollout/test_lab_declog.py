"""Issue 19.3 and 19.4 on a real lab rollout: a halted run whose runs directory is a real tmpfs that fills up, whose
decision log gets a torn last line, and whose state.json is cut short while another runs directory wants its host."""

from __future__ import annotations

import json

import pytest
from fabricproof_lab import manager
from fabricproof.rollout import decisions
from fabricproof.rollout import state as st

from .conftest import fill, leave_no_room
from .rehearsal import AFTER, BEFORE, cli, derived_plan, driver_of, the_run, whats

pytestmark = pytest.mark.lab


def halted_run(lab, tmp_path, runs_dir):
    """A one-wave driver upgrade halted by its pre-gate (Fabric Manager down on the node): nothing changed yet."""
    manager.fault_inject(lab.dir, "h100-0001", "fm-down")
    plan = derived_plan(tmp_path, "driver-fm-upgrade.yml", waves=[{"name": "pilot", "size": 1}], drain=None)
    halted = cli("rollout", "run", plan, "-i", lab.inventory, "--runs-dir", runs_dir)
    assert halted.exit_code == 1 and the_run(runs_dir).status == st.HALTED, halted.output
    return plan, the_run(runs_dir)


@pytest.mark.parametrize("small_disk", ["64m"], indirect=True)
@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_a_full_disk_and_a_torn_log_never_lose_a_decision(h100_lab, small_disk, tmp_path):
    runs_dir = small_disk / "runs"
    _plan, run = halted_run(h100_lab, tmp_path, runs_dir)
    log_path = run.dir / decisions.DECISIONS_FILE

    # Full disk: the RESUME record cannot be written whole, so none of it is; one line names the log.
    leave_no_room(run.dir, run.run_id)
    filler = fill(small_disk)
    before = log_path.read_bytes()
    resumed = cli("rollout", "resume", "last", "--runs-dir", runs_dir)
    assert resumed.exit_code == 6, resumed.output  # a full disk is exit 6 (issue 19.7), as every write it refuses
    errors = [line for line in resumed.output.splitlines() if line.startswith("error:")]
    assert errors == [f"error: cannot write {log_path}: decision RESUME not recorded: No space left on device; "
                      "nothing of it was kept"], resumed.output
    assert "Traceback" not in resumed.output
    assert log_path.read_bytes() == before and the_run(runs_dir).status == st.HALTED
    filler.unlink()

    # A torn last line (a writer that died mid-line) is listed by `rollout status`, then set aside, named, before
    # the next record: the resumed run's records start on a line of their own.
    fragment = b'{"when": "2026-12-02T05:00:00Z", "run_id": "' + run.run_id.encode() + b'", "what": "RES'
    with log_path.open("ab") as fh:
        fh.write(fragment)
    torn_line = log_path.read_bytes().count(b"\n") + 1
    shown = cli("rollout", "status", "last", "--runs-dir", runs_dir)
    assert shown.exit_code == 0 and f"line {torn_line}: torn, no newline at the end" in shown.output, shown.output
    manager.fault_clear(h100_lab.dir, "h100-0001")
    done = cli("rollout", "resume", "last", "--runs-dir", runs_dir)
    assert done.exit_code == 0 and the_run(runs_dir).status == st.DONE, done.output
    assert driver_of(h100_lab.node("h100-0001")) == (AFTER, AFTER, AFTER)
    assert (run.dir / "decisions.jsonl.torn-1").read_bytes() == fragment
    story = whats(run.dir)
    assert story[story.index("TORN_TAIL") + 1] == "RESUME" and story[-1] == "DONE"
    doc = json.loads(cli("rollout", "status", "last", "--runs-dir", runs_dir, "-f", "json").stdout)
    assert doc["decision_log"] == {"path": str(log_path), "unreadable": [], "set_aside": ["decisions.jsonl.torn-1"]}
    assert "torn last line(s) set aside beside decisions.jsonl, kept as they were: decisions.jsonl.torn-1" in \
        done.output


@pytest.mark.parametrize("h100_lab", [1], indirect=True)
def test_a_halted_run_with_unreadable_state_keeps_its_host_until_released_on_purpose(h100_lab, tmp_path):
    plan, run = halted_run(h100_lab, tmp_path, tmp_path / "runs")
    state_file = run.dir / st.STATE_FILE
    state_file.write_bytes(state_file.read_bytes()[:200])  # cut short
    other = tmp_path / "elsewhere" / "runs"

    refused = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", other)
    assert refused.exit_code == 2, refused.output
    assert f"error: {run.dir}: run {run.run_id} (pid " in refused.output
    assert "still holds h100-0001: its state.json cannot be read (" in refused.output
    assert f"release its hosts deliberately with `fabricproof rollout unlock {run.run_id} --yes`" in refused.output
    assert "finished or is gone" not in refused.output and st.list_runs(other) == []
    assert driver_of(h100_lab.node("h100-0001")) == (BEFORE, BEFORE, BEFORE)  # nothing touched

    asked = cli("rollout", "unlock", run.run_id)
    assert asked.exit_code == 2 and "nothing was released: add --yes" in asked.output, asked.output
    assert cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", other).exit_code == 2
    released = cli("rollout", "unlock", run.run_id, "--yes")
    assert released.exit_code == 0 and f"released 1 host(s) held by run {run.run_id}" in released.output
    assert whats(run.dir)[-1] == "LOCKS_RELEASED"

    manager.fault_clear(h100_lab.dir, "h100-0001")
    after = cli("rollout", "run", plan, "-i", h100_lab.inventory, "--runs-dir", other)
    assert after.exit_code == 0, after.output
    assert "LOCK_TAKEN_OVER" not in whats(the_run(other).dir)  # released on purpose, not taken over
    assert driver_of(h100_lab.node("h100-0001")) == (AFTER, AFTER, AFTER)
