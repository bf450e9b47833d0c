"""Running probes over a fleet: the idle guard before every probe, each host's own argv from its baseline values,
one probe at a time per host (an HCA probe's HCAs side by side), pairwise probes in rounds with a localisation
round, and one budget over the whole run. Evidence and facts go to a run store of their own."""

from __future__ import annotations

import dataclasses
import math
import statistics
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import __version__
from .. import facts as facts_mod
from .. import spool, transport
from ..collectors import COLLECTORS
from ..collectors.base import FABRIC_LOAD, NOT_RUN_EXIT, ParseError, not_run_line, not_run_reason
from ..errors import InputError
from ..model import Command, CommandResult, Host, Report
from ..runstore import PROBES_DIR, RunStore, check_host_names, manifest_document
from ..timeutil import utc_now
from ..transport import HostError, RunContext
from ..transport.fanout import STOP_GRACE_S
from ..transport.fanout import guarded as run_guarded
from . import guard, pairing, rendezvous, spec
from .figures import Figure, of_host, report_rows

#: A probe is not started with less of the budget left than this: it could not finish.
MIN_START_S = 5.0
#: How long a pair client keeps knocking while its server starts (the server waits this long more than its run).
DEFAULT_RENDEZVOUS_S = 30
#: A pair is slow when below this fraction of the fleet's median, if the baseline sets no figure for it.
MEDIAN_FRACTION = 0.9
_IDLE_NAME = "idle_check"


@dataclass(frozen=True)
class ProbeSettings:
    """How a probe run goes: its budget (None: no limit), --require-idle, the pairing rounds, the forks."""

    budget_s: float | None = None
    require_idle: bool = False
    shuffles: int | None = None  # pairing rounds beside the ring; None: about log2(N) in all
    seed: int = 0
    rendezvous_s: int = DEFAULT_RENDEZVOUS_S
    forks: int = 64


@dataclass(frozen=True)
class ProbeEvent:
    """Progress: one probe finished on one host (or one pair), in one stage ("node", "hca", "round 2/4",
    "localise")."""

    probe: str
    stage: str
    subject: str  # a host, or "server -> client"
    status: str  # ok, slow, skipped, error
    message: str
    elapsed_s: float


@dataclass
class ProbeRun:
    """What a probe run measured; its evidence and facts are in run_dir too."""

    run_dir: Path
    probes: tuple[str, ...]
    facts_by_host: dict[str, dict[str, Any]] = field(default_factory=dict)  # probe collectors only
    errors: dict[str, str] = field(default_factory=dict)  # hosts not reached at all
    rounds: dict[str, list[pairing.Round]] = field(default_factory=dict)  # pair probe -> its rounds (localisation last)
    pairs: dict[str, dict[pairing.Pair, bool]] = field(default_factory=dict)  # pair probe -> pair -> fast enough
    blame: dict[str, dict[str, pairing.Blame]] = field(default_factory=dict)
    stopped: str = ""  # "budget" when the budget ran out, "interrupted" on Ctrl-C
    duration_s: float = 0.0

    def figures(self) -> list[Figure]:
        return [f for host, doc in sorted(self.facts_by_host.items()) for f in of_host(host, doc)]


Values = Callable[[Host], Mapping[str, Any]]
Progress = Callable[[ProbeEvent], None]


def data_address(host: Host) -> str:
    """What a pair client dials: the host's fabricproof_data_address (its address on the fabric), else the
    address it is reached at, else its name."""
    for key in ("fabricproof_data_address", "ansible_host"):
        if host.vars.get(key):
            return spec.server_address(str(host.vars[key]))
    return spec.server_address(host.name)


def _timeout(probe: spec.Probe, values: Mapping[str, Any]) -> float:
    return probe.timeout_s(values) if probe.timeout_s else COLLECTORS[probe.id].timeout_s


