"""The collective gate: a wave's hosts, with hosts already proven, run one collective before and after the change; a
drop beyond the tolerance fails the wave, and the search over the group names the host to roll back first."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import Problem
from ...inventory import Inventory
from ...judging.baseline import Baseline
from ...probes import collective as launch
from ...probes import isolation
from ...probes.isolation import Outcome, Verdict
from .. import state as st
from .. import store
from ..stepid import StepId
from .base import DRAINED, SETTLE, Block, GateKind, Reach, StepForm

if TYPE_CHECKING:
    from ..plan import Wave
    from ..steps import RunSteps

#: search(hosts, threshold) -> the verdict over the group after the change, judged against `threshold`.
Search = Callable[[Sequence[str], float], Verdict]


def group(wave: Sequence[str], proven: Sequence[str], count: int) -> list[str]:
    """The wave's hosts and up to `count` hosts already proven (changed in an earlier wave, or not changed and
    passing): with them a change that slows only the new hosts' traffic to the rest shows too."""
    return pick(wave, proven, count, {})[0]


def pick(wave: Sequence[str], proven: Sequence[str], count: int, busy: Mapping[str, str]
         ) -> tuple[list[str], dict[str, str]]:
    """The group (as `group`) leaving out proven hosts the cluster is using (`busy`: back in service, a job runs
    there; a collective never starts on such a node), and those it passed over before it had `count`, with why."""
    extra: list[str] = []
    skipped: dict[str, str] = {}
    in_wave = set(wave)
    for h in proven:
        if len(extra) == count:
            break
        if h in in_wave:
            continue
        if h in busy:
            skipped[h] = busy[h]
        else:
            extra.append(h)
    return [*wave, *extra], skipped


@dataclass(frozen=True)
class Decision:
    """The gate's verdict on a wave: pass or not and why, both figures, the hosts to roll back first (the wave's
    hosts the search named, in its order) and proven hosts it named (never rolled back by this wave)."""

    passed: bool
    why: str
    before: Outcome
    after: Outcome
    roll_back_first: tuple[str, ...] = ()
    proven_at_fault: tuple[str, ...] = ()
    verdict: Verdict | None = None

    def to_record(self) -> dict[str, Any]:
        """What the decision log keeps: the figures or failures, the hosts named, and the search's path."""
        return {"passed": self.passed, "why": self.why, "before": _outcome(self.before), "after": _outcome(self.after),
                "roll_back_first": list(self.roll_back_first), "proven_at_fault": list(self.proven_at_fault),
                "search": None if self.verdict is None else self.verdict.to_facts()}


def _outcome(o: Outcome) -> dict[str, Any]:
    return {"figure": o.figure, "failure": o.failure, "failure_kind": None if o.failure is None else o.kind}


def decide(wave: Sequence[str], hosts: Sequence[str], before: Outcome, after: Outcome, tolerance_pct: float,
           search: Search) -> Decision:
    """The wave passes when the collective after the change reaches its figure before, less the tolerance. When it
    does not (slower, or failed), the search over the same hosts, against that floor, names what is at fault."""
    if before.figure is None:
        return Decision(False, f"the collective failed before the change ({before.failure}): nothing to compare "
                               "with; the wave is not proven", before, after)
    floor = before.figure * (1.0 - tolerance_pct / 100.0)
    if after.figure is not None and after.figure >= floor:
        return Decision(True, f"{after.figure:g} GB/s after the change, {before.figure:g} before (tolerance "
                              f"{tolerance_pct:g}%)", before, after)
    what = (f"{after.figure:g} GB/s after the change, below {floor:g} ({before.figure:g} before, tolerance "
            f"{tolerance_pct:g}%)" if after.figure is not None else f"the collective failed after the change "
            f"({after.failure})")
    try:
        verdict = search(hosts, floor)
    except launch.Stopped as exc:  # a host took a job mid-search, or the budget ran out: no verdict to act on
        return Decision(False, f"{what}; the search stopped ({exc}): the whole wave rolls back", before, after)
    in_wave = set(wave)
    named = [m for f in verdict.findings if f.kind == "host" for m in f.members]
    named += [m for f in verdict.findings if f.kind == "pair" for m in f.members if m not in named]
    first = tuple(h for h in named if h in in_wave)
    proven = tuple(h for h in named if h not in in_wave)
    if first:
        why = f"{what}; the search names {', '.join(first)}: roll back first"
    else:
        why = f"{what}; the search named no host of the wave ({verdict.state}): the whole wave rolls back"
    if proven:
        why += f"; also at fault, not changed by this wave: {', '.join(proven)}"
    return Decision(False, why, before, after, first, proven, verdict)


