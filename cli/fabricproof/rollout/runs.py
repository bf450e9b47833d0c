"""Start, resume, roll back and abort rollout runs: plan + inventory -> waves, locks, state, then the executor."""

from __future__ import annotations

import hashlib
import os
import signal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..judging import baseline as baseline_mod
from ..judging import catalog as catalog_mod
from .. import inventory as inventory_mod
from .. import transport
from ..judging.catalog import Check
from ..collect import DEFAULT_FORKS, DEFAULT_HOST_TIMEOUT_S, check_settings
from ..errors import InputError, Problem
from ..inventory import Inventory
from ..model import ExitCode
from ..paths import state_dir
from ..runstore import check_host_names
from . import lock
from . import plan as plan_mod
from . import state as st
from .decisions import DecisionLog, who
from .executor import (
    Context,
    Executor,
    RunPlaybook,
    snapshot_inputs,
    start_rollback,
)
from .gate import Clock, Collect, Collected, RealClock
from .gates.base import Reach
from .plan import Plan, Wave
from .playbook import run_playbook
from .stepid import PAUSE, StepId
from .store import INPUTS_DIR, RolloutStore

Progress = Callable[[str], None]
#: The steps of a halted wave that resume runs again: its proofs and its verdicts (not its probes' pre-change figures).
RE_PROVEN = ("pre_gate", "pre_verdict", "post_gate", "soak", "decide")


