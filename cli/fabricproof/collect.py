"""Collection: hosts x collectors over a transport, bounded concurrency; raw evidence and facts into a run directory."""

from __future__ import annotations

import ctypes
import fnmatch
import json
import math
import os
import secrets
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from . import __version__
from . import facts as facts_mod
from .capture import platform_of
from .collectors import COLLECTORS, Collector, default_collectors
from .errors import InputError, Problem
from .fsutil import atomic_write_text
from .inventory import Host
from .model import CommandResult, ExitCode
from .timeutil import utc_now
from .transport.base import ErrorKind, HostError, Transport
from .transport.replay import META, RUN_FILE, STDERR_SUFFIX, STDOUT_SUFFIX, raw_dir

_LIBC = ctypes.CDLL(None, use_errno=True)  # this process's libc (dlopen(NULL)): no ldconfig lookup

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


# ---------------------------------------------------------------------------------------- input checks


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


def check_host_names(names: Sequence[str]) -> None:
    """Host names become directory names under raw/: refuse ones that would escape or hide there."""
    bad = [n for n in names if not n or "/" in n or "\0" in n or n.startswith(".")]
    if bad:
        raise InputError(f"host name {bad[0]!r} cannot name a file: inventory host names for collection must not "
                         f"be empty, contain '/' or start with '.'")


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def prepare_run_dir(run_dir: Path) -> Path:
    """Create RUNDIR, refusing one that already holds a run: evidence is never overwritten."""
    run_dir = Path(run_dir)
    if run_dir.exists() and not run_dir.is_dir():
        raise InputError(Problem("the run directory is a file", str(run_dir)))
    if run_dir.is_dir() and any((run_dir / n).exists() for n in (RUN_FILE, "raw", "facts")):
        raise InputError(Problem("this directory already holds a collection run; give -o a new directory",
                                 str(run_dir)))
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(Problem(f"cannot create the run directory: {exc.strerror}", str(run_dir))) from None
    return run_dir


# ---------------------------------------------------------------------------------------- facts


def host_platform(doc: Mapping[str, Any]) -> str | None:
    """The platform (a100, h100, ...) a facts document shows, from its GPU names; None if unknown or mixed."""
    gpus = ((doc.get("gpu") or {}).get("gpus")) or []
    found = {platform_of(str(g.get("name") or "")) for g in gpus if isinstance(g, dict)}
    return found.pop() if len(found) == 1 else None


def mark_not_applicable(doc: dict[str, Any]) -> dict[str, Any]:
    """A collector that failed on a platform it is not for (no Fabric Manager on a GB200 tray, no IMEX on
    an H100) was not needed there: record it as skipped with the reason, not as a collection error."""
    platform = host_platform(doc)
    if platform is None:
        return doc
    for cid, run in doc.get("collectors", {}).items():
        collector = COLLECTORS.get(cid)
        if collector is None or run.get("status") != "error" or platform in collector.platforms:
            continue
        run["status"] = "skipped"
        run["error"] = f"not applicable on {platform} (for {', '.join(collector.platforms)}): {run.get('error', '')}"
    return doc


# ---------------------------------------------------------------------------------------- the run


