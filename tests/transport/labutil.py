"""Helpers for transport lab tests: the shared LabFactory (tests/labkit.py), host vars, process lookups."""

from __future__ import annotations

import os
from pathlib import Path

from fabricproof.model import Host
from labkit import LabFactory, RunningLab, lab_skip_reason

__all__ = ["LabFactory", "RunningLab", "lab_skip_reason", "processes_mentioning", "with_vars"]


def with_vars(host: Host, **changes: object) -> Host:
    """The same inventory host with some vars replaced (a copy: the inventory is shared)."""
    return Host(host.name, {**host.vars, **changes}, host.groups)


def processes_mentioning(needle: str) -> list[int]:
    """PIDs whose command line contains needle (used to prove no ssh mux master outlived a run)."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit() and int(proc.name) != os.getpid():
            try:
                if needle.encode() in (proc / "cmdline").read_bytes():
                    found.append(int(proc.name))
            except OSError:
                continue
    return found
