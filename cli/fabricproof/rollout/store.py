"""The rollout run directory's layout, known here alone: state, decisions, inputs, waves and attempts, Ansible
artefacts, the page, the abort request and the run's lock (runbook runs share the runs directory and its names)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from ..fsutil import private_dir

STATE_FILE = "state.json"
DECISIONS_FILE = "decisions.jsonl"
#: A torn last line is moved to decisions.jsonl.torn-<n> beside the log before the next record is appended.
TORN_SUFFIX = ".torn-"
#: The rollout report's file (written as each run, resume or rollback command ends).
PAGE_FILE = "rollout.html"
ABORT_FILE = "abort-requested"
RUN_LOCK = ".lock"
INPUTS_DIR = "inputs"
ANSIBLE_DIR = "ansible"
WAVES_DIR = "waves"
ROLLBACK_PREFIX = "rollback-"
#: A runbook run's record, its steps' evidence and the bundle it ends with.
RUNBOOK_FILE = "runbook.json"
RUNBOOK_STEPS_DIR = "steps"
BUNDLE = "evidence.tar.gz"
#: Where a wave's gates keep their evidence: before the change, after it, and the soak.
PRE_GATE_DIR, POST_GATE_DIR, SOAK_DIR = "pre-gate", "post-gate", "soak"
ROLLBACK_GATE_DIR = "gate"
#: Inside a stage: each proof of a gate, each re-read of a soak, and the soak's first snapshot.
ATTEMPT, SAMPLE, SOAK_START = "attempt-", "sample-", "start"
#: Inside the collective gate's evidence: the search's launches, apart from the collective that measured the wave
#: (both number their launches from 0).
SEARCH_DIR = "search"
APPLY_FAILED_DIR = "apply-failed"
IN_DOUBT_PREFIX = "in-doubt-"
_NUMBERED = re.compile(r"^(attempt|sample)-(\d+)$")


def fresh_dir(path: Path) -> Path:
    """`path`, or when an earlier execution of the step left evidence there (the run was killed and resumed),
    the first free `path-2`, `path-3`, ...: a resumed step starts afresh and the old evidence is kept."""
    candidate, k = path, 1
    while candidate.exists() and any(candidate.iterdir()):
        k += 1
        candidate = path.with_name(f"{path.name}-{k}")
    return candidate


def gate_dir(stage: Path, kind: str) -> Path:
    """A gate kind's own evidence inside a stage it joins (the probes gate's in pre-gate/probes)."""
    return stage / kind


def attempt_dir(stage: Path, n: int) -> Path:
    return stage / f"{ATTEMPT}{n}"


def sample_dir(stage: Path, n: int) -> Path:
    return stage / f"{SAMPLE}{n}"


def soak_start_dir(stage: Path) -> Path:
    return stage / SOAK_START


def next_attempt(stage: Path) -> int:
    """The number the next gate attempt in `stage` gets: attempts go on counting across a resume."""
    done = [int(p.name[len(ATTEMPT):]) for p in stage.glob(ATTEMPT + "*") if p.name[len(ATTEMPT):].isdigit()]
    return max(done, default=0) + 1


def numbered(stage: Path) -> list[tuple[int, Path]]:
    """Every attempt (gate) or sample (soak) directory of a stage, in order."""
    return sorted((int(m.group(2)), d) for d in stage.iterdir() if d.is_dir() and (m := _NUMBERED.match(d.name)))


def wave_name(index: int, name: str) -> str:
    """A wave's directory: its number from 1 and its name."""
    return f"{index + 1}-{name}"


class RolloutStore:
    """One rollout (or runbook) run directory: every path in it comes from here."""

    def __init__(self, root: Path):
        self.root = Path(root)

    @property
    def state_path(self) -> Path:
        return self.root / STATE_FILE

    @property
    def decisions_path(self) -> Path:
        return self.root / DECISIONS_FILE

    def torn_path(self, n: int) -> Path:
        return self.root / f"{DECISIONS_FILE}{TORN_SUFFIX}{n}"

    def torn_files(self) -> Iterator[tuple[int, Path]]:
        """(n, path) of every torn tail set aside beside the log, in no order."""
        for p in self.root.glob(DECISIONS_FILE + TORN_SUFFIX + "*"):
            n = p.name.rsplit("-", 1)[1]
            if n.isdigit():
                yield int(n), p

    @property
    def page_path(self) -> Path:
        return self.root / PAGE_FILE

    @property
    def abort_path(self) -> Path:
        return self.root / ABORT_FILE

    def set_aside_abort(self, stamp: str) -> Path:
        """Where an earlier abort request is moved so the rollback that cleans up after it is not stopped."""
        return self.root / f"{ABORT_FILE}.{stamp}"

    @property
    def lock_path(self) -> Path:
        return self.root / RUN_LOCK

    @property
    def ansible_dir(self) -> Path:
        """ansible-runner's private data directory: every playbook's artefacts, by ident."""
        return self.root / ANSIBLE_DIR

    def inputs_dir(self) -> Path:
        return private_dir(self.root, INPUTS_DIR)

    def input_path(self, name: str, suffix: str) -> Path:
        """The copy of one input (plan, before, after) the run was judged against."""
        return self.inputs_dir() / f"{name}{suffix or '.yaml'}"

    @property
    def inputs_path(self) -> Path:
        return self.root / INPUTS_DIR

    def evidence_dir(self, *parts: str) -> Path:
        return private_dir(self.root, *parts)  # never through a link planted in the run directory

    def wave_dir(self, index: int, name: str, *parts: str) -> Path:
        return self.evidence_dir(WAVES_DIR, wave_name(index, name), *parts)

    def rollback_dir(self, n: int, index: int, name: str, *parts: str) -> Path:
        return self.evidence_dir(f"{ROLLBACK_PREFIX}{n}", wave_name(index, name), *parts)

    @property
    def runbook_path(self) -> Path:
        return self.root / RUNBOOK_FILE

    def runbook_step_dir(self, number: int, slug: str) -> Path:
        return self.root / RUNBOOK_STEPS_DIR / f"{number}-{slug}"

    @property
    def bundle_path(self) -> Path:
        return self.root / BUNDLE
