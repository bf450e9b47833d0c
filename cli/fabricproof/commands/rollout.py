"""`fabricproof rollout`: plan (dry run), run, status, resume, abort and unlock staged rollouts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from .. import transport
from ..collect import DEFAULT_FORKS
from ..errors import InputError
from ..rollout import decisions, runs
from ..rollout import plan as plan_mod
from ..rollout import state as st
from ..rollout.store import RolloutStore
from ..fsutil import write_target
from ._common import OUTPUT_MODE_HELP, console, err_console, input_errors, output_mode, report_targets, shown, whole_ids
from ._runlog import decision_log_notes, finish_run, progress, report_page, say

EXIT_HELP = ("Exit codes: 0 done · 1 a gate failed and the run halted · 2 bad input (nothing touched) · "
             "4 rolled back · 5 waiting for an operator (paused, rollback not proven, aborted) · 6 the run's state "
             "or evidence could not be written (disk full, I/O error) · 130 interrupted.")

app = typer.Typer(
    help="Staged rollouts: change a pilot, prove it, widen in waves, roll back by itself when the proof fails.\n\n"
         + EXIT_HELP,
    no_args_is_help=True,
)

RunsDir = Annotated[Path, typer.Option("--runs-dir", help="Where runs are kept (state, decisions, evidence, locks).")]
Inventory = Annotated[str | None, typer.Option("--inventory", "-i", help="Ansible inventory; overrides the plan's.")]
Fmt = Annotated[str, typer.Option("--format", "-f", help="table or json.")]


def _check_fmt(fmt: str) -> None:
    if fmt not in ("table", "json"):
        raise InputError(f"--format {fmt!r}: choose table or json")


# -------------------------------------------------------------------------------------------- plan


@app.command("plan")
@input_errors
def plan_cmd(
    plan: Annotated[Path, typer.Argument(help="Rollout plan YAML (kind: RolloutPlan).", show_default=False)],
    inventory: Inventory = None,
    fmt: Fmt = "table",
    via: Annotated[str, typer.Option("--via", help="How `rollout run` will collect (its settings are checked for "
                                     "every host of every wave).")] = "ssh",
) -> None:
    """Dry run: validate the plan and show the hosts of every wave, the gates and thresholds, the soak and the
    rollback steps. Touches nothing: no host, no lock, no run directory.

    Example: fabricproof rollout plan inventories/lab/plans/driver-fm-upgrade.yml -i "$(fabricproof lab up)"
    """
    _check_fmt(fmt)
    transport.kind(via, (transport.Reach.REMOTE,))
    prep = runs.prepare(plan, inventory)
    runs.preflight(prep, via)
    gate_checks = runs.select_checks(prep.plan.gates.checks, prep.catalog)
    soak_checks = runs.select_checks(prep.plan.soak.checks, prep.catalog) if prep.plan.soak else []
    doc = plan_mod.describe(prep.plan, prep.waves, prep.inventory_path, gate_checks, soak_checks)
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2))
        return
    _print_plan(doc)


def _print_plan(doc: dict[str, Any]) -> None:
    console.print(f"[bold]{shown(doc['plan'])}[/]: {shown(doc['description'])}", soft_wrap=True)
    console.print(f"target {shown(doc['target'])} in {shown(doc['inventory'])}: {doc['hosts']} host(s), "
                  f"moving by {shown(doc['units'])}", soft_wrap=True)
    console.print(f"apply {shown(doc['change']['apply'])}\nrollback {shown(doc['change']['rollback'])}", soft_wrap=True)
    console.print(f"before {shown(doc['baseline']['before'])}\nafter  {shown(doc['baseline']['after'])}",
                  soft_wrap=True)
    table = Table("wave", "hosts", "batches", "may fail", "soak", "pause", title="waves (pilot first)")
    for w in doc["waves"]:
        hosts = ", ".join(w["hosts"][:6]) + (f" (+{len(w['hosts']) - 6})" if len(w["hosts"]) > 6 else "")
        table.add_row(f"{w['index'] + 1}. {w['name']}", f"{len(w['hosts'])}: {shown(hosts)}",
                      " | ".join(str(len(b)) for b in w["batches"]), f"{w['tolerated_failures']} ({w['budget']})",
                      plan_mod.format_duration(w["soak_s"]) if w["soak_s"] is not None else "-",
                      "yes" if w["pause"] else "")
    console.print(table)
    g = doc["gates"]
    console.print(f"gates: {len(g['checks'])} check(s) fail a host at {g['fail_on']} or above; post-gate retried "
                  f"every {g['retry_interval_s']}s for up to {g['timeout_s']}s; a host's collection is cut after "
                  f"{g['host_timeout_s']:g}s\n  budget boundary: {g['boundary']}", soft_wrap=True)
    console.print("  checks: " + shown(", ".join(g["checks"])), soft_wrap=True)
    if doc["soak"]:
        s = doc["soak"]
        every = f", read every {s['interval_s']}s" if s["interval_s"] else ""
        console.print(f"soak: counters must not grow{every}: {shown(', '.join(s['checks']))}", soft_wrap=True)
    if doc["drain"]:
        console.print(f"drain: {doc['drain']['scheduler']} ({shown(Path(doc['drain']['drain']).name)} / "
                      f"{shown(Path(doc['drain']['undrain']).name)})", soft_wrap=True)
    console.print(f"on failure: {doc['on_failure']}")
    for step in doc["rollback_steps"]:
        console.print(f"  - {shown(step)}", soft_wrap=True)
    console.print(f"reports: {', '.join(doc['reports'])}")


# --------------------------------------------------------------------------------------------- run


@app.command("run", epilog=EXIT_HELP)
@input_errors
def run_cmd(
    plan: Annotated[Path, typer.Argument(help="Rollout plan YAML.", show_default=False)],
    inventory: Inventory = None,
    runs_dir: RunsDir = Path("runs"),
    via: Annotated[str, typer.Option("--via", help=f"How gates collect: {transport.choices([transport.Reach.REMOTE])}.")] = "ssh",
    forks: Annotated[int, typer.Option("--forks", help="Hosts a gate collects, and a playbook changes, at once.")] = DEFAULT_FORKS,
) -> None:
    """Run a rollout: for each wave pre-gate, drain, apply, post-gate, soak, decide, undrain.

    State lives in RUNS_DIR/<run id>/state.json (resumable), decisions in decisions.jsonl, gate reports under
    waves/. A failed wave is rolled back (or halted) as the plan says.
    """
    code, run_id = runs.start(plan, runs_dir=runs_dir, inventory_override=inventory, via=via, forks=forks,
                              progress=progress)
    finish_run(code, runs_dir, run_id)


@app.command("resume", epilog=EXIT_HELP)
@input_errors
def resume_cmd(
    run: Annotated[str, typer.Argument(help="Run id, its directory, or 'last'.", show_default=False)],
    runs_dir: RunsDir = Path("runs"),
) -> None:
    """Continue an interrupted, paused or halted run. Hosts whose apply was cut short are probed first and never
    applied twice: a host that already proves the after-baseline is left alone."""
    state = st.find_run(runs_dir, run)
    runs_dir = state.dir.parent  # RUN may be the run's path (as status takes it): its runs dir is where it lives
    code = runs.resume(runs_dir, state.run_id, progress=progress)
    finish_run(code, runs_dir, state.run_id)


@app.command("abort")
@input_errors
def abort_cmd(
    run: Annotated[str, typer.Argument(help="Run id (or 'last').", show_default=False)],
    runs_dir: RunsDir = Path("runs"),
    reason: Annotated[str, typer.Option("--reason", "-r", help="Why, for the decision log.")] = "",
) -> None:
    """Stop a run at its next step boundary (a running playbook finishes its batch). Nothing is rolled back:
    run `fabricproof rollback RUN` for that."""
    say(runs.abort(runs_dir, run, reason or "aborted by an operator"))


@app.command("unlock")
@input_errors
def unlock_cmd(
    run: Annotated[str | None, typer.Argument(help="Run id or run directory whose host locks to release.",
                                              show_default=False)] = None,
    host: Annotated[list[str] | None, typer.Option("--host", help="Release this host's lock whatever it holds "
                                                   "(an unreadable record too); repeatable.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Release them; without it nothing is released and the locks "
                                      "it would release are listed (exit 2).")] = False,
) -> None:
    """Release on purpose the hosts a stopped run still reserves when it cannot be resumed, rolled back or aborted
    (its state.json is unreadable), or hosts whose lock record cannot be read. The hosts may be drained or
    half-changed: check them first. A run some process is driving is refused (abort it instead)."""
    say(runs.unlock(run, host or [], yes=yes))


# ------------------------------------------------------------------------------------------ status


def _counts(state: st.RunState, wave: int | None = None) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in state.hosts.values():
        if wave is None or d["wave"] == wave:
            out[d["state"]] = out.get(d["state"], 0) + 1
    return out


def _fmt_counts(c: dict[str, int]) -> str:
    return ", ".join(f"{n} {s}" for s, n in sorted(c.items()))


@app.command("status")
@input_errors
def status_cmd(
    run: Annotated[str | None, typer.Argument(help="Run id or 'last'; omitted: list every run.")] = None,
    runs_dir: RunsDir = Path("runs"),
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json, or (with RUN) html: the rollout report "
                                     "page; FORMAT=PATH writes it to PATH.")] = "table",
    mode: Annotated[str, typer.Option("--output-mode", help=OUTPUT_MODE_HELP)] = "600",
) -> None:
    """Show runs: without RUN a list; with RUN its waves, hosts, steps and decisions.

    Example: fabricproof rollout status last -f html=rollout.html   (waves on a timeline, gates, soak, decisions)
    """
    ((fmt, target),) = report_targets([fmt], ("table", "json", "html"))
    file_mode = output_mode(mode)
    if fmt == "html":
        if run is None:
            raise InputError("-f html shows one run: give RUN (a run id, or last)")
        page = report_page(st.find_run(runs_dir, run).dir)
        if target is None:
            typer.echo(page, nl=False)
        else:
            write_target(target, (page,), mode=file_mode, option="--format html")
            err_console.print(f"wrote the rollout report to {shown(target)}", soft_wrap=True)
        return
    if target is not None:
        raise InputError(f"--format {fmt}=PATH: only html is written to a file; {fmt} goes to stdout")
    from ..rollout import lock

    if run is None:
        all_runs = st.list_runs(runs_dir)
        if fmt == "json":
            typer.echo(json.dumps([{"run_id": r.run_id, "plan": r.data["plan"], "status": r.status,
                                    "exit_code": r.data["exit_code"], "created_at": r.data["created_at"],
                                    "updated_at": r.data["updated_at"], "hosts": _counts(r)} for r in all_runs],
                                  indent=2))
            return
        table = Table("run", "plan", "status", "updated", "hosts", title=f"{len(all_runs)} run(s) in {runs_dir}")
        whole_ids(table, 0, (r.run_id for r in all_runs))
        for r in all_runs:
            table.add_row(r.run_id, r.data["plan"], r.status, r.data["updated_at"], _fmt_counts(_counts(r)))
        console.print(table)
        return
    state = st.find_run(runs_dir, run)
    owner = lock.run_holder(state.dir)
    log_path = decisions.path_of(state.dir)
    log = decisions.read_log(state.dir)
    doc = {**state.data, "driven_by": owner, "decisions": log.records,
           "decision_log": {"path": str(log_path), "unreadable": [u.as_dict() for u in log.unreadable],
                            "set_aside": log.set_aside}}
    if fmt == "json":
        typer.echo(json.dumps(doc, indent=2))
        return
    live = f", driven by pid {owner.get('pid')}" if owner else ""
    console.print(f"[bold]{state.run_id}[/] plan {shown(state.data['plan'])}: [bold]{state.status}[/]{live} "
                  f"(exit {state.data['exit_code']}); started {state.data['created_at']} by "
                  f"{shown(state.data['created_by'])}, updated {state.data['updated_at']}", soft_wrap=True)
    from ..reporters.rollout_html import BOOKKEEPING
    from ..rollout.stepid import StepId
    from ..rollout.view import step_words

    waves = Table("wave", "hosts", "steps done", title="waves")
    for w in state.waves:
        done = []
        for s, v in state.data["steps"].items():
            sid = StepId.parse(s)
            if (sid is not None and sid.rollback is None and sid.wave == w.index and sid.kind not in BOOKKEEPING
                    and v["status"] in ("done", "failed")):
                done.append(step_words(sid.kind, sid.batch_label) + (" (failed)" if v["status"] == "failed" else ""))
        waves.add_row(f"{w.index + 1}. {w.name}", _fmt_counts(_counts(state, w.index)), ", ".join(done))
    console.print(waves)
    hosts = Table("host", "wave", "state", "reason", title="hosts")
    names = [w.name for w in state.waves]
    for h, d in sorted(state.hosts.items(), key=lambda kv: (kv[1]["wave"], kv[0])):
        hosts.add_row(h, names[d["wave"]], d["state"], shown(d.get("reason", "")))
    console.print(hosts)
    console.print("decisions:")
    for d in doc["decisions"][-15:]:
        console.print("  " + shown(decisions.format_line(d)), soft_wrap=True)
    for note in decision_log_notes(log, log_path):
        console.print(shown(note), soft_wrap=True)
    console.print(f"state {RolloutStore(state.dir).state_path}")