def drain_conflict(baselines: Sequence[Baseline]) -> str | None:
    """Why a plan whose waves `drain: {scheduler: slurm}` drains cannot have this gate when a baseline (its defaults
    or any group's values) launches the collective with srun; None when none does."""
    values = [v for b in baselines for v in (b.defaults, *(b.for_groups([g]) for g in b.groups))]
    if not any(launch.config(v)["launcher"] == "srun" for v in values):
        return None
    return ("drain: {scheduler: slurm} cannot be combined with a collective gate launched by srun: the drain step "
            "drains the wave's nodes in Slurm and srun never gets a drained node (not even root in a maintenance "
            "reservation), so every wave's collective before the change would fail ('Slurm shows it drained') and "
            "no wave would ever be changed; remove spec.drain (the gate then runs only on nodes Slurm shows idle, "
            "but nothing keeps jobs off a wave while it changes) or launch the collective with mpirun "
            "(perf.probes.collective.launcher in the baselines)")


# -- the gate kind ----------------------------------------------------------------------------------------------

PRE_COLLECTIVE, COLLECTIVE = "pre_collective", "collective"


@dataclass(frozen=True)
class Spec:
    """gates.collective: the scale, the allowed drop, and how many proven hosts join each wave's collective."""

    scale: str
    tolerance_pct: float
    proven_hosts: int


@dataclass(frozen=True)
class Seam:
    """How the gate reaches the cluster: one collective over hosts (its outcome), and the search over hosts against
    a floor (its verdict); each with the evidence directory and the baseline in force."""

    measure: Callable[[Sequence[str], Path, Baseline], Outcome]
    search: Callable[[Sequence[str], float, Path, Baseline], Verdict]
    #: Hosts -> each one the cluster is using (a job runs there), with why; None: every host is taken as idle.
    busy: Callable[[Sequence[str], Path, Baseline], Mapping[str, str]] | None = None


def live_collective(inventory: Inventory, scale: str) -> Seam:
    """The collective through the cluster's launcher (probes.collective), its settings from the baseline values of
    the group's first host; a round refused (a node not idle, the budget spent) is a failure in those words."""

    def values(hosts: Sequence[str], baseline: Baseline) -> Mapping[str, Any]:
        return baseline.for_groups(inventory.hosts[hosts[0]].groups)

    def measure(hosts: Sequence[str], evidence: Path, baseline: Baseline) -> Outcome:
        run = launch.Collective(values(hosts, baseline), scale, evidence)
        try:
            (out,) = run([list(hosts)])
        except launch.Stopped as exc:
            return Outcome.failed(str(exc), "error")
        return out

    def search(hosts: Sequence[str], floor: float, evidence: Path, baseline: Baseline) -> Verdict:
        v = values(hosts, baseline)
        run = launch.Collective(v, scale, evidence)
        return isolation.search(hosts, run, isolation.Settings(threshold=floor,
                                                               margin=float(launch.config(v)["margin"])))

    def busy(hosts: Sequence[str], evidence: Path, baseline: Baseline) -> Mapping[str, str]:
        return launch.Collective(values(hosts, baseline), scale, evidence).not_idle(hosts) if hosts else {}

    return Seam(measure, search, busy)


