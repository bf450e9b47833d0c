"""The probes' idle guard asks every host of each probe and collective round which GPU processes run: the lab answers
that call from a pre-rendered file through its tool script (a `cat`), the same text as the Python form, idle or
busy, so a round does not start the emulator on every host."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from fabricproof.probes import guard
from fabricproof_lab.emu import api


def _call(argv: list[str], node: Path, **env: str) -> tuple[str, str, int]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
                          env={"PATH": "/usr/bin:/bin", "FABRICPROOF_LAB_NODE": str(node), **env})
    return proc.stdout, proc.stderr, proc.returncode


def test_the_guards_gpu_process_query_is_answered_without_python_as_the_python_form_answers(tmp_path):
    labdir = tmp_path / "lab"
    bindir = api.install(labdir)
    node = api.create_node(labdir, "127.10.0.2", "gb200-nvl72", 1)
    tool = [str(bindir / guard.GPU_APPS[0]), *guard.GPU_APPS[1:]]
    python = ["/usr/bin/python3", "-S", "-m", f"{api.PACKAGE}.cli", *guard.GPU_APPS]
    idle = _call(python, node, PYTHONPATH=str(labdir / "lib"))
    api.inject(labdir, "127.10.0.2", "gpu-busy")
    busy = _call(python, node, PYTHONPATH=str(labdir / "lib"))
    assert idle == ("", "", 0) and busy[0].count("/usr/bin/python3") == 4 and busy[1:] == ("", 0), (idle, busy)

    # without the emulator's Python package the tool script can only answer from the node's files
    shutil.move(labdir / "lib", tmp_path / "lib-aside")
    assert _call(tool, node) == busy
    shutil.move(tmp_path / "lib-aside", labdir / "lib")
    api.clear(labdir, "127.10.0.2", "gpu-busy")
    shutil.move(labdir / "lib", tmp_path / "lib-aside")
    assert _call(tool, node) == idle
    assert not os.path.exists(labdir / "lib")
