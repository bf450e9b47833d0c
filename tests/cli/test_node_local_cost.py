"""`check --local` runs on every node every few minutes (Slurm's HealthCheckProgram): it imports what it uses and
not the lab, the rollout machinery, SSH or Ansible, and the pure-Python JSON-Schema validator stays unloaded while
its documents are valid."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: Imported by other commands only: each costs every node's run its import time (the lab and rollout ~0.1 s,
#: jsonschema ~0.08 s and ~0.2 s validating the 101 check files).
UNUSED = ("fabricproof_lab", "fabricproof.commands.lab", "fabricproof.commands.rollout", "fabricproof.rollout.runs",
          "fabricproof.commands.demo", "paramiko", "ansible_runner", "jsonschema")


def test_check_local_imports_only_what_it_uses(tmp_path):
    # No node tools here: the collectors fail, which changes nothing of what the run loads.
    env = {**os.environ, "PYTHONPATH": str(REPO / "cli"), "PATH": f"{tmp_path}:/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "fabricproof", "check", "--local", "-b",
                           str(REPO / "inventories" / "lab" / "baseline.yaml"), "--group", "dgx_h100",
                           "--node-name", "h100-0001"], env=env, cwd=tmp_path, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode in (1, 3), proc.stdout + proc.stderr  # judged: failures or errors, not a crash
    assert "h100-0001" in proc.stdout
    loaded = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \| +(\S+)$", proc.stderr, re.M))
    assert {"fabricproof.collectors", "fabricproof.judging.evaluate"} <= loaded  # it did judge the node
    assert sorted(m for m in UNUSED if m in loaded) == []