class _Run:
    """The state of one collection, shared by the worker threads; every write of shared state holds the lock."""

    def __init__(self, run_dir: Path, hosts: Sequence[Host], collectors: Sequence[Collector], via: str,
                 run_id: str, progress: Progress | None, sink: Sink | None = None):
        self.run_dir = run_dir
        self.hosts = {h.name: h for h in hosts}
        self.collectors = list(collectors)
        self.via = via
        self.result = CollectResult(run_dir=run_dir, run_id=run_id, via=via, hosts=tuple(self.hosts),
                                    started_at=utc_now())
        self.progress = progress
        self.sink = sink
        self.lock = threading.Lock()
        self.crunch = threading.Lock()
        self.t0 = time.monotonic()
        self.counts = {"done": 0, "failed": 0, "partial": 0}
        self.recorded: set[str] = set()

    def record(self, name: str, outcome: Sequence[CommandResult] | HostError) -> None:
        """Write one host's evidence and facts, then report progress. Never raises for host data."""
        with self.lock:
            if name in self.recorded or name not in self.hosts:
                return
            self.recorded.add(name)
        if isinstance(outcome, HostError):
            with self.lock:
                self.result.errors[name] = outcome
            self._report(name, "failed", str(outcome))
            return
        with self.crunch:
            self._record_outputs(name, outcome)

    def _record_outputs(self, name: str, outcome: Sequence[CommandResult]) -> None:
        host = self.hosts[name]
        outputs = {c.id: r for c, r in zip(self.collectors, outcome, strict=True)}
        evidence = self._write_raw(name, outputs)
        doc = mark_not_applicable(facts_mod.build(name, outputs, via=self.via, groups=host.groups,
                                                  collected_at=utc_now(), evidence=evidence))
        # Compact JSON: the C encoder is ~8x cheaper than indented output, and this runs once per host.
        # Renamed into place, not fsynced one by one: the run syncs its file system once, at the end.
        path = self.run_dir / "facts" / f"{name}.json"
        tmp = path.with_name(f".{path.name}.tmp")
        _write_bytes(tmp, (json.dumps(doc, separators=(",", ":"), ensure_ascii=False) + "\n").encode())
        os.replace(tmp, path)
        failed = {cid: str(run.get("error", "failed")) for cid, run in doc["collectors"].items()
                  if run.get("status") == "error"}
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

    def _write_raw(self, name: str, outputs: Mapping[str, CommandResult]) -> dict[str, str]:
        """RUNDIR/raw/<host>/: written whole in a hidden sibling, then renamed into place, so a reader sees a
        host's evidence complete or not at all, for one rename instead of one per file."""
        final = raw_dir(self.run_dir, name)
        staging = final.with_name(f".{name}.partial")  # hidden: host names never start with "."
        if staging.exists():
            shutil.rmtree(staging)  # left by a crash of an earlier attempt at this very run directory
        staging.mkdir()
        meta: dict[str, Any] = {}
        evidence: dict[str, str] = {}
        for cid, r in outputs.items():
            out = r.stdout.encode("utf-8", errors="replace")
            err = r.stderr.encode("utf-8", errors="replace")
            _write_bytes(staging / f"{cid}{STDOUT_SUFFIX}", out)
            if err:
                _write_bytes(staging / f"{cid}{STDERR_SUFFIX}", err)
            evidence[cid] = f"raw/{name}/{cid}{STDOUT_SUFFIX}"
            meta[cid] = {"argv": list(r.argv), "exit_code": r.exit_code, "duration_s": round(r.duration_s, 3),
                         "error": r.error, "stdout_bytes": len(out), "stderr_bytes": len(err)}
        # One collector per line: readable, and the C encoder (indent= would take the pure-Python one).
        _write_bytes(staging / META, ("{\n" + ",\n".join(f"{json.dumps(cid)}:{json.dumps(m)}" for cid, m in meta.items())
                                      + "\n}\n").encode())
        os.rename(staging, final)  # the directory must not exist yet: evidence is never overwritten
        return evidence

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

    def write_manifest(self, status: str, extra: Mapping[str, Any]) -> None:
        r = self.result
        doc = {
            "apiVersion": "fabricproof/v1", "kind": "CollectionRun", "run_id": r.run_id, "status": status,
            "via": r.via, "tool_version": __version__, "started_at": r.started_at, "finished_at": r.finished_at,
            "duration_s": round(r.duration_s, 3), **extra,
            "hosts": list(r.hosts),
            "collectors": [{"id": c.id, "command": c.command, "timeout_s": c.timeout_s} for c in self.collectors],
            "counts": {"hosts": len(r.hosts), "collected": len(r.collected), "not_collected": len(r.errors),
                       "with_collector_errors": len(r.collector_errors)},
            "errors": {h: {"kind": e.kind.value, "message": e.message} for h, e in sorted(r.errors.items())},
            "collector_errors": dict(sorted(r.collector_errors.items())),
        }
        atomic_write_text(self.run_dir / RUN_FILE, json.dumps(doc, indent=1) + "\n")


def _write_bytes(path: Path, data: bytes) -> None:
    """One evidence file. Not fsynced one by one (27 files a host): the whole file system is synced once
    before run.json records the run as complete."""
    with open(path, "wb") as fh:
        fh.write(data)


