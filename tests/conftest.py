"""Shared pytest fixtures: where the real-output corpus lies, repo paths, the lab, and a private state directory."""

from __future__ import annotations

import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from labkit import LabFactory, lab_skip_reason

# Keep the assertion-rewritten test modules between runs even where PYTHONDONTWRITEBYTECODE is set (it is on the
# development machines): without the cache every xdist worker rewrites all ~230 test modules again, 10.3 s of CPU
# per process to collect the suite against 4.3 s with it. Set here, before pytest imports any test module.
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"


@pytest.fixture(autouse=True)
def sigint_handler_kept() -> Iterator[None]:
    """No code under test leaves its own Ctrl-C handler behind (ansible-runner installs one for good unless told
    otherwise): a process that swallows Ctrl-C after its first playbook would lose every later interrupt."""
    before = signal.getsignal(signal.SIGINT)
    yield
    after = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, before)  # the next test starts clean either way
    assert after is before, f"the test left SIGINT handled by {after!r}"


@pytest.fixture(autouse=True)
def private_state_dir(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own machine-wide state (host locks and reservations), so tests that reuse host names never see
    each other's runs and nothing is written to /var/lib/fabricproof. Subprocesses inherit it."""
    directory = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("FABRICPROOF_STATE_DIR", str(directory))
    return directory


@pytest.fixture(scope="session")
def corpus() -> Path:
    if not CORPUS.is_dir():
        pytest.skip(f"real-output corpus not found at {CORPUS}")
    return CORPUS


@pytest.fixture(scope="session")
def lab_factory() -> Iterator[LabFactory]:
    reason = lab_skip_reason()
    if reason:
        pytest.skip(reason)
    factory = LabFactory()
    try:
        yield factory
    finally:
        problems = factory.teardown()
        assert not problems, problems

