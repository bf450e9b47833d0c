"""Runbooks: load an incident procedure (file:line errors) and run its steps in order, asking before each mutating
step, recording every decision, and ending with an evidence bundle (tar.gz of decisions, reports, raw outputs)."""

from __future__ import annotations

import difflib
import json
import re
import tarfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judging import baseline as baseline_mod
from .. import breaker as breaker_mod
from ..judging import catalog as catalog_mod
from .. import documents
from .. import inventory as inventory_mod
from .. import slurm
from ..judging.catalog import Check
from ..errors import InputError, Problem, WriteError
from ..fsutil import atomic_write_text
from ..inventory import Inventory
from ..model import ExitCode
from ..paths import state_dir
from ..timeutil import utc_now
from . import decisions, lock
from . import state as st
from .decisions import DecisionLog, who
from .gate import Clock, Collect, Proof, RealClock, prove, run_gate, summarize, wait
from .gates.base import catalog_matches
from .plan import parse_duration, resolve_playbook
from .playbook import PlaybookResult, run_playbook
from .store import RolloutStore, attempt_dir

ACTIONS = ("playbook", "validate", "rollback", "wait", "confirm")
#: Every key a step may have: its name, its one action, and what qualifies it.
STEP_KEYS = ("name", *ACTIONS, "hosts", "on_failure", "vars", "breaker")
MUTATING = ("playbook", "rollback")
FAILED_HOSTS = "@failed"


@dataclass(frozen=True)
class Validate:
    baseline: Path
    checks: tuple[str, ...] = ()
    fail_on: str = "critical"
    retry_interval_s: int = 10
    timeout_s: int = 0
    fabric_plan: Path | None = None  # each attempt also diffs the fabric against this cabling plan
    #: The plan file not found, as a problem with its place in the runbook: refused when a run starts (a lab's plan
    #: exists once the lab is up, like the runbook's inventory), not when the runbook is linted.
    fabric_plan_missing: Problem | None = None
    fabric_window_s: float = 5.0
    probes: tuple[str, ...] = ()  # and runs these probes on the step's hosts


@dataclass(frozen=True)
class Step:
    index: int
    name: str
    kind: str
    on_failure: str = "stop"
    hosts: str | None = None
    playbook: Path | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)
    validate: Validate | None = None
    run: str | None = None  # rollback: run id or 'last'
    wait_s: int | None = None
    question: str | None = None
    breaker: breaker_mod.Limit | None = None  # a drain step drains only within the Slurm drain breaker


@dataclass(frozen=True)
class Runbook:
    name: str
    source: Path
    steps: tuple[Step, ...]
    description: str = ""
    inventory: Path | None = None
    target: str | None = None
    vars: Mapping[str, Any] = field(default_factory=dict)


