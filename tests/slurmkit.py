"""A real Slurm for tests: Debian's munged, slurmctld and one slurmd per node, started in a throwaway directory on
loopback only, and always stopped by PID (jobs and health checks they left included)."""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from fabricproof import slurm
from fabricproof_lab import netstat, procs

DAEMONS = ("munged", "slurmctld", "slurmd")
CLIENTS = ("munge", "scontrol", "sinfo", "squeue", "sbatch", "srun", "scancel")
INSTALL_HINT = "apt-get install -y slurmctld slurmd slurm-client munge"
DEPLOY = Path(__file__).resolve().parents[1] / "deploy" / "slurm"
HEALTH_PROGRAM = DEPLOY / "fabricproof-health"  # what operators install as HealthCheckProgram
SLURM_CONF_LINES = DEPLOY / "slurm.conf"  # the lines they add to slurm.conf
START_TIMEOUT_S = 90.0  # generous: several daemons start at once on a loaded two-core machine
T = TypeVar("T")


def skip_reason() -> str | None:
    """Why a real Slurm cannot run here, or None."""
    if os.geteuid() != 0:
        return "real Slurm tests need root: slurmd runs jobs and health checks as root"
    missing = [tool for tool in DAEMONS + CLIENTS if shutil.which(tool) is None]
    if missing:
        return f"Debian's Slurm is not installed ({', '.join(missing)} missing); install it with: {INSTALL_HINT}"
    # With CommunicationParameters=NoInAddrAny every daemon (and srun) binds the address this machine's hostname
    # resolves to instead of 0.0.0.0; only a loopback one keeps the test cluster off the network.
    try:
        own = socket.gethostbyname(socket.gethostname())
    except OSError as exc:
        return f"this machine's hostname does not resolve ({exc}); Slurm binds to that address"
    if not ipaddress.ip_address(own).is_loopback:
        return (f"this machine's hostname resolves to {own}, not a loopback address: Slurm binds to it, so the test "
                f"cluster would listen beyond loopback (map the hostname to 127.0.1.1 in /etc/hosts)")
    return None


def free_ports(count: int) -> list[int]:
    """`count` distinct TCP ports free on 127.0.0.1 now (held together while chosen, so they differ)."""
    held = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            held.append(s)
        return [s.getsockname()[1] for s in held]
    finally:
        for s in held:
            s.close()


def wait_for(predicate: Callable[[], T], timeout_s: float, what: str, detail: Callable[[], str] = lambda: "",
             interval_s: float = 0.25) -> T:
    """The first truthy value of `predicate` within `timeout_s`, else AssertionError naming `what`."""
    end = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}\n{detail()}")
        time.sleep(interval_s)


class Interrupted:
    """A command in its own session that a test interrupts as an operator's Ctrl-C would, reaped whatever happens:
    on leaving the block its whole group is killed if it still runs."""

    def __init__(self, argv: Sequence[str], env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(list(argv), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     start_new_session=True)

    def ctrl_c(self, timeout_s: float) -> tuple[str, str]:
        """SIGINT to the command, then its (stdout, stderr) once it has ended within `timeout_s`."""
        os.kill(self.proc.pid, signal.SIGINT)
        return self.proc.communicate(timeout=timeout_s)

    def __enter__(self) -> Interrupted:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=30)


def _tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


@dataclass(frozen=True)
class Node:
    name: str
    port: int  # slurmd's own port: Debian builds slurmd with --enable-multiple-slurmd


def health_check_lines(program: Path, interval: int) -> list[str]:
    """The lines of the shipped deploy/slurm/slurm.conf, with the test's program and interval in place of the
    installed path and 300 s (every other setting as shipped)."""
    settings = dict(line.split("=", 1) for line in SLURM_CONF_LINES.read_text().splitlines()
                    if line.strip() and not line.startswith("#"))
    assert set(settings) == {"HealthCheckProgram", "HealthCheckInterval", "HealthCheckNodeState"}, settings
    settings.update(HealthCheckProgram=str(program), HealthCheckInterval=str(interval))
    return [f"{key}={value}" for key, value in settings.items()]