class CollectiveGate(GateKind):
    name = "collective"
    schema = {"collective": {
        "type": "object", "additionalProperties": False, "required": ["tolerance_pct"],
        "description": "Each wave's hosts, with hosts already proven, run one multi-node collective once drained "
                       "before the change and again after its post-gate; a drop beyond the tolerance fails the wave, "
                       "and the search names the host(s) to roll back first (the whole wave when it names none).",
        "properties": {
            "scale": {"enum": list(launch.SCALES), "default": "all",
                      "description": "The collective's scale (perf.probes.collective settings of the baseline)."},
            "tolerance_pct": {"type": "number", "minimum": 0, "maximum": 100,
                              "description": "Allowed drop of the avg busbw, in percent of the figure before."},
            "proven_hosts": {"type": "integer", "minimum": 0, "default": 2,
                             "description": "Hosts of earlier waves that passed, added to each wave's collective."}}}}
    steps = {PRE_COLLECTIVE: StepForm("pre collective"), COLLECTIVE: StepForm("collective")}
    before_stage, before_step = DRAINED, PRE_COLLECTIVE
    after_stage, after_step = SETTLE, COLLECTIVE

    def parse(self, block: Block, problems: list[Problem]) -> Spec | None:
        c = block.spec["gates"].get("collective")
        if c is None:
            return None
        return Spec(c.get("scale", "all"), float(c["tolerance_pct"]), int(c.get("proven_hosts", 2)))

    def drain_conflict(self, scheduler: str, spec: Any, baselines: Sequence[Baseline]) -> str | None:
        return drain_conflict(baselines) if scheduler == "slurm" else None

    def live(self, reach: Reach, spec: Spec) -> Seam:
        return live_collective(reach.inventory, spec.scale)

    def describe(self, spec: Any) -> dict[str, Any]:
        return {"collective": {"scale": spec.scale, "tolerance_pct": spec.tolerance_pct,
                               "proven_hosts": spec.proven_hosts}}

    def _proven(self, run: RunSteps, w: Wave) -> list[str]:
        return [h for h in run.state.hosts_in(st.PASSED) if run.state.hosts[h]["wave"] < w.index]

    def _busy(self, run: RunSteps, hosts: Sequence[str], evidence: Path) -> Mapping[str, str]:
        seam = run.ctx.seam(self.name)
        return dict(seam.busy(hosts, evidence, run.ctx.before)) if seam.busy is not None and hosts else {}

    def before(self, run: RunSteps, w: Wave, spec: Spec) -> None:
        """The collective before the change over the drained wave and proven hosts the cluster shows idle (one
        running a job is passed over, and named); kept in the step's record. When it fails, or too few idle hosts
        are left for a collective, there is nothing to compare with: the wave's hosts are left out of the change."""
        sid = StepId(w.index, PRE_COLLECTIVE)
        hosts = run.state.hosts_in(st.PENDING, wave=w.index)
        proven = [h for h in self._proven(run, w) if h not in set(hosts)]
        planned = group(hosts, proven, spec.proven_hosts)
        run.state.begin(sid, hosts=planned)
        if len(planned) < 2:
            run.state.finish(sid, failed={}, ran=False)
            return
        evidence = store.fresh_dir(store.gate_dir(run.wave_dir(w, store.PRE_GATE_DIR), self.name))
        hosts_all, skipped = pick(hosts, proven, spec.proven_hosts,
                                  self._busy(run, proven if spec.proven_hosts else [], evidence))
        passed = "; ".join(f"{h}: {why}" for h, why in skipped.items())
        if len(hosts_all) < 2:
            out = Outcome.failed(f"too few idle hosts for a collective: {len(hosts_all)} (proven hosts running "
                                 f"jobs, passed over: {passed})", "error")
        else:
            out = run.ctx.seam(self.name).measure(hosts_all, evidence, run.ctx.before)
        failed: dict[str, str] = {}
        if out.figure is None:
            failed = {h: f"pre-gate collective failed: {out.failure}" for h in hosts}
            run.state.set_hosts(hosts, st.EXCLUDED, reason=f"pre-gate collective failed: {out.failure}")
        why = (f"{out.figure:g} GB/s over {len(hosts_all)} host(s) before the change ({spec.scale})"
               if out.figure is not None else f"the collective failed before the change: {out.failure}")
        if skipped and out.figure is not None:
            why += f"; proven hosts running jobs, passed over: {passed}"
        run.log.record("PRE_COLLECTIVE", why, step=sid, wave=w.name, hosts=failed, evidence=[evidence],
                       figure=out.figure, failure=out.failure, group=hosts_all, passed_over=skipped)
        run.state.finish(sid, failed=failed, evidence=[str(evidence)], before=_outcome(out), group=hosts_all)
        run.say(f"  pre-gate collective: {why}")

    def after(self, run: RunSteps, w: Wave, spec: Spec) -> None:
        """The collective again after the post-gate, over the same group less the hosts the change failed and the
        proven hosts a job runs on by now; a drop beyond the tolerance fails the hosts the search names (the whole
        wave when it names none, or when too few idle hosts are left to run it)."""
        sid = StepId(w.index, COLLECTIVE)
        pre = run.state.step(StepId(w.index, PRE_COLLECTIVE)) or {}
        hosts = run.state.hosts_in(st.PASSED, wave=w.index)
        group_ = [h for h in pre.get("group", []) if h in set(hosts) or h not in set(run.state.hosts_in(
            st.PENDING, st.EXCLUDED, st.APPLYING, st.APPLIED, st.APPLY_FAILED, st.FAILED, wave=w.index))]
        run.state.begin(sid, hosts=hosts)
        before = pre.get("before") or {}
        if not hosts or before.get("figure") is None or len(group_) < 2:
            run.state.finish(sid, failed={}, ran=False)
            return
        evidence = store.fresh_dir(store.gate_dir(run.wave_dir(w, store.POST_GATE_DIR), self.name))
        seam = run.ctx.seam(self.name)
        skipped = dict(self._busy(run, [h for h in group_ if run.state.hosts[h]["wave"] != w.index], evidence))
        group_ = [h for h in group_ if h not in skipped]
        passed = "; ".join(f"{h}: {why}" for h, why in skipped.items())
        if len(group_) < 2:
            after = Outcome.failed(f"too few idle hosts for a collective: {len(group_)} (proven hosts running jobs, "
                                   f"passed over: {passed})", "error")
            d = Decision(False, f"the collective after the change could not run ({after.failure}): the wave is not "
                                "proven", Outcome(before["figure"]), after)
        else:
            after = seam.measure(group_, evidence, run.ctx.after)
            d = decide(hosts, group_, Outcome(before["figure"]), after, spec.tolerance_pct,
                       lambda hs, floor: seam.search(hs, floor, evidence / store.SEARCH_DIR, run.ctx.after))
        failed = {} if d.passed else {h: f"collective: {d.why}" for h in (d.roll_back_first or hosts)}
        for h, why in failed.items():
            run.state.set_hosts([h], st.FAILED, reason=why)
        run.log.record("COLLECTIVE_GATE", d.why, step=sid, wave=w.name, hosts=failed, evidence=[evidence],
                       group=group_, passed_over=skipped, **{k: v for k, v in d.to_record().items() if k != "why"})
        run.state.finish(sid, failed=failed, evidence=[str(evidence)])
        run.say(f"  collective: {d.why}")


GATE = CollectiveGate()