def from_document(doc: documents.Document, catalog: Sequence[Check] | None = None) -> Runbook:
    """Validate a runbook (one action per step first, for a plain message; then the schema; then files and checks)."""
    d = doc.data
    problems: list[Problem] = []
    steps_raw = ((d or {}).get("spec") or {}).get("steps") if isinstance(d, dict) else None
    if isinstance(steps_raw, list):
        for i, s in enumerate(steps_raw):
            if isinstance(s, dict):
                found = [a for a in ACTIONS if a in s]
                if len(found) != 1:
                    got = f"it has {', '.join(found)}" if found else "it has none"
                    problems.append(doc.problem(("spec", "steps", i), f"a step needs exactly one of "
                                                                      f"{', '.join(ACTIONS)}; {got}"))
                for key in sorted(k for k in s if k not in STEP_KEYS):  # the typo that left it with none, named
                    hint = difflib.get_close_matches(str(key), STEP_KEYS, n=1)
                    tip = f"; did you mean {hint[0]!r}?" if hint else f"; allowed: {', '.join(STEP_KEYS)}"
                    problems.append(doc.problem(("spec", "steps", i, key), f"unknown key {key!r}{tip}"))
    if problems:
        raise InputError(problems)
    documents.validate(doc, "runbook")
    if catalog is None:
        catalog = catalog_mod.load()
    base = Path(doc.file).resolve().parent
    spec = d["spec"]
    steps: list[Step] = []
    for i, s in enumerate(spec["steps"]):
        at = ("spec", "steps", i)
        kind = next(a for a in ACTIONS if a in s)
        common = {"index": i, "name": s["name"], "kind": kind, "on_failure": s.get("on_failure", "stop"),
                  "hosts": s.get("hosts")}
        if kind == "playbook":
            path: Path | None = None
            try:
                path = resolve_playbook(s["playbook"], base)
            except ValueError as exc:
                problems.append(doc.problem(at + ("playbook",), str(exc)))
            limit = None
            if "breaker" in s:
                try:
                    limit = breaker_mod.parse_limit(str(s["breaker"]), "breaker")
                except InputError as exc:
                    problems.append(doc.problem(at + ("breaker",), exc.problems[0].message))
            steps.append(Step(**common, playbook=path, vars=dict(s.get("vars") or {}), breaker=limit))
        elif kind == "validate":
            v = s["validate"]
            bpath = (base / v["baseline"]).resolve()
            if not bpath.is_file():
                problems.append(doc.problem(at + ("validate", "baseline"), f"baseline {v['baseline']!r} not found"))
            else:
                try:
                    baseline_mod.load(bpath)
                except InputError as exc:
                    problems.extend(exc.problems)
            for j, pat in enumerate(v.get("checks") or ()):
                if not catalog_matches(pat, catalog):
                    problems.append(doc.problem(at + ("validate", "checks", j), f"{pat!r} matches no check id or family"))
            fpath = (base / v["fabric_plan"]).resolve() if "fabric_plan" in v else None
            missing = (doc.problem(at + ("validate", "fabric_plan"), f"cabling plan {v['fabric_plan']!r} not found")
                       if fpath is not None and not fpath.is_file() else None)
            from ..probes.spec import PROBES

            for j, pid in enumerate(v.get("probes") or ()):
                if pid not in PROBES:
                    problems.append(doc.problem(at + ("validate", "probes", j), f"unknown probe {pid!r}; probes: "
                                                f"{', '.join(PROBES)}"))
            steps.append(Step(**common, validate=Validate(
                bpath, tuple(v.get("checks") or ()), v.get("fail_on", "critical"),
                parse_duration(v.get("retry_interval", 10)), parse_duration(v.get("timeout", 0)), fabric_plan=fpath,
                fabric_plan_missing=missing, fabric_window_s=parse_duration(v.get("fabric_window", 5)),
                probes=tuple(v.get("probes") or ()))))
        elif kind == "rollback":
            steps.append(Step(**common, run=s["rollback"]["run"]))
        elif kind == "wait":
            steps.append(Step(**common, wait_s=parse_duration(s["wait"])))
        else:
            steps.append(Step(**common, question=s["confirm"]))
        if "breaker" in s and kind != "playbook":
            problems.append(doc.problem(at + ("breaker",), f"a {kind} step drains nothing; remove breaker"))
        if s.get("hosts") and kind in ("rollback", "wait", "confirm"):
            problems.append(doc.problem(at + ("hosts",), f"a {kind} step acts on no hosts; remove hosts"))
    if problems:
        raise InputError(problems)
    meta = d["metadata"]
    return Runbook(name=meta["name"], description=meta.get("description", ""), source=Path(doc.file).resolve(),
                   steps=tuple(steps), inventory=(base / spec["inventory"]).resolve() if "inventory" in spec else None,
                   target=spec.get("target"), vars=dict(spec.get("vars") or {}))


def load(path: Path, catalog: Sequence[Check] | None = None) -> Runbook:
    return from_document(documents.load_yaml(Path(path)), catalog)


# ---------------------------------------------------------------------------------------------- run


Ask = Callable[[str], bool]
CollectFactory = Callable[[Inventory, Sequence[Check], str, str, str], Collect]


@dataclass
class Session:
    """One run of a runbook: where it writes, how it asks, and the seams tests replace."""

    runbook: Runbook
    inventory_path: str
    inventory: Inventory
    runs_dir: Path
    yes: bool
    ask: Ask
    limit: str | None = None
    collect_factory: CollectFactory | None = None
    run_playbook: Callable[..., PlaybookResult] = run_playbook
    progress: Callable[[str], None] = lambda _m: None
    clock: Clock = field(default_factory=RealClock)


