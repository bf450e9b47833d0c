"""Fleet collection, the one library call: hosts x collectors over a transport into a run store, bounded concurrency.

Every command and the rollout gates collect through `collect()`: it validates the settings, makes the transport
from the registry and closes it, writes raw evidence and facts through the run store, and reports each host as
it finishes (progress) or hands its facts to a sink (a streaming evaluation) instead of holding them.
"""

from __future__ import annotations

import fnmatch
import secrets
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__, transport
from . import facts as facts_mod
from . import inventory as inventory_mod
from .collectors import COLLECTORS, Collector, default_collectors
from .errors import InputError
from .model import Command, CommandResult, ExitCode, Host
from .redact import Redactor, secret_values
from .runstore import RunStore, check_host_names, manifest_document
from .timeutil import utc_now
from .transport import ErrorKind, HostError, Outcome, Reach, RunContext

DEFAULT_FORKS = 64
DEFAULT_HOST_TIMEOUT_S = 300.0


@dataclass(frozen=True)
class HostProgress:
    """One host finished (collected, partly collected, or not collected)."""

    host: str
    status: str  # "ok", "partial" (some collectors failed) or "failed" (host not collected)
    message: str  # the host error, or the failed collectors
    done: int
    failed: int  # hosts not collected so far
    partial: int
    total: int
    elapsed_s: float


Progress = Callable[[HostProgress], None]
#: Takes each host's facts as the host finishes (a streaming evaluation), instead of the run holding them all.
Sink = Callable[[str, dict[str, Any]], None]


@dataclass
class CollectResult:
    """What a collection produced; facts and errors also sit in the run directory."""

    run_dir: Path
    run_id: str
    via: str
    hosts: tuple[str, ...]
    facts_by_host: dict[str, dict[str, Any]] = field(default_factory=dict)  # empty when a sink took the facts
    collected: list[str] = field(default_factory=list)  # hosts with facts, in the order they finished
    errors: dict[str, HostError] = field(default_factory=dict)  # hosts not collected at all
    collector_errors: dict[str, dict[str, str]] = field(default_factory=dict)  # host -> collector -> reason
    started_at: str = ""
    finished_at: str = ""
    duration_s: float = 0.0

    @property
    def collection_errors(self) -> dict[str, str]:
        """host -> reason for every host not collected (the shape evaluate() takes)."""
        return {h: str(e) for h, e in sorted(self.errors.items())}

    @property
    def complete(self) -> bool:
        return not self.errors and not self.collector_errors

    @property
    def exit_code(self) -> int:
        return ExitCode.OK if self.complete else ExitCode.INCOMPLETE


# ---------------------------------------------------------------------------------------- choosing what to run


def select_collectors(patterns: Sequence[str] | None = None) -> list[Collector]:
    """Collectors by id or glob (comma-separated or repeated). An exact id picks any collector; a glob
    picks only standard ones, so `nvidia_smi*` does not also run the alternatives that fill /gpu."""
    if not patterns:
        return list(default_collectors())
    terms = [t.strip() for p in patterns for t in p.split(",") if t.strip()]
    chosen: dict[str, Collector] = {}
    for term in terms:
        if term in COLLECTORS:
            chosen[term] = COLLECTORS[term]
            continue
        hits = [c for c in default_collectors() if fnmatch.fnmatchcase(c.id, term)]
        if not hits:
            raise InputError(f"--collectors {term!r} matches no collector; see `fabricproof collectors list`")
        chosen.update((c.id, c) for c in hits)
    by_pointer: dict[str, list[str]] = {}
    for c in chosen.values():
        by_pointer.setdefault(c.provides, []).append(c.id)
    clashes = {p: ids for p, ids in by_pointer.items() if len(ids) > 1}
    if clashes:
        p, ids = next(iter(sorted(clashes.items())))
        raise InputError(f"--collectors: {' and '.join(ids)} both fill {p}; choose one")
    return [c for c in COLLECTORS.values() if c.id in chosen]  # registry order: stable raw/ and facts


def this_node(inventory: str | None = None, name: str | None = None, groups: Sequence[str] = ()) -> Host:
    """This node, named `name` or by its short hostname; its groups are `groups` plus, when the inventory lists
    it, the inventory's."""
    name = name or socket.gethostname().split(".")[0]
    found: tuple[str, ...] = ()
    if inventory:
        inv = inventory_mod.load(inventory)
        if name in inv.hosts:
            found = inv.hosts[name].groups
    return Host(name, {}, tuple(sorted({*groups, *found})))