def sha256_file(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def inventory_path(plan: Plan, override: str | None) -> str:
    if override:
        return str(Path(override).resolve()) if Path(override).exists() else override
    if plan.inventory is None:
        raise InputError(Problem("the plan names no spec.inventory: give one with -i INVENTORY", str(plan.source)))
    return str(plan.inventory)


def select_checks(patterns: Sequence[str], catalog: Sequence[Check]) -> list[Check]:
    return catalog_mod.select(catalog, list(patterns)) if patterns else list(catalog)


def live_collect(inventory: Inventory, checks: Sequence[Check], via: str, run_id: str, inv_path: str,
                 forks: int = DEFAULT_FORKS, host_timeout_s: float = DEFAULT_HOST_TIMEOUT_S) -> Collect:
    """Collection over a remote transport (SSH, Ansible) into each proof's evidence directory, running only the
    collectors these checks read (their own, and those providing the facts they compare with or apply by), each
    host bounded by `host_timeout_s` (the plan's gates.host_timeout_s)."""
    from ..collect import collect as collect_fleet
    from ..judging.projection import collected_for

    # A probe's check (perf.*) reads facts only the probe runner makes, behind the idle guard (probes_after): its
    # collector never runs here as a plain command.
    collectors = collected_for(checks)
    options = transport.configure(via, inventory_path=inv_path)

    def collect(hosts: Sequence[str], evidence_dir: Path) -> Collected:
        # Each proof is a run of its own (the Ansible transport keeps its runner artifacts with its evidence);
        # its id names the rollout run and the proof, so runner artifacts of two proofs never mix.
        res = collect_fleet([inventory.hosts[h] for h in hosts], evidence_dir, via=via, options=options,
                            collectors=collectors, forks=forks, inventory=inv_path, host_timeout_s=host_timeout_s,
                            run_id=f"{run_id}-{evidence_dir.parent.name}-{evidence_dir.name}")
        return Collected(res.facts_by_host, res.collection_errors)

    return collect


def probes_after(collect: Collect, inventory: Inventory, via: str, inv_path: str, probes: Sequence[str],
                 baseline: baseline_mod.Baseline) -> Collect:
    """A collection followed by the probes on the hosts it collected (only idle ones), their facts merged in (into
    the proof's evidence directory, probes/); a host the probes could not reach is not collected."""
    from ..probes.runner import ProbeSettings, merged, run_probes
    from ..runstore import RunStore

    options = transport.configure(via, inventory_path=inv_path)

    def wrapped(hosts: Sequence[str], evidence_dir: Path) -> Collected:
        got = collect(hosts, evidence_dir)
        if not got.facts:
            return got
        run = run_probes([inventory.hosts[h] for h in got.facts], RunStore(evidence_dir).probes_root, list(probes),
                         values=lambda h: baseline.for_groups(h.groups), facts=got.facts, via=via, options=options,
                         settings=ProbeSettings())
        return Collected(merged(got.facts, run), {**got.errors, **{h: f"probes: {e}" for h, e in run.errors.items()}})

    return wrapped


def fabric_after(collect: Collect, inventory: Inventory, via: str, inv_path: str, plan: Any,
                 window_s: float) -> Collect:
    """A collection followed by the fabric step: the fabric read once from the vantage into the proof's evidence
    directory (fabric/), diffed against `plan`, each collected host's /subnet facts merged in."""
    from ..subnet.step import merged, prove

    options = transport.configure(via, inventory_path=inv_path)

    def wrapped(hosts: Sequence[str], evidence_dir: Path) -> Collected:
        got = collect(hosts, evidence_dir)
        if not got.facts:
            return got
        proof = prove(plan, list(inventory.hosts.values()), got.facts, evidence_dir, via=via,
                      options=options, window_s=window_s, run_id=f"fabric-{evidence_dir.name}")
        return Collected(merged(got.facts, proof), got.errors)

    return wrapped


@dataclass(frozen=True)
class Seams:
    """What a run talks to: collection, playbooks and the clock. Tests replace them; defaults are the real ones."""

    #: (inventory, checks, via, run id, inventory path, forks, host timeout)
    collect_factory: Callable[..., Collect] | None = None
    run_playbook: RunPlaybook | None = None
    clock: Clock | None = None
    #: A gate kind's live part by its name, in place of the kind's own `live`: (Reach, the kind's spec) -> seam.
    gates: Mapping[str, Callable[[Reach, Any], Any]] = field(default_factory=dict)


@dataclass
class Prepared:
    plan: Plan
    inventory_path: str
    inventory: Inventory
    waves: list[Wave]
    catalog: list[Check]


def prepare(plan_file: Path, inventory_override: str | None) -> Prepared:
    """Load and validate everything a run or a dry run needs; touches nothing (InputError -> exit 2)."""
    catalog = catalog_mod.load()
    plan = plan_mod.load(plan_file, catalog)
    inv_path = inventory_path(plan, inventory_override)
    inv = inventory_mod.load(inv_path)
    for path in dict.fromkeys((plan.before, plan.after)):
        baseline_mod.check_groups(baseline_mod.load(path), inv.groups, inv_path)
    waves = plan_mod.compute_waves(plan, inv)
    return Prepared(plan, inv_path, inv, waves, catalog)


def preflight(prep: Prepared, via: str) -> None:
    """What every wave's gates will ask of its hosts, checked for all waves before the first is touched (exit 2,
    nothing changed): a host the collection cannot name or whose connection settings the transport cannot use, in
    wave 3, must not surface after wave 1 was changed. Names the wave and the host; the first of them, and how many."""
    check_host_names([h for w in prep.waves for h in w.hosts])
    k = transport.kind(via)
    problems = []
    for w in prep.waves:
        for h in w.hosts:
            try:
                k.check_host(h, prep.inventory.hosts[h].vars)
            except ValueError as exc:
                problems.append(f"wave {w.index + 1} ({w.name}), host {h!r}: --via {via} cannot use its connection "
                                f"settings: {exc}")
    if problems:
        more = f" (and {len(problems) - 1} more host(s))" if len(problems) > 1 else ""
        raise InputError(Problem(f"{problems[0]}{more}; every wave is checked before any is changed: nothing was "
                                 f"changed", prep.inventory_path))


def context(prep: Prepared, run_id: str, via: str, forks: int, progress: Progress, seams: Seams | None = None) -> Context:
    seams = seams or Seams()
    plan = prep.plan
    gate_checks = select_checks(plan.gates.checks, prep.catalog)
    soak_checks = select_checks(plan.soak.checks, prep.catalog) if plan.soak else []
    reach = Reach(prep.inventory, via, prep.inventory_path, forks)
    live = {kind.name: (seams.gates.get(kind.name) or kind.live)(reach, spec) for kind, spec in plan.gates.active()}
    factory = seams.collect_factory or live_collect
    collect = factory(prep.inventory, list(gate_checks) + list(soak_checks), via, run_id, prep.inventory_path,
                      forks, plan.gates.host_timeout_s)
    return Context(plan=plan, inventory_path=prep.inventory_path, groups=prep.inventory.groups_of(),
                   before=baseline_mod.load(plan.before), after=baseline_mod.load(plan.after),
                   gate_checks=gate_checks, soak_checks=soak_checks, collect=collect,
                   run_playbook=seams.run_playbook or run_playbook, clock=seams.clock or RealClock(),
                   progress=progress, forks=forks,
                   gate_seams={name: seam for name, seam in live.items() if seam is not None})


def reservations(runs_dir: Path) -> list[tuple[str, str, list[str]]]:
    """(run id, status, hosts it may have touched) of every run that stopped unfinished."""
    out = []
    for run in st.list_runs(runs_dir):
        if run.status in st.FINISHED:
            continue
        out.append((run.run_id, run.status, sorted(run.hosts)))
    return out


def ensure_runs_dir(runs_dir: Path) -> Path:
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    return runs_dir


def _drive(state: st.RunState, ctx: Context, locks: lock.HostLocks) -> int:
    log = DecisionLog(state.dir, state.run_id)
    for stale in locks.stale:
        log.record("LOCK_TAKEN_OVER", f"lock of run {stale.get('run_id')} (pid {stale.get('pid')}) was stale: "
                   f"{stale['why']}", hosts=[stale.get("host", "")])
    with lock.run_lock(state.dir, state.run_id):
        return Executor(ctx, state, log).run()


def start(plan_file: Path, *, runs_dir: Path, inventory_override: str | None = None, via: str = "ssh",
          forks: int = DEFAULT_FORKS, progress: Progress = lambda _m: None,
          seams: Seams | None = None) -> tuple[int, str]:
    """Validate, lock the hosts, create the run, drive it. Returns (exit code, run id). `via` and `forks` are how
    the gates collect; `forks` also caps the hosts a playbook changes at once within a batch."""
    transport.kind(via, (transport.Reach.REMOTE,))
    check_settings(forks, 1, None)
    prep = prepare(plan_file, inventory_override)
    preflight(prep, via)
    runs_dir = ensure_runs_dir(runs_dir)
    run_id = st.new_run_id(prep.plan.name)
    hosts = [h for w in prep.waves for h in w.hosts]
    locks = lock.acquire(state_dir(), run_id, hosts, reservations(runs_dir), run_dir=runs_dir / run_id)
    state: st.RunState | None = None
    try:
        ctx = context(prep, run_id, via, forks, progress, seams)
        state = st.RunState.create(runs_dir / run_id, run_id=run_id, plan_name=prep.plan.name,
                                   plan_file=str(prep.plan.source), inventory=prep.inventory_path, waves=prep.waves,
                                   who=who(), settings={"via": via, "forks": forks, "plan_sha256": sha256_file(prep.plan.source),
                                                        "on_failure": prep.plan.on_failure})
        inputs = snapshot_inputs(state.dir, prep.plan)
        DecisionLog(state.dir, run_id).record(
            "START", f"plan {prep.plan.name}: {len(prep.waves)} wave(s), {len(hosts)} host(s), on failure "
                     f"{prep.plan.on_failure}" + (f"; ticket {prep.plan.ticket}" if prep.plan.ticket else ""),
            hosts=hosts, evidence=list(inputs.values()))
        progress(f"run {run_id} ({state.dir})")
        return _drive(state, ctx, locks), run_id
    finally:
        locks.release(finished=state is None or state.status in st.FINISHED)


def _reopen(runs_dir: Path, run: str, progress: Progress,
            seams: Seams | None) -> tuple[st.RunState, Context, lock.HostLocks, Inventory]:
    """Load a run, check its plan did not change, and lock its hosts again (with the inventory it read)."""
    state = st.find_run(runs_dir, run)
    plan_file = Path(state.data["plan_file"])
    if not plan_file.is_file():
        raise InputError(Problem(f"the run's plan file is gone; restore it (a copy is in {INPUTS_DIR}/plan.yaml)",
                                 str(plan_file)))
    if sha256_file(plan_file) != state.data["settings"].get("plan_sha256"):
        raise InputError(Problem(f"the plan changed since run {state.run_id} started; restore it (the original is "
                                 f"in {RolloutStore(state.dir).inputs_path}) or start a new run", str(plan_file)))
    catalog = catalog_mod.load()
    plan = plan_mod.load(plan_file, catalog)
    inv = inventory_mod.load(state.data["inventory"])
    prep = Prepared(plan, state.data["inventory"], inv, state.waves, catalog)
    locks = lock.acquire(state_dir(), state.run_id, sorted(state.hosts), reservations(runs_dir), run_dir=state.dir)
    try:
        settings = state.data["settings"]
        ctx = context(prep, state.run_id, settings.get("via", "ssh"), settings.get("forks", DEFAULT_FORKS), progress,
                      seams)
    except BaseException:
        locks.release()
        raise
    return state, ctx, locks, inv


def resume(runs_dir: Path, run: str, *, progress: Progress = lambda _m: None, seams: Seams | None = None) -> int:
    """Continue a run that was interrupted, paused or halted."""
    state = st.find_run(runs_dir, run)
    if state.status in (st.DONE, st.ROLLED_BACK):
        progress(f"run {state.run_id} is {state.status}: nothing to resume")
        return ExitCode.OK
    if state.status == st.ABORTED:
        raise InputError(Problem(f"run {state.run_id} was aborted; roll it back with `fabricproof rollback "
                                 f"{state.run_id}` or start a new run", str(state.dir)))
    state, ctx, locks, _inv = _reopen(runs_dir, run, progress, seams)
    try:
        log = DecisionLog(state.dir, state.run_id)
        why = f"resumed from {state.status}"
        if state.status == st.PAUSED:
            pause = next((sid for s in state.data["steps"] if (sid := StepId.parse(s)) is not None
                          and sid.kind == PAUSE and sid.rollback is None
                          and state.data["steps"][s]["status"] == "started"), None)
            if pause:
                state.finish(pause, approved_by=who())
                why = f"operator approved the next wave (w{pause.wave})"
        elif state.status == st.HALTED:
            k = state.data.get("halted_wave", 0)
            state.forget(sid for s in list(state.data["steps"]) if (sid := StepId.parse(s)) is not None
                         and sid.rollback is None and sid.wave == k and sid.kind in RE_PROVEN)
            why = f"re-proving halted wave {k + 1} and going on if it passes"
        elif state.status == st.RUNNING:  # we hold its locks, so the process that drove it is gone
            why = "resumed a run whose process died (killed or crashed) while it was running"
        elif state.status == st.ROLLBACK_FAILED:
            why = "resumed after a failed rollback: the remaining steps run; use `fabricproof rollback` to retry"
        in_doubt = state.in_doubt("apply") + state.in_doubt("rollback")
        log.record("RESUME", why + (f"; {len(in_doubt)} host(s) in doubt will be probed before anything is applied"
                                    if in_doubt else ""), hosts=in_doubt)
        state.save()
        return _drive(state, ctx, locks)
    finally:
        locks.release(finished=state.status in st.FINISHED)


def rollback(runs_dir: Path, run: str, *, limit: str | None = None, progress: Progress = lambda _m: None,
             seams: Seams | None = None) -> tuple[int, st.RunState]:
    """Put back the hosts a run changed, newest wave first, and prove the before-baseline on them."""
    state, ctx, locks, inv = _reopen(runs_dir, run, progress, seams)
    try:
        changed = state.hosts_in(*st.CHANGED)
        if limit:  # the inventory _reopen read: Ansible is asked once a process
            chosen = set(inventory_mod.limit(inv, limit))
            changed = [h for h in changed if h in chosen]
        if not changed:
            progress(f"run {state.run_id}: no host matching the limit is changed; nothing to roll back")
            return ExitCode.OK, state
        log = DecisionLog(state.dir, state.run_id)
        run_store = RolloutStore(state.dir)
        if run_store.abort_path.exists():  # an earlier abort must not stop the rollback that cleans up after it
            run_store.abort_path.rename(run_store.set_aside_abort(state.data["updated_at"].replace(":", "")))
        executor = Executor(ctx, state, log)
        start_rollback(executor, changed, reason=f"rollback requested by {who()}"
                                                  + (f" (--limit {limit})" if limit else ""))
        with lock.run_lock(state.dir, state.run_id):
            code = executor.run()
        return code, state
    finally:
        locks.release(finished=state.status in st.FINISHED)


def abort(runs_dir: Path, run: str, reason: str) -> str:
    """Stop a run: signal the process driving it, or mark a stopped run aborted. Returns what was done."""
    state = st.find_run(runs_dir, run)
    if state.status in st.FINISHED:
        raise InputError(Problem(f"run {state.run_id} is already {state.status}", str(state.dir)))
    log = DecisionLog(state.dir, state.run_id)
    RolloutStore(state.dir).abort_path.write_text(f"{who()}: {reason}\n")
    log.record("ABORT", reason or "aborted by an operator", hosts=[])
    owner = lock.run_holder(state.dir)
    if owner and owner.get("pid"):
        try:
            os.kill(int(owner["pid"]), signal.SIGTERM)
        except ProcessLookupError:
            owner = None
    if owner:
        return (f"asked pid {owner['pid']} to stop run {state.run_id} after its current step; "
                "drained hosts stay drained")
    state.set_status(st.ABORTED)
    state.save()
    lock.clear(state_dir(), state.run_id, state.hosts)
    return f"run {state.run_id} marked aborted; its hosts are free (drained hosts stay drained)"


def unlock(run: str | None, hosts: Sequence[str], *, yes: bool) -> str:
    """Release on purpose the hosts a stopped run still holds (its state unreadable, say), or the hosts named,
    whatever their lock records say. Without `yes` nothing is released: the refusal lists what would be. The
    release is recorded in the run's decision log when its directory is still there."""
    if not run and not hosts:
        raise InputError("give the run (its id or its run directory) whose hosts to release, or --host HOST")
    base = state_dir()
    found = lock.reserved(base, run, hosts)
    where = str(base / lock.LOCK_DIR)
    if not found:
        what = " and ".join(x for x in (f"run {run}" if run else "", ", ".join(hosts)) if x)
        raise InputError(Problem(f"no lock record holds {what}: nothing to release", where))
    by_holder: dict[tuple[str, str], list[str]] = {}
    since: dict[tuple[str, str], str] = {}
    for host, owner in found.items():
        # One holder per run and process, whatever second each lock was taken in: a run's locks straddle seconds.
        holder = (f"unknown holder ({owner[lock.UNREADABLE]})" if lock.UNREADABLE in owner else
                  f"run {owner.get('run_id', '?')} (pid {owner.get('pid', '?')}, {owner.get('owner', '?')}")
        key = (holder, str(owner.get("run_dir", "")))
        by_holder.setdefault(key, []).append(host)
        if lock.UNREADABLE not in owner:
            since[key] = min(since.get(key, "~"), str(owner.get("since", "?")))
    parts = []
    for key, taken in sorted(by_holder.items()):
        # a readable record's "run R (pid P, owner" is closed with its earliest lock time
        holder = key[0] + (f", since {since[key]})" if key in since else "")
        parts.append(f"{holder}: {', '.join(sorted(taken))}")
    listing = "; ".join(parts)
    if not yes:
        raise InputError(Problem(f"would release {len(found)} host(s) held by {listing}. They may be drained or "
                                 "half-changed; nothing was released: add --yes to release them", where))
    released = lock.release(base, found)
    notes = []
    for (_holder, run_dir), taken in sorted(by_holder.items()):
        mine = sorted(set(taken) & set(released))
        if not run_dir or not mine or not Path(run_dir).is_dir():
            continue
        run_id = found[mine[0]].get("run_id", "?")
        try:
            DecisionLog(Path(run_dir), str(run_id)).record(
                "LOCKS_RELEASED", f"{len(mine)} host(s) released on purpose with `rollout unlock` by {who()}: "
                                  "this run no longer reserves them", hosts=mine)
        except OSError as exc:
            notes.append(f"; not recorded in {run_dir}'s decision log ({exc.strerror or exc})")
    if len(released) < len(found):
        notes.append(f"; {len(found) - len(released)} record(s) changed meanwhile and were left as they are")
    return f"released {len(released)} host(s) held by {listing}" + "".join(notes)
