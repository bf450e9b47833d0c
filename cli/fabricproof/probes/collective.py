"""A collective over a host set at a scale: nccl-tests launched by srun or mpirun with a fixed argv from the baseline,
its figure or failure in the tool's own words, and the runner the collective search drives."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import slurm
from ..collectors.base import ParseError, not_run_reason
from ..collectors.probes.nccl_tests import parse_nccl_tests
from ..errors import InputError
from ..model import Command, Host
from ..subnet.diff import Finding
from ..subnet.names import host_of
from ..subnet.plan import Plan
from ..transport import HostError, Transport
from ..transport.fanout import guarded as run_guarded
from . import guard, spec
from .isolation import SPINES, Outcome, Settings, Verdict

#: The scales a collective runs at: one NVLink domain (a GB200/GB300 rack's trays, multi-node NVLink on), the same
#: domain with multi-node NVLink off (NCCL_MNNVL_ENABLE=0: its InfiniBand alone), the hosts under one leaf, hosts
#: across leaves, pairs, and a wave or the whole set.
SCALES = ("domain", "domain_ib", "leaf", "cross_leaf", "pair", "all")
#: nccl-tests binaries a collective may run.
TESTS = ("all_reduce_perf", "all_gather_perf", "alltoall_perf")
# A Slurm node name or a host of an MPI host file: one name, never a list, a range, an option or shell text.
_NODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: How long a cancelled step may take to leave squeue.
CANCEL_WAIT_S = 60.0
#: How long the idle guard may take on one host.
IDLE_CHECK_S = 60.0
#: Hosts -> each one that may not be used, with why.
IdleCheck = Callable[[Sequence[str]], Mapping[str, str]]


def node_name(host: str) -> str:
    """`host` as one element of a node list: refused (exit 2) when it could be read as more than one name."""
    if not isinstance(host, str) or not _NODE.fullmatch(host):
        raise InputError(f"collective: {host!r} is not a node name (letters, digits, '.', '_', '-'; no list, range "
                         "or option)")
    return host


def config(values: Mapping[str, Any]) -> dict[str, Any]:
    """perf.probes.collective of a host's baseline values over its defaults."""
    return spec.config(values)["collective"]


def nccl_argv(values: Mapping[str, Any]) -> tuple[str, ...]:
    """The nccl-tests argv each task runs: `<bin_dir>/<test> -b <min> -e <max> -f <factor> -g <GPUs per task>`
    (one task per GPU: -g 1; one task per node: every GPU)."""
    c = config(values)
    nccl = spec.config(values)["nccl_tests"]
    binary = f"{nccl['bin_dir'].rstrip('/')}/{c['test']}" if nccl["bin_dir"] else c["test"]
    return (binary, "-b", str(c["min_bytes"]), "-e", str(c["max_bytes"]), "-f", str(c["step_factor"]),
            "-g", str(gpus_per_task(values)))


def gpus(values: Mapping[str, Any]) -> int:
    return int(spec.config(values)["nccl_tests"]["gpus"] or (values.get("gpu") or {}).get("count") or 8)


def tasks_per_node(values: Mapping[str, Any]) -> int:
    return gpus(values) if config(values)["tasks_per_node"] == "gpus" else 1


def gpus_per_task(values: Mapping[str, Any]) -> int:
    return 1 if config(values)["tasks_per_node"] == "gpus" else gpus(values)


#: Scales that prove the InfiniBand fabric: multi-node NVLink off, or NCCL would carry trays of one NVLink domain
#: (a GB200 rack's, under one leaf) over NVLink and never touch the leaves.
IB_SCALES = ("domain_ib", "leaf", "cross_leaf")


def _env(scale: str) -> dict[str, str]:
    return {"NCCL_MNNVL_ENABLE": "0"} if scale in IB_SCALES else {}


def srun_argv(values: Mapping[str, Any], hosts: Sequence[str], job_name: str, scale: str = "all") -> tuple[str, ...]:
    """`srun --nodelist=<hosts> --nodes=<n> --ntasks-per-node=<t> --mpi=<plugin> --label ... <nccl-tests argv>`:
    one argv, never a shell string; every host a node name. --immediate: never wait for nodes a job holds."""
    c = config(values)
    names = [node_name(h) for h in hosts]
    env = ",".join(["ALL", *(f"{k}={v}" for k, v in _env(scale).items())])
    extra = (f"--partition={node_name(c['partition'])}",) if c["partition"] else ()
    return ("srun", f"--nodelist={','.join(names)}", f"--nodes={len(names)}",
            f"--ntasks-per-node={tasks_per_node(values)}", f"--mpi={c['mpi']}", "--label",
            f"--job-name={node_name(job_name)}", "--kill-on-bad-exit=1", "--immediate=30", f"--export={env}",
            *extra, *nccl_argv(values))


