"""The decision log: runs/<run id>/decisions.jsonl, append-only and fsynced; one JSON object per decision."""

from __future__ import annotations

import getpass
import json
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..fsutil import append_line
from ..timeutil import utc_now

DECISIONS_FILE = "decisions.jsonl"

# The verdicts an operator reads first; every other record is a step (what was done, on what evidence).
PROCEED, ROLLBACK, HALT = "PROCEED", "ROLLBACK", "HALT"


def who() -> str:
    """user@host of whoever runs fabricproof; a sudo caller is named too (the person, not just root)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    sudo = os.environ.get("SUDO_USER")
    if sudo and sudo != user:
        user = f"{user}(sudo:{sudo})"
    return f"{user}@{socket.gethostname()}"


class DecisionLog:
    """Appends decisions of one run; evidence paths are kept relative to the run directory."""

    def __init__(self, run_dir: Path, run_id: str, actor: str | None = None):
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / DECISIONS_FILE
        self.run_id = run_id
        self.actor = actor or who()

    def _rel(self, p: str | Path) -> str:
        try:
            return str(Path(p).resolve().relative_to(self.run_dir.resolve()))
        except ValueError:
            return str(p)

    def record(self, what: str, why: str, *, step: str = "", wave: str | None = None,
               hosts: Iterable[str] = (), evidence: Iterable[str | Path] = (), **extra: Any) -> dict[str, Any]:
        entry: dict[str, Any] = {"when": utc_now(), "run_id": self.run_id, "who": self.actor, "what": what,
                                 "why": why, "step": step}
        if wave is not None:
            entry["wave"] = wave
        entry["hosts"] = sorted(hosts)
        entry["evidence"] = [self._rel(p) for p in evidence]
        entry.update(extra)
        append_line(self.path, json.dumps(entry, sort_keys=False, default=str))
        return entry


def read(run_dir: Path) -> list[dict[str, Any]]:
    """Every decision of a run, in order. A torn last line (crash mid-write) is skipped, not fatal."""
    path = Path(run_dir) / DECISIONS_FILE
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out


def format_line(d: dict[str, Any]) -> str:
    """One decision as an operator reads it: time, who, what, on which hosts, why."""
    hosts = d.get("hosts") or []
    shown = ", ".join(hosts[:4]) + (f" (+{len(hosts) - 4})" if len(hosts) > 4 else "")
    where = f" [{d['wave']}]" if d.get("wave") else ""
    on = f" on {shown}" if shown else ""
    return f"{d['when']} {d['who']}{where} {d['what']}{on}: {d['why']}"
