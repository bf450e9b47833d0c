"""Processes the lab owns: start them detached, recognise them by PID, stop them and their children."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")


@dataclass(frozen=True)
class ProcInfo:
    pid: int
    ppid: int
    state: str  # one letter, as in /proc/PID/stat ("Z" = exited, not yet reaped)


def parse_stat(text: str) -> ProcInfo:
    """Parse /proc/PID/stat; the command name may hold spaces and parentheses, so split at the last ')'."""
    head, _, rest = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = rest.split()
    return ProcInfo(pid=pid, state=fields[0], ppid=int(fields[1]))


def proc_info(pid: int) -> ProcInfo | None:
    try:
        return parse_stat((PROC / str(pid) / "stat").read_text())
    except (FileNotFoundError, ProcessLookupError, ValueError, IndexError):
        return None


def _reap(pid: int) -> bool:
    """Reap `pid` if it is an exited child of ours; True when it is gone for good."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child: its parent (or init) reaps it
        return False
    return done == pid


def is_running(pid: int) -> bool:
    """True while `pid` exists and has not exited (a zombie counts as exited)."""
    if _reap(pid):
        return False
    info = proc_info(pid)
    return info is not None and info.state != "Z"


def cmdline(pid: int) -> str:
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""



def with_environment(name: str, prefix: str) -> list[int]:
    """Live processes whose environment sets `name` to a value starting with `prefix`, whoever their parent is now:
    what a lab node's sessions left behind once their sshd child had gone (a session's watchdog, re-parented to
    init, sleeps until its command's deadline). Processes whose environment cannot be read are not ours to end."""
    wanted = f"{name}={prefix}".encode()
    found = []
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            env = (entry / "environ").read_bytes()
        except OSError:  # gone, a kernel thread, or not readable
            continue
        if any(var.startswith(wanted) for var in env.split(b"\0")) and is_running(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)

def is_process_of(pid: int, executable: Path, marker: str) -> bool:
    """True when `pid` runs `executable` and its command line mentions `marker`.

    A recorded PID may have been reused by an unrelated process after ours died; the executable
    plus a marker unique to the lab (its absolute config path) tells ours apart. sshd rewrites
    its process title, but the title keeps the original command line, so the marker survives.
    """
    if not is_running(pid):
        return False
    line = cmdline(pid)
    try:
        exe = os.readlink(PROC / str(pid) / "exe")
    except PermissionError:  # not root: another user's exe link is hidden, its cmdline is not
        return str(executable) in line and marker in line
    except (FileNotFoundError, ProcessLookupError):
        return False
    return exe == str(executable) and marker in line


def spawn_detached(argv: Sequence[str], log: Path, env: dict[str, str], stdin: str = "/dev/null",
                   stdin_flags: int = os.O_RDONLY) -> int:
    """Start `argv` in its own session with stdin from `stdin` (/dev/null; a FIFO it holds open read-write to read
    commands from) and stdout+stderr appended to `log`.

    posix_spawn rather than subprocess.Popen: the process must outlive the `lab up` command that
    starts it, and a Popen object dropped while its child runs warns and keeps a reference around.
    setsid keeps a terminal's hangup or Ctrl-C away from the lab.
    """
    actions = [
        (os.POSIX_SPAWN_OPEN, 0, stdin, stdin_flags, 0),
        (os.POSIX_SPAWN_OPEN, 1, str(log), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640),
        (os.POSIX_SPAWN_DUP2, 1, 2),
    ]
    return os.posix_spawn(argv[0], list(argv), env, file_actions=actions, setsid=True)


def process_table() -> dict[int, ProcInfo]:
    table: dict[int, ProcInfo] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            info = proc_info(int(entry.name))
            if info is not None:
                table[info.pid] = info
    return table


def descendants(roots: Iterable[int], table: dict[int, ProcInfo] | None = None) -> set[int]:
    """Every live descendant of `roots` (not the roots): sshd's per-connection children and the
    sessions, shells and emulated tools below them."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found: set[int] = set()
    todo = list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid for pid in found if table[pid].state != "Z"}


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def freeze_tree(roots: Iterable[int]) -> set[int]:
    """SIGSTOP `roots` and all their descendants; return every PID frozen.

    A stopped process cannot fork, so once the whole tree is stopped nothing escapes the kill:
    sshd's per-connection children would otherwise be re-parented to init the moment their
    listener exits, and nothing would tie them to the lab any more.
    """
    frozen = {p for p in roots if is_running(p)}
    _signal(frozen, signal.SIGSTOP)
    while True:
        new = descendants(frozen) - frozen
        if not new:
            return frozen
        _signal(new, signal.SIGSTOP)
        frozen |= new


def terminate(pids: Iterable[int], timeout_s: float = 5.0) -> list[int]:
    """SIGTERM `pids` (and SIGCONT them, in case they are stopped), wait for them to exit, SIGKILL
    what is left; return the PIDs that survived even that."""
    pending = {p for p in pids if is_running(p)}
    _signal(pending, signal.SIGTERM)
    _signal(pending, signal.SIGCONT)
    for sig, wait_s in ((signal.SIGKILL, timeout_s), (None, 2.0)):
        deadline = time.monotonic() + wait_s
        while pending and time.monotonic() < deadline:
            pending = {p for p in pending if is_running(p)}
            if pending:
                time.sleep(0.02)
        if not pending or sig is None:
            break
        _signal(pending, sig)
    return sorted(pending)


def terminate_tree(roots: Iterable[int], timeout_s: float = 5.0) -> list[int]:
    """Stop `roots` and every process below them; return the PIDs still alive afterwards."""
    return terminate(freeze_tree(roots), timeout_s)
