"""`fabricproof check --local`: a node proves itself (Slurm HealthCheckProgram, cron, DaemonSet), NHC-style."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from ..judging import catalog
from ..actions import host_actions
from ..judging import baseline as baseline_mod
from .. import facts as facts_mod
from .. import inventory as inventory_mod
from .. import breaker, config, slurm
from ..collect import DEFAULT_HOST_TIMEOUT_S, check_settings, select_collectors, this_node
from ..errors import InputError
from ..judging.evaluate import failing_actions
from ..judging.pipeline import Live, Request, run
from ..fsutil import atomic_write_text, check_target, write_target
from ..model import ExitCode, Outcome, Report, Severity
from ..reporters import REPORTERS
from ..reporters._common import found_lines, not_proven_reason
from . import _breaker, _probes
from ._common import (BASELINE_HELP, INVENTORY_DEFAULT, OUTPUT_MODE_HELP, SEVERITIES, check_fail_on, consoles,
                      input_errors, output_mode, plain, report_targets, shown)

EPILOG = """\
Examples (on the node itself):

  fabricproof check --local -b /etc/fabricproof/baseline.yaml --group dgx_h100

  # Slurm: HealthCheckProgram=/usr/local/sbin/fabricproof-health, a wrapper running (slurmd names the node)
  fabricproof check --local -b /etc/fabricproof/baseline.yaml -i /etc/fabricproof/inventory.yml --drain \\
      --facts-dir /shared/fabricproof/facts --command-timeout 8 --timeout 50

  # every node at once, from a login node:
  srun -N 64 --ntasks-per-node=1 fabricproof check --local ... --facts-dir /shared/fabricproof/facts

  # central, fleet checks included:  fabricproof validate --facts /shared/fabricproof/facts -b baseline.yaml -i inventory.yml

Prints one line per problem (NHC style) and exits like validate: 0 pass; 1 a check at or above --fail-on failed;
2 invalid input; 3 something could not be collected or judged (a tool cut off at --timeout, say). Each failure ends in
its action ("[action: reset_gpu]") and a last line names the node's, the most disruptive of them ("ACTION node:
reboot ..."). --drain drains this node in Slurm on exit 1 (reason
"fabricproof check: <action>: <check ids>") and, on a later passing run, resumes it only if that reason is still the node's: a
person's drain, or a rollout's ("fabricproof: <plan> run <id>"), stays. It drains only while fewer than --breaker
(default 10%) of the node's partitions were drained by fabricproof in --breaker-window (default 1h), counted from
Slurm's node list; past it the node is reported ("would drain: breaker open, ...") and left in service, exit 1,
until `fabricproof breaker reset`. With --facts-dir, the facts of the previous run there also feed the
counter-delta checks.
"""


def nhc_lines(report: Report, node: str, fail_on: str) -> list[str]:
    """One line per problem, worst first, like NHC's "Health check failed" lines, each failure with its action, then
    one ACTION line with the node's (the most disruptive of them); one OK line otherwise."""
    threshold = Severity(fail_on).rank
    rank = {Outcome.FAIL: 0, Outcome.ERROR: 1, Outcome.UNKNOWN: 2}
    problems = sorted((r for r in report.results if r.outcome in rank),
                      key=lambda r: (rank[r.outcome], -r.severity.rank, r.check_id))
    lines = []
    for r in problems:
        if r.outcome is Outcome.FAIL:
            level = "FAIL" if r.severity.rank >= threshold else "WARN"
            said = "; ".join(found_lines(r)) if r.findings else (r.reason or r.expected)  # GPU 1: ..., not a pointer
            lines.append(f"{level} {node}: {r.check_id} ({r.severity.value}): {said}"
                         + (f" [action: {r.action}]" if r.action else ""))
        else:
            lines.append(f"{r.outcome.value.upper()} {node}: {r.check_id}: {r.reason}")
    for host, why in sorted(report.collection_errors.items()):
        lines.append(f"ERROR {host}: not collected: {why}")
    for host, checks in report.not_proven.items():
        lines.append(f"NOT PROVEN {host}: {not_proven_reason(checks)}")
    for host, action in host_actions(report.results).items():  # the verdict's line: what to do with the node
        lines.append(f"ACTION {host}: {action} (the most disruptive action of its failed checks)")
    s = report.summary
    if not lines:
        lines.append(f"OK {node}: {s.passed} checks passed, {s.skipped} not applicable")
    return lines


