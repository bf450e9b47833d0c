"""Lab fixtures for rollout rehearsals: a fresh small lab per test, started and always stopped by the lab tests'
own LabFactory (tests/labkit.py, so every suite stops labs the same way)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import labkit as kit
from diskkit import small_tmpfs
import pytest


@pytest.fixture(scope="session")
def rollout_labs(lab_factory: kit.LabFactory) -> kit.LabFactory:
    """The session's lab factory (tests/conftest.py): it stops every sshd it ever started, by PID."""
    return lab_factory


@dataclass(frozen=True)
class Lab:
    dir: Path
    inventory: Path

    def node(self, host: str) -> dict:
        """The stored state of a lab node by inventory name (h100-0001)."""
        import json

        return json.loads((self.dir / "nodes" / "by-name" / host / "state.json").read_text())


@pytest.fixture
def h100_lab(rollout_labs, request) -> Iterator[Lab]:
    """A fresh DGX H100 lab, stopped at the test's end; its size comes from
    @pytest.mark.parametrize('h100_lab', [N], indirect=True)."""
    nodes = getattr(request, "param", 2)
    directory = rollout_labs.new_dir()
    status = rollout_labs.up(directory, nodes=nodes, profile="dgx-h100")
    assert status.running, status.as_dict()
    yield Lab(directory, status.layout.inventory)
    problems = rollout_labs.down([directory.parent])
    assert not problems, problems


@pytest.fixture
def small_disk(tmp_path, request):
    """A real tmpfs of our own on a temporary directory, unmounted after the test: a disk that fills up. Its size is
    2m unless @pytest.mark.parametrize('small_disk', ['64m'], indirect=True) says otherwise."""
    with small_tmpfs(tmp_path / "disk", getattr(request, "param", "2m")) as mnt:
        yield mnt


def fill(disk: Path) -> Path:
    """Write a filler file on `disk` until it refuses a byte (a whole page, then single bytes); returns the filler."""
    import errno
    import os

    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (b"\0" * 65536, b"\0"):
            for _ in range(100_000):  # bounded: up to 6 GiB in 64 KiB pieces, then the last page byte by byte
                try:
                    os.write(fd, chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC, exc
                    break
    finally:
        os.close(fd)
    return filler


PAGE = 4096  # tmpfs allocates whole pages: a file's last page keeps room that filling the disk cannot take


def leave_no_room(run_dir: Path, run_id: str) -> None:
    """Pad a run's decision log with an operator's NOTE ending exactly at its last page, so that once the disk is
    filled no byte is left for the next record (the note is an ordinary whole record)."""
    import json

    from fabricproof.rollout import decisions
    from fabricproof.timeutil import utc_now

    path = Path(run_dir) / decisions.DECISIONS_FILE
    slack = -path.stat().st_size % PAGE
    empty = {"when": utc_now(), "run_id": run_id, "who": decisions.who(), "what": "NOTE", "why": "", "step": "",
             "hosts": [], "evidence": []}  # the record DecisionLog writes, so its length is known beforehand
    base = len(json.dumps(empty)) + 1
    if slack >= base:
        decisions.DecisionLog(run_dir, run_id).record("NOTE", "x" * (slack - base))
    assert path.stat().st_size % PAGE == 0 or -path.stat().st_size % PAGE < base
