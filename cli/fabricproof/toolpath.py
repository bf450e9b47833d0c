"""Find Ansible's tools beside this Python: pip puts them there, and PATH may lack them (no pyenv rehash, a venv
not activated, a cron or Slurm environment)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path


def python_bindir() -> Path:
    return Path(sys.executable).parent


def find(name: str) -> str | None:
    """The tool installed beside this interpreter, else the one on PATH."""
    here = python_bindir() / name
    return str(here) if os.access(here, os.X_OK) else shutil.which(name)


def path_with_python_bin(path: str | None = None) -> str:
    """PATH with this interpreter's bin directory first (ansible-runner starts `ansible-playbook` from PATH)."""
    path = os.environ.get("PATH", "") if path is None else path
    bindir = str(python_bindir())
    return path if bindir in path.split(os.pathsep) else bindir + os.pathsep + path