class RunbookRun:
    def __init__(self, s: Session):
        self.s = s
        self.rb = s.runbook
        self.target = targets(s.runbook, s.inventory, s.limit)  # exit 2 before the run directory exists
        self.plans: dict[int, Any] = {}  # step index -> its cabling plan, read now (exit 2 before any step)
        for step in self.rb.steps:
            if step.validate is not None:
                baseline_mod.check_groups(baseline_mod.load(step.validate.baseline), s.inventory.groups,
                                          s.inventory_path)
                if step.validate.fabric_plan_missing is not None:
                    raise InputError(step.validate.fabric_plan_missing)
                if step.validate.fabric_plan is not None:
                    from ..subnet.plan import load_plan

                    self.plans[step.index] = load_plan(step.validate.fabric_plan, groups=s.inventory.groups)
        self.run_id = st.new_run_id(f"runbook-{self.rb.name}")
        self.dir = Path(s.runs_dir) / self.run_id
        self.dir.mkdir(mode=0o700, parents=True)
        self.log = DecisionLog(self.dir, self.run_id)
        self.failed: list[str] = []  # hosts that failed the latest validate step
        self.related_runs: list[Path] = []
        self.step_code: int = ExitCode.CHECK_FAILED  # exit code a failed step stands for
        self.record: dict[str, Any] = {"apiVersion": "fabricproof/v1", "kind": "RunbookRun", "run_id": self.run_id,
                                       "runbook": self.rb.name, "file": str(self.rb.source),
                                       "inventory": s.inventory_path, "started_at": utc_now(), "by": who(),
                                       "yes": s.yes, "steps": []}
        self._save()

    def _save(self) -> None:
        atomic_write_text(RolloutStore(self.dir).runbook_path, json.dumps(self.record, indent=2) + "\n", mode=0o600)

    def _hosts(self, step: Step) -> list[str]:
        target = self.target
        if step.hosts == FAILED_HOSTS:
            return [h for h in self.failed if h in target]
        if step.hosts:
            chosen = set(inventory_mod.limit(self.s.inventory, step.hosts))
            return [h for h in target if h in chosen]
        return target

    def _confirm(self, step: Step, question: str) -> bool:
        if self.s.yes:
            self.log.record("CONFIRMED", f"{question} (--yes)", step=f"{step.index + 1}")
            return True
        answer = self.s.ask(question)
        self.log.record("CONFIRMED" if answer else "DECLINED", question, step=f"{step.index + 1}")
        return answer

    def run(self) -> int:
        self.log.record("RUNBOOK_START", f"runbook {self.rb.name}: {len(self.rb.steps)} step(s)"
                        + (f", --limit {self.s.limit}" if self.s.limit else ""), evidence=[self.rb.source])
        code: int = ExitCode.OK
        try:
            for step in self.rb.steps:
                self.s.progress(f"step {step.index + 1}/{len(self.rb.steps)}: {step.name}")
                self.step_code = ExitCode.CHECK_FAILED
                outcome, why, evidence = self._step(step)
                self.record["steps"].append({"index": step.index + 1, "name": step.name, "kind": step.kind,
                                             "outcome": outcome, "why": why, "evidence": evidence, "at": utc_now()})
                self._save()
                self.log.record(f"STEP_{outcome.upper()}", f"{step.name}: {why}", step=f"{step.index + 1}",
                                evidence=evidence)
                self.s.progress(f"  {outcome}: {why}")
                if outcome == "declined":
                    code = ExitCode.HALTED
                    break
                if outcome == "failed":
                    code = self.step_code
                    if step.on_failure == "stop":
                        break
        except InputError:
            code = ExitCode.INVALID_INPUT  # the log ends with the exit the operator sees, never a false 0
            raise
        except KeyboardInterrupt:
            code = ExitCode.INTERRUPTED
            raise
        except WriteError:
            code = ExitCode.WRITE_FAILED
            raise
        except Exception:
            code = ExitCode.CHECK_FAILED
            raise
        finally:
            self.record["ended_at"] = utc_now()
            self.record["exit_code"] = int(code)
            self._save()
            self.log.record("RUNBOOK_END", f"exit {int(code)}", evidence=[RolloutStore(self.dir).bundle_path])
            bundle(self.dir, self.related_runs)
        return code

    def _step(self, step: Step) -> tuple[str, str, list[str]]:
        if step.kind == "wait":
            assert step.wait_s is not None
            wait(step.wait_s, self.s.clock, lambda: False)
            return "done", f"waited {step.wait_s}s", []
        if step.kind == "confirm":
            assert step.question is not None
            return ("done", "confirmed", []) if self._confirm(step, step.question) else ("declined", "declined", [])
        if step.kind == "validate":
            return self._validate(step)
        if step.kind == "rollback":
            return self._rollback(step)
        return self._playbook(step)

    def _validate(self, step: Step) -> tuple[str, str, list[str]]:
        v = step.validate
        assert v is not None
        hosts = self._hosts(step)
        if not hosts:
            return "skipped", "no hosts to validate", []
        catalog = catalog_mod.load()
        checks = catalog_mod.select(catalog, list(v.checks)) if v.checks else catalog
        base = baseline_mod.load(v.baseline)
        collect = (self.s.collect_factory or _default_collect)(self.s.inventory, checks, "ssh", self.run_id,
                                                                self.s.inventory_path)
        if v.probes or v.fabric_plan is not None:
            collect = _after(collect, self.s.inventory, "ssh", self.s.inventory_path, v, base,
                             self.plans.get(step.index))
        out = RolloutStore(self.dir).runbook_step_dir(step.index + 1, _slug(step.name))

        def attempt(n: int) -> Proof:
            return prove(hosts, base, checks, collect, attempt_dir(out, n), groups=self.s.inventory.groups_of(),
                         fail_on=v.fail_on, formats=("json", "markdown"), run_id=self.run_id)

        result = run_gate(step.name, hosts, attempt, retry_interval_s=v.retry_interval_s, timeout_s=v.timeout_s,
                          clock=self.s.clock)
        self.failed = sorted(result.failed)
        evidence = list(result.evidence)
        if result.failed:
            listing = summarize([f"{h}: {r}" for h, r in result.failed.items()], 3)
            return "failed", f"{len(result.failed)} of {len(hosts)} host(s) failed: {listing}", evidence
        return "done", f"{len(hosts)} host(s) proven on {v.baseline.name}", evidence

    def _playbook(self, step: Step) -> tuple[str, str, list[str]]:
        assert step.playbook is not None
        hosts = self._hosts(step)
        if not hosts:
            return "skipped", "no hosts" + (" failed the last validate step" if step.hosts == FAILED_HOSTS else ""), []
        held: list[str] = []
        if step.breaker is not None:
            try:
                hosts, held, said = _within_breaker(hosts, step.breaker, time.time())
            except slurm.SlurmError as exc:
                return "failed", f"breaker: {exc}; nothing drained", []
            if held:
                self.log.record("BREAKER_OPEN", said, step=f"{step.index + 1}", hosts=held)
                self.s.progress(f"  {said}")
            if not hosts:
                return "failed", said, []
        shown = ", ".join(hosts[:5]) + (f" (+{len(hosts) - 5})" if len(hosts) > 5 else "")
        if not self._confirm(step, f"run {step.playbook.name} on {len(hosts)} host(s): {shown}?"):
            return "declined", f"operator declined {step.playbook.name}", []
        locks = lock.acquire(state_dir(), self.run_id, hosts, _reservations(self.s.runs_dir))
        try:
            extravars = {**self.rb.vars, **step.vars, "fabricproof_run_id": self.run_id,
                         "fabricproof_change": f"runbook-{self.rb.name}",
                         "fabricproof_reason": f"fabricproof: runbook {self.rb.name} run {self.run_id}"}
            res = self.s.run_playbook(step.playbook, inventory=self.s.inventory_path, hosts=hosts, extravars=extravars,
                                      private_dir=RolloutStore(self.dir).ansible_dir, ident=f"{self.run_id}_step{step.index + 1}")
        finally:
            locks.release(finished=True)  # a runbook step holds its hosts only while it runs
        if res.failed:
            listing = summarize([f"{h}: {r}" for h, r in res.failed.items()], 3)
            return "failed", f"{step.playbook.name}: {len(res.failed)} of {len(hosts)} failed: {listing}", [res.artifacts]
        if held:  # the breaker kept hosts the step was for in service: not done
            return "failed", (f"{step.playbook.name} ok on {len(hosts)} host(s); breaker open: "
                              f"{summarize(held, 5)} left in service"), [res.artifacts]
        return "done", f"{step.playbook.name} ok on {len(hosts)} host(s)", [res.artifacts]

    def _rollback(self, step: Step) -> tuple[str, str, list[str]]:
        from . import runs

        assert step.run is not None
        target = st.find_run(self.s.runs_dir, step.run)
        if not self._confirm(step, f"roll back rollout run {target.run_id} ({target.data['plan']}, {target.status})?"):
            return "declined", "operator declined the rollback", []
        self.related_runs.append(target.dir)
        seams = runs.Seams(collect_factory=self.s.collect_factory, run_playbook=self.s.run_playbook, clock=self.s.clock)
        code, state = runs.rollback(self.s.runs_dir, target.run_id, limit=self.s.limit, progress=self.s.progress,
                                    seams=seams)
        evidence = [str(decisions.path_of(state.dir)), str(RolloutStore(state.dir).state_path)]
        if code in (ExitCode.OK, ExitCode.ROLLED_BACK):
            return "done", f"run {target.run_id}: {state.status}", evidence
        self.step_code = code  # 5: hosts not proven after the rollback wait for an operator
        return "failed", f"run {target.run_id}: {state.status} (exit {int(code)})", evidence


