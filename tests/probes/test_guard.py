"""The idle guard run by a real /bin/sh inside the transport's framed script: it refuses a node with GPU compute
processes or Slurm job steps (or one it cannot see), runs the probe on an idle one, and ends the probe when the
session that started it goes away."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from fabricproof.collectors.base import NOT_RUN_EXIT, not_run_reason
from fabricproof.probes import guard
from fabricproof.model import Command
from fabricproof.transport.framing import build_script, decode_results, new_nonce

TOOLS = {
    # Stand-ins for the node's tools, answering as the real ones do: nvidia-smi's csv,noheader rows (none when
    # idle), scontrol listpids's header and one row per job step process.
    "nvidia-smi": 'if [ -n "$NVSMI_FAIL" ]; then echo "NVIDIA-SMI has failed because it couldn\'t communicate with '
                  'the NVIDIA driver."; exit 9; fi\n[ -n "$GPU_APPS" ] && printf "%s\\n" "$GPU_APPS"\nexit 0\n',
    "scontrol": 'if [ -n "$SCONTROL_FAIL" ]; then echo "scontrol: error: slurm_load_ctl_conf error"; exit 1; fi\n'
                'if [ -z "$JOB_PIDS" ]; then echo "No job steps exist on this node."; exit 1; fi\n'
                'echo "PID      JOBID    STEPID   LOCALID GLOBALID"\nprintf "%s\\n" "$JOB_PIDS"\n',
    # This machine may run slurmd for other tests: whether slurmd "runs here" is the test's to say.
    "pgrep": 'if [ "$1" = -x ]; then [ -n "$SLURMD_RUNS" ] && [ "$2" = slurmd ] && echo 1 && exit 0; exit 1; fi\n'
             'exec /usr/bin/pgrep "$@"\n',
}


@pytest.fixture
def node(tmp_path: Path) -> dict[str, str]:
    """An environment whose PATH finds the stand-in tools first (scontrol only where Slurm is used)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, body in TOOLS.items():
        (bin_dir / name).write_text("#!/bin/sh\n" + body)
        (bin_dir / name).chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)}


def run(argv: tuple[str, ...], env: dict[str, str], timeout_s: float = 60.0, check: bool = True):
    """The guarded argv as one framed command through /bin/sh, the way every transport runs it."""
    cmd = Command(guard.guarded(argv, check), timeout_s, "probe", "fabric-load")
    nonce = new_nonce()
    proc = subprocess.run(["/bin/sh", "-s"], input=build_script([cmd], nonce).encode(), capture_output=True,
                          timeout=120, env=env, check=False)
    return decode_results([cmd], proc.stdout, proc.stderr, nonce)[0]


def test_an_idle_node_runs_the_probe_with_its_arguments_and_exit_status(node):
    r = run(("sh", "-c", 'echo "ran $1 $2"; exit 3', "probe", "-b 8", "$(reboot)"), node)
    assert r.stdout == "ran -b 8 $(reboot)\n"  # data stays data: "$@", never spliced into the script
    assert r.exit_code == 3
    assert not_run_reason(r.exit_code, r.stdout) is None


def test_a_gpu_compute_process_refuses_the_node_naming_it(node):
    r = run(("sh", "-c", "echo ran"), {**node, "GPU_APPS": "4242, /usr/bin/python3, 30512 MiB"})
    assert r.exit_code == NOT_RUN_EXIT
    assert "ran" not in r.stdout
    why = not_run_reason(r.exit_code, r.stdout)
    assert why and "1 GPU compute process(es) running" in why and "4242, /usr/bin/python3" in why


def test_watch_only_runs_the_probe_beside_gpu_work(node):
    """The runs after an idle check made for them (an HCA probe's servers and clients) skip the checks."""
    cmd = ("sh", "-c", "echo ran")
    r = run(cmd, {**node, "GPU_APPS": "4242, ib_write_bw, 500 MiB"}, check=False)
    assert (r.exit_code, r.stdout) == (0, "ran\n")


def test_a_node_whose_gpus_cannot_be_seen_is_refused(node):
    r = run(("sh", "-c", "echo ran"), {**node, "NVSMI_FAIL": "1"})
    why = not_run_reason(r.exit_code, r.stdout)
    assert why and why.startswith("cannot tell whether the GPUs are idle") and "NVIDIA driver" in why