def slurm_conf(root: Path, ctld_port: int, nodes: Sequence[Node], health: Path | None, interval: int) -> str:
    """The test cluster's slurm.conf: everything under `root`, every daemon on 127.0.0.1, no cgroups (containers),
    no accounting, and fabricproof as HealthCheckProgram (deploy/slurm/slurm.conf's lines)."""
    lines = [
        "ClusterName=fabricproof-test",
        "SlurmctldHost=localhost(127.0.0.1)",
        f"SlurmctldPort={ctld_port}",
        "SlurmUser=root",
        "SlurmdUser=root",
        "AuthType=auth/munge",
        "CredType=cred/munge",
        f"AuthInfo=socket={root}/munge/munge.socket",
        # Bind the address the hostname resolves to (skip_reason makes sure it is loopback), never 0.0.0.0.
        "CommunicationParameters=NoInAddrAny,NoCtldInAddrAny",
        f"StateSaveLocation={root}/ctld",
        f"SlurmdSpoolDir={root}/spool/%n",
        f"SlurmctldPidFile={root}/run/slurmctld.pid",
        f"SlurmdPidFile={root}/run/slurmd-%n.pid",
        f"SlurmctldLogFile={root}/log/slurmctld.log",
        f"SlurmdLogFile={root}/log/slurmd-%n.log",
        "ProctrackType=proctrack/pgid",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "JobCompType=jobcomp/none",
        "SchedulerType=sched/builtin",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_CPU",
        "MpiDefault=none",
        "ReturnToService=2",
        "SlurmdParameters=config_overrides",  # the node lines below need not match this machine's hardware
        "KillWait=5",
        "MailProg=/bin/true",
    ]
    if health is not None:
        lines += health_check_lines(health, interval)
    lines += [f"NodeName={n.name} NodeAddr=127.0.0.1 NodeHostname=localhost Port={n.port} CPUs=1 RealMemory=1000"
              for n in nodes]
    lines.append(f"PartitionName=debug Nodes={','.join(n.name for n in nodes)} Default=YES MaxTime=INFINITE State=UP")
    return "\n".join(lines) + "\n"


@dataclass
class SlurmCluster:
    """One test cluster. `start()` brings it up (or stops what it started and raises); `stop()` always works."""

    nodes: tuple[str, ...]
    health: Path | None = None  # HealthCheckProgram (written by the caller before start)
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="fabricproof-slurm-test-", dir="/tmp")))
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)  # "slurmd h100-0001" -> its process
    ctld_port: int = 0
    node_ports: dict[str, int] = field(default_factory=dict)
    health_interval: int = 0

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "SLURM_CONF": str(self.conf), **extra}

    # -- start ------------------------------------------------------------------------------------------------

    def start(self) -> SlurmCluster:
        try:
            self._start()
        except BaseException as exc:
            problems = self.stop()
            if problems:
                exc.add_note(f"stopping the cluster that failed to start: {problems}")
            raise
        return self

    def _start(self) -> None:
        # munged wants every directory above its socket searchable by all, and its key private to root.
        self.root.chmod(0o755)
        for sub in ("munge", "ctld", "run", "log", "spool"):
            (self.root / sub).mkdir(mode=0o755)
        key_dir = self.root / "munge-key"
        key_dir.mkdir(mode=0o700)
        key = key_dir / "munge.key"
        key.write_bytes(secrets.token_bytes(1024))
        key.chmod(0o400)
        ports = free_ports(1 + len(self.nodes))
        self.ctld_port, self.node_ports = ports[0], dict(zip(self.nodes, ports[1:]))
        for name in self.nodes:
            (self.root / "spool" / name).mkdir(mode=0o755)
        self.write_conf()

        socket_path = self.root / "munge" / "munge.socket"
        self._spawn("munged", ["munged", "--foreground", f"--socket={socket_path}", f"--key-file={key}",
                               f"--pid-file={self.root / 'run' / 'munged.pid'}", f"--seed-file={key_dir / 'seed'}",
                               f"--log-file={self.root / 'log' / 'munged.log'}"])
        wait_for(socket_path.exists, START_TIMEOUT_S, "munged's socket", self.logs)
        self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-f", str(self.conf)])
        wait_for(lambda: self.run("sinfo", "-h", check=False).returncode == 0, START_TIMEOUT_S,
                 "slurmctld to answer sinfo", self.logs, interval_s=0.5)
        for name in self.nodes:
            self._spawn(f"slurmd {name}", ["slurmd", "-D", "-N", name, "-f", str(self.conf)])
        wait_for(lambda: set(self.states().values()) == {"idle"}, START_TIMEOUT_S,
                 f"every node idle in sinfo ({', '.join(self.nodes)})", lambda: f"{self.states()}\n{self.logs()}",
                 interval_s=0.5)

    def write_conf(self) -> None:
        nodes = [Node(n, self.node_ports[n]) for n in self.nodes]
        self.conf.write_text(slurm_conf(self.root, self.ctld_port, nodes, self.health, self.health_interval))

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.root / "log" / f"{name.replace(' ', '-')}.out").open("wb")
        with log:
            # Own session: a Ctrl-C of pytest does not reach the daemons before stop() does, in order.
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                                env=self.env(), cwd=self.root, start_new_session=True)
        time.sleep(0.05)
        if self.procs[name].poll() is not None:
            raise AssertionError(f"{name} exited at once ({self.procs[name].returncode}):\n{self.logs()}")

    def logs(self) -> str:
        parts = []
        for path in sorted((self.root / "log").glob("*")):
            parts.append(f"--- {path.name}\n{_tail(path)}")
        return "\n".join(parts)

    # -- use ----------------------------------------------------------------------------------------------------

    def run(self, *argv: str, check: bool = True, timeout: float = 60.0) -> subprocess.CompletedProcess:
        """A Slurm client command against this cluster (no shell)."""
        proc = subprocess.run(list(argv), capture_output=True, text=True, env=self.env(), timeout=timeout,
                              stdin=subprocess.DEVNULL, cwd=self.root, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}): {proc.stderr.strip()}")
        return proc

    def states(self) -> dict[str, str]:
        """Node -> sinfo's long state name (idle, drained, draining, allocated, ...)."""
        proc = self.run("sinfo", "-h", "-N", "-o", "%N %T", check=False)
        return dict(line.split(None, 1) for line in proc.stdout.splitlines() if " " in line)

    def node(self, name: str) -> slurm.NodeState:
        return slurm.parse_show_node(self.run("scontrol", "show", "node", name).stdout, name)

    def reconfigure(self, health_interval: int) -> None:
        """Rewrite slurm.conf with another HealthCheckInterval (0: off) and make the daemons read it."""
        self.health_interval = health_interval
        self.write_conf()
        self.run("scontrol", "reconfigure")

    def jobs(self) -> list[str]:
        return self.run("squeue", "-h", "-o", "%i", check=False).stdout.split()

    def daemon_pids(self) -> dict[str, int]:
        return {name: p.pid for name, p in self.procs.items() if p.poll() is None}

    def listening(self) -> dict[str, set[tuple[str, int]]]:
        """Each running daemon's listening TCP sockets (address, port), from its own file descriptors."""
        return {name: _listening_of(pid) for name, pid in self.daemon_pids().items()}

    # -- stop ---------------------------------------------------------------------------------------------------

    def stop(self) -> list[str]:
        """Cancel every job, stop slurmd, slurmctld and munged by PID, then kill any process still working in
        the cluster's directory (a job's or a health check's); the problems met, if any."""
        problems: list[str] = []
        ctld = self.procs.get("slurmctld")
        if ctld is not None and ctld.poll() is None and self.jobs():
            self.run("scancel", "--quiet", "--user=root", check=False)
            try:
                wait_for(lambda: not self.jobs(), 60.0, "the cancelled jobs to end")
            except AssertionError as exc:
                problems.append(str(exc).splitlines()[0])
        order = [n for n in self.procs if n.startswith("slurmd")] + ["slurmctld", "munged"]
        for name in order:
            p = self.procs.get(name)
            if p is None or p.poll() is not None:
                continue
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                problems.append(f"{name} (pid {p.pid}) ignored SIGTERM; killed")
                p.kill()
                p.wait(timeout=30)
        left = _processes_in(self.root)
        if left:
            problems.append(f"processes of the cluster outlived its daemons, killed: {sorted(left)}")
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            procs.terminate(left, timeout_s=10)
        shutil.rmtree(self.root, ignore_errors=True)
        return problems


def _socket_inodes(pid: int) -> set[str]:
    found = set()
    try:
        for fd in (procs.PROC / str(pid) / "fd").iterdir():
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:["):
                found.add(target[8:-1])
    except OSError:
        pass
    return found


def _listening_of(pid: int) -> set[tuple[str, int]]:
    inodes = _socket_inodes(pid)
    found: set[tuple[str, int]] = set()
    for name in ("tcp", "tcp6"):
        try:
            header, *rows = (procs.PROC / str(pid) / "net" / name).read_text().splitlines()
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if len(fields) > 9 and fields[9] in inodes:
                found |= netstat.parse_listeners(f"{header}\n{row}")
    return found


def _processes_in(root: Path) -> set[int]:
    """PIDs (not this one) working in `root`: the daemons, their health checks and every job run there (clients
    run with `root` as their working directory, and jobs inherit it); `root` is unique to one cluster."""
    found = set()
    for entry in procs.PROC.iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if (cwd == str(root) or cwd.startswith(f"{root}/")) and procs.is_running(int(entry.name)):
            found.add(int(entry.name))
    return found
