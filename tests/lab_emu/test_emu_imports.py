"""What an emulated tool's Python form imports (issue 20.6): every such call is a process of its own (a collective's
task on each node, a playbook's state change), and its imports were most of its CPU. The tool scripts start the
package's launcher by path with the output key their `case` found, so no call imports runpy or the command table
for its key; a probe on a healthy node needs neither the renderers, the fault families, dataclasses, typing nor
OpenSSL's hashlib. Each answer is the same as the `python3 -m <pkg>.cli` form's, byte for byte."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from fabricproof_lab.emu import api

PKG = api.PACKAGE
#: Never on any tool call's path.
NEVER = {"runpy", "typing", "_hashlib"}
#: Not on a healthy node's probe: the command table and the product's tools vocabulary (and with them dataclasses),
#: the fault families.
NOT_ON_A_PROBE = NEVER | {"dataclasses", "inspect", "fabricproof.tools", f"{PKG}.outputs", f"{PKG}.faults.base"}


def _call(argv: list[str], node: Path, *, importtime: bool = False, **env: str) -> subprocess.CompletedProcess[bytes]:
    extra = {"PYTHONPROFILEIMPORTTIME": "1"} if importtime else {}
    return subprocess.run(argv, capture_output=True, timeout=120, stdin=subprocess.DEVNULL, check=False,
                          env={"PATH": "/usr/bin:/bin", "FABRICPROOF_LAB_NODE": str(node),
                               "FABRICPROOF_LAB_PROBE_SCALE": "0", **extra, **env})


def _imported(stderr: bytes) -> tuple[set[str], bytes]:
    """The modules `-X importtime` lists, and the rest of stderr."""
    names, rest = set(), []
    for line in stderr.decode("utf-8", "surrogateescape").splitlines(keepends=True):
        if line.startswith("import time:"):
            names.add(line.rsplit("|", 1)[1].strip())
        else:
            rest.append(line)
    assert names, "PYTHONPROFILEIMPORTTIME listed nothing: the tool did not run Python"
    return names, "".join(rest).encode("utf-8", "surrogateescape")


def _as_module(labdir: Path, node: Path, argv: list[str]) -> subprocess.CompletedProcess[bytes]:
    """The same invocation through `python3 -m <pkg>.cli`, which looks its key up itself."""
    return _call(["/usr/bin/python3", "-S", "-m", f"{PKG}.cli", *argv], node, PYTHONPATH=str(labdir / "lib"))


@pytest.fixture
def rack(tmp_path: Path, system_python: Path) -> tuple[Path, Path]:
    labdir = tmp_path / "lab"
    api.install(labdir)
    return labdir, api.create_node(labdir, "127.10.0.2", "gb200-nvl72", 1, rack=1)


@pytest.mark.parametrize("argv", [["all_reduce_perf", "-b", "8", "-e", "8G", "-f", "2", "-g", "4"],
                                  ["nvbandwidth", "-t", "device_to_device_memcpy_read_ce"],
                                  ["dcgmi", "diag", "-r", "1"]], ids=lambda a: a[0])
def test_a_probe_on_a_healthy_node_imports_no_command_table_faults_dataclasses_or_typing(rack, argv):
    labdir, node = rack
    probe = _call([str(labdir / "bin" / argv[0]), *argv[1:]], node, importtime=True)
    names, stderr = _imported(probe.stderr)
    assert not names & NOT_ON_A_PROBE, sorted(names & NOT_ON_A_PROBE)
    assert probe.returncode == 0 and probe.stdout.count(b"\n") > 5, probe
    same = _as_module(labdir, node, argv)
    assert (probe.stdout, stderr, probe.returncode) == (same.stdout, same.stderr, same.returncode)


def test_a_collective_task_imports_no_command_table_faults_dataclasses_or_typing(rack):
    """One task of a launch (Slurm's task environment): its node's summary joins rank 0, here a listener of the
    test's own that answers as rank 0 does; the task prints nothing, as a follower does."""
    import socket
    import threading

    labdir, node = rack
    key = "slurm-7.0"
    joined: list[bytes] = []
    with socket.socket() as srv:
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        srv.settimeout(120)
        rendezvous = node.resolve().parent / "collective"
        (rendezvous / f"{key}.port").write_text(f"{srv.getsockname()[1]}\n")

        def leader() -> None:
            conn, _ = srv.accept()
            with conn:
                buf = b""
                while not buf.endswith(b"\n"):
                    buf += conn.recv(65536)
                joined.append(buf)
                conn.sendall(b"done\n")

        thread = threading.Thread(target=leader, daemon=True)
        thread.start()
        task = _call([str(labdir / "bin" / "all_reduce_perf"), "-b", "8", "-e", "8G", "-f", "2", "-g", "4"], node,
                     importtime=True, SLURM_PROCID="1", SLURM_NTASKS="2", SLURM_JOB_ID="7", SLURM_STEP_ID="0")
        thread.join(120)
    names, stderr = _imported(task.stderr)
    assert not names & NOT_ON_A_PROBE, sorted(names & NOT_ON_A_PROBE)
    assert (task.stdout, stderr, task.returncode) == (b"", b"", 0)
    assert len(joined) == 1 and b'"rank": 1' in joined[0] and b'"host": "node-0001"' in joined[0], joined


def test_a_state_change_and_a_read_with_no_file_start_no_runpy_typing_or_openssl(rack, tmp_path):
    labdir, node = rack
    restart = _call([str(labdir / "bin" / "systemctl"), "restart", "nvidia-persistenced"], node, importtime=True)
    names, stderr = _imported(restart.stderr)
    assert not names & NEVER and f"{PKG}.outputs" in names, sorted(names & NEVER)  # it re-rendered the node
    other = api.create_node(labdir, "127.10.0.3", "gb200-nvl72", 2, rack=1)
    same = _as_module(labdir, other, ["systemctl", "restart", "nvidia-persistenced"])
    assert (restart.stdout, stderr, restart.returncode) == (same.stdout, same.stderr, same.returncode)

    # a read-only invocation whose file is gone (absent mlxlink device): the key comes from the script's `case`
    argv = ["mlxlink", "-d", "mlx5_9", "-m", "-c"]
    read = _call([str(labdir / "bin" / argv[0]), *argv[1:]], node, importtime=True)
    names, stderr = _imported(read.stderr)
    assert not names & NEVER, sorted(names & NEVER)
    same = _as_module(labdir, node, argv)
    assert (read.stdout, stderr, read.returncode) == (same.stdout, same.stderr, same.returncode)
