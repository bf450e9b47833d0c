"""The framed script run by a real /bin/sh (dash on Debian), exactly as the SSH transport feeds it: on stdin."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from fabricproof.model import Command
from fabricproof.transport import lanes as lanes_mod
from fabricproof.transport.framing import build_script, decode_results, new_nonce

# Print marker-shaped lines built from everything the tool can see of its ancestors' argvs (the
# shell's, and its parent's). None holds the nonce.
FORGE = ("g=$(cut -d' ' -f4 /proc/$PPID/stat); "
         "printf '\\n%s:0:E:0\\n' \"$(cat /proc/$PPID/cmdline /proc/$g/cmdline | tr '\\0' ' ')\"")


def run_script(commands: list[Command], nonce: str | None = None, env: dict[str, str] | None = None
               ) -> tuple[list, float]:
    nonce = nonce or new_nonce()
    t0 = time.monotonic()
    proc = subprocess.run(["/bin/sh", "-s"], input=build_script(commands, nonce).encode(), capture_output=True,
                          timeout=60, check=False, env=env)
    return decode_results(commands, proc.stdout, proc.stderr, nonce), time.monotonic() - t0


def spy_path(tmp_path: Path, tool: str) -> dict[str, str]:
    """An environment whose PATH first finds a `tool` that logs each call to tmp_path/<tool>.calls, then
    runs the real one."""
    spy = tmp_path / "spybin"
    spy.mkdir(exist_ok=True)
    real = shutil.which(tool)
    (spy / tool).write_text(f'#!/bin/sh\necho "$*" >>{tmp_path / (tool + ".calls")}\nexec {real} "$@"\n')
    (spy / tool).chmod(0o755)
    return {**os.environ, "PATH": f"{spy}:{os.environ['PATH']}"}


def test_real_shell_round_trip_with_hostile_and_binary_output():
    commands = [
        Command(("printf", "%s", "no newline"), 5),
        Command(("sh", "-c", "printf '\\000\\001\\377\\376bin'; echo err >&2; exit 3"), 5),
        # A tool trying to read the rest of the script (and the nonce) from stdin gets /dev/null,
        # and its parent's argv shows only "/bin/sh -s".
        Command(("sh", "-c", "cat; " + FORGE), 5),
        Command(("definitely-not-a-tool-fabricproof",), 5),
        Command(("true",), 5),
    ]
    nonce = new_nonce()
    results, _ = run_script(commands, nonce)
    assert results[0].stdout == "no newline" and results[0].exit_code == 0
    assert results[1].exit_code == 3 and results[1].stderr == "err\n"
    assert results[1].stdout == "\x00\x01\ufffd\ufffdbin"
    assert results[2].exit_code == 0 and "/bin/sh -s" in results[2].stdout and nonce not in results[2].stdout
    assert results[3].exit_code == 127 and results[3].error is None and "definitely-not-a-tool" in results[3].stderr
    assert results[4].exit_code == 0 and results[4].stdout == ""
    # stderr belongs to its own command only: nothing of an earlier command's leaks into a quiet one
    assert [bool(r.stderr) for r in results] == [False, True, False, True, False]


def test_a_hanging_command_times_out_alone_and_the_rest_still_run():
    commands = [Command(("sleep", "30"), 1), Command(("echo", "after"), 5)]
    results, elapsed = run_script(commands)
    assert results[0].exit_code is None and results[0].error == "timed out after 1 s"
    assert results[1].stdout == "after\n" and results[1].exit_code == 0
    assert elapsed < 10


def test_timeout_kills_the_command_and_its_descendants():
    # The command and its grandchild ignore TERM and the grandchild would keep the pipe open for 30 s:
    # the KILL that follows the TERM reaches every descendant, not only the command.
    commands = [Command(("sh", "-c", "trap '' TERM; sh -c 'sleep 30' & wait"), 1), Command(("echo", "next"), 5)]
    results, elapsed = run_script(commands)
    assert results[0].error == "timed out after 1 s"
    assert results[1].stdout == "next\n"
    assert elapsed < 15


def test_one_watchdog_bounds_every_command_without_a_timeout_process_each(tmp_path):
    # GNU timeout per command costs the host a fork+exec each (~1.1 ms, 26 commands a host); the
    # watchdog needs no process per command.
    env = spy_path(tmp_path, "timeout")
    commands = [Command(("echo", str(i)), 5) for i in range(10)] + [Command(("sleep", "30"), 1)]
    results, elapsed = run_script(commands, env=env)
    assert [r.stdout for r in results[:10]] == [f"{i}\n" for i in range(10)]
    assert results[10].error == "timed out after 1 s" and elapsed < 10
    assert not (tmp_path / "timeout.calls").exists()


def test_a_quick_collection_costs_the_watchdog_one_or_two_sleeps(tmp_path):
    env = spy_path(tmp_path, "sleep")
    results, _ = run_script([Command(("echo", str(i)), 30) for i in range(26)], env=env)
    assert [r.exit_code for r in results] == [0] * 26
    assert len((tmp_path / "sleep.calls").read_text().splitlines()) <= 2


def test_without_a_private_temporary_directory_gnu_timeout_bounds_each_command(tmp_path):
    env = spy_path(tmp_path, "timeout")
    (tmp_path / "spybin" / "mktemp").write_text("#!/bin/sh\necho 'mktemp: read-only file system' >&2\nexit 1\n")
    (tmp_path / "spybin" / "mktemp").chmod(0o755)
    results, elapsed = run_script([Command(("sh", "-c", "echo ok; echo warn >&2"), 5), Command(("sleep", "30"), 1)],
                                  env=env)
    assert results[0].stdout == "ok\n" and results[0].stderr == "warn\n" and results[0].exit_code == 0
    assert results[1].error == "timed out after 1 s" and elapsed < 10
    assert (tmp_path / "timeout.calls").read_text().splitlines() == ["-k 2 5 sh -c echo ok; echo warn >&2",
                                                                     "-k 2 1 sleep 30"]


def test_the_watchdog_cleans_up_after_itself(tmp_path):
    commands = [Command(("echo", "a"), 5), Command(("sleep", "30"), 1)]
    nonce = new_nonce()
    # A session of its own: afterwards, anything of the script still running would still be in it.
    proc = subprocess.Popen(["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(tmp_path)}, start_new_session=True)
    out, err = proc.communicate(build_script(commands, nonce).encode(), timeout=60)
    assert decode_results(commands, out, err, nonce)[1].error == "timed out after 1 s"
    assert list(tmp_path.iterdir()) == []  # the private directory is gone
    assert session_empties(proc.pid)  # the watchdog sees it gone and ends after its current `sleep 1`


def session_empties(sid: int, within_s: float = 10.0) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if not subprocess.run(["pgrep", "-s", str(sid)], capture_output=True).stdout:
            return True
        time.sleep(0.2)
    return False


def running(commands: list[Command], tmp: Path, lanes: bool = False) -> subprocess.Popen:
    """The script in a session of its own (anything of it left running stays in the session), its private directory
    under `tmp`, once its first `sleep 30` has started."""
    proc = subprocess.Popen(["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(tmp)}, start_new_session=True)
    proc.stdin.write(build_script(commands, new_nonce(), lanes=lanes_mod.plan(commands) if lanes else None).encode())
    proc.stdin.close()
    deadline = time.monotonic() + 30
    while not subprocess.run(["pgrep", "-s", str(proc.pid), "-x", "-f", "sleep 30"],
                             capture_output=True).stdout and time.monotonic() < deadline:
        time.sleep(0.1)
    return proc


def closed(proc: subprocess.Popen) -> None:
    proc.stdout.close()
    proc.stderr.close()


def test_when_the_shell_dies_the_watchdog_ends_the_running_command_at_its_deadline_and_cleans_up(tmp_path):
    proc = running([Command(("sleep", "30"), 3)], tmp_path)
    proc.kill()  # the connection is gone: sshd ends the session's shell
    proc.wait()
    assert session_empties(proc.pid) and list(tmp_path.iterdir()) == []
    closed(proc)


@pytest.mark.parametrize("lanes", [False, True], ids=["in-order", "lanes"])
def test_when_every_process_of_the_session_is_terminated_at_once_the_private_directory_goes_too(tmp_path, lanes):
    """logind at logout, an operator's pkill, the lab's teardown: the watchdog is TERMed with the shell, so the shell
    removes the directory itself (before this, /dev/shm kept one per such session)."""
    proc = running([Command(("sleep", "30"), 20, tool="a"), Command(("sleep", "30"), 20, tool="b")], tmp_path, lanes)
    assert len(list(tmp_path.iterdir())) == 1
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(30) == -signal.SIGTERM  # it still dies of the signal, as a shell without the trap would
    assert session_empties(proc.pid) and list(tmp_path.iterdir()) == []
    closed(proc)


def test_a_watchdog_terminated_after_its_shell_died_alone_removes_the_private_directory(tmp_path):
    """The shell killed alone (a lost connection), then its watchdog TERMed before the command's deadline (`lab
    down`, logind) while the dead shell is still unreaped: the watchdog removes the directory itself."""
    proc = running([Command(("sleep", "30"), 25)], tmp_path)
    proc.kill()
    # Not reaped yet, as under a frozen sshd: the shell is a zombie, which `kill -0` still finds
    deadline = time.monotonic() + 30
    while Path(f"/proc/{proc.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the killed shell never became a zombie"
        time.sleep(0.05)
    assert len(list(tmp_path.iterdir())) == 1  # the watchdog sleeps until the deadline, 25 s away
    os.killpg(proc.pid, signal.SIGTERM)  # the watchdog and the command, as `lab down` or logind ends them
    deadline = time.monotonic() + 10
    while list(tmp_path.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert list(tmp_path.iterdir()) == []
    proc.wait()
    assert session_empties(proc.pid)
    closed(proc)


# ---------------------------------------------------------------------------------------- lanes: concurrent commands


def logged(log: Path, name: str, body: str = "sleep 0.5") -> tuple[str, ...]:
    """argv that logs its start and end to `log`: the order of the lines proves what overlapped."""
    return ("sh", "-c", f'echo "{name}:start" >>{log}; {body}; echo "{name}:end" >>{log}')


def test_a_tools_commands_run_in_sequence_and_other_tools_alongside(tmp_path):
    log = tmp_path / "log"
    commands = [Command(logged(log, "smi1"), 10, "smi1", "nvidia-smi", 0.5),
                Command(logged(log, "ib"), 10, "ib", "ibstat", 0.5),
                Command(logged(log, "smi2"), 10, "smi2", "nvidia-smi", 0.5),
                Command(logged(log, "fw"), 10, "fw", "nvfwupd", 1.0)]
    results, _ = run_script(commands)
    assert [r.exit_code for r in results] == [0, 0, 0, 0]
    events = log.read_text().split()
    assert events.index("smi1:end") < events.index("smi2:start")  # one driver lock: never two nvidia-smi at once
    assert events.index("fw:start") < events.index("smi1:end")  # another tool: alongside
    assert all(r.duration_s >= 0.5 for r in results)  # measured on the host, per command


def test_framing_holds_when_lanes_print_at_the_same_time():
    # Each lane prints 200 kB in bursts while the others do: a lane's frames leave in one piece, never interleaved.
    def noisy(tag: str) -> tuple[str, ...]:
        return ("sh", "-c", f"for i in $(seq 2000); do echo {tag}-$i-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa; "
                            f"[ $((i % 500)) = 0 ] && echo {tag}-warn-$i >&2 && sleep 0.1; done; exit 0")

    commands = [Command(noisy(t), 30, t, "", 1.0) for t in "abcd"]
    results, _ = run_script(commands)
    for tag, r in zip("abcd", results, strict=True):
        lines = r.stdout.splitlines()
        assert r.exit_code == 0 and len(lines) == 2000 and all(ln.startswith(f"{tag}-") for ln in lines)
        assert lines[-1].startswith(f"{tag}-2000-") and r.stdout.endswith("\n")
        assert r.stderr.splitlines() == [f"{tag}-warn-{i}" for i in (500, 1000, 1500, 2000)]


def test_a_hung_command_among_concurrent_ones_times_out_at_its_own_deadline():
    # The watchdog sleeps until the earliest deadline it knows; a lane starting a command due sooner wakes it,
    # so a 1 s limit holds even while another lane's 60 s command runs.
    # (warm outlasts the watchdog's first look, so it is asleep until a deadline ~10 s away when `hung` starts)
    commands = [Command(("sleep", "7"), 60, "slow", "a", 7.0), Command(("sleep", "1.5"), 10, "warm", "b", 1.5),
                Command(("sleep", "30"), 1, "hung", "b", 0.5), Command(("echo", "ok"), 10, "quick", "", 0.1)]
    results, _ = run_script(commands)
    assert results[0].exit_code == 0 and results[1].exit_code == 0 and results[3].stdout == "ok\n"
    assert results[2].error == "timed out after 1 s"
    assert results[2].duration_s < results[0].duration_s  # killed at its own deadline, not at the 60 s one


def test_after_a_tool_times_out_its_other_commands_are_not_run(tmp_path):
    marker = tmp_path / "ran"
    commands = [Command(("sleep", "30"), 1, "q", "nvidia-smi", 0.6),
                Command(("touch", str(marker)), 10, "topo", "nvidia-smi", 0.3),
                Command(("echo", "fine"), 10, "ib", "ibstat", 0.1)]
    results, _ = run_script(commands)
    assert results[0].error == "timed out after 1 s"
    assert results[1].exit_code is None and results[1].error == (
        "not run: nvidia-smi is hung on this host (`sleep 30` timed out after 1 s), so its other commands were not run")
    assert not marker.exists()
    assert results[2].stdout == "fine\n" and results[2].error is None


def test_after_a_tool_times_out_its_other_commands_are_not_run_under_gnu_timeout_too(tmp_path):
    env = spy_path(tmp_path, "timeout")
    (tmp_path / "spybin" / "mktemp").write_text("#!/bin/sh\nexit 1\n")
    (tmp_path / "spybin" / "mktemp").chmod(0o755)
    marker = tmp_path / "ran"
    commands = [Command(("sleep", "30"), 1, "q", "nvidia-smi", 0.6), Command(("echo", "fine"), 10, "ib", "ibstat", 9),
                Command(("touch", str(marker)), 10, "topo", "nvidia-smi", 0.3)]
    results, _ = run_script(commands, env=env)
    assert results[0].error == "timed out after 1 s" and results[1].stdout == "fine\n"
    assert results[2].error.startswith("not run: nvidia-smi is hung on this host") and not marker.exists()


def test_when_the_shell_dies_the_watchdog_ends_every_lane_and_cleans_up(tmp_path):
    commands = [Command(("sleep", "30"), 3, "a", "x", 1.0), Command(("sleep", "31"), 3, "b", "y", 1.0)]
    proc = subprocess.Popen(["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env={**os.environ, "TMPDIR": str(tmp_path)}, start_new_session=True)
    proc.stdin.write(build_script(commands, new_nonce()).encode())
    proc.stdin.close()
    deadline = time.monotonic() + 10
    while len(subprocess.run(["pgrep", "-s", str(proc.pid), "-f", "^sleep 3[01]$"],
                             capture_output=True).stdout.split()) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.kill()  # the connection is gone: sshd ends the session's shell; the lanes live on without it
    proc.wait()
    assert session_empties(proc.pid, within_s=20) and list(tmp_path.iterdir()) == []
    proc.stdout.close()
    proc.stderr.close()


def test_a_closed_channel_ends_the_lanes_at_their_next_command_not_at_their_end(tmp_path):
    nonce = new_nonce()
    marker = tmp_path / "second-ran"
    commands = [Command(("sleep", "40"), 60, "long", "a", 10.0),
                Command(("sleep", "3"), 10, "c1", "c", 5.0), Command(("sh", "-c", f"sleep 3 && touch {marker}"), 10, "c2", "c", 5.0),
                Command(("echo", "first"), 10, "first", "b", 0.1)]
    proc = subprocess.Popen(["/bin/sh", "-s"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env={**os.environ, "TMPDIR": str(tmp_path / "tmp")}, start_new_session=True)
    (tmp_path / "tmp").mkdir()
    proc.stdin.write(build_script(commands, nonce).encode())
    proc.stdin.close()
    got = b""
    while b"first" not in got:
        chunk = os.read(proc.stdout.fileno(), 4096)
        assert chunk, got
        got += chunk
    proc.stdout.close()  # Ctrl-C on the client: the channel closes while lanes a and c still run
    # c1 ends ~3 s in; the tick that follows finds the channel gone, and the shell ends lanes a and c right away
    assert proc.wait(timeout=30) == 0
    assert session_empties(proc.pid, within_s=10) and list((tmp_path / "tmp").iterdir()) == []
    assert not marker.exists()
