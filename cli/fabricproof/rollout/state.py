"""Run state: runs/<run id>/state.json, rewritten atomically (owner-only) after every step, so a killed run resumes.

Every step records its intent ("started") before it acts and its completion ("done"/"failed") after.
Applying a host is tracked per host: `apply.started` is written before the playbook touches it and
`apply.done` once the playbook finished on it, so resume can tell hosts that were never touched,
hosts whose apply completed, and hosts whose apply was interrupted (in doubt).
"""

from __future__ import annotations

import json
import os
import secrets
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from .. import documents
from ..errors import InputError, Problem
from ..fsutil import atomic_write_text, refuse_links_in
from ..model import ExitCode
from ..probes.figures import Figure
from ..timeutil import utc_now
from .plan import Wave
from .stepid import StepId
from .store import STATE_FILE, RolloutStore
FILE_MODE = 0o600
DIR_MODE = 0o700

# Run status -> exit code of the command that left it there.
RUNNING, PAUSED, HALTED, DONE = "running", "paused", "halted", "done"
ROLLED_BACK, ROLLBACK_FAILED, ABORTED, INTERRUPTED = "rolled_back", "rollback_failed", "aborted", "interrupted"
EXIT_BY_STATUS: dict[str, int] = {
    DONE: ExitCode.OK, HALTED: ExitCode.CHECK_FAILED, ROLLED_BACK: ExitCode.ROLLED_BACK,
    PAUSED: ExitCode.HALTED, ROLLBACK_FAILED: ExitCode.HALTED, ABORTED: ExitCode.HALTED,
    INTERRUPTED: ExitCode.INTERRUPTED, RUNNING: ExitCode.INTERRUPTED,
}
# A run in one of these no longer holds its hosts; any other status reserves them until resumed or aborted.
FINISHED = frozenset({DONE, ROLLED_BACK, ABORTED})

# Host states along the way; see docs in README (Rollouts -> state).
PENDING, EXCLUDED, APPLYING, APPLIED, APPLY_FAILED = "pending", "excluded", "applying", "applied", "apply_failed"
PASSED, FAILED, ROLLING_BACK = "passed", "failed", "rolling_back"
HOST_ROLLED_BACK, HOST_ROLLBACK_FAILED = "rolled_back", "rollback_failed"
CHANGED = frozenset({APPLYING, APPLIED, APPLY_FAILED, PASSED, FAILED, ROLLING_BACK, HOST_ROLLBACK_FAILED})


def new_run_id(name: str, now: str | None = None) -> str:
    """'<UTC yyyymmddThhmmss>-<change>-<4 hex>': sorts by time, names the change, never collides in practice."""
    stamp = (now or utc_now()).replace("-", "").replace(":", "").rstrip("Z")
    return f"{stamp}-{name}-{secrets.token_hex(2)}"