def _sync_filesystem(path: Path) -> None:
    """syncfs(2) on the run directory's file system: one flush for all the evidence of a run."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if getattr(_LIBC, "syncfs", None) is not None and _LIBC.syncfs(fd) == 0:
            return
        os.sync()  # no syncfs (not glibc): flush everything, still once per run
    finally:
        os.close(fd)


def _guarded(fn: Callable[[], Sequence[CommandResult]], host: str) -> Sequence[CommandResult] | HostError:
    try:
        return fn()
    except HostError as exc:
        return exc
    except Exception as exc:  # a transport bug on one host must not sink the fleet; say what it was
        return HostError(ErrorKind.FAILED, f"{host}: {type(exc).__name__}: {exc}")


def collect(hosts: Sequence[Host], run_dir: Path, transport: Transport, *,
            collectors: Sequence[Collector] | None = None, forks: int = DEFAULT_FORKS,
            host_timeout_s: float = DEFAULT_HOST_TIMEOUT_S, command_timeout_s: float | None = None,
            progress: Progress | None = None, run_id: str | None = None,
            manifest: Mapping[str, Any] | None = None, sink: Sink | None = None) -> CollectResult:
    """Run every collector on every host and write RUNDIR/raw/<host>/<collector>.txt (+ .stderr, meta.json),
    RUNDIR/facts/<host>.json and RUNDIR/run.json. Host failures become per-host errors; the run goes on.

    `run_dir` must have been through prepare_run_dir(). `command_timeout_s` caps every collector's own
    timeout; `host_timeout_s` bounds one host from connect to last byte. `manifest` adds keys to run.json
    (inventory, limit). `progress` is called once per host, from worker threads, one call at a time.
    `sink`, when given, takes each host's facts from the worker thread that built them, and the result
    does not hold them (facts_by_host stays empty; `collected` names the hosts).
    """
    if forks < 1:
        raise InputError(f"--forks must be at least 1, got {forks}")
    check_host_names([h.name for h in hosts])
    chosen = list(collectors) if collectors is not None else list(default_collectors())
    argvs = [c.argv for c in chosen]
    timeouts = [min(c.timeout_s, command_timeout_s) if command_timeout_s else c.timeout_s for c in chosen]
    run = _Run(Path(run_dir), hosts, chosen, getattr(transport, "name", type(transport).__name__),
               run_id or new_run_id(), progress, sink)
    extra = dict(manifest or {})
    for sub in ("raw", "facts"):
        (run.run_dir / sub).mkdir(parents=True, exist_ok=True)
    run.write_manifest("running", extra)
    status = "interrupted"
    try:
        run_fleet = getattr(transport, "run_fleet", None)
        if run_fleet is not None:
            waves = math.ceil(len(hosts) / max(1, min(forks, len(hosts) or 1)))
            deadline = time.monotonic() + host_timeout_s * max(1, waves)
            outcomes = run_fleet(list(hosts), argvs, timeouts, deadline,
                                 lambda name, outcome: run.record(name, outcome))
            for name in run.hosts:  # outcomes the transport did not stream, and hosts it forgot
                run.record(name, outcomes.get(name) or HostError(ErrorKind.FAILED,
                                                                 f"{name}: the transport returned nothing"))
        else:
            def one(host: Host) -> None:
                deadline = time.monotonic() + host_timeout_s
                outcome = _guarded(lambda: transport.run_many(host, argvs, timeouts, deadline), host.name)
                run.record(host.name, outcome)

            with ThreadPoolExecutor(max_workers=max(1, min(forks, len(hosts))), thread_name_prefix="collect") as pool:
                futures = [pool.submit(one, h) for h in hosts]
                try:
                    for f in futures:
                        f.result()
                except BaseException:
                    # Ctrl-C: hosts not started are dropped, and closing the transport cuts the
                    # running ones short instead of letting them run to their deadlines.
                    pool.shutdown(wait=False, cancel_futures=True)
                    transport.close()
                    raise
        status = "complete"
    finally:
        r = run.result
        r.finished_at = utc_now()
        r.duration_s = time.monotonic() - run.t0
        _sync_filesystem(run.run_dir)  # evidence and facts are on disk before run.json says so
        run.write_manifest(status, extra)
    return run.result


def reparse(run_dir: Path, hosts: Sequence[Host] | None = None,
            collectors: Sequence[Collector] | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Facts rebuilt in memory from a run directory's raw evidence, with its recorded host errors: what
    `validate --raw RUNDIR` evaluates after a parser fix. Writes nothing. Hosts default to every host the
    run holds (without inventory groups); collectors to the ones the run recorded in run.json."""
    from .transport.replay import ReplayTransport

    replay = ReplayTransport(run_dir=Path(run_dir))
    if collectors is None:
        try:
            recorded = [c.get("id") for c in json.loads((Path(run_dir) / RUN_FILE).read_text()).get("collectors", [])]
        except (FileNotFoundError, json.JSONDecodeError, AttributeError):
            recorded = []
        collectors = [COLLECTORS[c] for c in recorded if c in COLLECTORS] or list(default_collectors())
    chosen = list(collectors)
    facts_by_host: dict[str, dict[str, Any]] = {}
    errors: dict[str, str] = {}
    for host in hosts if hosts is not None else [Host(n) for n in replay.hosts()]:
        outcome = _guarded(lambda h=host: replay.run_many(h, [c.argv for c in chosen], [c.timeout_s for c in chosen]),
                           host.name)
        if isinstance(outcome, HostError):
            errors[host.name] = str(outcome)
            continue
        outputs = {c.id: r for c, r in zip(chosen, outcome, strict=True)}
        evidence = {cid: f"raw/{host.name}/{cid}{STDOUT_SUFFIX}" for cid in outputs
                    if (raw_dir(Path(run_dir), host.name) / f"{cid}{STDOUT_SUFFIX}").is_file()}
        facts_by_host[host.name] = mark_not_applicable(facts_mod.build(
            host.name, outputs, via="replay", groups=host.groups, collected_at=utc_now(), evidence=evidence))
    return facts_by_host, errors
