"""A rollout run directory follows no symbolic link planted in it (waves/<n>/<gate>, inputs/, ansible/, ABORT):
resume, rollback, abort and status refuse the run with one line and exit 2, and write nothing anywhere; `rollout
status -f html=PATH` writes a device where it is and refuses a directory before reading the run."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest
from fabricproof.errors import InputError
from fabricproof.rollout import runs
from fabricproof.rollout import state as st

from .fakes import Fleet
from .test_cli import _fake_run, cli
from .test_executor import FakeClock


def seams(fleet: Fleet) -> runs.Seams:
    return runs.Seams(collect_factory=fleet.collect_factory, run_playbook=fleet.run_playbook, clock=FakeClock())


def tree(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*"))


def plant_dir(run_dir: Path, rel: str, outside: Path) -> Path:
    """Move run_dir/rel out to `outside` (as it was) and leave a link to it in its place."""
    link = run_dir / rel
    shutil.move(str(link), str(outside))
    link.symlink_to(outside)
    return link


def one_line(text: str, link: Path) -> None:
    lines = text.strip().splitlines()
    assert len(lines) == 1 and f"{link}: a symbolic link inside a run directory" in lines[0], text


def test_resume_refuses_a_planted_gate_directory_and_writes_nothing(tmp_path, monkeypatch):
    runs_dir, run_id, fleet = _fake_run(tmp_path, monkeypatch)  # halted in wave 2: resume re-proves it
    run_dir = runs_dir / run_id
    outside = tmp_path / "elsewhere"
    link = plant_dir(run_dir, "waves/2-early/post-gate", outside)
    before, state_before = tree(outside), (run_dir / st.STATE_FILE).read_bytes()
    with pytest.raises(InputError) as exc:
        runs.resume(runs_dir, run_id, seams=seams(fleet))
    one_line(str(exc.value), link)
    assert tree(outside) == before and (run_dir / st.STATE_FILE).read_bytes() == state_before


def test_rollback_refuses_a_planted_ansible_directory(tmp_path, monkeypatch):
    runs_dir, run_id, fleet = _fake_run(tmp_path, monkeypatch)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    link = runs_dir / run_id / "ansible"
    link.symlink_to(outside)
    plays = list(fleet.plays)
    with pytest.raises(InputError) as exc:
        runs.rollback(runs_dir, run_id, seams=seams(fleet))
    one_line(str(exc.value), link)
    assert tree(outside) == [] and fleet.plays == plays  # no playbook ran


def test_abort_and_status_refuse_a_planted_link_with_exit_2(tmp_path, monkeypatch):
    runs_dir, run_id, _ = _fake_run(tmp_path, monkeypatch)
    victim = tmp_path / "precious.txt"
    victim.write_text("keep me\n")
    link = runs_dir / run_id / "ABORT"
    link.symlink_to(victim)  # abort writes ABORT: through the link, it would overwrite the victim
    aborted = cli("rollout", "abort", run_id, "--runs-dir", runs_dir, "--reason", "INC-9")
    assert aborted.exit_code == 2
    one_line(aborted.stderr, link)
    assert victim.read_text() == "keep me\n"
    assert st.RunState.load(runs_dir / run_id).status == st.HALTED
    for args in (("status", run_id), ("status", "last", "-f", "json"), ("resume", run_id)):
        res = cli("rollout", *args, "--runs-dir", runs_dir)
        assert res.exit_code == 2, args
        one_line(res.stderr, link)


def test_status_html_into_a_device_writes_it_in_place(tmp_path, monkeypatch):
    runs_dir, run_id, _ = _fake_run(tmp_path, monkeypatch)
    null = tmp_path / "null"
    os.mknod(null, 0o666 | stat.S_IFCHR, os.makedev(1, 3))  # a private /dev/null
    os.chmod(null, 0o666)
    before = os.lstat(null)
    res = cli("rollout", "status", run_id, "--runs-dir", runs_dir, "-f", f"html={null}")
    assert res.exit_code == 0, res.output
    after = os.lstat(null)
    assert (after.st_ino, after.st_mode, after.st_rdev) == (before.st_ino, before.st_mode, before.st_rdev)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".null")) == []  # no temp file beside it


def test_status_html_into_a_directory_exits_2_before_reading_the_run(tmp_path):
    out = tmp_path / "pages"
    out.mkdir()
    res = cli("rollout", "status", "no-such-run", "--runs-dir", tmp_path / "runs", "-f", f"html={out}")
    assert res.exit_code == 2
    assert res.stderr.strip() == f"error: {out}: --format html: a directory; name a file"