def _not_run(argv: Sequence[str], why: str) -> CommandResult:
    """A probe the run did not start, recorded as the guard records one it refused (skipped, with the reason)."""
    return CommandResult(tuple(argv), not_run_line(why), exit_code=NOT_RUN_EXIT)


def _titled(parts: Sequence[tuple[str, str]]) -> str:
    """Outputs under '==> target <==' titles, the form the perftest parser reads."""
    return "".join(f"==> {name} <==\n{text.rstrip(chr(10))}\n" for name, text in parts)


class _Runner:
    def __init__(self, hosts: Sequence[Host], values: Values, facts: Mapping[str, Mapping[str, Any]],
                 link: transport.Transport, settings: ProbeSettings, progress: Progress | None):
        self.hosts = {h.name: h for h in hosts}
        self.values = {h.name: values(h) for h in hosts}
        self.facts = facts
        self.link = link
        self.s = settings
        self.progress = progress
        self.t0 = time.monotonic()
        self.deadline = self.t0 + settings.budget_s if settings.budget_s else math.inf
        self.outputs: dict[str, dict[str, CommandResult]] = {h: {} for h in self.hosts}
        self.refused: set[tuple[str, str]] = set()  # (host, probe) the idle guard refused
        self.errors: dict[str, str] = {}
        self.lock = threading.Lock()
        self.budget_hit = False
        self.stopping = threading.Event()  # Ctrl-C: start nothing more

    # ---------------------------------------------------------------------------------------- plumbing

    def left(self) -> float:
        return self.deadline - time.monotonic()

    def budget_note(self) -> str:
        self.budget_hit = True
        return f"the probe budget ({self.s.budget_s:g} s) was spent before it started"

    def tell(self, probe: str, stage: str, subject: str, status: str, message: str = "") -> None:
        if self.progress is not None:
            with self.lock:
                self.progress(ProbeEvent(probe, stage, subject, status, message, time.monotonic() - self.t0))

    def run(self, host: str, commands: list[Command]) -> list[CommandResult] | None:
        """The commands on one host, or None (recorded as the host's error) when it could not be reached."""
        if self.stopping.is_set():
            return None
        outcome = run_guarded(self.link, self.hosts[host], commands,
                              time.monotonic() + sum(c.timeout_s + 5 for c in commands) + 30)
        if isinstance(outcome, HostError):
            with self.lock:
                self.errors.setdefault(host, str(outcome))
            return None
        # Probe outputs are combined as text (a pair's two ends, an HCA's server and client): held in memory.
        return [spool.inline(r) for r in outcome]

    def command(self, argv: Sequence[str], timeout_s: float, name: str, tool: str = FABRIC_LOAD) -> Command:
        # Never past the budget: the transport's watchdog stops a probe at its command's timeout.
        return Command(tuple(argv), max(1.0, min(timeout_s, self.left())), name, tool)

    def keep(self, host: str, probe: str, result: CommandResult) -> str:
        """Record a host's result of a probe; its status for progress."""
        with self.lock:
            self.outputs[host][probe] = result
        why = not_run_reason(result.exit_code, result.stdout)
        if why is not None:
            return f"skipped: {why}"
        if result.error:
            return f"error: {result.error}"
        if result.exit_code != 0:
            return f"error: exit {result.exit_code}"
        return "ok"

    def idle(self, names: Sequence[str], probe: str, stage: str) -> list[str]:
        """The hosts whose idle check passes now (the others get the probe recorded as refused)."""

        def one(name: str) -> str | None:
            if self.left() < MIN_START_S:
                self.keep(name, probe, _not_run(("true",), self.budget_note()))
                return None
            got = self.run(name, [self.command(guard.IDLE_CHECK, 60.0, _IDLE_NAME, "")])
            if got is None:
                return None
            why = not_run_reason(got[0].exit_code, got[0].stdout)
            if why is None and got[0].exit_code == 0:
                return name
            self.refused.add((name, probe))
            self.keep(name, probe, got[0] if why else _not_run(got[0].argv, f"the idle check failed: "
                                                                             f"{got[0].error or got[0].exit_code}"))
            self.tell(probe, stage, name, "skipped", why or "the idle check failed")
            return None

        with ThreadPoolExecutor(max_workers=max(1, min(self.s.forks, len(names)))) as pool:
            return [n for n in pool.map(one, names) if n]

    # ---------------------------------------------------------------------------------------- layouts

    def node_probe(self, probe: spec.Probe, names: Sequence[str]) -> None:
        def one(name: str) -> None:
            values = self.values[name]
            assert probe.node_argv is not None
            argv = guard.guarded(probe.node_argv(values))
            if self.left() < MIN_START_S:
                self.keep(name, probe.id, _not_run(argv, self.budget_note()))
                self.tell(probe.id, "node", name, "skipped", "budget spent")
                return
            got = self.run(name, [self.command(argv, _timeout(probe, values), probe.id)])
            if got is None:
                self.tell(probe.id, "node", name, "error", self.errors.get(name, ""))
                return
            if not_run_reason(got[0].exit_code, got[0].stdout) is not None:
                self.refused.add((name, probe.id))
            status = self.keep(name, probe.id, got[0])
            self.tell(probe.id, "node", name, status.split(":")[0], status)

        with ThreadPoolExecutor(max_workers=max(1, min(self.s.forks, len(names)))) as pool:
            list(pool.map(one, names))

    def hca_probe(self, probe: spec.Probe, names: Sequence[str]) -> None:
        def one(name: str) -> None:
            values = self.values[name]
            assert probe.hca_runs is not None
            runs = probe.hca_runs(values, self.facts.get(name))
            if not runs:
                self.keep(name, probe.id, _not_run((probe.binary(values),), "no HCA to test: set "
                                                   "perf.probes.perftest.hcas or collect topo_matrix first"))
                self.tell(probe.id, "hca", name, "skipped", "no HCA known")
                return
            if self.left() < MIN_START_S:
                self.keep(name, probe.id, _not_run(runs[0].server_argv, self.budget_note()))
                return
            timeout = _timeout(probe, values)
            # Every HCA's server in its own lane (side by side, one port each), then the clients, which knock
            # until their server listens.
            servers = [self.command(guard.guarded(r.server_argv, check=False), timeout + self.s.rendezvous_s,
                                    f"{probe.id}.{r.hca}.server", f"hca:{r.hca}") for r in runs]
            clients = [self.command(guard.guarded(rendezvous.client(r.client_argv, self.s.rendezvous_s), check=False),
                                    timeout + self.s.rendezvous_s, f"{probe.id}.{r.hca}.client", f"hca:{r.hca}")
                       for r in runs]
            with ThreadPoolExecutor(max_workers=2) as pool:
                fs = pool.submit(self.run, name, servers)
                fc = pool.submit(self.run, name, clients)
                got_s, got_c = fs.result(), fc.result()
            if got_s is None or got_c is None:
                self.tell(probe.id, "hca", name, "error", self.errors.get(name, ""))
                return
            text = _titled([(r.hca, s.stdout + c.stdout) for r, s, c in zip(runs, got_s, got_c, strict=True)])
            bad = next((x for x in (*got_s, *got_c) if x.error), None)
            status = self.keep(name, probe.id, CommandResult(runs[0].client_argv, text, "", 0 if bad is None else None,
                                                              max(x.duration_s for x in got_c),
                                                              bad.error if bad else None))
            self.tell(probe.id, "hca", name, status.split(":")[0], status)

        with ThreadPoolExecutor(max_workers=max(1, min(self.s.forks, len(names)))) as pool:
            list(pool.map(one, names))

    def pair_probe(self, probe: spec.Probe, names: Sequence[str]) -> tuple[list[pairing.Round], dict[pairing.Pair, bool]]:
        parts: dict[str, list[tuple[str, str]]] = {n: [] for n in names}
        errors: dict[str, str] = {}
        figures: dict[pairing.Pair, float | None] = {}
        planned = pairing.plan_rounds(names, self.s.shuffles, self.s.seed)
        done: list[pairing.Round] = []
        assert probe.pair_argv is not None

        def pair(server: str, client: str) -> tuple[pairing.Pair, float | None]:
            address = data_address(self.hosts[server])
            s_argv = probe.pair_argv(self.values[server], address, None)[0]
            c_argv = probe.pair_argv(self.values[client], address, None)[1]
            timeout = _timeout(probe, self.values[client])
            with ThreadPoolExecutor(max_workers=2) as pool:
                fs = pool.submit(self.run, server, [self.command(guard.guarded(s_argv, check=False),
                                                                 timeout + self.s.rendezvous_s, probe.id)])
                fc = pool.submit(self.run, client, [self.command(
                    guard.guarded(rendezvous.client(c_argv, self.s.rendezvous_s), check=False),
                    timeout + self.s.rendezvous_s, probe.id)])
                got_s, got_c = fs.result(), fc.result()
            if got_s is None or got_c is None:
                return (server, client), None
            body = got_s[0].stdout + got_c[0].stdout
            with self.lock:
                n = sum(1 for p in parts[client] if p[0].split("#")[0] == server)
                parts[client].append((server + (f"#{n + 1}" if n else ""), body))
                m = sum(1 for p in parts[server] if p[0].split("#")[0] == client)
                parts[server].append((client + (f"#{m + 1}" if m else ""), body))
                if got_c[0].error or got_s[0].error:
                    errors[client] = errors[server] = got_c[0].error or got_s[0].error or ""
            try:
                target = next(iter(COLLECTORS[probe.id].parse(_titled([("x", body)]))["targets"].values()))
            except ParseError:
                return (server, client), math.nan  # it ran and measured nothing: the pair failed
            key = "bw_average_gbps" if probe.id == "ib_pair_bw" else "t_typical_us"
            return (server, client), target.get(key)

        def measure(r: pairing.Round, stage: str) -> dict[pairing.Pair, bool]:
            if self.left() < MIN_START_S:
                self.budget_note()
                return {}
            with ThreadPoolExecutor(max_workers=max(1, min(self.s.forks, 2 * len(r) or 1))) as pool:
                got = dict(pool.map(lambda p: pair(*p), r))
            done.append(r)
            out: dict[pairing.Pair, bool] = {}
            for p, value in got.items():
                figures[p] = value
                if value is None:
                    continue  # a member could not be reached: untested, not slow
                out[p] = self._fast(probe.id, p, value, figures)
                self.tell(probe.id, stage, f"{p[0]} -> {p[1]}", "ok" if out[p] else "slow",
                          "measured nothing" if math.isnan(value) else f"{value:g}")
            return out

        # run_rounds measures the planned rounds in order, then at most one localisation round.
        stages = iter([*(f"round {k}/{len(planned)}" for k in range(1, len(planned) + 1)), "localise"])
        results = pairing.run_rounds(planned, lambda r: measure(r, next(stages)))
        for name in names:
            if parts[name]:
                self.keep(name, probe.id, CommandResult((probe.binary(self.values[name]),), _titled(parts[name]), "",
                                                        None if name in errors else 0, 0.0, errors.get(name)))
            elif self.budget_hit:
                self.keep(name, probe.id, _not_run((probe.binary(self.values[name]),), self.budget_note()))
        return done, results

    def _fast(self, probe: str, p: pairing.Pair, value: float, figures: Mapping[pairing.Pair, float | None]) -> bool:
        """Fast enough: at the client's baseline figure (perf.ib.pair_bw_gbps / pair_lat_us), else within
        MEDIAN_FRACTION of the pairs measured so far."""
        if math.isnan(value):
            return False
        ib = (self.values[p[1]].get("perf") or {}).get("ib") or {}
        if probe == "ib_pair_bw":
            if ib.get("pair_bw_gbps") is not None:
                return value >= float(ib["pair_bw_gbps"])
            seen = [v for v in figures.values() if v is not None and not math.isnan(v)]
            return value >= MEDIAN_FRACTION * statistics.median(seen)
        if ib.get("pair_lat_us") is not None:
            return value <= float(ib["pair_lat_us"])
        seen = [v for v in figures.values() if v is not None and not math.isnan(v)]
        return value <= statistics.median(seen) / MEDIAN_FRACTION