def hostfile(values: Mapping[str, Any], hosts: Sequence[str]) -> str:
    """The MPI host file of a launch, built from the inventory's names: `<host> slots=<tasks per node>`."""
    return "".join(f"{node_name(h)} slots={tasks_per_node(values)}\n" for h in hosts)


def mpirun_argv(values: Mapping[str, Any], hosts: Sequence[str], hostfile_path: Path, scale: str = "all"
                ) -> tuple[str, ...]:
    """`mpirun --hostfile <file> -np <n x t> --map-by ppr:<t>:node --tag-output [--mca plm_rsh_agent <agent>]
    [-x VAR=value] <nccl-tests argv>`: the agent (how orted reaches each host) is the baseline's, one argv element."""
    c = config(values)
    t = tasks_per_node(values)
    agent = ("--mca", "plm_rsh_agent", c["rsh_agent"]) if c["rsh_agent"] else ()
    env = tuple(a for k, v in _env(scale).items() for a in ("-x", f"{k}={v}"))
    return (c["mpirun"], "--hostfile", str(hostfile_path), "-np", str(len(hosts) * t), "--map-by", f"ppr:{t}:node",
            "--tag-output", *agent, *env, *nccl_argv(values))


def threshold(values: Mapping[str, Any], scale: str) -> float | None:
    """The least avg busbw (GB/s) a healthy group reaches at `scale`, from the baseline; None: not set."""
    value = config(values)["thresholds"].get(scale)
    return None if value is None else float(value)


def search_settings(values: Mapping[str, Any], scale: str) -> Settings:
    t = threshold(values, scale)
    if t is None:
        raise InputError(f"collective: perf.probes.collective.thresholds.{scale} is not set in the baseline")
    return Settings(threshold=t, margin=float(config(values)["margin"]))


# -- scales -----------------------------------------------------------------------------------------------------

