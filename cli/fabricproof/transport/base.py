"""The transport seam: run fixed argv on a host and return CommandResults; host-level failures as HostError."""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..inventory import Host
from ..model import CommandResult
from .framing import Command


class ErrorKind(str, enum.Enum):
    """Why a host could not be collected at all; each becomes a per-host collection error."""

    UNREACHABLE = "unreachable"
    AUTH = "auth failure"
    HOSTKEY_MISMATCH = "host key mismatch"
    HOSTKEY_UNKNOWN = "unknown host key"
    TIMEOUT = "timeout"
    CONFIG = "bad connection settings"
    PROTOCOL = "ssh error"
    FAILED = "failed"


class HostError(Exception):
    """Nothing could run on this host. The message names the host and the reason, never a secret."""

    def __init__(self, kind: ErrorKind, message: str, retryable: bool = False):
        self.kind = kind
        self.message = message
        self.retryable = retryable
        super().__init__(message)

    def __str__(self) -> str:
        return f"{self.kind.value}: {self.message}"


@dataclass(frozen=True)
class TransportOptions:
    """Settings shared by every transport; each uses the ones that apply to it."""

    accept_new_host_keys: bool = False
    connect_timeout_s: float = 10.0
    connect_attempts: int = 3
    retry_backoff_s: float = 0.5
    forks: int = 64
    run_dir: Path | None = None  # where the Ansible transport keeps its artifacts, and replay reads from
    run_id: str = ""
    inventory_path: str | None = None  # the Ansible transport hands the same inventory to ansible-playbook
    max_output_bytes: int = 256 * 1024 * 1024  # per host: a host printing without end must not eat the controller


def as_commands(argvs: Sequence[Sequence[str]], timeouts: float | Sequence[float]) -> list[Command]:
    """Pair argvs with their timeouts (one for all, or one each)."""
    if isinstance(timeouts, (int, float)):
        per = [float(timeouts)] * len(argvs)
    else:
        per = [float(t) for t in timeouts]
        if len(per) != len(argvs):
            raise ValueError(f"{len(argvs)} commands but {len(per)} timeouts")
    return [Command(tuple(a), t) for a, t in zip(argvs, per, strict=True)]


def default_deadline(commands: Sequence[Command], slack_s: float = 30.0) -> float:
    """A monotonic deadline no command list can need more than: every timeout plus its kill grace, plus slack."""
    return time.monotonic() + sum(c.timeout_s + 2 for c in commands) + slack_s


@runtime_checkable
class Transport(Protocol):
    """Runs fixed collector argv on hosts. run_many raises HostError when nothing could run on the host;
    once commands run, per-command failures (timeout, cut off) are CommandResults with `error` set."""

    name: str

    def run(self, host: Host, argv: Sequence[str], timeout: float) -> CommandResult: ...

    def run_many(self, host: Host, argvs: Sequence[Sequence[str]], timeout_per_command: float | Sequence[float],
                 deadline: float | None = None) -> list[CommandResult]: ...

    def close(self) -> None: ...


class FleetTransport(Protocol):
    """A transport that fans out by itself (Ansible): one call for all hosts instead of one per host."""

    def run_fleet(self, hosts: Sequence[Host], argvs: Sequence[Sequence[str]], timeouts: Sequence[float],
                  deadline: float, on_host: HostCallback) -> dict[str, list[CommandResult] | HostError]: ...


class HostCallback(Protocol):
    def __call__(self, host: str, outcome: list[CommandResult] | HostError) -> None: ...