def failed_ids(report: Report, fail_on: str) -> list[str]:
    threshold = Severity(fail_on).rank
    return sorted({r.check_id for r in report.results if r.outcome is Outcome.FAIL and r.severity.rank >= threshold})


def _previous(path: Path) -> dict | None:
    """This node's facts from the last run in --facts-dir, if readable: the earlier snapshot for delta checks."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and doc.get("kind") == "Facts" else None


def _slurm(node: str, report: Report, code: int, fail_on: str, limit: breaker.Limit, window_s: int) -> None:
    ids = failed_ids(report, fail_on)
    if code not in (ExitCode.OK, ExitCode.CHECK_FAILED):
        consoles()[1].print(f"--drain: {node} left as it is: the run was incomplete (exit {code})")
        return
    try:
        state = slurm.parse_show_node(slurm.run(slurm.show_argv(node)), node)
        action = slurm.decide(state, ids, passed=code == ExitCode.OK,
                              action=failing_actions(report, fail_on).get(node, ""))
        messages = [action.message] if action.message else []
        if action.new_drain:
            messages = breaker.guarded_drain(node, action, limit, window_s).messages
        elif action.argv:
            slurm.run(action.argv)
        for message in messages:
            consoles()[1].print(shown(message), soft_wrap=True, highlight=False)
    except slurm.SlurmError as exc:
        consoles()[1].print(f"[bold red]error:[/] --drain: {shown(str(exc))}", soft_wrap=True)


@input_errors
def check(
    baseline: Annotated[Path | None, typer.Option("--baseline", "-b", help=BASELINE_HELP, show_default=False)] = None,
    local: Annotated[bool, typer.Option("--local", help="Collect on this node itself (the only mode of `check`).")] = False,
    group: Annotated[list[str], typer.Option("--group", "-g", help="Inventory group(s) of this node: selects "
                                             "baseline overrides (e.g. dgx_h100). Repeatable.")] = [],  # noqa: B006
    inventory: Annotated[str | None, typer.Option("--inventory", "-i", help="Inventory to take this node's groups from." + INVENTORY_DEFAULT)] = None,
    node_name: Annotated[str | None, typer.Option("--node-name", envvar="SLURMD_NODENAME", show_envvar=False,
                                                  help="Slurm NodeName and facts host name (default: "
                                                  "$SLURMD_NODENAME, which slurmd sets for HealthCheckProgram and "
                                                  "job tasks, else the short hostname).")] = None,
    facts_dir: Annotated[Path | None, typer.Option("--facts-dir", help="Also write this node's facts to "
                                                   "DIR/<node>.json for a central `validate --facts DIR`.")] = None,
    drain: Annotated[bool, typer.Option("--drain", help="Drain this node in Slurm on failure; resume it when "
                                        "it passes again, only if this check drained it.")] = False,
    fail_on: Annotated[str, typer.Option("--fail-on", help=f"Lowest severity that makes the exit code 1: {SEVERITIES}.")] = "critical",
    fmt: Annotated[str, typer.Option("--format", "-f", help="nhc (one line per problem), or a report format, as "
                                     f"FORMAT or FORMAT=PATH: {', '.join(REPORTERS)}. With a PATH, stdout gets the "
                                     "nhc lines.")] = "nhc",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Same as --format FORMAT=PATH (one format: "
                                                "nothing to mismatch).")] = None,
    checks: Annotated[list[str], typer.Option("--checks", "-c", help="Check ids, globs or families. Repeatable.")] = [],  # noqa: B006
    command_timeout: Annotated[float | None, typer.Option("--command-timeout", help="Cap on every collector's timeout, seconds.")] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Deadline of the whole collection, seconds: a tool "
                                           "still running then is cut off and its checks report it (exit 3). "
                                           "slurmd kills a HealthCheckProgram after 60 s, so give it less there "
                                           "(50). Probes have their own --probe-budget.")] = DEFAULT_HOST_TIMEOUT_S,
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="Keep this run's raw evidence and facts here "
                                                 "(default: a temporary directory, removed afterwards).")] = None,
    mode: Annotated[str, typer.Option("--output-mode", help=OUTPUT_MODE_HELP)] = "600",
    probes: _probes.ProbesOpt = [],  # noqa: B006
    probe_budget: _probes.BudgetOpt = None,
    require_idle: _probes.RequireIdleOpt = False,
    breaker_limit: _breaker.LimitOpt = breaker.DEFAULT_LIMIT,
    breaker_window: _breaker.WindowOpt = breaker.DEFAULT_WINDOW,
) -> None:
    """Check this node against a baseline (node-local mode)."""
    if not local:
        raise InputError("`check` runs on the node itself: pass --local (to check a fleet, use `fabricproof validate`)")
    baseline, inventory = config.baseline(baseline), config.inventory(inventory)
    check_fail_on(fail_on)
    limit, window_s = breaker.parse_limit(breaker_limit), breaker.parse_window(breaker_window)
    check_settings(1, timeout, command_timeout, host_timeout_option="--timeout")
    file_mode = output_mode(mode)
    ((fmt, path),) = report_targets([fmt], ["nhc", *REPORTERS], default="nhc")
    if path is not None and output is not None and path != output:
        raise InputError(f"--format {fmt}={path} and --output {output}: give the file once")
    output = output or path
    if output is not None and fmt == "nhc":
        raise InputError("--output needs a report --format (json, prometheus, ...); nhc lines go to stdout")
    if output is not None:
        check_target(output, "--output")
    if facts_dir is not None and facts_dir.exists() and not facts_dir.is_dir():
        raise InputError(f"--facts-dir {facts_dir} is not a directory")
    probe_ids: tuple[str, ...] = ()
    if probes or probe_budget is not None or require_idle:  # the probe runner is loaded only for a run with probes
        from ..probes import options as probe_options
        from ..probes.spec import PROBES, Layout

        probe_ids, probe_settings = probe_options.settings(probes, probe_budget, require_idle, None, 1)
        pairwise = [p for p in probe_ids if PROBES[p].layout is Layout.PAIR]
        if pairwise:
            raise InputError(f"--probes {pairwise[0]}: a pairwise probe needs two hosts; run it with "
                             "`validate --probes`")
    base = baseline_mod.load(baseline)
    inv = inventory_mod.load(inventory) if inventory else None
    if inv is not None:
        baseline_mod.check_groups(base, inv.groups, inventory)
    selected = catalog.select(catalog.load(), checks)
    host = this_node(inventory, node_name, group, loaded=inv)
    node, groups = host.name, list(host.groups)
    target = facts_dir / f"{node}.json" if facts_dir is not None else None
    previous = _previous(target) if target is not None else None
    quiet = fmt != "nhc" and output is None
    then = (_probes.after_collection([host], probe_ids, base, "local", None, probe_settings, quiet,
                                     errors_lose_hosts=False) if probe_ids else None)
    judged = run(Request(Live((host,), run_dir, via="local", collectors=select_collectors(None), host_timeout_s=timeout,
                              command_timeout_s=command_timeout, then=then),
                         base, selected, groups={node: groups}, previous={node: previous} if previous else None,
                         hold=True))
    catalog.keep()  # the next run on this node reads the catalog back rather than parsing it
    if node not in judged.facts:  # the local transport cannot fail a whole host; say so if it did
        raise InputError(f"this node could not be collected: {judged.report.collection_errors.get(node, 'no facts')}")
    if target is not None:
        atomic_write_text(target, facts_mod.dump(judged.facts[node]), mode=file_mode)
    report, code = judged.report, judged.exit_code(fail_on)

    lines = nhc_lines(report, node, fail_on)
    if fmt == "nhc" or output is not None:
        sys.stdout.write("".join(f"{plain(line)}\n" for line in lines))
    if fmt != "nhc":
        text = REPORTERS[fmt].render(report)
        if output is not None:
            write_target(output, (text,), mode=file_mode, option="--output")
        else:
            sys.stdout.write(text)
    if drain:
        _slurm(node, report, code, fail_on, limit, window_s)
    raise typer.Exit(code)