def domains(facts: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Hosts by NVLink domain: the clique their GPUs registered in (/gpu/gpus/*/fabric: ClusterUUID + CliqueId);
    hosts without one are left out."""
    out: dict[str, list[str]] = {}
    for host, doc in facts.items():
        gpus_ = ((doc.get("gpu") or {}).get("gpus")) or []
        keys = {(f.get("cluster_uuid"), f.get("clique_id")) for g in gpus_ if (f := g.get("fabric") or {})}
        keys.discard((None, None))
        if len(keys) == 1:
            uuid, clique = keys.pop()
            out.setdefault(f"{uuid}/{clique}", []).append(host)
    return out


def groups(scale: str, hosts: Sequence[str], facts: Mapping[str, Mapping[str, Any]] | None = None,
           leaves: Mapping[str, str] | None = None) -> list[list[str]]:
    """The groups of one scale over `hosts`: each domain; each leaf (host -> leaf, from the fabric plan when one is
    given); one host of each leaf together (across leaves); consecutive pairs; or all of them."""
    hosts = list(dict.fromkeys(hosts))
    if scale in ("domain", "domain_ib"):
        return [g for g in domains({h: (facts or {}).get(h, {}) for h in hosts}).values() if len(g) > 1]
    if scale in ("leaf", "cross_leaf"):
        by: dict[str, list[str]] = {}
        for h in hosts:
            if (leaves or {}).get(h):
                by.setdefault(leaves[h], []).append(h)
        if scale == "leaf":
            return [g for g in by.values() if len(g) > 1]
        width = min((len(g) for g in by.values()), default=0)
        return [[by[leaf][i] for leaf in sorted(by)] for i in range(width)] if len(by) > 1 else []
    if scale == "pair":
        return [hosts[i:i + 2] for i in range(0, len(hosts) - 1, 2)]
    if scale == "all":
        return [hosts] if len(hosts) > 1 else []
    raise InputError(f"collective: unknown scale {scale!r} (one of {', '.join(SCALES)})")


# -- one launch -------------------------------------------------------------------------------------------------

def outcome(text: str, hosts: Sequence[str]) -> tuple[Outcome, dict[str, Any] | None]:
    """A launch's output as the search sees it: the avg busbw, or the failure in the tool's words."""
    try:
        frag = parse_nccl_tests(text, expected_hosts=list(hosts))
    except ParseError as exc:
        words = str(exc)
        return Outcome.failed(words, "hang" if "hung" in words or "never" in words else "error"), None
    return Outcome(figure=frag["avg_busbw_gbps"]), frag


def idle_guard(link: Transport, hosts: Mapping[str, Host], forks: int = 16) -> IdleCheck:
    """The probes' idle guard (probes/guard.py) on every host of a round, over the transport: a host with a GPU
    compute process, a Slurm job step, GPUs it cannot query, or that cannot be reached is not used."""

    def one(name: str) -> tuple[str, str | None]:
        got = run_guarded(link, hosts[name], [Command(guard.IDLE_CHECK, IDLE_CHECK_S, "idle_check")],
                          time.monotonic() + IDLE_CHECK_S + 30)
        if isinstance(got, HostError):
            return name, f"not reached: {got}"
        why = not_run_reason(got[0].exit_code, got[0].stdout)
        if why is None and got[0].exit_code == 0:
            return name, None
        return name, why or f"the idle check failed: {got[0].error or f'exit {got[0].exit_code}'}"

    def check(names: Sequence[str]) -> dict[str, str]:
        if not names:
            return {}
        with ThreadPoolExecutor(max_workers=max(1, min(forks, len(names)))) as pool:
            return {n: why for n, why in pool.map(one, names) if why}

    return check


@dataclass
class Launch:
    """One collective's launch record: its group, argv, evidence file, outcome and how long it ran."""

    index: int
    group: tuple[str, ...]
    argv: tuple[str, ...]
    evidence: Path
    job_name: str
    outcome: Outcome | None = None
    parsed: dict[str, Any] | None = None
    seconds: float = 0.0
    proc: subprocess.Popen | None = field(default=None, repr=False)
    round: int = 0  # the run's round it ran in (groups of a round run at once)

    def to_dict(self) -> dict[str, Any]:
        o = self.outcome or Outcome.failed("not run", "error")
        return {"index": self.index, "hosts": list(self.group), "argv": list(self.argv),
                "evidence": str(self.evidence), "figure": o.figure, "failure": o.failure,
                "failure_kind": None if o.failure is None else o.kind, "seconds": round(self.seconds, 3),
                "ranks": (self.parsed or {}).get("ranks")}


class Stopped(RuntimeError):
    """The run stopped before a round: its budget is spent, or a node of the round runs a job."""


class Collective:
    """Runs collectives at one scale, groups of a round at once, for the search (`run(groups) -> [Outcome]`).

    Every launch is a process group of its own, so a Ctrl-C of the operator reaches fabricproof, which cancels each
    running step (`scancel --name`, then the launcher's process group) and waits until Slurm lists none of them."""

    def __init__(self, values: Mapping[str, Any], scale: str, evidence_dir: Path, launcher: str | None = None,
                 env: Mapping[str, str] | None = None, idle: IdleCheck | None = None,
                 progress: Callable[[str], None] | None = None) -> None:
        if scale not in SCALES:
            raise InputError(f"collective: unknown scale {scale!r} (one of {', '.join(SCALES)})")
        self.values, self.scale, self.dir = values, scale, evidence_dir
        c = config(values)
        self.launcher = launcher or c["launcher"]
        self.timeout_s, self.budget_s = float(c["timeout_s"]), float(c["budget_s"])
        self.env = dict(os.environ if env is None else env)
        self.idle = idle
        self.tell = progress or (lambda _line: None)
        self.rounds = 0
        self.launches: list[Launch] = []
        self.started = time.monotonic()
        self.prefix = f"fabricproof-collective-{os.getpid()}"
        self.dir.mkdir(parents=True, exist_ok=True)

    # -- Slurm's view of the nodes ------------------------------------------------------------------------------

    def not_idle(self, hosts: Sequence[str]) -> dict[str, str]:
        """Hosts Slurm does not show idle (a job runs there, drained, down), with sinfo's word: never launched on."""
        if self.launcher != "srun":
            return {}
        proc = subprocess.run(slurm.node_states_argv([node_name(h) for h in hosts]), capture_output=True, text=True,
                              env=self.env, timeout=60, stdin=subprocess.DEVNULL, check=False)
        states = slurm.parse_node_states(proc.stdout)
        return {h: (f"Slurm shows it {states[h]}" if h in states else "Slurm does not know it")
                for h in hosts if states.get(h) != "idle"}

    # -- the runner ---------------------------------------------------------------------------------------------

    def __call__(self, groups_: list[list[str]]) -> list[Outcome]:
        return self.run(groups_)

    def run(self, groups_: list[list[str]]) -> list[Outcome]:
        """One round: every group at once, each bounded by the per-test timeout and what is left of the budget.
        Nothing starts unless Slurm shows every node idle and the idle guard (when given) passes on every host."""
        left = self.budget_s - (time.monotonic() - self.started)
        if left <= 0:
            raise Stopped(f"the collective's budget of {self.budget_s:g} s is spent")
        hosts = [h for g in groups_ for h in g]
        busy = self.not_idle(hosts)
        if not busy and self.idle is not None:
            busy = dict(self.idle(hosts))
        if busy:
            raise Stopped("not run: hosts not idle: "
                          + "; ".join(f"{h}: {why}" for h, why in sorted(busy.items())))
        self.rounds += 1
        self.tell(f"round {self.rounds}: {len(groups_)} group(s) at once ({self.scale}): "
                  + "; ".join(f"{len(g)} host(s) {g[0]}..{g[-1]}" if len(g) > 2 else ", ".join(g) for g in groups_))
        launches = [self._start(g) for g in groups_]
        deadline = time.monotonic() + min(self.timeout_s, left)
        try:
            for launch in launches:
                self._wait(launch, deadline)
        except BaseException:
            self.cancel(launches)
            raise
        self._gone(launches)  # the next round may use the same nodes: wait until Slurm has let them go
        for la in launches:
            o = la.outcome
            self.tell(f"  {', '.join(la.group) if len(la.group) <= 4 else f'{len(la.group)} hosts from {la.group[0]}'}: "
                      + (f"{o.figure:g} GB/s" if o is not None and o.figure is not None
                         else f"{o.kind if o else 'error'}: {o.failure if o else 'no outcome'}")
                      + f" ({la.seconds:.1f} s)")
        return [launch.outcome for launch in launches]  # type: ignore[misc]

    def _start(self, group: Sequence[str]) -> Launch:
        index = len(self.launches)
        name = f"{self.prefix}-{index}"
        evidence = self.dir / f"{index:04d}-{self.scale}.out"
        if self.launcher == "srun":
            argv = srun_argv(self.values, group, name, self.scale)
        else:
            hf = self.dir / f"{index:04d}.hosts"
            hf.write_text(hostfile(self.values, group))
            argv = mpirun_argv(self.values, group, hf, self.scale)
        launch = Launch(index, tuple(group), argv, evidence, name, round=self.rounds)
        self.launches.append(launch)
        with evidence.open("wb") as out:
            launch.proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                           env={**self.env, **_env(self.scale)}, start_new_session=True)
        launch.seconds = time.monotonic()
        return launch

    def _wait(self, launch: Launch, deadline: float) -> None:
        assert launch.proc is not None
        try:
            launch.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.cancel([launch])
            launch.seconds = time.monotonic() - launch.seconds
            launch.outcome = Outcome.failed(
                f"no result within {self.timeout_s:g} s: the job step was cancelled", "timeout")
            return
        launch.seconds = time.monotonic() - launch.seconds
        text = launch.evidence.read_text(errors="replace")
        launch.outcome, launch.parsed = outcome(text, launch.group)

    def cancel(self, launches: Sequence[Launch]) -> None:
        """End each running launch: scancel its job by name (Slurm ends every task on every node), then its
        launcher's process group; return once Slurm lists none of them (bounded)."""
        running = [la for la in launches if la.proc is not None and la.proc.poll() is None]
        if self.launcher == "srun":
            for la in running:
                subprocess.run(slurm.cancel_name_argv(la.job_name), env=self.env, capture_output=True, timeout=60,
                               stdin=subprocess.DEVNULL, check=False)
        for la in running:
            _signal_group(la.proc, signal.SIGTERM)  # type: ignore[arg-type]
        end = time.monotonic() + CANCEL_WAIT_S
        for la in running:
            try:
                la.proc.wait(timeout=max(0.1, end - time.monotonic()))  # type: ignore[union-attr]
            except subprocess.TimeoutExpired:
                _signal_group(la.proc, signal.SIGKILL)  # type: ignore[arg-type]
                la.proc.wait(timeout=30)  # type: ignore[union-attr]
        self._gone(running, end)

    def _gone(self, launches: Sequence[Launch], end: float | None = None) -> None:
        """Wait (bounded) until Slurm lists none of these launches' jobs."""
        if self.launcher != "srun" or not launches:
            return
        end = end if end is not None else time.monotonic() + CANCEL_WAIT_S
        names = {la.job_name for la in launches}
        while names & set(self._queued()) and time.monotonic() < end:
            time.sleep(0.25)

    def _queued(self) -> list[str]:
        proc = subprocess.run(slurm.job_names_argv(), capture_output=True, text=True, env=self.env, timeout=60,
                              stdin=subprocess.DEVNULL, check=False)
        return proc.stdout.split()

    def to_facts(self) -> dict[str, Any]:
        """The launches of this scale, as /perf/collective/<scale> holds them."""
        return {"scale": self.scale, "launcher": self.launcher, "launches": [la.to_dict() for la in self.launches]}


def leaves(plan: Plan, hosts: Sequence[str]) -> dict[str, str]:
    """Host -> the leaf its lowest rail's HCA is cabled to by the fabric plan (its roles: tier leaf); hosts are
    matched case-insensitively, hosts the plan does not cable are left out. On a rail-optimised fabric every rail's
    leaf of a scalable unit serves the same hosts, so one rail's leaves group them."""
    roles = plan.roles()
    wanted = {h.lower(): h for h in hosts}
    best: dict[str, tuple[int, str]] = {}
    for link in plan.links:
        for one, other in ((link.a.device, link.b.device), (link.b.device, link.a.device)):
            named = host_of(one)
            role = roles.get(other)
            if named is None or role is None or role.tier != "leaf" or named[0].lower() not in wanted:
                continue
            host = wanted[named[0].lower()]
            rail = plan.rail_of(named[1])
            key = (rail if rail is not None else 1 << 30, other)
            if host not in best or key < best[host]:
                best[host] = key
    return {h: best[h][1] for h in hosts if h in best}


def with_fabric(search: Mapping[str, Any], findings: Sequence[Finding], error: str = "") -> dict[str, Any]:
    """The search's facts (Verdict.to_facts) with, on each of its findings, the fabric diff's findings that bear on it
    (a host: those affecting the host; a path: those naming a port of its leaves), so a verdict on the fabric cites
    the cables beside the collectives; `fabric_error` says why the fabric could not be read."""
    def bears(f: Finding, found: Mapping[str, Any]) -> bool:
        if found["kind"] != "path":
            return bool(set(found["members"]) & set(f.hosts))
        leaves = [m for m in found["members"] if m != SPINES]
        return any(e == leaf or e.startswith(leaf + " ") for e in f.ends for leaf in leaves)

    out = dict(search)
    out["findings"] = [{**found, "fabric": [{"check": f.check, "sentence": f.sentence, "hosts": list(f.hosts)}
                                            for f in findings if bears(f, found)]}
                       for found in search.get("findings", ())]
    out["fabric_error"] = error or None
    return out


def facts_documents(run: Collective, verdict: Verdict | None, groups: Mapping[str, Sequence[str]]
                    ) -> dict[str, dict[str, Any]]:
    """The facts document of each host a collective ran on: its /perf/collective (host_facts) and the collector's
    run record (`groups`: host -> its inventory groups)."""
    out = {}
    for host, fragment in host_facts(run, verdict).items():
        doc = {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": host, "via": run.launcher,
               "groups": sorted(groups.get(host, ())), "collectors": {"collective": {"status": "ok"}}}
        doc["perf"] = {"collective": fragment}
        out[host] = doc
    return out


def host_facts(run: Collective, verdict: Verdict | None) -> dict[str, dict[str, Any]]:
    """Each host's /perf/collective fragment (collectors/probes/collective.SCHEMA): its launches, the figure of the
    first group it was in, and the search's verdict on it with the evidence chain of what names it. Hosts that ran
    in no launch get none (their checks stay unjudged). A host carries only its own part of the search's path, so
    a fleet's facts grow with its size, not with its size times the search's tests."""
    decisions = {d.index: d.to_dict() for d in verdict.decisions} if verdict is not None else {}
    out: dict[str, dict[str, Any]] = {}
    for host in dict.fromkeys(h for la in run.launches for h in la.group):
        mine = [la for la in run.launches if host in la.group]
        first = mine[0].outcome or Outcome.failed("not run")
        out[host] = {
            "scale": run.scale, "launcher": run.launcher, "threshold_gbps": threshold(run.values, run.scale),
            "busbw_gbps": first.figure, "failure": first.failure,
            "launches": [{k: v for k, v in la.to_dict().items() if k not in ("argv", "ranks")} for la in mine],
            "isolation": None if verdict is None else {
                "verdict": verdict.of_host(host), "search": verdict.state, "rounds": verdict.rounds,
                "tests": verdict.tests,
                "findings": [{**f.to_dict(), "evidence": [decisions[i] for i in f.evidence if i in decisions]}
                             for f in verdict.findings if host in f.members]},
        }
    return out


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass
