"""Fleet collection, the one library call: hosts x collectors over a transport into a run store, bounded concurrency.

Every command and the rollout gates collect through `collect()`: it validates the settings, makes the transport
from the registry and closes it, writes raw evidence and facts through the run store, and reports each host as
it finishes (progress) or hands its facts to a sink (a streaming evaluation) instead of holding them.
"""

from __future__ import annotations

import fnmatch
import secrets
import socket
import time
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from .. import facts as facts_mod
from .. import inventory as inventory_mod
from .. import transport
from ..collectors import COLLECTORS, Collector, default_collectors
from ..errors import InputError, WriteError
from ..judging.packing import no_cycles
from ..model import Command, Host
from ..runstore import RunStore, check_host_names
from ..timeutil import utc_now
from ..transport import ErrorKind, HostError, Reach, RunContext
from . import shards
from .record import CollectResult, HostProgress, Progress, Recorder, Sink

__all__ = ["DEFAULT_FORKS", "DEFAULT_HOST_TIMEOUT_S", "CollectResult", "HostProgress", "Progress", "Sink",
           "check_settings", "collect", "new_run_id", "reparse", "select_collectors", "select_hosts", "this_node"]

DEFAULT_FORKS = 64
DEFAULT_HOST_TIMEOUT_S = 300.0


# ---------------------------------------------------------------------------------------- choosing what to run


def select_collectors(patterns: Sequence[str] | None = None) -> list[Collector]:
    """Collectors by id or glob (comma-separated or repeated). An exact id picks any collector; a glob
    picks only standard ones, so `nvidia_smi*` does not also run the alternatives that fill /gpu."""
    if not patterns:
        return list(default_collectors())
    terms = [t.strip() for p in patterns for t in p.split(",") if t.strip()]
    chosen: dict[str, Collector] = {}
    for term in terms:
        if term in COLLECTORS and COLLECTORS[term].loads_fabric:
            # A probe loads the GPUs and links: it runs only through the guarded probe path (idle guard, budget,
            # its host's own argv), never as a plain collector on a node that may be doing work.
            raise InputError(f"--collectors {term!r} is a probe: run it with `validate --probes {term}` (or "
                             f"`check --local --probes {term}`), which runs it only on idle nodes")
        if term in COLLECTORS and COLLECTORS[term].fabric_scope:
            raise InputError(f"--collectors {term!r} is the fabric plan's diff, made once on the vantage host: give "
                             "the plan with `validate --fabric-plan PLAN`")
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


def this_node(inventory: str | None = None, name: str | None = None, groups: Sequence[str] = (),
              loaded: inventory_mod.Inventory | None = None) -> Host:
    """This node, named `name` or by its short hostname; its groups are `groups` plus, when the inventory lists
    it, the inventory's (`loaded`: that inventory, already read)."""
    name = name or socket.gethostname().split(".")[0]
    found: tuple[str, ...] = ()
    if inventory:
        inv = loaded or inventory_mod.load(inventory)
        if name in inv.hosts:
            found = inv.hosts[name].groups
    return Host(name, {}, tuple(sorted({*groups, *found})))


def select_hosts(inventory: str | None, limit: str | None, via: str,
                 loaded: inventory_mod.Inventory | None = None) -> list[Host]:
    """The hosts a run over `via` targets, before any is touched (inventory and --limit errors exit 2 here):
    this node for a transport that reaches itself, else the inventory's hosts matching --limit (`loaded`: that
    inventory, already read)."""
    if transport.kind(via, transport.LIVE).reach is Reach.SELF:
        return [this_node(inventory)]
    if not inventory:
        raise InputError(f"--via {via} needs --inventory (-i)")
    inv = loaded or inventory_mod.load(inventory)
    return [inv.hosts[name] for name in inventory_mod.limit(inv, limit)]


def new_run_id() -> str:
    return datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ") + "-" + secrets.token_hex(3)


def check_settings(forks: int, host_timeout_s: float, command_timeout_s: float | None,
                   workers: int | None = None, *, host_timeout_option: str = "--host-timeout") -> None:
    """The one place fleet settings are validated (exit 2, before any host is touched). `host_timeout_option`
    is the option the command calls the host timeout by (check --local: --timeout)."""
    if forks < 1:
        raise InputError(f"--forks must be at least 1, got {forks}")
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    if host_timeout_s <= 0:
        raise InputError(f"{host_timeout_option} must be positive, got {host_timeout_s:g}")
    if command_timeout_s is not None and command_timeout_s <= 0:
        raise InputError(f"--command-timeout must be positive, got {command_timeout_s:g}")


# ---------------------------------------------------------------------------------------- the run


def _shardable(via: str) -> bool:
    """Hosts of this transport may be spread over worker processes: it reaches them one at a time, from here."""
    k = transport.kind(via)
    return k.fleet_runner == transport.TransportKind.fleet_runner and k.reach is not Reach.SELF


def collect(hosts: Sequence[Host], run_dir: Path, *, via: str = "ssh", options: Any = None,
            collectors: Sequence[Collector] | None = None, forks: int = DEFAULT_FORKS,
            host_timeout_s: float = DEFAULT_HOST_TIMEOUT_S, command_timeout_s: float | None = None,
            progress: Progress | None = None, sink: Sink | None = None, run_id: str | None = None,
            inventory: str | None = None, limit: str | None = None, workers: int | None = None,
            durable: bool = True) -> CollectResult:
    """Run the collectors on every host over transport `via` into a new run directory: RUNDIR/raw/<host>/,
    RUNDIR/facts/<host>.json and RUNDIR/run.json (see runstore). Host failures become per-host errors; the
    run goes on.

    `options` is the transport's own options type (transport.configure builds it from command settings; None
    takes its defaults). `command_timeout_s` caps every collector's own timeout; `host_timeout_s` bounds one
    host from connect to last byte. `inventory` and `limit` are recorded in run.json. `progress` is called once
    per host, one call at a time. `sink`, when given, takes each host's facts as the host finishes, and the result
    does not hold them (facts_by_host stays empty). `durable=False` skips the one flush of the file system before
    run.json says complete, for a run directory removed once judged (check --local's temporary one): on a node whose
    job is writing, syncfs(2) would wait for the job's data too.

    `workers` processes share the hosts (default: the machine's cores, for fleets big enough to pay for them; see
    shards.worker_count), each parsing and writing its own hosts; `forks` stays the hosts collected at once in
    total. Progress and the sink run in this process, as records stream back. A worker that dies leaves its
    unfinished hosts recorded as not collected; Ctrl-C leaves run.json saying which hosts were done.
    """
    check_settings(forks, host_timeout_s, command_timeout_s, workers)
    check_host_names([h.name for h in hosts])
    chosen = list(collectors) if collectors is not None else list(default_collectors())
    commands = [Command(c.argv, min(c.timeout_s, command_timeout_s) if command_timeout_s else c.timeout_s, c.id,
                        c.lock, c.typical_s) for c in chosen]
    # Workers look collectors up by id: one that is not the registry's own stays in this process.
    registered = all(COLLECTORS.get(c.id) is c for c in chosen)
    n_workers = shards.worker_count(workers, len(hosts), forks, _shardable(via) and registered)
    store = RunStore.create(run_dir)
    run_id = run_id or new_run_id()
    ctx = RunContext(run_dir=store.root, run_id=run_id, forks=forks, host_timeout_s=host_timeout_s)
    run = Recorder(store, hosts, chosen, via, run_id, progress, sink)
    run.result.workers = n_workers
    settings = {"inventory": inventory, "limit": limit, "forks": forks, "workers": n_workers,
                "host_timeout_s": host_timeout_s, "command_timeout_s": command_timeout_s}
    link = None
    if n_workers == 1:
        link, fleet = transport.open_fleet(via, options, ctx)
    store.begin()
    run.write_manifest("running", settings)
    status, reason = "interrupted", ""
    try:
        if link is None:
            # This process only takes the workers' facts (JSON data, no cycles) and hands them to the sink: the cyclic
            # collector walked them and the imports for ~1 ms a host (150 lab hosts, 2 workers), for nothing.
            with no_cycles():
                shards.run_sharded(hosts, commands, [c.id for c in chosen], via, options, ctx, n_workers,
                                   run.accept, run.is_recorded)
        else:
            fleet.run(list(hosts), commands, run.record)
        for name in run.names:  # hosts the transport forgot to report
            run.record(name, HostError(ErrorKind.FAILED, f"{name}: the transport returned nothing"))
        status = "complete"
    except WriteError as exc:
        status, reason = "incomplete", str(exc)
        store.discard_staging()
        raise
    finally:
        if link is not None:
            link.close()
        r = run.result
        r.finished_at = utc_now()
        r.duration_s = time.monotonic() - run.t0
        try:
            if durable:
                store.sync()  # evidence and facts are on disk before run.json says so
            run.write_manifest(status, settings, reason)
        except WriteError:
            if not reason:
                raise
            # run.json cannot say it either: the failed write already names the path, and that error stands.
    return run.result


def reparse(run_dir: Path, hosts: Sequence[Host] | None = None,
            collectors: Sequence[Collector] | None = None) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """Facts rebuilt in memory from a run directory's raw evidence, with its recorded host errors: what
    `validate --raw RUNDIR` evaluates after a parser fix. Writes nothing. Hosts default to every host the
    run holds (without inventory groups); collectors to the ones the run recorded in run.json."""
    from ..transport.fanout import guarded
    from ..transport.replay import ReplayOptions, ReplayTransport

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
