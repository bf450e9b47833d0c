"""Ansible transport: playbooks/collect.yml through ansible-runner, raw stdout/stderr/rc taken from its events."""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..model import Command, CommandResult, Host
from ..paths import playbooks_dir
from ..toolpath import path_with_python_bin
from .base import ErrorKind, HostError, OnHost, Outcome, RunContext, Transport
from .framing import KILL_AFTER_S, finished, timed_argv

PLAYBOOK = "collect.yml"
COMMANDS_VAR = "fabricproof_commands"
#: How long an idle ssh mux master lives. Each host's commands run back to back as one loop, so
#: the master only has to bridge the gap between two items; it must not outlive the run by long.
CONTROL_PERSIST_S = 30


def classify_unreachable(message: str) -> ErrorKind:
    """Map OpenSSH's words (as Ansible relays them) to a collection error kind."""
    text = message.lower()
    if "remote host identification has changed" in text or "host key for" in text and "has changed" in text:
        return ErrorKind.HOSTKEY_MISMATCH
    if "host key verification failed" in text or "no matching host key" in text or "is known" in text:
        return ErrorKind.HOSTKEY_UNKNOWN
    if "permission denied" in text or "authentication" in text or "too many authentication failures" in text:
        return ErrorKind.AUTH
    if "timed out" in text or "timeout" in text:
        return ErrorKind.TIMEOUT
    return ErrorKind.UNREACHABLE


def _delta_seconds(delta: Any) -> float:
    """The command module's "0:00:01.234567" as seconds."""
    m = re.fullmatch(r"(\d+):(\d\d):(\d\d(?:\.\d+)?)", str(delta or ""))
    return int(m[1]) * 3600 + int(m[2]) * 60 + float(m[3]) if m else 0.0


def _one_line(text: Any, limit: int = 300) -> str:
    return re.sub(r"\s+", " ", str(text or "")).strip()[:limit]


class _Collector:
    """Assembles per-host results from the runner's event stream (runs in the caller's thread)."""

    def __init__(self, hosts: Sequence[str], commands: Sequence[Command], on_host: OnHost | None):
        self.commands = commands
        self.on_host = on_host
        self.items: dict[str, dict[int, CommandResult]] = {h: {} for h in hosts}
        self.unreachable: dict[str, str] = {}  # first unreachable item's message, per host
        self.done: dict[str, Outcome] = {}

    def event(self, ev: Mapping[str, Any]) -> bool:
        kind = ev.get("event")
        data = ev.get("event_data") or {}
        host = data.get("host")
        if host not in self.items or host in self.done:
            return True
        res = data.get("res") or {}
        if kind in ("runner_item_on_ok", "runner_item_on_failed"):
            self._item(host, res)
        elif kind == "runner_on_unreachable":
            # In a loop the task-level message is "All items completed"; the items say why.
            for item in res.get("results") or []:
                self._item(host, item)
            msg = self.unreachable.get(host) or _one_line(res.get("msg") or "unreachable")
            if self.items[host]:  # the host went away part way: keep what it answered
                self._finish(host, self.assembled(host, f"the host became unreachable: {msg}"))
            else:
                self._finish(host, HostError(classify_unreachable(msg), f"{host}: {msg}"))
        elif kind in ("runner_on_ok", "runner_on_failed") and data.get("task_action", "").endswith("command"):
            if kind == "runner_on_failed" and not self.items[host]:
                msg = _one_line(res.get("msg") or res.get("module_stderr") or "the collect task failed")
                self._finish(host, HostError(ErrorKind.FAILED, f"{host}: {msg}"))
            else:
                for item in res.get("results") or []:  # a loop result not streamed as an item event
                    self._item(host, item)
                self._finish(host, self.assembled(host, "the collect task ended before this command ran"))
        return True  # keep every event in the artifacts: they are the raw evidence of an Ansible run

    def _item(self, host: str, res: Mapping[str, Any]) -> None:
        if res.get("unreachable"):
            self.unreachable.setdefault(host, _one_line(res.get("msg") or res.get("stderr") or "unreachable"))
            return
        item = res.get("item") or {}
        k = item.get("i") if isinstance(item, dict) else None
        if not isinstance(k, int) or not 0 <= k < len(self.commands) or k in self.items[host]:
            return
        cmd = self.commands[k]
        stdout, stderr = str(res.get("stdout") or ""), str(res.get("stderr") or "")
        rc = res.get("rc")
        if isinstance(rc, int) and rc >= 0:
            self.items[host][k] = finished(cmd, stdout, stderr, rc, _delta_seconds(res.get("delta")),
                                           timed=res.get("delta") is not None)
        else:  # the task keyword timeout fired, or the module could not run the command at all
            self.items[host][k] = CommandResult(cmd.argv, stdout, stderr, exit_code=None,
                                                error=_one_line(res.get("msg") or "the command did not run"))

    def assembled(self, host: str, missing: str) -> list[CommandResult]:
        got = self.items[host]
        return [got.get(k) or CommandResult(c.argv, "", exit_code=None, error=f"not run: {missing}")
                for k, c in enumerate(self.commands)]

    def _finish(self, host: str, outcome: Outcome) -> None:
        self.done[host] = outcome
        if self.on_host is not None:
            self.on_host(host, outcome)