def _within_breaker(hosts: list[str], limit: breaker_mod.Limit, now: float) -> tuple[list[str], list[str], str]:
    """The hosts the drain breaker lets this step drain (in order), those it keeps in service, and what it said:
    judged from Slurm's node list as `check --local --drain` judges it (scontrol runs here: this machine needs the
    cluster's slurm.conf), over the partitions of the step's hosts."""
    nodes = breaker_mod.read()
    wanted = set(hosts)
    partitions = {p for n in nodes if n.name in wanted for p in n.partitions}
    verdict = breaker_mod.judge(breaker_mod.in_partitions(nodes, partitions), limit,
                                breaker_mod.parse_window(breaker_mod.DEFAULT_WINDOW), now)
    room = 0 if verdict.open else max(0, verdict.allowed - len(verdict.drains))
    allowed, held = hosts[:room], hosts[room:]
    if not held:
        return allowed, held, ""
    said = f"would drain: breaker open, {verdict.count_words()}; {len(held)} host(s) left in service: {summarize(held, 5)}"
    problem = breaker_mod.latch(verdict, held[0], now)
    return allowed, held, said + (f" ({problem})" if problem else "")


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40] or "step"


def targets(runbook: Runbook, inventory: Inventory, limit: str | None) -> list[str]:
    """The hosts a runbook acts on: its target, narrowed by --limit; exit 2 when nothing is left."""
    hosts = inventory_mod.limit(inventory, runbook.target)
    if limit:
        keep = set(inventory_mod.limit(inventory, limit))
        hosts = [h for h in hosts if h in keep]
        if not hosts:
            raise InputError(Problem(f"--limit {limit!r} leaves no host of the runbook's target {runbook.target!r}",
                                     str(runbook.source)))
    return hosts


def _reservations(runs_dir: Path) -> list[tuple[str, str, list[str]]]:
    from .runs import reservations

    return reservations(runs_dir)


def _default_collect(inventory: Inventory, checks: Sequence[Check], via: str, run_id: str, inv_path: str) -> Collect:
    from .runs import live_collect

    return live_collect(inventory, checks, via, run_id, inv_path)


def _after(collect: Collect, inventory: Inventory, via: str, inv_path: str, v: Validate,
           base: baseline_mod.Baseline, plan: Any) -> Collect:
    """A validate step's collection followed by its probes and its fabric diff (the two steps validate --probes and
    --fabric-plan add), so its checks judge both."""
    from .runs import fabric_after, probes_after

    if v.probes:
        collect = probes_after(collect, inventory, via, inv_path, v.probes, base)
    if plan is not None:
        collect = fabric_after(collect, inventory, via, inv_path, plan, v.fabric_window_s)
    return collect


def bundle(run_dir: Path, related: Sequence[Path] = ()) -> Path:
    """runs/<id>/evidence.tar.gz: everything the run wrote (decisions, reports, raw outputs, playbook artifacts) and
    the decisions and state of rollout runs it acted on (under rollouts/<run id>/)."""
    out = RolloutStore(run_dir).bundle_path
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, "w:gz") as tar:
        for path in sorted(Path(run_dir).rglob("*")):
            if path.is_file() and path not in (out, tmp):
                tar.add(path, arcname=str(Path(run_dir.name) / path.relative_to(run_dir)), recursive=False)
        for other in related:
            for path in [*decisions.files(other), RolloutStore(other).state_path]:
                if path.is_file():
                    tar.add(path, arcname=str(Path(run_dir.name) / "rollouts" / other.name / path.name))
    tmp.chmod(0o600)
    tmp.replace(out)
    return out
