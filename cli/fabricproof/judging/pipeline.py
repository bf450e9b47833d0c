"""The one pipeline call: facts from a source (a live collection, saved facts, a caller's own collection), judged
against a baseline and checks, the reports written beside the evidence. validate, check --local, the rollout gates
and the soak all go through run()."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import __version__
from .. import facts as facts_mod
from .. import inventory as inventory_mod
from ..collect import DEFAULT_FORKS, DEFAULT_HOST_TIMEOUT_S, CollectResult, HostProgress, collect, reparse
from ..collectors import Collector
from ..errors import InputError
from ..fsutil import atomic_write_chunks
from ..model import Host, Report
from ..reporters import REPORTERS
from ..runstore import RunStore
from ..timeutil import utc_now
from .baseline import Baseline
from .catalog import Check
from .evaluate import StreamingEvaluation, evaluate, exit_code
from .packing import no_cycles

Facts = Mapping[str, Any]


def _same(report: Report) -> Report:
    return report


@dataclass(frozen=True)
class Added:
    """What a step run between the collection and the evaluation adds (the probes): every collected host's facts with
    its own merged in, hosts it counts as not collected (beside those the collection lost), and a last touch to the
    report (its figures)."""

    facts: dict[str, dict[str, Any]]
    errors: Mapping[str, str] = field(default_factory=dict)
    finish: Callable[[Report], Report] = _same


@dataclass(frozen=True)
class Live:
    """Collect these hosts now over transport `via`, into `run_dir`, kept as the evidence; with no `run_dir`, into a
    temporary run directory removed afterwards, and the facts then cite no evidence. `progress` is entered for the
    collection's time and called once per host. `then` runs after the collection, before the evaluation (which then
    waits for every host instead of judging each as it finishes)."""

    hosts: Sequence[Host]
    run_dir: Path | None
    via: str = "ssh"
    options: Any = None
    collectors: Sequence[Collector] | None = None
    forks: int = DEFAULT_FORKS
    host_timeout_s: float = DEFAULT_HOST_TIMEOUT_S
    command_timeout_s: float | None = None
    workers: int | None = None
    inventory: str | None = None  # recorded in run.json, with the limit
    limit: str | None = None
    progress: AbstractContextManager[Callable[[HostProgress], None]] | None = None  # entered while collecting
    then: Callable[[CollectResult], Added] | None = None


@dataclass(frozen=True)
class Saved:
    """Facts an earlier run saved: a facts or run directory (`facts`), or a run directory's raw evidence parsed again
    (`raw`). The scope is the inventory (with `limit`) when one is given, else the run's own manifest: a host either
    lists without facts is not collected, never passed over."""

    facts: Path | None = None
    raw: Path | None = None
    inventory: inventory_mod.Inventory | None = None
    limit: str | None = None


class Returned(Protocol):
    """What a delegated collection returns (rollout.gate.Collected has this shape)."""

    @property
    def facts(self) -> Mapping[str, dict[str, Any]]: ...

    @property
    def errors(self) -> Mapping[str, str]: ...


@dataclass(frozen=True)
class Delegated:
    """A collection the caller runs with settings of its own (the rollout's): `collect(hosts, evidence_dir)` returns
    the facts it got and why the other hosts have none."""

    hosts: Sequence[str]
    evidence_dir: Path
    collect: Callable[[list[str], Path], Returned]
    finish: Callable[[Report], Report] = _same  # a last touch to the report, once judged (a collective's section)


Source = Live | Saved | Delegated


@dataclass(frozen=True)
class Request:
    """What to prove: the facts' source, what they are judged against, and which reports go beside the evidence."""

    source: Source
    baseline: Baseline
    checks: Sequence[Check]
    groups: Mapping[str, Sequence[str]] = field(default_factory=dict)  # host -> its inventory groups
    previous: Mapping[str, Facts] | None = None  # earlier facts of the same hosts: the counter-delta checks
    reports: Sequence[str] = ()  # formats written beside the evidence (report.<extension>, mode 600)
    run_id: str = ""  # the report's; a live collection records it too (else it makes one of its own)
    hold: bool = False  # keep every host's facts in the result; else a live collection is judged as hosts finish


@dataclass(frozen=True)
class Unfinished:
    """Saved facts from a run that did not finish (its run.json's status)."""

    source: Path
    status: str
    with_facts: int  # hosts that have facts
    hosts: int  # hosts the run set out to collect


@dataclass(frozen=True)
class Judged:
    """The outcome: the report, the facts judged (when held), the reports written and where the evidence lies."""

    report: Report
    facts: dict[str, dict[str, Any]]
    written: dict[str, Path]  # format -> its report beside the evidence
    evidence_dir: Path | None  # None: saved facts, or a temporary collection
    unfinished: Unfinished | None = None

    def exit_code(self, fail_on: str = "critical", require_all: bool = False) -> int:
        return exit_code(self.report, fail_on, require_all)


@dataclass(frozen=True)
class Gathered:
    """Facts per host in scope, and why the other hosts in scope have none."""

    facts: dict[str, dict[str, Any]]
    errors: dict[str, str]


def run(request: Request) -> Judged:
    """Facts from the request's source, judged against its baseline and checks, its reports written beside the
    evidence. Raises InputError (exit 2) for saved facts that cannot be read."""
    source = request.source
    if isinstance(source, Live):
        return _live(request, source)
    if isinstance(source, Saved):
        return _judged_saved(request, source)
    gathered = gather(source)
    return _judged(request, gathered.facts, gathered.errors, source.evidence_dir, source.finish)


def gather(source: Delegated) -> Gathered:
    """The collection step alone (a soak's first snapshot): the hosts in scope, each with facts or a reason."""
    returned = source.collect(list(source.hosts), source.evidence_dir)
    scope = set(source.hosts)
    facts = {h: f for h, f in returned.facts.items() if h in scope and h not in returned.errors}
    missing = {h: "no facts came back" for h in source.hosts if h not in facts and h not in returned.errors}
    return Gathered(facts, {**missing, **{h: e for h, e in returned.errors.items() if h in scope}})


def _meta(request: Request) -> dict[str, str]:
    return {"run_id": request.run_id, "created_at": utc_now(), "tool_version": __version__}


def _judged(request: Request, facts: dict[str, dict[str, Any]], errors: Mapping[str, str], evidence_dir: Path | None,
            finish: Callable[[Report], Report] = _same, unfinished: Unfinished | None = None) -> Judged:
    report = finish(evaluate(facts, request.baseline, request.checks, groups=request.groups,
                             previous=request.previous, collection_errors=errors, **_meta(request)))
    return Judged(report, facts, _write(report, evidence_dir, request.reports), evidence_dir, unfinished)


def _write(report: Report, evidence_dir: Path | None, formats: Sequence[str]) -> dict[str, Path]:
    """The report in each format beside the evidence it rests on, made piece by piece (a fleet's report is large)."""
    written: dict[str, Path] = {}
    if evidence_dir is None:
        return written
    store = RunStore(evidence_dir)
    for fmt in formats:
        reporter = REPORTERS[fmt]
        written[fmt] = store.report_file(reporter.extension)
        atomic_write_chunks(written[fmt], reporter.pieces(report), mode=0o600)
    return written


def _cite_none(doc: dict[str, Any]) -> dict[str, Any]:
    """Facts whose evidence went with a temporary run: they cite none."""
    for collector_run in doc["collectors"].values():
        collector_run.pop("evidence", None)
    return doc


def _live(request: Request, source: Live) -> Judged:
    if source.run_dir is not None:
        return _collected(request, source, source.run_dir, kept=True)
    scratch = Path(tempfile.mkdtemp(prefix="fabricproof-check-"))
    try:
        return _collected(request, source, scratch / "run", kept=False)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _collected(request: Request, source: Live, run_dir: Path, kept: bool) -> Judged:
    """Collect into run_dir and judge; facts of a run that is not kept cite no evidence."""
    evidence_dir = run_dir if kept else None
    cite: Callable[[dict[str, Any]], dict[str, Any]] = (lambda doc: doc) if kept else _cite_none
    settings: dict[str, Any] = {
        "via": source.via, "options": source.options, "collectors": source.collectors, "forks": source.forks,
        "host_timeout_s": source.host_timeout_s, "command_timeout_s": source.command_timeout_s,
        "run_id": request.run_id or None, "inventory": source.inventory, "limit": source.limit,
        "workers": source.workers, "durable": kept}
    if source.then is None and not request.hold:
        # Judged as hosts finish: memory stays flat with fleet size (the facts are on disk, in the run).
        stream = StreamingEvaluation(request.baseline, request.checks, groups=request.groups,
                                     previous=request.previous)
        with source.progress or nullcontext() as progress:
            result = collect(source.hosts, run_dir, progress=progress,
                             sink=lambda host, doc: stream.add(host, cite(doc)), **settings)
        report = stream.finish(result.collection_errors, **_meta(request))
        return Judged(report, {}, _write(report, evidence_dir, request.reports), evidence_dir)
    with source.progress or nullcontext() as progress:
        result = collect(source.hosts, run_dir, progress=progress, **settings)
    added = source.then(result) if source.then is not None else Added(result.facts_by_host)
    lost = result.collection_errors
    errors = {**lost, **{h: e for h, e in added.errors.items() if h not in lost}}
    if kept and source.then is not None:  # the run's facts are what was judged, the step's own merged in
        store = RunStore(run_dir)
        for host, doc in added.facts.items():
            store.write_facts(host, doc)
    facts = {host: cite(doc) for host, doc in added.facts.items()}
    return _judged(request, facts, errors, evidence_dir, added.finish)


def _judged_saved(request: Request, source: Saved) -> Judged:
    """Saved facts judged a host at a time, as a live run is (a directory of 10,000 hosts is never held whole:
    only what fleet checks compare is kept of each host's facts), or held whole when the request asks."""
    if request.hold:
        held: dict[str, dict[str, Any]] = {}
        errors, unfinished = _saved(source, held.__setitem__)
        return _judged(request, held, errors, None, unfinished=unfinished)
    stream = StreamingEvaluation(request.baseline, request.checks, groups=request.groups, previous=request.previous)
    with no_cycles():
        errors, unfinished = _saved(source, stream.add)
        report = stream.finish(errors, **_meta(request))
    return Judged(report, {}, {}, None, unfinished)


def _saved(source: Saved, judge: Callable[[str, dict[str, Any]], None]) -> tuple[dict[str, str], Unfinished | None]:
    """Hand each host's facts from a facts or run directory, or re-parsed raw evidence, to `judge` one at a time;
    return the collection errors of the hosts in scope, and whether that run was unfinished."""
    where = source.raw or source.facts
    if where is None:
        raise InputError("no saved facts: give a facts directory or a run directory")
    found: Iterable[tuple[str, dict[str, Any]]]
    if source.raw:
        if not source.raw.is_dir():
            raise InputError(f"{source.raw}: run directory not found")
        reparsed, collection_errors = reparse(source.raw)
        if not reparsed and not collection_errors:
            raise InputError(f"{source.raw}: no raw evidence (raw/<host>/...) in this run directory")
        found = reparsed.items()
    else:
        found = facts_mod.iter_dir(where)
        # Hosts a run could not collect, as its run.json records them (none for a plain facts directory).
        collection_errors = {h: e["message"] for h, e in RunStore(where).recorded_errors().items()}
    manifest = RunStore(where).manifest() or {}
    unfinished = manifest.get("status", "complete") != "complete"
    if source.inventory is not None:
        scope = set(inventory_mod.limit(source.inventory, source.limit))  # every inventory host when no limit
        if source.limit:
            collection_errors = {h: e for h, e in collection_errors.items() if h in scope}
    elif source.limit:
        raise InputError("--limit needs --inventory")
    else:
        scope = set(manifest.get("hosts") or ())  # the hosts the run set out to collect
    judged: set[str] = set()
    for host, doc in found:
        if source.inventory is None or not source.limit or host in scope:
            judge(host, doc)
            judged.add(host)
    # A host in scope that has no facts is not a pass: it is reported as not collected (exit 3).
    why = (f"the run did not finish (run.json: status {manifest['status']}), and this host has no facts in {where}"
           if unfinished else f"no facts for this host in {where}")
    for host in sorted(scope - judged - set(collection_errors)):
        collection_errors[host] = why
    return (collection_errors,
            Unfinished(where, str(manifest["status"]), len(judged), len(manifest.get("hosts") or ()))
            if unfinished else None)