@dataclass(frozen=True)
class AnsibleOptions:
    """What ansible-playbook is given: the same inventory the hosts came from, and the SSH host-key policy."""

    inventory_path: str
    accept_new_host_keys: bool = False
    connect_timeout_s: float = 10.0


@contextmanager
def _ctrl_c_cancels(interrupted: threading.Event) -> Iterator[None]:
    """While a playbook runs, Ctrl-C sets `interrupted` (ansible-runner's cancel_callback then stops the playbook
    and every host is recorded); the handler before it is put back afterwards. Left to itself, ansible-runner
    installs its own SIGINT/SIGTERM handlers for good, and every later Ctrl-C in this process would be lost."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    signal.signal(signal.SIGINT, lambda _signum, _frame: interrupted.set())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


class AnsibleTransport(Transport):
    """Fans out through ansible-playbook; one playbook run collects every host (see AnsibleFleet)."""

    name = "ansible"

    def __init__(self, options: AnsibleOptions, ctx: RunContext | None = None):
        if not options.inventory_path:
            raise ValueError("the Ansible transport needs the inventory path")
        self.options = options
        self.run_dir = ctx.run_dir if ctx else None  # runner artifacts are kept with the run's evidence
        self.run_id = ctx.run_id if ctx else ""
        self.forks = ctx.forks if ctx else 1

    def run_many(self, host: Host, commands: Sequence[Command], deadline: float) -> list[CommandResult]:
        outcome = self.run_fleet([host], commands, deadline)[host.name]
        if isinstance(outcome, HostError):
            raise outcome
        return outcome

    # ------------------------------------------------------------------ one playbook for the fleet
    def run_fleet(self, hosts: Sequence[Host], commands: Sequence[Command], deadline: float,
                  on_host: OnHost | None = None) -> dict[str, Outcome]:
        import ansible_runner  # imported here: it is only needed when Ansible does the fan-out

        names = [h.name for h in hosts]
        base = Path(self.run_dir or tempfile.mkdtemp(prefix="fabricproof-ansible-")) / "ansible"
        base.mkdir(mode=0o700, parents=True, exist_ok=True)
        limit_file = base / "limit.txt"
        limit_file.write_text("".join(f"{n}\n" for n in names))
        # A private, short directory for ssh control sockets (a unix socket path must stay < 108 bytes):
        # every mux master of this run lives there, so the cleanup finds exactly ours.
        control_dir = Path(tempfile.mkdtemp(prefix="fp-cp-"))
        collector = _Collector(names, commands, on_host)
        timeout = max(1, int(deadline - time.monotonic()))
        interrupted = threading.Event()
        try:
            with _ctrl_c_cancels(interrupted):
                runner = ansible_runner.run(
                    private_data_dir=str(base),
                    ident=self.run_id or None,
                    playbook=str(playbooks_dir() / PLAYBOOK),
                    inventory=str(Path(self.options.inventory_path).resolve()),  # type: ignore[arg-type]
                    limit=f"@{limit_file}",
                    forks=max(1, min(self.forks, len(names))),
                    extravars={COMMANDS_VAR: [
                        {"i": k, "argv": list(timed_argv(c.argv, c.timeout_s)),
                         # Ansible's own task timeout only backs up GNU timeout on the host.
                         "timeout": int(c.timeout_s + KILL_AFTER_S + 10)}
                        for k, c in enumerate(commands)]},
                    envvars=self._envvars(control_dir),
                    event_handler=collector.event,
                    quiet=True,
                    timeout=timeout,
                    cancel_callback=interrupted.is_set,
                )
            status = getattr(runner, "status", "unknown")
            stdout_tail = self._stdout_tail(runner)
        finally:
            self._stop_mux_masters(control_dir)
        for name in names:
            if name in collector.done:
                continue
            if collector.items[name]:
                why = "ansible-playbook stopped before this command ran"
                collector._finish(name, collector.assembled(name, why))
            elif status == "timeout":
                collector._finish(name, HostError(ErrorKind.TIMEOUT, f"{name}: ansible-playbook ran out of "
                                                                     f"time ({timeout} s) before reaching this host"))
            else:
                collector._finish(name, HostError(ErrorKind.FAILED, f"{name}: ansible-playbook ({status}) "
                                                                    f"returned nothing for this host"
                                                                    f"{': ' + stdout_tail if stdout_tail else ''}"))
        if interrupted.is_set():  # Ctrl-C cancelled the playbook; every host is recorded, now stop the run
            raise KeyboardInterrupt
        return dict(collector.done)

    def _envvars(self, control_dir: Path) -> dict[str, str]:
        ssh_args = [
            "-o ControlMaster=auto", f"-o ControlPersist={CONTROL_PERSIST_S}s",
            # Prefer X25519: OpenSSH 9.x's default sntrup761 KEX costs ~60 ms of CPU per connection
            # on the controller (../shared/ssh-fleet-measurements.md). '^' only reorders; nothing is disabled.
            "-o KexAlgorithms=^curve25519-sha256,curve25519-sha256@libssh.org",
        ]
        if self.options.accept_new_host_keys:
            ssh_args.append("-o StrictHostKeyChecking=accept-new")
        env = {
            "ANSIBLE_PIPELINING": "True",
            "ANSIBLE_SSH_ARGS": " ".join(ssh_args),
            "ANSIBLE_SSH_CONTROL_PATH_DIR": str(control_dir),
            "ANSIBLE_TIMEOUT": str(int(self.options.connect_timeout_s)),
            "ANSIBLE_RETRY_FILES_ENABLED": "False",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_DEPRECATION_WARNINGS": "False",
            "ANSIBLE_LOCALHOST_WARNING": "False",
            "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False",
        }
        if not self.options.accept_new_host_keys:
            env["ANSIBLE_HOST_KEY_CHECKING"] = "True"
        env["PATH"] = path_with_python_bin()  # ansible-runner starts `ansible-playbook` from PATH
        return env

    @staticmethod
    def _stdout_tail(runner: Any) -> str:
        try:
            text = runner.stdout.read()
        except Exception:  # no stdout artifact (the run never started)
            return ""
        lines = [ln for ln in str(text).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "ERROR" in ln]
        return _one_line(" ".join((errors or lines)[-3:]))

    @staticmethod
    def _stop_mux_masters(control_dir: Path) -> None:
        """No ssh mux master of this run may outlive it: ask each to exit, then kill stragglers by PID."""
        for sock in control_dir.iterdir() if control_dir.is_dir() else ():
            subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "fabricproof-mux"],
                           stdin=subprocess.DEVNULL, capture_output=True, timeout=10, check=False)
        marker = str(control_dir).encode()
        pids = []
        for proc in Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                if marker in (proc / "cmdline").read_bytes():
                    pids.append(int(proc.name))
            except OSError:
                continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        shutil.rmtree(control_dir, ignore_errors=True)


class AnsibleFleet:
    """The registry's adapter for Ansible: one ansible-playbook run for the whole fleet, not one per host. Its
    deadline allows every host its host timeout, in as many rounds as the forks make."""

    def __init__(self, transport: AnsibleTransport, ctx: RunContext):
        self.transport = transport
        self.ctx = ctx

    def run(self, hosts: Sequence[Host], commands: Sequence[Command], on_host: OnHost) -> None:
        rounds = math.ceil(len(hosts) / max(1, min(self.ctx.forks, len(hosts) or 1)))
        deadline = time.monotonic() + self.ctx.host_timeout_s * max(1, rounds)
        self.transport.run_fleet(hosts, commands, deadline, on_host)

    def interrupt(self) -> None:
        """ansible-runner stops its ansible-playbook child when interrupted; nothing more to cut."""