def select_hosts(inventory: str | None, limit: str | None, via: str) -> list[Host]:
    """The hosts a run over `via` targets, before any is touched (inventory and --limit errors exit 2 here):
    this node for a transport that reaches itself, else the inventory's hosts matching --limit."""
    if transport.kind(via, transport.LIVE).reach is Reach.SELF:
        return [this_node(inventory)]
    if not inventory:
        raise InputError(f"--via {via} needs --inventory (-i)")
    inv = inventory_mod.load(inventory)
    return [inv.hosts[name] for name in inventory_mod.limit(inv, limit)]


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def check_settings(forks: int, host_timeout_s: float, command_timeout_s: float | None) -> None:
    """The one place fleet settings are validated (exit 2, before any host is touched)."""
    if forks < 1:
        raise InputError(f"--forks must be at least 1, got {forks}")
    if host_timeout_s <= 0 or (command_timeout_s is not None and command_timeout_s <= 0):
        raise InputError("--host-timeout and --command-timeout must be positive")


# ---------------------------------------------------------------------------------------- the run


class _Recorder:
    """The state of one collection, shared by the worker threads; every write of shared state holds the lock."""

    def __init__(self, store: RunStore, hosts: Sequence[Host], collectors: Sequence[Collector], via: str,
                 run_id: str, progress: Progress | None, sink: Sink | None):
        self.store = store
        self.hosts = {h.name: h for h in hosts}
        self.collectors = list(collectors)
        self.via = via
        self.result = CollectResult(run_dir=store.root, run_id=run_id, via=via, hosts=tuple(self.hosts),
                                    started_at=utc_now())
        self.progress = progress
        self.sink = sink
        # Messages about a host reach run.json, reports, rollout state and the decision log: no secret of the
        # inventory may ride along (a transport or tool may quote a setting back).
        self.redact = Redactor(secret_values(h.vars for h in hosts))
        self.lock = threading.Lock()
        # Host processing (parse, write) runs one host at a time: threads waiting on a Lock sleep, while
        # threads contending for the GIL wake every 5 ms (this halved context switches on 200 lab hosts).
        self.crunch = threading.Lock()
        self.t0 = time.monotonic()
        self.counts = {"done": 0, "failed": 0, "partial": 0}
        self.recorded: set[str] = set()

    def record(self, name: str, outcome: Outcome) -> None:
        """Write one host's evidence and facts, then report progress. Never raises for host data."""
        with self.lock:
            if name in self.recorded or name not in self.hosts:
                return
            self.recorded.add(name)
        if isinstance(outcome, HostError):
            outcome = HostError(outcome.kind, self.redact(outcome.message), outcome.retryable)
            with self.lock:
                self.result.errors[name] = outcome
            self._report(name, "failed", str(outcome))
            return
        with self.crunch:
            self._record_outputs(name, outcome)

    def _record_outputs(self, name: str, outcome: Sequence[CommandResult]) -> None:
        host = self.hosts[name]
        outputs = {c.id: r for c, r in zip(self.collectors, outcome, strict=True)}
        evidence = self.store.write_evidence(name, outputs)
        doc = facts_mod.mark_not_applicable(facts_mod.build(name, outputs, via=self.via, groups=host.groups,
                                                            collected_at=utc_now(), evidence=evidence))
        failed = {}
        for cid, run in doc["collectors"].items():
            if run.get("status") == "error":
                run["error"] = failed[cid] = self.redact(str(run.get("error", "failed")))
        self.store.write_facts(name, doc)
        if self.sink is not None:
            self.sink(name, doc)
        with self.lock:
            self.result.collected.append(name)
            if self.sink is None:
                self.result.facts_by_host[name] = doc
            if failed:
                self.result.collector_errors[name] = failed
        message = "; ".join(f"{cid}: {why}" for cid, why in failed.items())
        self._report(name, "partial" if failed else "ok", message)

    def _report(self, name: str, status: str, message: str) -> None:
        with self.lock:
            self.counts["done"] += 1
            if status != "ok":
                self.counts[status] += 1
            event = HostProgress(host=name, status=status, message=message, done=self.counts["done"],
                                 failed=self.counts["failed"], partial=self.counts["partial"],
                                 total=len(self.hosts), elapsed_s=time.monotonic() - self.t0)
            if self.progress is not None:
                self.progress(event)  # under the lock: renderers see events one at a time, in order

    def write_manifest(self, status: str, settings: Mapping[str, Any]) -> None:
        r = self.result
        self.store.write_manifest(manifest_document(
            run_id=r.run_id, status=status, via=r.via, tool_version=__version__, started_at=r.started_at,
            finished_at=r.finished_at, duration_s=r.duration_s, hosts=r.hosts,
            commands=[{"id": c.id, "command": c.command, "timeout_s": c.timeout_s} for c in self.collectors],
            collected=len(r.collected), errors={h: (e.kind.value, e.message) for h, e in r.errors.items()},
            command_errors=r.collector_errors, settings=settings))


