"""`check --local` runs on every node every few minutes (Slurm's HealthCheckProgram): it imports what it uses and
not the lab, the rollout machinery, SSH or Ansible, and the pure-Python JSON-Schema validator stays unloaded while
its documents are valid. What it imports is pinned: a module added to its path costs every node every run."""

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


#: Every fabricproof module `check --local` loads, the collectors aside (the registry loads each collector's module:
#: a new collector is expected to add one). A module added here is CPU on every node every few minutes (issue 23.4):
#: the report formats, the probe runner, rich, msgspec and multiprocessing are left out on purpose.
PINNED = {
    "fabricproof", "fabricproof.actions", "fabricproof.breaker", "fabricproof.cache", "fabricproof.cli",
    "fabricproof.collect", "fabricproof.collect.record", "fabricproof.collect.shards", "fabricproof.collectors",
    "fabricproof.commands",
    "fabricproof.commands._breaker", "fabricproof.commands._common", "fabricproof.commands._probes",
    "fabricproof.commands.check", "fabricproof.config", "fabricproof.documents", "fabricproof.errors",
    "fabricproof.facts", "fabricproof.fsutil", "fabricproof.invcache", "fabricproof.inventory", "fabricproof.judging",
    "fabricproof.judging.baseline", "fabricproof.judging.catalog", "fabricproof.judging.evaluate",
    "fabricproof.judging.findings", "fabricproof.judging.ops", "fabricproof.judging.packing",
    "fabricproof.judging.pipeline", "fabricproof.judging.pointer",
    "fabricproof.model", "fabricproof.paths", "fabricproof.platforms", "fabricproof.redact", "fabricproof.reporters",
    "fabricproof.reporters._common", "fabricproof.reporters.base", "fabricproof.runstore", "fabricproof.slurm",
    "fabricproof.spool", "fabricproof.subnet", "fabricproof.subnet.checks", "fabricproof.textsafe",
    "fabricproof.timeutil", "fabricproof.toolpath", "fabricproof.tools", "fabricproof.transport",
    "fabricproof.transport.base", "fabricproof.transport.fanout", "fabricproof.transport.framing",
    "fabricproof.transport.lanes", "fabricproof.transport.liblog", "fabricproof.transport.local", "fabricproof.words",
}
#: Beyond what the interpreter and typer load by themselves: the baseline's YAML and its schema, the XML parser.
#: msgspec (and its typing_extensions) writes the node's facts: ~25 ms to import, for a fleet's 3.1 ms a host saved.
THIRD_PARTY = {"defusedxml", "jsonschema_rs", "msgspec", "typing_extensions", "yaml"}
#: Standard-library packages only other paths need (the workers' pipes, syncfs, the JSON fast path's decimal aside).
STDLIB_UNUSED = ("multiprocessing", "ctypes")
#: Run a command and write the modules loaded when it ends, one a line.
LOADED = """import atexit, runpy, sys
out = sys.argv[1]
atexit.register(lambda: open(out, "w").write("\\n".join(sorted(sys.modules))))
sys.argv = [sys.argv[2], *sys.argv[3:]]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
"""


def loaded(tmp_path: Path, env: dict[str, str], *argv: str) -> set[str]:
    out = tmp_path / f"loaded-{len(list(tmp_path.glob('loaded-*')))}.txt"
    proc = subprocess.run([sys.executable, "-c", LOADED, str(out), *argv], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert out.is_file(), proc.stdout + proc.stderr
    return set(out.read_text().split())


def test_check_local_loads_exactly_its_pinned_modules(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO / "cli"), "PATH": f"{tmp_path}:/usr/bin:/bin"}
    check = ("fabricproof", "check", "--local", "-b", str(REPO / "inventories" / "lab" / "baseline.yaml"),
             "--group", "dgx_h100", "--node-name", "h100-0001")
    floor = set(subprocess.run([sys.executable, "-c", "import sys, typer; print(*sys.modules)"], env=env,
                               cwd=tmp_path, capture_output=True, text=True, timeout=300, check=True).stdout.split())
    first, again = loaded(tmp_path, env, *check), loaded(tmp_path, env, *check)  # the catalog loaded, then kept
    assert first == again
    ours = {m for m in first if m.split(".")[0] == "fabricproof" and not m.startswith("fabricproof.collectors.")}
    assert sorted(ours - PINNED) == [] and sorted(PINNED - ours) == []
    tops = {m.split(".")[0] for m in first} - {m.split(".")[0] for m in floor} - set(sys.stdlib_module_names)
    # Cython's runtime registers itself under names of its own when PyYAML's C loader is loaded
    assert {t for t in tops if t != "fabricproof" and not t.startswith(("_cython_", "cython_runtime"))} == THIRD_PARTY
    assert sorted(m for m in STDLIB_UNUSED if m in first) == []
    assert "fabricproof.collectors.gpu.nvidia_smi_q" in first  # it did collect and parse