class RunState:
    """The state document of one run and its file. Mutators change memory; save() makes them durable."""

    def __init__(self, run_dir: Path, data: dict[str, Any]):
        self.dir = Path(run_dir)
        self.data = data

    # ---------------------------------------------------------------------------- construction
    @classmethod
    def create(cls, run_dir: Path, *, run_id: str, plan_name: str, plan_file: str, inventory: str,
               waves: Sequence[Wave], who: str, settings: Mapping[str, Any]) -> RunState:
        run_dir = Path(run_dir)
        run_dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=False)
        os.chmod(run_dir, DIR_MODE)  # whatever the umask: decisions and evidence are the owner's only
        now = utc_now()
        hosts = {h: {"wave": w.index, "state": PENDING, "reason": ""} for w in waves for h in w.hosts}
        data = {
            "apiVersion": "fabricproof/v1", "kind": "RolloutState", "run_id": run_id, "plan": plan_name,
            "plan_file": plan_file, "inventory": inventory, "created_at": now, "updated_at": now,
            "created_by": who, "status": RUNNING, "phase": "rollout", "exit_code": None,
            "settings": dict(settings), "waves": [w.as_dict() for w in waves], "steps": {}, "hosts": hosts,
            "rollback": None,
        }
        state = cls(run_dir, data)
        state.save()
        return state

    @classmethod
    def load(cls, run_dir: Path) -> RunState:
        """A run's state.json, checked to hold what every command reads (exit 2 naming the file, line and JSON
        path otherwise): a hand-edited, truncated or foreign file is refused before anything acts on it."""
        path = RolloutStore(run_dir).state_path
        if not path.exists():
            raise InputError(Problem(f"no rollout run here ({STATE_FILE} missing)", str(run_dir)))
        doc = documents.load_json(path)
        problems = _shape_problems(doc)
        if problems:
            raise InputError(problems[0])  # one line: a state fabricproof did not write is refused whole
        return cls(Path(run_dir), doc.data)

    def save(self) -> None:
        self.data["updated_at"] = utc_now()
        atomic_write_text(RolloutStore(self.dir).state_path, json.dumps(self.data, indent=2, sort_keys=False) + "\n", mode=FILE_MODE)

    # --------------------------------------------------------------------------------- accessors
    @property
    def run_id(self) -> str:
        return self.data["run_id"]

    @property
    def status(self) -> str:
        return self.data["status"]

    @property
    def waves(self) -> list[Wave]:
        return [Wave.from_dict(w) for w in self.data["waves"]]

    @property
    def hosts(self) -> dict[str, dict[str, Any]]:
        return self.data["hosts"]

    def hosts_in(self, *states: str, wave: int | None = None) -> list[str]:
        return sorted(h for h, d in self.hosts.items()
                      if d["state"] in states and (wave is None or d["wave"] == wave))

    def set_status(self, status: str, exit_code: int | None = None) -> None:
        self.data["status"] = status
        self.data["exit_code"] = EXIT_BY_STATUS.get(status) if exit_code is None else exit_code

    # ------------------------------------------------------------------------------------- steps
    def step(self, sid: StepId | str) -> dict[str, Any] | None:
        return self.data["steps"].get(str(sid))

    def step_done(self, sid: StepId | str) -> bool:
        st = self.step(sid)
        return st is not None and st["status"] in ("done", "failed")

    def begin(self, sid: StepId | str, **detail: Any) -> None:
        """Record the intent to run a step (before it acts), durably."""
        st = self.data["steps"].get(str(sid)) or {"attempts": 0}
        st.pop("ran", None)  # what an earlier execution found (nothing to do) is not this one's
        st.update(status="started", started_at=utc_now(), ended_at=None, attempts=st["attempts"] + 1, **detail)
        self.data["steps"][str(sid)] = st
        self.save()

    def finish(self, sid: StepId | str, status: str = "done", **detail: Any) -> None:
        """Record a step's completion (after it acted), durably."""
        st = self.data["steps"].setdefault(str(sid), {"attempts": 1})
        st.update(status=status, ended_at=utc_now(), **detail)
        self.save()

    def forget(self, sids: Iterable[StepId | str]) -> None:
        """Drop steps so they run again (resume after a halt re-proves the halted wave)."""
        for sid in list(sids):
            self.data["steps"].pop(str(sid), None)

    # ------------------------------------------------------------------------------------- hosts
    def set_hosts(self, hosts: Iterable[str], state: str, reason: str | None = None, **fields: Any) -> None:
        for h in hosts:
            d = self.hosts[h]
            d["state"] = state
            if reason is not None:
                d["reason"] = reason
            for k, v in fields.items():
                d[k] = v

    def mark(self, hosts: Iterable[str], key: str, **fields: Any) -> None:
        """Update a per-host record such as apply/rollback: {'started': ts, 'done': ts, 'ok': bool, ...}."""
        for h in hosts:
            rec = self.hosts[h].get(key) or {}
            rec.update(fields)
            self.hosts[h][key] = rec

    def set_probe_before(self, host: str, figures: Sequence[Figure]) -> None:
        """A host's own figures before the change, kept for its post-gate (across a resume)."""
        self.hosts[host]["probe_before"] = [f.to_dict() for f in figures]

    def probe_before(self, host: str) -> list[Figure]:
        """What set_probe_before() kept for `host` (none: nothing to compare with)."""
        return [Figure.from_dict(host, row) for row in self.hosts[host].get("probe_before") or []]

    def in_doubt(self, key: str = "apply") -> list[str]:
        """Hosts whose apply (or rollback) started but never recorded an end: the playbook may or may not have run."""
        return sorted(h for h, d in self.hosts.items()
                      if (d.get(key) or {}).get("started") and not (d.get(key) or {}).get("done"))


#: What the commands read of a state document, by key: (JSON types, what it is). Keys a run adds as it goes
#: (halted_wave, a step's detail) are read with defaults and need no entry.
_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "run_id": ((str,), "the run id"), "plan": ((str,), "the plan's name"), "plan_file": ((str,), "the plan's path"),
    "inventory": ((str,), "the inventory's path"), "created_at": ((str,), "a UTC time"),
    "updated_at": ((str,), "a UTC time"), "created_by": ((str,), "user@host"), "status": ((str,), "a run status"),
    "phase": ((str,), "rollout or rollback"), "exit_code": ((int, type(None)), "an exit code or null"),
    "settings": ((dict,), "an object"), "waves": ((list,), "a list of waves"), "steps": ((dict,), "an object"),
    "hosts": ((dict,), "an object"), "rollback": ((dict, type(None)), "an object or null"),
}
_WAVE_FIELDS: dict[str, tuple[tuple[type, ...], str]] = {
    "index": ((int,), "an integer"), "name": ((str,), "a string"), "units": ((list,), "a list of host lists"),
    "batches": ((list,), "a list of host lists"), "pause": ((bool,), "true or false"),
    "max_failed_hosts": ((int,), "an integer"), "max_failed_percent": ((int, float, type(None)), "a number or null"),
    "soak_s": ((int, type(None)), "an integer or null"),
}
_JSON_NAMES = {list: "a list", dict: "an object", type(None): "null", str: "a string", bool: "a boolean",
               int: "a number", float: "a number"}


