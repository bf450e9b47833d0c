"""Helpers for transport lab tests: the lab engineers' LabFactory (loaded from tests/lab/conftest.py), host vars."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

from fabricproof.inventory import Host

_spec = importlib.util.spec_from_file_location("fabricproof_tests_lab_conftest",
                                               Path(__file__).resolve().parents[1] / "lab" / "conftest.py")
assert _spec is not None and _spec.loader is not None
_lab = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = _lab  # dataclasses look their module up while the class is being built
_spec.loader.exec_module(_lab)

LabFactory = _lab.LabFactory
RunningLab = _lab.RunningLab
lab_skip_reason = _lab.lab_skip_reason


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
