"""Replay transport: read a run directory's raw evidence back as CommandResults (re-parse after a parser fix)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..collectors import COLLECTORS
from ..inventory import Host
from ..model import CommandResult
from .base import ErrorKind, HostError, TransportOptions

#: Files of one host under RUNDIR/raw/<host>/ (written by fabricproof.collect).
META = "meta.json"
STDOUT_SUFFIX = ".txt"
STDERR_SUFFIX = ".stderr"
RUN_FILE = "run.json"


def raw_dir(run_dir: Path, host: str) -> Path:
    return Path(run_dir) / "raw" / host


class ReplayTransport:
    """Serves what a host printed in a past run, with its exit status, timing and errors as recorded."""

    name = "replay"

    def __init__(self, options: TransportOptions | None = None, run_dir: Path | None = None):
        self.options = options or TransportOptions()
        directory = run_dir if run_dir is not None else self.options.run_dir
        if directory is None:
            raise ValueError("the replay transport needs a run directory")
        self.run_dir = Path(directory)
        self._by_argv = {c.argv: c.id for c in COLLECTORS.values()}
        self._host_errors = self._recorded_host_errors()

    def _recorded_host_errors(self) -> dict[str, dict[str, Any]]:
        try:
            run = json.loads((self.run_dir / RUN_FILE).read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}
        errors = run.get("errors") if isinstance(run, dict) else None
        return errors if isinstance(errors, dict) else {}

    def hosts(self) -> list[str]:
        """Every host the run directory holds evidence or a recorded error for."""
        raw = self.run_dir / "raw"
        seen = {p.name for p in raw.iterdir() if p.is_dir() and not p.name.startswith(".")} if raw.is_dir() else set()
        return sorted(seen | set(self._host_errors))

    def run(self, host: Host, argv: Sequence[str], timeout: float) -> CommandResult:
        return self.run_many(host, [argv], timeout)[0]

    def run_many(self, host: Host, argvs: Sequence[Sequence[str]], timeout_per_command: float | Sequence[float],
                 deadline: float | None = None) -> list[CommandResult]:
        recorded = self._host_errors.get(host.name)
        if recorded:
            kind = next((k for k in ErrorKind if k.value == recorded.get("kind")), ErrorKind.FAILED)
            raise HostError(kind, str(recorded.get("message", "not collected")))
        directory = raw_dir(self.run_dir, host.name)
        if not directory.is_dir():
            raise HostError(ErrorKind.FAILED, f"no raw evidence for {host.name} in {self.run_dir}")
        try:
            meta = json.loads((directory / META).read_text())
        except FileNotFoundError:
            meta = {}  # a hand-made evidence directory: outputs only, every command taken as exit 0
        except json.JSONDecodeError as exc:
            raise HostError(ErrorKind.FAILED, f"{directory / META} is not JSON: {exc}") from None
        return [self._one(directory, tuple(argv), meta) for argv in argvs]

    def _one(self, directory: Path, argv: tuple[str, ...], meta: dict[str, Any]) -> CommandResult:
        cid = self._by_argv.get(argv)
        if cid is None:
            return CommandResult(argv, "", exit_code=None, error="no collector has this command; nothing recorded")
        record = meta.get(cid) if isinstance(meta.get(cid), dict) else {}
        out_path = directory / f"{cid}{STDOUT_SUFFIX}"
        if not out_path.is_file() and not record:
            return CommandResult(argv, "", exit_code=None, error=f"not recorded in {directory}")
        stdout = out_path.read_text(encoding="utf-8", errors="replace") if out_path.is_file() else ""
        err_path = directory / f"{cid}{STDERR_SUFFIX}"
        stderr = err_path.read_text(encoding="utf-8", errors="replace") if err_path.is_file() else ""
        exit_code = record.get("exit_code", 0) if record else 0
        return CommandResult(argv, stdout, stderr, exit_code=exit_code, duration_s=float(record.get("duration_s") or 0.0),
                             error=record.get("error"))

    def close(self) -> None:
        pass
