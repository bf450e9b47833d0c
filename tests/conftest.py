"""Shared pytest fixtures: where the real-output corpus lies, repo paths, the lab, and a private state directory."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import cpukit
import pytest
import spread
from labkit import LabFactory, lab_skip_reason

# Keep the assertion-rewritten test modules between runs even where PYTHONDONTWRITEBYTECODE is set (it is on the
# development machines): without the cache every xdist worker rewrites all ~230 test modules again, 10.3 s of CPU
# per process to collect the suite against 4.3 s with it. Set here, before pytest imports any test module.
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"


LABS_OF_THE_CALL = pytest.StashKey[list[Path]]()

# A suite started in the background of a non-interactive shell (`pytest &` in a script or a subshell) inherits Ctrl-C
# ignored, and Python then installs no KeyboardInterrupt handler: every Ctrl-C test would fail for how the suite was
# started (6 did so once). Take SIGINT back before the workers start; they and every process below them inherit the
# default.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_configure(config: pytest.Config) -> None:
    cpukit.register(config)  # only when FABRICPROOF_TEST_CPU_LOG names a directory


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Every xdist worker collects and must reach the same order; the count is the same on each.
    items[:] = spread.spread(items, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Remember the labs a test's body started (labs of module and session fixtures start in the setup phase)."""
    factory = getattr(item, "funcargs", {}).get("lab_factory")
    before = list(factory.roots) if factory else []
    yield
    if factory:
        item.stash[LABS_OF_THE_CALL] = [r for r in factory.roots if r not in before]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    """Stop the labs a test's body started at its end, after its fixtures: the session's teardown stopping them
    all on a worker's last test was a serial tail of the run (87 s on one worker, 35 labs, under load)."""
    yield
    roots = item.stash.get(LABS_OF_THE_CALL, [])
    if roots:
        problems = item.funcargs["lab_factory"].down(roots)
        assert not problems, problems


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


@pytest.fixture(autouse=True, scope="session")
def private_cache_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The session's own $XDG_CACHE_HOME: the inventory cache is never this machine's ~/.cache, and the CLI
    processes of one test (9 in a kill/resume rehearsal) read the same inventory from it once. Content-keyed, so
    sharing it between tests changes no answer. Also a session-wide FABRICPROOF_STATE_DIR under each test's own:
    daemons a module fixture starts before any test (slurmd's health checks, which keep the catalog's cache) would
    otherwise write to this machine's /var/lib/fabricproof."""
    directory = tmp_path_factory.mktemp("xdg-cache")
    names = {"XDG_CACHE_HOME": directory, "FABRICPROOF_STATE_DIR": tmp_path_factory.mktemp("session-state")}
    before = {name: os.environ.get(name) for name in names}
    os.environ.update({name: str(path) for name, path in names.items()})
    yield directory
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


#: ansible-playbook's main process polls its workers every `internal_poll_interval` seconds (default 0.001, an ini
#: setting with no environment variable): while a task runs it spends ~35 ms of CPU a second of wall on that loop
#: (perf, a play waiting 5 s: 30-40 samples/s at 1 kHz, 2-3 at 0.05). Lab plays mostly wait (drains, reboots, a
#: loaded machine), so every ansible-playbook the tests start reads this file; a result is then seen up to 20 ms later,
#: the answers are the same. The product leaves Ansible's default alone: an operator's ansible.cfg is theirs.
ANSIBLE_CFG = "[defaults]\ninternal_poll_interval = 0.02\n"


@pytest.fixture(autouse=True, scope="session")
def cheap_ansible_polling(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test's Ansible (in-process, spawned CLI processes and the daemons a module fixture starts alike)
    polls at 20 ms; a test about ansible.cfg itself sets its own ANSIBLE_CONFIG."""
    path = tmp_path_factory.mktemp("ansible-cfg") / "ansible.cfg"
    path.write_text(ANSIBLE_CFG)
    before = os.environ.get("ANSIBLE_CONFIG")
    os.environ["ANSIBLE_CONFIG"] = str(path)
    yield path
    if before is None:
        os.environ.pop("ANSIBLE_CONFIG", None)
    else:
        os.environ["ANSIBLE_CONFIG"] = before


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