def test_slurm_job_steps_refuse_the_node(node):
    r = run(("sh", "-c", "echo ran"), {**node, "JOB_PIDS": "31337    1042     0        0       0\n"
                                                            "31338    1042     0        1       1"})
    why = not_run_reason(r.exit_code, r.stdout)
    assert why and "Slurm job steps run on this node (scontrol listpids: 2 processes)" in why
    assert "31337" in why


def test_no_job_steps_is_idle_even_where_slurmd_runs(node):
    r = run(("sh", "-c", "echo ran"), {**node, "SLURMD_RUNS": "1"})
    assert (r.exit_code, r.stdout) == (0, "ran\n")


def test_scontrol_without_slurmd_here_means_no_slurm_jobs(node):
    """A login or control node has scontrol but no slurmd: it cannot answer, and nothing of Slurm runs there."""
    r = run(("sh", "-c", "echo ran"), {**node, "SCONTROL_FAIL": "1"})
    assert (r.exit_code, r.stdout) == (0, "ran\n")


def test_scontrol_failing_on_a_slurm_node_refuses_it(node):
    r = run(("sh", "-c", "echo ran"), {**node, "SCONTROL_FAIL": "1", "SLURMD_RUNS": "1"})
    why = not_run_reason(r.exit_code, r.stdout)
    assert why and why.startswith("cannot tell whether Slurm jobs run here") and "slurm_load_ctl_conf" in why


def test_the_probe_timeout_ends_the_probe_and_its_children(node, tmp_path):
    pidfile = tmp_path / "child.pid"
    t0 = time.monotonic()
    r = run(("sh", "-c", f'sleep 300 & echo $! >{pidfile}; wait'), node, timeout_s=2)
    assert r.exit_code is None and r.error and r.error.startswith("timed out")
    assert time.monotonic() - t0 < 60
    assert not _alive(int(pidfile.read_text()))


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(line.startswith("State:") and "Z" in line for line in f)
    except FileNotFoundError:
        return False


def _wait_gone(pid: int, within_s: float) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return False


def test_when_the_session_ends_the_probe_is_stopped(node, tmp_path):
    """The transport's shell killed outright (what a closed SSH session leaves behind): the guard notices that its
    ancestor is gone and ends the probe, instead of leaving it to run for its whole timeout."""
    pidfile = tmp_path / "probe.pid"
    cmd = Command(guard.guarded(("sh", "-c", f"echo $$ >{pidfile}; exec sleep 300")), 600, "probe", "fabric-load")
    # The session: a shell that reads the framed script, under a parent we can kill like sshd's session process.
    session = subprocess.Popen(["/bin/sh", "-c", "/bin/sh -s; :"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, env=node, start_new_session=True)
    assert session.stdin is not None
    session.stdin.write(build_script([cmd], new_nonce()).encode())
    session.stdin.close()
    end = time.monotonic() + 60
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < end:
        time.sleep(0.1)
    probe = int(pidfile.read_text())
    assert _alive(probe)
    session.send_signal(signal.SIGKILL)
    session.wait(timeout=30)
    try:
        assert _wait_gone(probe, 30), "the probe outlived its session"
    finally:
        if _alive(probe):
            os.kill(probe, signal.SIGKILL)


def test_guarded_argv_is_the_fixed_script_with_the_probe_as_arguments():
    argv = guard.guarded(("all_reduce_perf", "-g", "8"))
    assert argv[:2] == ("sh", "-c") and argv[2] == guard.script()
    assert argv[3:] == (guard.NAME, "check", "all_reduce_perf", "-g", "8")
    assert guard.guarded(("x",), check=False)[3:] == (guard.NAME, "watch", "x")
    with pytest.raises(ValueError):
        guard.guarded(())


@pytest.mark.parametrize(("code", "out", "why"), [
    (75, "fabricproof: not run: busy\n", "busy"),
    (75, "fabricproof: not run: \n", "prerequisite absent"),
    (75, "some output\n", None),  # the tool's own 75, without the marker: it ran
    (0, "fabricproof: not run: busy\n", None),
    (None, "", None),
])
def test_not_run_needs_both_the_status_and_the_marker(code, out, why):
    assert not_run_reason(code, out) == why
