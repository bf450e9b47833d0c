"""A symbolic link planted inside a run directory is refused, never followed: evidence and facts never land outside
the run (raw/, facts/, probes/, a host's evidence, a facts file), whether planted before the run or while it runs."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof.errors import InputError
from fabricproof.fsutil import private_dir, refuse_links_in
from fabricproof.model import CommandResult, Host
from fabricproof.runstore import RunStore
from fabricproof.transport.replay import ReplayOptions

PICK = [COLLECTORS["lsmod"], COLLECTORS["cmdline"]]
OUTPUTS = {"lsmod": CommandResult(("lsmod",), "Module Size Used by\n")}


def recorded(tmp_path: Path) -> Path:
    """Evidence to replay: what a collection reads, no host touched."""
    src = tmp_path / "recorded"
    (src / "raw" / "h1").mkdir(parents=True)
    (src / "raw" / "h1" / "lsmod.txt").write_text("Module                  Size  Used by\nnvidia_peermem 16384 0\n")
    return src


@pytest.fixture
def outside(tmp_path) -> Path:
    """Where a planted link points: it must stay empty."""
    d = tmp_path / "elsewhere"
    d.mkdir()
    return d


def refused(exc: pytest.ExceptionInfo, link: Path) -> None:
    message = str(exc.value)
    assert f"{link}: a symbolic link inside a run directory" in message and "\n" not in message


@pytest.mark.parametrize("sub", ["raw", "facts"])
def test_a_link_planted_in_an_empty_run_directory_is_refused_before_the_run(tmp_path, outside, sub):
    run = tmp_path / "run"
    run.mkdir()
    (run / sub).symlink_to(outside)
    with pytest.raises(InputError) as exc:
        collect([Host("h1")], run, via="replay", options=ReplayOptions(recorded(tmp_path)), collectors=PICK)
    refused(exc, run / sub)
    assert list(outside.iterdir()) == [] and sorted(p.name for p in run.iterdir()) == [sub]


def test_a_link_planted_deeper_in_an_empty_run_directory_is_refused(tmp_path, outside):
    run = tmp_path / "run"
    (run / "raw").mkdir(parents=True)
    (run / "raw" / ".h1.partial").symlink_to(outside)  # hidden staging a crash could have left
    with pytest.raises(InputError) as exc:
        collect([Host("h1")], run, via="replay", options=ReplayOptions(recorded(tmp_path)), collectors=PICK)
    refused(exc, run / "raw" / ".h1.partial")
    assert list(outside.iterdir()) == []


def test_a_run_directory_that_is_itself_a_link_is_refused(tmp_path, outside):
    """A run store inside a run (its probes/) is created the same way: a link there would lead out of the run."""
    run = tmp_path / "run"
    collect([Host("h1")], run, via="replay", options=ReplayOptions(recorded(tmp_path)), collectors=PICK)
    probes = RunStore(run).probes_root
    probes.symlink_to(outside)
    with pytest.raises(InputError) as exc:
        RunStore.create(probes)
    assert "the run directory is a symbolic link" in str(exc.value) and str(outside) in str(exc.value)
    assert list(outside.iterdir()) == []


@pytest.mark.parametrize("plant", ["raw", "raw/h1", "raw/.h1.partial", "facts", "facts/.h1.json.tmp"])
def test_nothing_is_written_through_a_link_planted_while_the_run_runs(tmp_path, outside, plant):
    store = RunStore.create(tmp_path / "run")
    store.begin()
    link = store.root / plant
    if plant in ("raw", "facts"):
        link.rmdir()
    # a file-sized link (the facts' temp file) would have the facts written into a file of its choosing
    link.symlink_to(outside / "stolen.json" if plant.endswith(".tmp") else outside)
    with pytest.raises(InputError) as exc:
        if plant.startswith("raw"):
            store.write_evidence("h1", OUTPUTS)
        else:
            store.write_facts("h1", {"kind": "Facts", "host": "h1"})
    refused(exc, link)
    assert list(outside.iterdir()) == []


def test_private_dir_makes_what_is_missing_and_refuses_a_link_on_the_way(tmp_path, outside):
    run = tmp_path / "run"
    run.mkdir()
    made = private_dir(run, "waves", "1-pilot", "pre")
    assert made.is_dir() and oct(made.stat().st_mode & 0o777) == oct(0o700)
    (run / "waves" / "2-rest").symlink_to(outside)
    with pytest.raises(InputError) as exc:
        private_dir(run, "waves", "2-rest", "pre")
    refused(exc, run / "waves" / "2-rest")
    assert list(outside.iterdir()) == []


def test_a_tree_walk_finds_a_link_at_any_depth_and_follows_none(tmp_path, outside):
    run = tmp_path / "run"
    private_dir(run.parent, run.name, "waves", "1-pilot", "post", "attempt-1")
    refuse_links_in(run)  # a clean tree passes
    (outside / "loop").symlink_to(outside)  # were the walk to follow links, this would never end
    deep = run / "waves" / "1-pilot" / "post" / "attempt-1" / "raw"
    deep.symlink_to(outside)
    with pytest.raises(InputError) as exc:
        refuse_links_in(run)
    refused(exc, deep)
    assert os.readlink(deep) == str(outside)
