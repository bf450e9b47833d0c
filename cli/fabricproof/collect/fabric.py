"""The fabric-scope collection: the fabric tools run once per run on the vantage host through the transport's fleet
seam, their outputs kept as evidence and parsed into one Subnet (fabric.json), the error counters read again after a
window for their growth."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import spool, transport
from ..collectors.base import ParseError, not_run_reason
from ..model import Command, CommandResult, Host
from ..runstore import FABRIC_DIR, RunStore
from ..subnet.model import Subnet, merge
from ..timeutil import utc_now
from ..transport import HostError, RunContext

#: The collector whose second reading, after the window, gives the counters' growth; and that reading's name.
COUNTERS = "ibqueryerrors"
COUNTERS_AFTER = "ibqueryerrors_after"
#: The collector without which there is no fabric to judge: the topology.
TOPOLOGY = "ibnetdiscover"
#: Seconds between the two counter readings unless told otherwise (`--fabric-window`).
DEFAULT_WINDOW_S = 5.0
#: A fabric tool that failed and printed nothing is run once more this much later: its MADs can time out while the
#: SM sweeps (seen in the lab: ibqueryerrors exit 245, no output, right after a cable went; fine seconds later).
RETRY_AFTER_S = 2.0


class FabricCollector(Protocol):
    """What the fabric collection needs of a collectors.subnet.FabricCollector."""

    id: str
    argv: Sequence[str]
    parse: Callable[[str], Subnet]
    typical_s: float
    timeout_s: float
    ok_exit_codes: tuple[int, ...]


@dataclass
class FabricRun:
    """What the vantage host showed of the fabric. `subnet` is None when the topology could not be read; `errors`
    says why each collector that failed did (collector id -> one line); `error` is set when nothing could run."""

    vantage: str
    subnet: Subnet | None = None
    counters_before: Subnet | None = None
    errors: dict[str, str] = field(default_factory=dict)
    evidence: dict[str, str] = field(default_factory=dict)  # collector id -> its output, relative to the run dir
    results: dict[str, CommandResult] = field(default_factory=dict)
    window_s: float = 0.0
    error: str = ""
    # command (a collector id, or ibqueryerrors_after for the counters' second reading) -> why its first run did
    # not count
    retried: dict[str, str] = field(default_factory=dict)


def _registry() -> tuple[Mapping[str, FabricCollector], Callable[[Mapping[str, str]], Subnet]]:
    from ..collectors.subnet import FABRIC_COLLECTORS, collect_views

    return FABRIC_COLLECTORS, collect_views


def _run(fleet: transport.FleetRunner, host: Host, commands: Sequence[Command]) -> list[CommandResult] | HostError:
    outcome: list[list[CommandResult] | HostError] = []
    fleet.run([host], commands, lambda _name, result: outcome.append(result))
    return outcome[0] if outcome else HostError(transport.ErrorKind.FAILED, f"{host.name}: no outcome")


def _failure(result: CommandResult, ok_exit_codes: Sequence[int]) -> str | None:
    """Why a fabric tool's output is no reading of the fabric (not run, cut off, failed), else None."""
    why = not_run_reason(result.exit_code, result.stdout)
    if why is not None:
        return f"not run: {why}"
    if result.error:
        return result.error
    if result.exit_code not in ok_exit_codes:
        last = next((ln.strip() for ln in reversed(result.stderr.splitlines()) if ln.strip()), "")
        return f"exit {result.exit_code}" + (f": {last[:200]}" if last else "")
    return None


def _once_more(fleet: transport.FleetRunner, vantage: Host, commands: Sequence[Command],
               outcome: list[CommandResult], found: Mapping[str, FabricCollector], run: FabricRun
               ) -> list[CommandResult]:
    """The tools that failed with no output, run once more RETRY_AFTER_S later; their first failure kept in
    `run.retried`. A tool that printed something, or was not run at all, is judged as it is. Each command names its
    collector by `tool` (the counters' second reading is ibqueryerrors_after, read by ibqueryerrors)."""
    again = [i for i, (c, r) in enumerate(zip(commands, outcome, strict=True))
             if not r.stdout.strip() and not_run_reason(r.exit_code, r.stdout) is None
             and _failure(r, found[c.tool].ok_exit_codes) is not None]
    if not again:
        return outcome
    time.sleep(RETRY_AFTER_S)
    second = _run(fleet, vantage, [commands[i] for i in again])
    if isinstance(second, HostError):
        return outcome
    outcome = list(outcome)
    for i, result in zip(again, second, strict=True):
        first = _failure(outcome[i], found[commands[i].tool].ok_exit_codes)
        run.retried[commands[i].name] = f"{first}; run once more {RETRY_AFTER_S:g} s later"
        outcome[i] = result
    return outcome


