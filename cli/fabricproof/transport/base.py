"""The transport seam: run fixed commands on one host and return CommandResults; host-level failures as HostError."""

from __future__ import annotations

import abc
import enum
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Protocol

from ..model import Command, CommandResult, Host


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


#: One host's outcome: a result per command, or why nothing could run there.
Outcome = list[CommandResult] | HostError
#: Called once per host as it finishes, from whatever thread finished it.
OnHost = Callable[[str, Outcome], None]


@dataclass(frozen=True)
class RunContext:
    """What a transport may need to know of the run it serves: where its evidence goes (the Ansible transport
    keeps its runner artifacts there), the run's id, and how many hosts run at once."""

    run_dir: Path
    run_id: str
    forks: int
    host_timeout_s: float


class Transport(abc.ABC):
    """Runs fixed collector argv on one host. run_many raises HostError when nothing could run on the host;
    once commands run, per-command failures (timeout, cut off) are CommandResults with `error` set.
    Thread-safe: one instance serves a whole run's thread pool."""

    name: ClassVar[str]

    @abc.abstractmethod
    def run_many(self, host: Host, commands: Sequence[Command], deadline: float) -> list[CommandResult]:
        """One result per command, in order; `deadline` (time.monotonic()) bounds the host as a whole."""

    def close(self) -> None:  # noqa: B027 - most transports hold nothing to release
        """End the run: release connections, and cut running hosts short (Ctrl-C)."""


class FleetRunner(Protocol):
    """How a collection drives a transport across a fleet; the registry adapts every transport to it."""

    def run(self, hosts: Sequence[Host], commands: Sequence[Command], on_host: OnHost) -> None:
        """Run the commands on every host, reporting each host once through on_host as it finishes."""

    def interrupt(self) -> None:
        """Ctrl-C: stop starting hosts and cut running ones short."""


def deadline_for(commands: Sequence[Command], slack_s: float = 30.0) -> float:
    """A monotonic deadline no command list can need more than: every timeout plus its kill grace, plus slack."""
    return time.monotonic() + sum(c.timeout_s + 2 for c in commands) + slack_s


def commands(argvs: Sequence[Sequence[str]], timeouts: float | Sequence[float], names: Sequence[str] = ()) -> list[Command]:
    """Commands from argvs and their timeouts (one for all, or one each), optionally named."""
    per = [float(timeouts)] * len(argvs) if isinstance(timeouts, (int, float)) else [float(t) for t in timeouts]
    if len(per) != len(argvs) or (names and len(names) != len(argvs)):
        raise ValueError(f"{len(argvs)} commands but {len(per)} timeouts and {len(names)} names")
    return [Command(tuple(a), t, names[k] if names else "") for k, (a, t) in enumerate(zip(argvs, per, strict=True))]
