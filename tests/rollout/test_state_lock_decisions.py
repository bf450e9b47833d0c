"""Run state (atomic, owner-only, round trip, in-doubt hosts), decision log (append-only, fsynced, torn last line),
and host locks (flock, stale takeover, reservations of unfinished runs)."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import textwrap

import pytest
from fabricproof.rollout import lock
from fabricproof.rollout import state as st
from fabricproof.rollout.decisions import DecisionLog, format_line, read, who
from fabricproof.rollout.plan import Budget, Wave

WAVES = [Wave(0, "pilot", (("a",),), (("a",),), False, Budget(), 10),
         Wave(1, "rest", (("b",), ("c",)), (("b",), ("c",)), True, Budget(1, 50.0), None)]


def new_state(tmp_path, run_id="run-1"):
    return st.RunState.create(tmp_path / run_id, run_id=run_id, plan_name="p", plan_file="/x/plan.yml",
                              inventory="/x/inv.yml", waves=WAVES, who="me@here", settings={"via": "ssh"})


def test_state_round_trip_and_owner_only_modes(tmp_path):
    s = new_state(tmp_path)
    s.begin("w0.apply.b0", hosts=["a"])
    s.mark(["a"], "apply", started="t1", done=None)
    s.set_hosts(["a"], st.APPLYING)
    s.save()
    loaded = st.RunState.load(tmp_path / "run-1")
    assert loaded.data == s.data
    assert loaded.waves == WAVES  # budgets, batches, pause and soak survive JSON
    assert loaded.step("w0.apply.b0")["status"] == "started" and not loaded.step_done("w0.apply.b0")
    assert loaded.in_doubt("apply") == ["a"]
    assert stat.S_IMODE(os.stat(tmp_path / "run-1").st_mode) == 0o700
    assert stat.S_IMODE(os.stat(tmp_path / "run-1" / "state.json").st_mode) == 0o600
    loaded.mark(["a"], "apply", done="t2", ok=True)
    loaded.finish("w0.apply.b0", ok=["a"])
    again = st.RunState.load(tmp_path / "run-1")
    assert again.in_doubt("apply") == [] and again.step_done("w0.apply.b0")
    assert again.step("w0.apply.b0")["attempts"] == 1


def test_state_is_replaced_atomically_never_half_written(tmp_path):
    s = new_state(tmp_path)
    for i in range(20):
        s.begin(f"s{i}")
        json.loads((tmp_path / "run-1" / "state.json").read_text())  # always a whole document
    assert not list((tmp_path / "run-1").glob(".state.json.*"))  # no temp files left behind


def test_status_and_exit_codes(tmp_path):
    s = new_state(tmp_path)
    for status, code in ((st.DONE, 0), (st.HALTED, 1), (st.ROLLED_BACK, 4), (st.PAUSED, 5),
                         (st.ROLLBACK_FAILED, 5), (st.INTERRUPTED, 130)):
        s.set_status(status)
        assert s.data["exit_code"] == code


def test_find_run_by_id_path_and_last(tmp_path):
    new_state(tmp_path, "20260101T000000-a-0001")
    new_state(tmp_path, "20260102T000000-b-0002")
    assert st.find_run(tmp_path, "last").run_id == "20260102T000000-b-0002"
    assert st.find_run(tmp_path, "20260101T000000-a-0001").run_id == "20260101T000000-a-0001"
    assert st.find_run(tmp_path, str(tmp_path / "20260101T000000-a-0001")).run_id == "20260101T000000-a-0001"
    with pytest.raises(Exception, match="no rollout run 'nope'.*recent runs: 20260101T000000-a-0001"):
        st.find_run(tmp_path, "nope")


def test_new_run_id_sorts_by_time_and_names_the_change():
    rid = st.new_run_id("driver-fm", "2026-11-30T15:10:19Z")
    assert rid.startswith("20261130T151019-driver-fm-") and len(rid.rsplit("-", 1)[1]) == 4


# ------------------------------------------------------------------------------------------ decisions


def test_decisions_append_only_with_relative_evidence(tmp_path):
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    log = DecisionLog(run_dir, "r", actor="alice@ctl")
    log.record("PROCEED", "all proven", step="w0.decide", wave="pilot", hosts=["b", "a"],
               evidence=[run_dir / "waves" / "1-pilot" / "report.json", "/elsewhere/x"])
    log.record("HALT", "budget exceeded", hosts=[])
    entries = read(run_dir)
    assert [e["what"] for e in entries] == ["PROCEED", "HALT"]
    first = entries[0]
    assert first["who"] == "alice@ctl" and first["hosts"] == ["a", "b"] and first["run_id"] == "r"
    assert first["evidence"] == ["waves/1-pilot/report.json", "/elsewhere/x"]
    assert first["when"].endswith("Z")
    assert stat.S_IMODE(os.stat(run_dir / "decisions.jsonl").st_mode) == 0o600
    assert format_line(first) == f"{first['when']} alice@ctl [pilot] PROCEED on a, b: all proven"


def test_decisions_survive_a_torn_last_line(tmp_path):
    log = DecisionLog(tmp_path, "r", actor="x@y")
    log.record("START", "go")
    with open(tmp_path / "decisions.jsonl", "a") as fh:
        fh.write('{"when": "2026-')  # the process died mid-write
    assert [e["what"] for e in read(tmp_path)] == ["START"]


def test_who_names_the_sudo_caller(monkeypatch):
    monkeypatch.setenv("SUDO_USER", "alice")
    assert "(sudo:alice)@" in who() or who().startswith("alice@")


# ---------------------------------------------------------------------------------------------- locks


def test_locks_exclude_each_other_and_name_the_holder(tmp_path):
    held = lock.acquire(tmp_path, "run-A", ["h1", "h2"])
    try:
        with pytest.raises(lock.LockBusy) as exc:
            lock.acquire(tmp_path, "run-B", ["h2", "h3"])
        msg = str(exc.value)
        assert "host h2 is locked by run run-A" in msg and f"pid {os.getpid()}" in msg
        # all or nothing: h3 was free, but run-B must not keep it
        assert lock.holder(tmp_path, "h3") is None
        assert lock.holder(tmp_path, "h1")["run_id"] == "run-A"
    finally:
        held.release()
    assert lock.holder(tmp_path, "h1") is None
    lock.acquire(tmp_path, "run-B", ["h2", "h3"]).release()


def test_lock_of_a_dead_process_is_stale_and_taken_over(tmp_path):
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(os.path.dirname(lock.__file__) + '/../..')!r})
        from fabricproof.rollout import lock
        lock.acquire({str(tmp_path)!r}, "run-dead", ["h1"])
        os._exit(0)  # dies holding the lock: the kernel drops the flock, the owner record stays
    """)
    subprocess.run([sys.executable, "-c", code], check=True)
    assert json.loads((tmp_path / "locks" / "h1.lock").read_text())["run_id"] == "run-dead"
    taken = lock.acquire(tmp_path, "run-new", ["h1"])
    assert [s["run_id"] for s in taken.stale] == ["run-dead"]
    assert lock.holder(tmp_path, "h1")["run_id"] == "run-new"
    taken.release()


