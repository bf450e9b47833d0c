"""The probes' idle guard asks every host of each probe and collective round which GPU processes and Slurm job steps
run there: the lab answers both calls from the node's pre-rendered files through its tool scripts, the same text and
exit code as the Python form, idle or busy, so a round does not start the emulator on every host."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from fabricproof.probes import guard
from fabricproof_lab.emu import api

CALLS = [pytest.param(guard.GPU_APPS, "gpu-busy", id="gpu-processes"),
         pytest.param(("scontrol", "listpids"), "slurm-job", id="job-steps")]


def _call(argv: list[str], node: Path, **env: str) -> tuple[str, str, int]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
                          env={"PATH": "/usr/bin:/bin", "FABRICPROOF_LAB_NODE": str(node), **env})
    return proc.stdout, proc.stderr, proc.returncode


@pytest.mark.parametrize(("call", "fault"), CALLS)
def test_the_guards_calls_are_answered_without_python_as_the_python_form_answers(tmp_path, call, fault):
    labdir = tmp_path / "lab"
    bindir = api.install(labdir)
    node = api.create_node(labdir, "127.10.0.2", "gb200-nvl72", 1)
    tool = [str(bindir / call[0]), *call[1:]]
    python = ["/usr/bin/python3", "-S", "-m", f"{api.PACKAGE}.cli", *call]
    idle = _call(python, node, PYTHONPATH=str(labdir / "lib"))
    api.inject(labdir, "127.10.0.2", fault)
    busy = _call(python, node, PYTHONPATH=str(labdir / "lib"))
    assert busy[0].count("\n") >= 4 and busy[1:] == ("", 0) and idle != busy, (idle, busy)

    # without the emulator's Python package the tool script can only answer from the node's files
    shutil.move(labdir / "lib", tmp_path / "lib-aside")
    assert _call(tool, node) == busy
    shutil.move(tmp_path / "lib-aside", labdir / "lib")
    api.clear(labdir, "127.10.0.2", fault)
    shutil.move(labdir / "lib", tmp_path / "lib-aside")
    assert _call(tool, node) == idle