def run_probes(hosts: Sequence[Host], run_dir: Path, probes: Sequence[str], *, values: Values,
               facts: Mapping[str, Mapping[str, Any]] | None = None, via: str = "ssh", options: Any = None,
               settings: ProbeSettings = ProbeSettings(), progress: Progress | None = None,
               run_id: str = "") -> ProbeRun:
    """Run `probes` on `hosts` over `via` into a new run store at run_dir (raw/<host>/<probe>, facts/<host>.json).

    `values(host)` gives the host's baseline values (its probe settings and thresholds), `facts` its earlier facts
    (the HCAs nearest each GPU). Node probes first, then HCA probes, then pairwise ones; a host runs one probe at a
    time. A host the idle guard refuses gets the probe recorded as skipped with the reason (error with
    settings.require_idle). The budget bounds the whole run: probes not started in it are recorded as not run,
    running ones stop at it. Ctrl-C closes the transport, which ends every remote probe (the guard watches its
    session), and the facts of what finished are still written."""
    kind = transport.kind(via)
    if kind.fleet_runner != transport.TransportKind.fleet_runner:
        raise InputError(f"--via {via}: probes run over a transport that reaches one host at a time "
                         f"({', '.join(n for n in transport.names() if transport.kind(n).fleet_runner == kind.fleet_runner) or 'ssh, local'})")
    if settings.budget_s is not None and settings.budget_s <= 0:
        raise InputError("--probe-budget must be positive")
    if settings.rendezvous_s < 1:
        raise InputError("the rendezvous must be at least 1 s")
    check_host_names([h.name for h in hosts])
    store = RunStore.create(run_dir)
    store.begin()
    started = utc_now()
    ctx = RunContext(run_dir=store.root, run_id=run_id or "probes", forks=settings.forks, host_timeout_s=3600.0)
    link, _fleet = transport.open_fleet(via, options, ctx)
    runner = _Runner(hosts, values, facts or {}, link, settings, progress)
    result = ProbeRun(store.root, tuple(probes))
    names = [h.name for h in hosts]

    def probe_all() -> None:
        for pid in probes:
            probe = spec.PROBES[pid]
            reachable = [n for n in names if n not in runner.errors]
            if probe.layout is spec.Layout.NODE:
                runner.node_probe(probe, reachable)
            elif probe.layout is spec.Layout.HCA:
                runner.hca_probe(probe, runner.idle(reachable, pid, "hca"))
            else:
                idle = runner.idle(reachable, pid, "pairs")
                result.rounds[pid], result.pairs[pid] = runner.pair_probe(probe, idle)
                result.blame[pid] = pairing.blame(idle, result.pairs[pid])

    # The probes run in a thread of their own so that Ctrl-C reaches this one at once, not after the running
    # probes end: closing the transport cuts every probe's channel, each guard then ends its probe on the node.
    failure: list[BaseException] = []

    # Waits are on an event, not Thread.join: a join interrupted by Ctrl-C marks the running thread stopped
    # (CPython 3.11), and the run would then be recorded complete while its probes still run.
    finished = threading.Event()

    def body() -> None:
        try:
            probe_all()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread below
            failure.append(exc)
        finally:
            finished.set()

    worker = threading.Thread(target=body, name="probes", daemon=True)
    try:
        worker.start()
        while not finished.wait(0.2):
            pass
        if failure:
            raise failure[0]
        result.stopped = "budget" if runner.budget_hit else ""
    except BaseException:
        if not finished.is_set():
            result.stopped = "interrupted"
            runner.stopping.set()
            link.close()
            finished.wait(STOP_GRACE_S)
        raise
    finally:
        link.close()
        result.errors = dict(runner.errors)
        result.facts_by_host = _record(store, hosts, runner, via, settings.require_idle, result)
        result.duration_s = time.monotonic() - runner.t0
        store.sync()
        store.write_manifest(manifest_document(
            run_id=ctx.run_id, status="interrupted" if result.stopped == "interrupted" else "complete", via=via,
            tool_version=__version__, started_at=started, finished_at=utc_now(), duration_s=result.duration_s,
            hosts=names, commands=[{"id": p, "command": COLLECTORS[p].command, "timeout_s": COLLECTORS[p].timeout_s}
                                   for p in probes],
            collected=len(result.facts_by_host), errors={h: ("failed", m) for h, m in result.errors.items()},
            command_errors={}, settings={"forks": settings.forks},
            done=names))
    return result


def _record(store: RunStore, hosts: Sequence[Host], runner: _Runner, via: str,
            require_idle: bool, result: ProbeRun) -> dict[str, dict[str, Any]]:
    """Each host's probe evidence and facts; with require_idle, a probe the guard refused is an error. A pair
    probe's facts carry the pairing's verdict on the host, so a check (and the report) names the host at fault."""
    out: dict[str, dict[str, Any]] = {}
    for host in hosts:
        outputs = runner.outputs.get(host.name) or {}
        if not outputs:
            continue
        evidence = store.write_evidence(host.name, outputs)
        doc = facts_mod.build(host.name, outputs, via=via, groups=host.groups, collected_at=utc_now(),
                              evidence=evidence)
        if require_idle:
            for pid, run in doc["collectors"].items():
                if (host.name, pid) in runner.refused and run.get("status") == "skipped":
                    run["status"] = "error"
                    run["error"] = f"--require-idle: {run.get('error', 'not idle')}"
        for pid, verdicts in result.blame.items():
            b = verdicts.get(host.name)
            fragment = (doc.get("perf") or {}).get(pid)
            if b is not None and isinstance(fragment, dict):
                fragment["pairing"] = {"verdict": b.verdict, "slow_with": list(b.slow_with),
                                       "good_with": list(b.good_with), "rounds": len(result.rounds.get(pid, ()))}
        store.write_facts(host.name, doc)
        out[host.name] = doc
    return out