def test_unfinished_runs_reserve_their_hosts(tmp_path):
    with pytest.raises(lock.LockBusy, match="run old stopped unfinished \\(halted\\) and still holds h2: resume it"):
        lock.acquire(tmp_path, "new", ["h1", "h2"], reservations=[("old", "halted", ["h2", "h9"])])
    assert lock.holder(tmp_path, "h1") is None
    lock.acquire(tmp_path, "old", ["h2"], reservations=[("old", "halted", ["h2"])]).release()  # its own hosts


def test_lock_file_names_cannot_escape(tmp_path):
    held = lock.acquire(tmp_path, "r", ["../../etc/passwd"])
    assert [p.name for p in (tmp_path / "locks").iterdir()] == ["..%2F..%2Fetc%2Fpasswd.lock"]
    held.release()


def test_run_lock_is_exclusive_and_names_its_pid(tmp_path):
    with lock.run_lock(tmp_path, "r"):
        assert lock.run_holder(tmp_path)["pid"] == os.getpid()
        with pytest.raises(lock.LockBusy, match=f"being driven by pid {os.getpid()}"), lock.run_lock(tmp_path, "r"):
            pass
    assert lock.run_holder(tmp_path) is None


def _died_holding(tmp_path, run_id: str, run_dir) -> None:
    """A process that locked h1 and h2 for run_id (recording run_dir) and died: the flocks go, the records stay."""
    code = textwrap.dedent(f"""
        import os, sys
        sys.path.insert(0, {str(os.path.dirname(lock.__file__) + '/../..')!r})
        from fabricproof.rollout import lock
        lock.acquire({str(tmp_path)!r}, {run_id!r}, ["h1", "h2"], run_dir={str(run_dir)!r})
        os._exit(0)
    """)
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.mark.parametrize("damage", ["truncated", "empty", "not utf-8", "a list", "missing"])
def test_a_holder_whose_state_cannot_be_read_keeps_its_hosts(tmp_path, damage):
    runs = tmp_path / "runs-a"
    halted = new_state(runs, "run-old")
    halted.set_status(st.HALTED)
    halted.save()
    _died_holding(tmp_path, "run-old", halted.dir)
    state_file = halted.dir / st.STATE_FILE
    text = state_file.read_bytes()
    if damage == "missing":
        state_file.unlink()
    else:
        state_file.write_bytes({"truncated": text[: len(text) // 2], "empty": b"", "not utf-8": b"\xff" + text,
                                "a list": b"[]"}[damage])
    records = {h: (tmp_path / "locks" / f"{h}.lock").read_bytes() for h in ("h1", "h2")}

    with pytest.raises(lock.LockBusy) as exc:
        lock.acquire(tmp_path, "run-new", ["h1", "h2", "h3"], run_dir=tmp_path / "runs-b" / "run-new")
    (problem,) = exc.value.problems
    assert problem.file == str(halted.dir.resolve())  # names the holder's run directory
    assert problem.message.startswith(f"run run-old (pid ") and "still holds h1, h2: its state.json cannot be read" \
        in problem.message
    assert problem.message.endswith("or release its hosts deliberately with `fabricproof rollout unlock run-old --yes`")
    assert {h: (tmp_path / "locks" / f"{h}.lock").read_bytes() for h in ("h1", "h2")} == records  # still reserved
    assert lock.holder(tmp_path, "h3") is None  # all or nothing


@pytest.mark.parametrize("gone", ["finished", "directory removed"])
def test_a_holder_proven_gone_is_taken_over_saying_why(tmp_path, gone):
    old = new_state(tmp_path / "runs-a", "run-old")
    _died_holding(tmp_path, "run-old", old.dir)
    if gone == "finished":
        old.set_status(st.DONE)
        old.save()
    else:
        shutil.rmtree(old.dir)
    taken = lock.acquire(tmp_path, "run-new", ["h1"], run_dir=tmp_path / "runs-b" / "run-new")
    try:
        assert [s["why"] for s in taken.stale] == [
            "that run finished (done)" if gone == "finished" else f"its run directory {old.dir.resolve()} is gone"]
    finally:
        taken.release()


def test_an_unreadable_lock_record_keeps_its_host(tmp_path):
    (tmp_path / "locks").mkdir()
    (tmp_path / "locks" / "h1.lock").write_bytes(b'{"run_id": "run-x", "pi')  # cut short by a crash
    with pytest.raises(lock.LockBusy, match=r"h1 held: its lock record cannot be read \(JSONDecodeError: .*"
                                            r"`fabricproof rollout unlock --host h1 --yes`"):
        lock.acquire(tmp_path, "run-new", ["h1"])