def collect_fabric(vantage: Host, run_dir: Path, *, via: str = "ssh", options: Any = None,
                   window_s: float = DEFAULT_WINDOW_S, run_id: str = "",
                   registry: tuple[Mapping[str, FabricCollector], Callable[[Mapping[str, str]], Subnet]] | None = None
                   ) -> FabricRun:
    """Run the fabric collectors on `vantage` over `via`, once; with a window, the counters again `window_s` later
    (a tool failing with no output, as while the SM sweeps, once more, in either reading).
    Evidence goes to RUNDIR/fabric/raw/<vantage>/, the parsed fabric to RUNDIR/fabric/fabric.json. A host that
    cannot be reached or a tool that fails is recorded in the FabricRun, never raised: the run goes on.
    `registry`: the collectors and how their outputs merge into one Subnet (collectors.subnet's by default)."""
    collectors, views_of = registry or _registry()
    found = dict(collectors)
    store = RunStore.create(RunStore(run_dir).fabric_root)
    store.begin()
    ctx = RunContext(run_dir=store.root, run_id=run_id or "fabric", forks=1,
                     host_timeout_s=sum(c.timeout_s for c in found.values()) * 2 + window_s + 60)
    link, fleet = transport.open_fleet(via, options, ctx)
    run = FabricRun(vantage.name, window_s=window_s)
    started = time.monotonic()
    try:
        commands = [Command(tuple(c.argv), c.timeout_s, cid, cid, c.typical_s) for cid, c in found.items()]
        outcome = _run(fleet, vantage, commands)
        if not isinstance(outcome, HostError):
            outcome = _once_more(fleet, vantage, commands, outcome, found, run)
        if not isinstance(outcome, HostError) and window_s > 0 and COUNTERS in found:
            # The counters' growth over the window: the first reading ended with the batch; wait out the rest.
            time.sleep(max(0.0, window_s - (time.monotonic() - started)))
            after = [Command(tuple(found[COUNTERS].argv), found[COUNTERS].timeout_s, COUNTERS_AFTER, COUNTERS,
                             found[COUNTERS].typical_s)]
            again = _run(fleet, vantage, after)
            if not isinstance(again, HostError):
                again = _once_more(fleet, vantage, after, again, found, run)
            outcome = outcome + again if not isinstance(again, HostError) else outcome + [
                CommandResult(tuple(found[COUNTERS].argv), "", exit_code=None, error=str(again))]
    finally:
        link.close()
    if isinstance(outcome, HostError):
        run.error = f"{vantage.name}: {outcome}"
        run.errors = {cid: run.error for cid in found}
        return run
    names = [*found, COUNTERS_AFTER][:len(outcome)]
    results = {name: spool.inline(r) for name, r in zip(names, outcome, strict=True)}
    refs = store.write_evidence(vantage.name, results)
    run.results = results
    run.evidence = {name: f"{FABRIC_DIR}/{ref}" for name, ref in refs.items()}
    texts: dict[str, str] = {}
    for name, result in results.items():
        cid = COUNTERS if name == COUNTERS_AFTER else name
        why = _failure(result, found[cid].ok_exit_codes)
        if why is None:
            texts[name] = result.stdout
        else:
            run.errors.setdefault(cid, f"{cid} on {vantage.name}: {why}")
    before = texts.pop(COUNTERS, None) if COUNTERS_AFTER in results else None
    if COUNTERS_AFTER in texts:
        texts[COUNTERS] = texts.pop(COUNTERS_AFTER)  # the counters as they stand after the window
    try:
        run.subnet = views_of(texts) if TOPOLOGY in texts else None
        run.counters_before = found[COUNTERS].parse(before) if before is not None and COUNTERS in texts else None
    except ParseError:
        # Which output is unreadable: each parsed alone, the unreadable ones left out of the merge.
        for cid in list(texts):
            try:
                found[cid].parse(texts[cid])
            except ParseError as exc:
                run.errors.setdefault(cid, f"{cid} on {vantage.name}: unreadable output: {exc}")
                del texts[cid]
        if before is not None:
            try:
                run.counters_before = found[COUNTERS].parse(before)
            except ParseError as exc:
                run.errors.setdefault(COUNTERS, f"{COUNTERS} on {vantage.name}: unreadable output: {exc}")
        try:
            run.subnet = views_of(texts) if TOPOLOGY in texts else None
        except ParseError as exc:  # each output reads alone, not together (a link naming a node nowhere else)
            run.errors.setdefault(TOPOLOGY, f"the fabric tools' outputs on {vantage.name} disagree: {exc}")
    store.write_fabric(document(run))
    store.sync()
    return run


def document(run: FabricRun) -> dict[str, Any]:
    """fabric.json: the vantage, what failed, and the fabric as subnet.model writes it (the counters of the later
    reading; the first reading's beside them)."""
    return {"vantage": run.vantage, "collected_at": utc_now(), "window_s": run.window_s, "errors": run.errors,
            "retried": run.retried,
            "subnet": run.subnet.to_dict() if run.subnet is not None else None,
            "counters_before": run.counters_before.to_dict()["counters"] if run.counters_before is not None else None}
