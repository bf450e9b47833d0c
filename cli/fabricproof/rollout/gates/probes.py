"""The probes gate: the plan's gate probes measured on a wave's hosts once drained, before the change (each host's
own figures, kept in the run state), and again inside the post-gate on the hosts it proved."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...judging.baseline import Baseline
from ...probes.figures import Figure, by_host_rows
from ...probes.spec import PROBES
from ...errors import Problem
from .. import state as st
from .. import store
from ..stepid import StepId
from ..steps import listing
from .base import DRAINED, JOIN, NAMES, Block, GateKind, Reach, StepForm

if TYPE_CHECKING:
    from ..plan import Wave
    from ..steps import RunSteps

PRE_PROBES = "pre_probes"
#: Its live part: (hosts, evidence directory, baseline) -> (figures of each host measured, why each other has none).
Probe = Callable[[Sequence[str], Path, Baseline], tuple[dict[str, list[Figure]], dict[str, str]]]


class ProbesGate(GateKind):
    name = "probes"
    schema = {"probes": {**NAMES, "uniqueItems": True,
                         "description": "Probes (`validate --probes` ids) run on the wave's hosts in the pre-gate and "
                                        "again in the post-gate, each only on an idle node."}}
    steps = {PRE_PROBES: StepForm("pre probes")}
    before_stage, before_step = DRAINED, PRE_PROBES
    after_stage = JOIN

    def parse(self, block: Block, problems: list[Problem]) -> tuple[str, ...] | None:
        """Probe ids, run in the pre-gate and the post-gate of every wave; None: the plan names none."""
        probes = tuple(block.spec["gates"].get("probes") or ())
        for i, pid in enumerate(probes):
            if pid not in PROBES:
                problems.append(block.problem(("spec", "gates", "probes", i), f"unknown probe {pid!r}; probes: "
                                              f"{', '.join(PROBES)}"))
        return probes or None


    def live(self, reach: Reach, spec: tuple[str, ...]) -> Probe:
        """The gate probes over a remote transport, each proof's probes a probe run of its own (idle guard included):
        hosts -> their figures, and why the others have none."""
        from ... import transport
        from ...probes.runner import ProbeSettings, run_probes

        options = transport.configure(reach.via, inventory_path=reach.inventory_path)
        hosts_of = reach.inventory.hosts

        def probe(hosts: Sequence[str], evidence_dir: Path, baseline: Baseline):
            run = run_probes([hosts_of[h] for h in hosts], evidence_dir, list(spec),
                             values=lambda h: baseline.for_groups(h.groups), via=reach.via, options=options,
                             settings=ProbeSettings(forks=reach.forks))
            figures: dict[str, list[Figure]] = {}
            for f in run.figures():
                figures.setdefault(f.host, []).append(f)
            why = {h: run.errors.get(h) or "; ".join(f"{cid}: {r.get('error', r.get('status'))}" for cid, r in
                                                      (run.facts_by_host.get(h, {}).get("collectors") or {}).items()
                                                      if r.get("status") != "ok") or "no figure measured"
                   for h in hosts if h not in figures}
            return figures, why

        return probe
    def describe(self, spec: Any) -> dict[str, Any]:
        return {"probes": list(spec), "regression_tolerance_pct": None}  # a regression gate sets it

    def before(self, run: RunSteps, w: Wave, spec: Any) -> None:
        """Each host's own figures before the change (after the drain), kept in the run state for its post-gate. A
        host with no figure cannot be compared: it is left out of the change."""
        sid = StepId(w.index, PRE_PROBES)
        hosts = run.state.hosts_in(st.PENDING, wave=w.index)
        run.state.begin(sid, hosts=hosts)
        evidence = store.fresh_dir(store.gate_dir(run.wave_dir(w, store.PRE_GATE_DIR), self.name))
        figures, missing = run.ctx.seam(self.name)(hosts, evidence, run.ctx.before) if hosts else ({}, {})
        for h in hosts:
            if h in figures:
                run.state.set_probe_before(h, figures[h])
            else:
                run.state.set_hosts([h], st.EXCLUDED, reason=f"pre-gate probes: {missing.get(h, 'no figure')}")
        why = (f"{len(figures)} of {len(hosts)} host(s) probed before the change ({', '.join(spec)})"
               + (f"; left out (nothing to compare with): {listing(missing)}" if missing else ""))
        run.log.record("PRE_PROBES", why, step=sid, wave=w.name, hosts=missing, evidence=[evidence],
                       figures=by_host_rows(figures))
        run.state.finish(sid, failed=missing, evidence=[str(evidence)])
        run.say(f"  pre-gate probes: {why}")

    def join(self, run: RunSteps, w: Wave, spec: Any, sid: Any, hosts: Sequence[str]) -> tuple[dict[str, str], str]:
        """The gate probes again after the change; with a regression gate, a host whose figure dropped beyond the
        tolerance below its own pre-change figure fails, and the decision record holds both figures."""
        from .regression import GATE as REGRESSION

        evidence = store.fresh_dir(store.gate_dir(run.wave_dir(w, store.POST_GATE_DIR), self.name))
        after, missing = run.ctx.seam(self.name)(list(hosts), evidence, run.ctx.after)
        tol = run.plan.gates.kinds.get(REGRESSION.name)
        before = {h: run.state.probe_before(h) for h in hosts}
        failed = REGRESSION.compare(hosts, before, after, tol) if tol is not None else {}
        run.state.set_hosts(list(failed), st.FAILED)
        for h, why in failed.items():
            run.state.hosts[h]["reason"] = why
        why = (f"{len(hosts) - len(failed)} of {len(hosts)} host(s) no worse than before the change"
               + (f" (tolerance {tol}%)" if tol is not None else "")
               + (f"; regressed: {listing(failed)}" if failed else ""))
        run.log.record("REGRESSION_GATE" if tol is not None else "POST_PROBES", why, step=sid, wave=w.name,
                       hosts=failed, evidence=[evidence, *run.state.step(StepId(w.index, PRE_PROBES))
                                               .get("evidence", [])],
                       before=by_host_rows(before), after=by_host_rows({h: after.get(h, []) for h in hosts}),
                       not_measured=missing)
        run.say(f"  post-gate probes: {why}")
        return failed, str(evidence)


GATE = ProbesGate()
