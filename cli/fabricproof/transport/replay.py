"""Replay transport: a past run's raw evidence served back as CommandResults (re-parse after a parser fix)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..model import Command, CommandResult, Host
from ..runstore import RunStore
from .base import ErrorKind, HostError, RunContext, Transport


@dataclass(frozen=True)
class ReplayOptions:
    """The run directory whose evidence is replayed."""

    source: Path


class ReplayTransport(Transport):
    """Serves what a host printed in a past run, with its exit status, timing and errors as recorded. Commands are
    found by name (the collector id they were recorded under), so it needs no collector registry."""

    name = "replay"

    def __init__(self, options: ReplayOptions, ctx: RunContext | None = None):
        self.store = RunStore(options.source)
        self._host_errors = self.store.recorded_errors()

    def hosts(self) -> list[str]:
        """Every host the run directory holds evidence or a recorded error for."""
        return self.store.hosts()

    def run_many(self, host: Host, commands: Sequence[Command], deadline: float) -> list[CommandResult]:
        recorded = self._host_errors.get(host.name)
        if recorded:
            kind = next((k for k in ErrorKind if k.value == recorded.get("kind")), ErrorKind.FAILED)
            raise HostError(kind, str(recorded.get("message", "not collected")))
        if not self.store.has_evidence(host.name):
            raise HostError(ErrorKind.FAILED, f"no raw evidence for {host.name} in {self.store.root}")
        try:
            meta = self.store.meta(host.name)
        except ValueError as exc:
            raise HostError(ErrorKind.FAILED, str(exc)) from None
        return [self._one(host.name, c, meta) for c in commands]

    def _one(self, host: str, cmd: Command, meta: dict) -> CommandResult:
        if not cmd.name:
            return CommandResult(cmd.argv, "", exit_code=None, error="an unnamed command cannot be replayed")
        rec = self.store.read(host, cmd.name, meta)
        if rec is None:
            return CommandResult(cmd.argv, "", exit_code=None, error=f"not recorded in {self.store.raw_dir(host)}")
        return CommandResult(cmd.argv, rec.stdout, rec.stderr, exit_code=rec.exit_code, duration_s=rec.duration_s,
                             error=rec.error, stdout_bytes=rec.stdout_bytes, stderr_bytes=rec.stderr_bytes)