def collect(hosts: Sequence[Host], run_dir: Path, *, via: str = "ssh", options: Any = None,
            collectors: Sequence[Collector] | None = None, forks: int = DEFAULT_FORKS,
            host_timeout_s: float = DEFAULT_HOST_TIMEOUT_S, command_timeout_s: float | None = None,
            progress: Progress | None = None, sink: Sink | None = None, run_id: str | None = None,
            inventory: str | None = None, limit: str | None = None) -> CollectResult:
    """Run the collectors on every host over transport `via` into a new run directory: RUNDIR/raw/<host>/,
    RUNDIR/facts/<host>.json and RUNDIR/run.json (see runstore). Host failures become per-host errors; the
    run goes on.

    `options` is the transport's own options type (transport.configure builds it from command settings; None
    takes its defaults). `command_timeout_s` caps every collector's own timeout; `host_timeout_s` bounds one
    host from connect to last byte. `inventory` and `limit` are recorded in run.json. `progress` is called once
    per host, from worker threads, one call at a time. `sink`, when given, takes each host's facts from the
    worker thread that built them, and the result does not hold them (facts_by_host stays empty).
    """
    check_settings(forks, host_timeout_s, command_timeout_s)
    check_host_names([h.name for h in hosts])
    chosen = list(collectors) if collectors is not None else list(default_collectors())
    commands = [Command(c.argv, min(c.timeout_s, command_timeout_s) if command_timeout_s else c.timeout_s, c.id,
                        c.lock, c.typical_s) for c in chosen]
    store = RunStore.create(run_dir)
    run_id = run_id or new_run_id()
    ctx = RunContext(run_dir=store.root, run_id=run_id, forks=forks, host_timeout_s=host_timeout_s)
    link, fleet = transport.open_fleet(via, options, ctx)
    run = _Recorder(store, hosts, chosen, via, run_id, progress, sink)
    settings = {"inventory": inventory, "limit": limit, "forks": forks, "host_timeout_s": host_timeout_s,
                "command_timeout_s": command_timeout_s}
    store.begin()
    run.write_manifest("running", settings)
    status = "interrupted"
    try:
        fleet.run(list(hosts), commands, run.record)
        for name in run.hosts:  # hosts the transport forgot to report
            run.record(name, HostError(ErrorKind.FAILED, f"{name}: the transport returned nothing"))
        status = "complete"
    finally:
        link.close()
        r = run.result
        r.finished_at = utc_now()
        r.duration_s = time.monotonic() - run.t0
        store.sync()  # evidence and facts are on disk before run.json says so
        run.write_manifest(status, settings)
    return run.result


def reparse(run_dir: Path, hosts: Sequence[Host] | None = None,
            collectors: Sequence[Collector] | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Facts rebuilt in memory from a run directory's raw evidence, with its recorded host errors: what
    `validate --raw RUNDIR` evaluates after a parser fix. Writes nothing. Hosts default to every host the
    run holds (without inventory groups); collectors to the ones the run recorded in run.json."""
    from .transport.fanout import guarded
    from .transport.replay import ReplayOptions, ReplayTransport

    store = RunStore.open(run_dir)
    replay = ReplayTransport(ReplayOptions(store.root))
    if collectors is None:
        collectors = [COLLECTORS[c] for c in store.recorded_commands() if c in COLLECTORS] or list(default_collectors())
    chosen = list(collectors)
    commands = [Command(c.argv, c.timeout_s, c.id) for c in chosen]
    facts_by_host: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for host in hosts if hosts is not None else [Host(n) for n in replay.hosts()]:
        outcome = guarded(replay, host, commands, time.monotonic() + DEFAULT_HOST_TIMEOUT_S)
        if isinstance(outcome, HostError):
            errors[host.name] = str(outcome)
            continue
        outputs = {c.id: r for c, r in zip(chosen, outcome, strict=True)}
        evidence = {cid: store.evidence_ref(host.name, cid) for cid in outputs if store.has_output(host.name, cid)}
        facts_by_host[host.name] = facts_mod.mark_not_applicable(facts_mod.build(
            host.name, outputs, via="replay", groups=host.groups, collected_at=utc_now(), evidence=evidence))
    return facts_by_host, errors
