"""Recording a collection: each host's evidence and facts into the run store (in whichever process collected it),
and the one account of the run (results, progress, the streaming sink, run.json) in the process that started it."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from .. import facts as facts_mod
from ..collectors import Collector
from ..model import CommandResult, Host
from ..redact import Redactor, secret_values
from ..runstore import RunStore, facts_bytes, facts_from_bytes, manifest_document
from ..timeutil import utc_now
from ..transport import ErrorKind, HostError, Outcome


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
    worker: int = 0  # pid of the worker process that collected it; 0 for this process


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
    done: list[str] = field(default_factory=list)  # every host that finished (collected or not), in that order
    workers: int = 1  # processes that collected

    @property
    def collection_errors(self) -> dict[str, str]:
        """host -> reason for every host not collected (the shape evaluate() takes)."""
        return {h: str(e) for h, e in sorted(self.errors.items())}

    @property
    def pending(self) -> list[str]:
        """Hosts the run did not finish (an interrupted run), in inventory order."""
        finished = set(self.done)
        return [h for h in self.hosts if h not in finished]

    @property
    def complete(self) -> bool:
        return not self.errors and not self.collector_errors

    @property
    def exit_code(self) -> int:
        from ..model import ExitCode

        return ExitCode.OK if self.complete else ExitCode.INCOMPLETE


@dataclass(frozen=True)
class Finished:
    """One host as recorded: its facts (and failed collectors), or why it was not collected. Crosses processes."""

    host: str
    doc: dict[str, Any] | None = None
    failed: dict[str, str] = field(default_factory=dict)  # collector id -> reason
    error: tuple[str, str, bool] | None = None  # (ErrorKind value, message, retryable)
    worker: int = 0
    #: The facts file's bytes, as the run store wrote them from doc (None: not written yet, or not kept).
    written: bytes | None = field(default=None, repr=False, compare=False)

    def __reduce__(self) -> tuple[Any, ...]:
        # A worker's host crosses the pipe as its facts file's JSON, not as a pickled dict: the bytes are already
        # made, and msgspec reads them back in ~0.75 ms of a lab host's 174 KB where pickle took ~1.5 (both ends).
        # The parent then judges what the facts file holds, as `validate --facts` would.
        if self.doc is None:
            return Finished, (self.host, None, self.failed, self.error, self.worker)
        written = self.written if self.written is not None else facts_bytes(self.doc)
        return _from_json, (self.host, written, self.failed, self.error, self.worker)

    @property
    def host_error(self) -> HostError | None:
        if self.error is None:
            return None
        kind, message, retryable = self.error
        return HostError(next((k for k in ErrorKind if k.value == kind), ErrorKind.FAILED), message, retryable)


def _from_json(host: str, written: bytes, failed: dict[str, str], error: tuple[str, str, bool] | None,
               worker: int) -> Finished:
    return Finished(host, facts_from_bytes(written), failed, error, worker)


def not_collected(host: str, error: HostError, worker: int = 0) -> Finished:
    return Finished(host, error=(error.kind.value, error.message, error.retryable), worker=worker)


class HostWriter:
    """Turns one host's outcome into its evidence and facts in the run store. Never raises for host data. One host
    at a time: threads waiting on a Lock sleep, while threads contending for the GIL wake every 5 ms (this halved
    context switches on 200 lab hosts)."""

    def __init__(self, store: RunStore, hosts: Sequence[Host], collectors: Sequence[Collector], via: str,
                 worker: int = 0):
        self.store = store
        self.hosts = {h.name: h for h in hosts}
        self.collectors = list(collectors)
        self.via = via
        self.worker = worker
        # Messages about a host reach run.json, reports, rollout state and the decision log: no secret of the
        # inventory may ride along (a transport or tool may quote a setting back).
        self.redact = Redactor(secret_values(h.vars for h in hosts))
        self.crunch = threading.Lock()

    def write(self, name: str, outcome: Outcome) -> Finished:
        if isinstance(outcome, HostError):
            return not_collected(name, HostError(outcome.kind, self.redact(outcome.message), outcome.retryable),
                                 self.worker)
        with self.crunch:
            return self._write_outputs(name, outcome)

    def _write_outputs(self, name: str, outcome: Sequence[CommandResult]) -> Finished:
        host = self.hosts[name]
        outputs = {c.id: r for c, r in zip(self.collectors, outcome, strict=True)}
        evidence = self.store.write_evidence(name, outputs)
        outputs = {cid: self.store.placed(name, cid, r) for cid, r in outputs.items()}
        doc = facts_mod.mark_not_applicable(facts_mod.build(name, outputs, via=self.via, groups=host.groups,
                                                            collected_at=utc_now(), evidence=evidence))
        failed = {}
        for cid, run in doc["collectors"].items():
            if run.get("status") == "error":
                run["error"] = failed[cid] = self.redact(str(run.get("error", "failed")))
        written = self.store.write_facts(name, doc)
        return Finished(name, doc=doc, failed=failed, worker=self.worker, written=written)


class Recorder:
    """The account of one collection in the process that started it; every write of shared state holds the lock."""

    def __init__(self, store: RunStore, hosts: Sequence[Host], collectors: Sequence[Collector], via: str,
                 run_id: str, progress: Progress | None, sink: Sink | None):
        self.store = store
        self.names = [h.name for h in hosts]
        self.expected = set(self.names)
        self.collectors = list(collectors)
        self.writer = HostWriter(store, hosts, collectors, via)
        self.result = CollectResult(run_dir=store.root, run_id=run_id, via=via, hosts=tuple(self.names),
                                    started_at=utc_now())
        self.progress = progress
        self.sink = sink
        self.lock = threading.Lock()
        self.t0 = time.monotonic()
        self.counts = {"done": 0, "failed": 0, "partial": 0}
        self.recorded: set[str] = set()

    def record(self, name: str, outcome: Outcome) -> None:
        """A host collected in this process: write it, then account for it."""
        if self._claim(name):
            self._account(self.writer.write(name, outcome))

    def accept(self, finished: Finished) -> None:
        """A host recorded elsewhere (a worker process wrote its evidence and facts)."""
        if self._claim(finished.host):
            self._account(finished)

    def is_recorded(self, name: str) -> bool:
        with self.lock:
            return name in self.recorded

    def _claim(self, name: str) -> bool:
        with self.lock:
            if name in self.recorded or name not in self.expected:
                return False
            self.recorded.add(name)
            return True

    def _account(self, f: Finished) -> None:
        error = f.host_error
        if error is not None:
            with self.lock:
                self.result.errors[f.host] = error
            self._report(f.host, "failed", str(error), f.worker)
            return
        assert f.doc is not None
        if self.sink is not None:
            self.sink(f.host, f.doc)
        with self.lock:
            self.result.collected.append(f.host)
            if self.sink is None:
                self.result.facts_by_host[f.host] = f.doc
            if f.failed:
                self.result.collector_errors[f.host] = dict(f.failed)
        message = "; ".join(f"{cid}: {why}" for cid, why in f.failed.items())
        self._report(f.host, "partial" if f.failed else "ok", message, f.worker)

    def _report(self, name: str, status: str, message: str, worker: int) -> None:
        with self.lock:
            self.result.done.append(name)
            self.counts["done"] += 1
            if status != "ok":
                self.counts[status] += 1
            event = HostProgress(host=name, status=status, message=message, done=self.counts["done"],
                                 failed=self.counts["failed"], partial=self.counts["partial"],
                                 total=len(self.names), elapsed_s=time.monotonic() - self.t0, worker=worker)
            if self.progress is not None:
                self.progress(event)  # under the lock: renderers see events one at a time, in order

    def write_manifest(self, status: str, settings: Mapping[str, Any], reason: str = "") -> None:
        r = self.result
        with self.lock:
            done = list(r.done)
            errors = {h: (e.kind.value, e.message) for h, e in r.errors.items()}
            collected = len(r.collected)
            command_errors = {h: dict(e) for h, e in r.collector_errors.items()}
        self.store.write_manifest(manifest_document(
            run_id=r.run_id, status=status, via=r.via, tool_version=__version__, started_at=r.started_at,
            finished_at=r.finished_at, duration_s=r.duration_s, hosts=r.hosts,
            commands=[{"id": c.id, "command": c.command, "timeout_s": c.timeout_s} for c in self.collectors],
            collected=collected, errors=errors, command_errors=command_errors, settings=settings,
            done=done if status != "running" else None, reason=reason))