def merge_into(doc: dict[str, Any], probe_doc: Mapping[str, Any], evidence_prefix: str) -> dict[str, Any]:
    """A host's facts with its probe facts added: the probes' collector records (evidence paths made relative to
    the main run directory with `evidence_prefix`) and their /perf fragments."""
    for cid, run in (probe_doc.get("collectors") or {}).items():
        run = dict(run)
        if run.get("evidence"):
            run["evidence"] = f"{evidence_prefix}/{run['evidence']}"
        doc.setdefault("collectors", {})[cid] = run
    if probe_doc.get("perf"):
        doc.setdefault("perf", {}).update(probe_doc["perf"])
    return doc


def merged(facts_by_host: Mapping[str, dict[str, Any]], probe_run: ProbeRun) -> dict[str, dict[str, Any]]:
    """Each host's facts with its probe facts in them (evidence paths relative to the main run directory)."""
    return {h: merge_into(doc, probe_run.facts_by_host.get(h, {}), PROBES_DIR) for h, doc in facts_by_host.items()}


def with_figures(report: Report, probe_run: ProbeRun | None) -> Report:
    """The report carrying every probe figure with its unit, worst first (the JSON report's `figures`)."""
    if probe_run is None:
        return report
    return dataclasses.replace(report, figures=report_rows(probe_run.figures()))