def _is(value: Any, types: tuple[type, ...]) -> bool:
    return isinstance(value, types) and not (isinstance(value, bool) and bool not in types)


def _shape_problems(doc: documents.Document) -> list[Problem]:
    """Every place a state document lacks what the commands read, by file, line and JSON path."""
    data = doc.data
    if not isinstance(data, dict):
        return [doc.problem((), f"not a rollout state: the file holds {_JSON_NAMES.get(type(data), 'a value')}, "
                                "not an object")]
    if data.get("kind") != "RolloutState":
        return [doc.problem(("kind",), "not a rollout state file (kind is not RolloutState)")]
    problems: list[Problem] = []

    def check(path: tuple[Any, ...], obj: dict[str, Any], fields: Mapping[str, tuple[tuple[type, ...], str]]) -> None:
        missing = [key for key in fields if key not in obj]
        if missing:
            problems.append(doc.problem(path, f"{', '.join(map(repr, missing))} missing: not a whole rollout state"))
        for key, (types, what) in fields.items():
            if key in obj and not _is(obj[key], types):
                problems.append(doc.problem(path + (key,), f"{key!r} must be {what}, not "
                                                           f"{_JSON_NAMES.get(type(obj[key]), 'that')}"))

    check((), data, _FIELDS)
    if problems:
        return problems
    if data["status"] not in EXIT_BY_STATUS:
        problems.append(doc.problem(("status",), f"unknown run status {data['status']!r}; one of "
                                                 f"{', '.join(EXIT_BY_STATUS)}"))
    for i, wave in enumerate(data["waves"]):
        if not isinstance(wave, dict):
            problems.append(doc.problem(("waves", i), "a wave must be an object"))
        else:
            check(("waves", i), wave, _WAVE_FIELDS)
    for name, host in data["hosts"].items():
        if not isinstance(host, dict):
            problems.append(doc.problem(("hosts", name), "a host's record must be an object"))
            continue
        check(("hosts", name), host, {"wave": ((int,), "the index of its wave"), "state": ((str,), "a host state")})
        if _is(host.get("wave"), (int,)) and not 0 <= host["wave"] < len(data["waves"]):
            problems.append(doc.problem(("hosts", name, "wave"), f"wave {host['wave']} does not exist "
                                                                 f"({len(data['waves'])} wave(s))"))
    for sid, step in data["steps"].items():
        if not isinstance(step, dict) or not isinstance(step.get("status"), str):
            problems.append(doc.problem(("steps", sid), "a step must be an object with a status"))
    return problems


def list_runs(runs_dir: Path) -> list[RunState]:
    """Every run under runs_dir, oldest first (run ids sort by time); unreadable ones are skipped."""
    out: list[RunState] = []
    if not Path(runs_dir).is_dir():
        return out
    for d in sorted(Path(runs_dir).iterdir()):
        if RolloutStore(d).state_path.is_file():
            try:
                out.append(RunState.load(d))
            except InputError:
                continue
    return out


def find_run(runs_dir: Path, run: str) -> RunState:
    """A run by id, by path, or 'last' (the newest); exit 2 when a symbolic link was planted inside its directory
    (resume, rollback and abort write there, status reads it: none of them follows one elsewhere)."""
    state = _find_run(runs_dir, run)
    refuse_links_in(state.dir)
    return state


def _find_run(runs_dir: Path, run: str) -> RunState:
    runs_dir = Path(runs_dir)
    if run == "last":
        runs = list_runs(runs_dir)
        if not runs:
            raise InputError(Problem("no rollout runs yet", str(runs_dir)))
        return runs[-1]
    candidate = Path(run)
    if RolloutStore(candidate).state_path.is_file():
        return RunState.load(candidate)
    if "/" not in run and RolloutStore(runs_dir / run).state_path.is_file():
        return RunState.load(runs_dir / run)
    known = [r.run_id for r in list_runs(runs_dir)][-5:]
    hint = f"; recent runs: {', '.join(known)}" if known else ""
    raise InputError(Problem(f"no rollout run {run!r} in {runs_dir}{hint}", str(runs_dir)))
