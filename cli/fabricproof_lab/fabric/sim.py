"""ibsim and opensm of one lab: start them detached (recorded by PID), change the fabric they hold, stop them."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricproof.fsutil import atomic_write_text

from .. import procs
from ..errors import LabError
from ..emu.simtools import CONSOLE, GROWING, GROWTH, UMAD2SIM
from . import netfile
from .topology import Cable, Fabric

IBSIM = Path("/usr/bin/ibsim")
OPENSM = Path("/usr/sbin/opensm")
INSTALL_HINT = "apt-get install ibsim-utils opensm infiniband-diags"
#: opensm reaches SUBNET UP in about a second on a lab fabric; a loaded two-core machine may take far longer.
SUBNET_UP_TIMEOUT_S = 120.0
#: After a change, opensm sweeps again on the traps the change raises; the fabric is settled once no sweep
#: finished for this long.
SETTLE_S = 1.0
#: The priority the lab nodes' own sminfo reports for their SM (emu/render_ib.render_sminfo).
SM_PRIORITY = 14


@dataclass
class FabricState:
    """The lab's fabric in lab.json: its generation parameters, the simulator's socket, PIDs and active faults."""

    dir: str
    socket: str
    su_size: int
    spines: int
    uplinks: int
    ibsim_pid: int | None = None
    opensm_pid: int | None = None
    faults: list[list[str]] = field(default_factory=list)  # [host, fault] in injection order

    def as_dict(self) -> dict[str, Any]:
        return {"dir": self.dir, "socket": self.socket, "su_size": self.su_size, "spines": self.spines,
                "uplinks": self.uplinks, "ibsim_pid": self.ibsim_pid, "opensm_pid": self.opensm_pid,
                "faults": self.faults}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> FabricState:
        return cls(dir=str(data["dir"]), socket=str(data["socket"]), su_size=int(data["su_size"]),
                   spines=int(data["spines"]), uplinks=int(data["uplinks"]), ibsim_pid=data.get("ibsim_pid"),
                   opensm_pid=data.get("opensm_pid"), faults=[list(f) for f in data.get("faults", [])])

    @property
    def path(self) -> Path:
        return Path(self.dir)

    def pids(self) -> list[int]:
        return [p for p in (self.opensm_pid, self.ibsim_pid) if p is not None]


def require_tools() -> None:
    missing = [str(p) for p in (IBSIM, OPENSM, Path(UMAD2SIM)) if not p.exists()]
    if missing:
        raise LabError(f"the lab's InfiniBand fabric needs {', '.join(missing)}; install them with: {INSTALL_HINT}")


def socket_name(lab_root: Path) -> str:
    """ibsim's abstract socket basename: one per lab directory, so labs side by side never meet."""
    return "fplab-" + hashlib.sha256(str(lab_root).encode()).hexdigest()[:12]


def alive(state: FabricState) -> dict[str, bool]:
    """Which of the fabric's processes run (a PID reused by another program is not ours)."""
    return {"ibsim": state.ibsim_pid is not None and procs.is_process_of(state.ibsim_pid, IBSIM, state.dir),
            "opensm": state.opensm_pid is not None and procs.is_process_of(state.opensm_pid, OPENSM, state.dir)}


def prepare(state: FabricState, fabric: Fabric, owner: tuple[int, int]) -> None:
    """The fabric directory: the net file, ibsim's console FIFO and the growing-counters file, which the lab user's
    tools write (emu.simtools)."""
    path = state.path
    path.mkdir(parents=True, exist_ok=True)
    os.chmod(path, 0o755)
    console = path / CONSOLE
    if console.exists() and not stat.S_ISFIFO(console.stat().st_mode):
        console.unlink()
    if not console.exists():
        os.mkfifo(console, 0o600)
    atomic_write_text(path / "net", netfile.render(fabric), mode=0o644)
    _write_growing(path, fabric)
    for p in (path, console, path / GROWING):
        os.chown(p, *owner)


def _write_growing(path: Path, fabric: Fabric) -> None:
    growing = path / GROWING

    try:
        reads = json.loads(growing.read_text()).get("reads", 0)
    except (FileNotFoundError, ValueError):
        reads = 0
    ports = [list(p) for p in fabric.growing]
    # Written in place: the file's owner (the lab user) must stay
    with open(growing, "w") as f:
        f.write(json.dumps({"ports": ports, "reads": reads if ports else 0}))
    os.chmod(growing, 0o644)


def _spawn(argv: list[str], cwd: Path, log: Path, env: dict[str, str], stdin: Path | None = None) -> int:
    """posix_spawn has no working directory: /bin/sh changes to it and execs the program under the same PID."""
    return procs.spawn_detached(["/bin/sh", "-c", 'cd "$0" && exec "$@"', str(cwd), *argv], log, env,
                                stdin=str(stdin) if stdin else "/dev/null",
                                stdin_flags=os.O_RDWR if stdin else os.O_RDONLY)


def _count(log: Path, needle: bytes) -> int:
    try:
        return log.read_bytes().count(needle)
    except FileNotFoundError:
        return 0


def _wait_subnet_up(state: FabricState, after: int, timeout_s: float = SUBNET_UP_TIMEOUT_S) -> None:
    """Until opensm has logged more than `after` SUBNET UP, then until its sweeps settle."""
    log = state.path / "opensm.log"
    deadline = time.monotonic() + timeout_s
    seen, since = after, time.monotonic()
    while time.monotonic() < deadline:
        if not all(p is not None and procs.is_running(p) for p in (state.ibsim_pid, state.opensm_pid)):
            raise LabError(f"the lab fabric's simulator stopped: {_tail(state.path / 'ibsim.log')} "
                           f"{_tail(log)}")
        now = _count(log, b"SUBNET UP")
        if now != seen:
            seen, since = now, time.monotonic()
        if seen > after and time.monotonic() - since >= SETTLE_S:
            return
        time.sleep(0.05)
    raise LabError(f"opensm did not bring the lab fabric's subnet up within {timeout_s:g} s: {_tail(log)} "
                   f"{_tail(state.path / 'ibsim.log')}")


def _tail(path: Path) -> str:
    try:
        lines = path.read_text(errors="replace").strip().splitlines()
    except FileNotFoundError:
        return ""
    return f"{path.name}: " + " | ".join(lines[-3:])


def start(state: FabricState) -> None:
    """ibsim on the net file (its console a FIFO it holds open itself, so it never reads end-of-file), then opensm
    attached at spine-1, its first node: one sweep at start (-s 0: no periodic sweeps, only on traps and SIGHUP),
    then running as the subnet's master SM and SA for the tools (sminfo and ibqueryerrors need one: with -o it
    would exit after the sweep). -d 2 makes it flush its log, where SUBNET UP is waited for."""
    require_tools()
    path = state.path
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "IBSIM_SOCKNAME": state.socket}
    cache = path / "osm-cache"
    shutil.rmtree(cache, ignore_errors=True)  # opensm keeps LIDs from its cache; the net file's must win
    cache.mkdir()
    (path / "opensm.log").write_text("")
    for log in ("ibsim.log", "opensm.log"):  # the lab user's tools read them (emu.simtools.grow_counters)
        (path / log).touch()
        os.chmod(path / log, 0o644)
    try:
        state.ibsim_pid = _spawn([str(IBSIM), "-s", str(path / "net")], path, path / "ibsim.log", env,
                                 stdin=path / CONSOLE)
        _wait_for(path / "ibsim.log", b"sim>", state)
        sm_env = dict(env, LD_PRELOAD=UMAD2SIM, OSM_CACHE_DIR=str(cache), OSM_TMP_DIR=str(path))
        state.opensm_pid = _spawn([str(OPENSM), "-d", "2", "-s", "0", "-p", str(SM_PRIORITY), "-f", str(path / "opensm.log")], path,
                                  path / "opensm.out", sm_env)
        _wait_subnet_up(state, 0)
    except BaseException:
        stop(state)
        raise


def _wait_for(log: Path, needle: bytes, state: FabricState, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if needle in (log.read_bytes() if log.exists() else b""):
            return
        if state.ibsim_pid is not None and not procs.is_running(state.ibsim_pid):
            raise LabError(f"ibsim exited: {_tail(log)}")
        time.sleep(0.05)
    raise LabError(f"ibsim did not start within {timeout_s:g} s: {_tail(log)}")


def stop(state: FabricState, timeout_s: float = 5.0) -> list[int]:
    """opensm, then ibsim, by PID; returns the PIDs that survived SIGKILL."""
    running = alive(state)
    # One after the other: opensm leaves in well under a second while ibsim still answers, but with ibsim gone
    # under it, it waits on its outstanding MADs and met SIGKILL at the timeout (5 s, in 2 of 6 restarts).
    left = [p for name, pid in (("opensm", state.opensm_pid), ("ibsim", state.ibsim_pid)) if pid is not None
            and running[name] for p in procs.terminate([pid], timeout_s)]
    state.opensm_pid = state.ibsim_pid = None
    return left


def console_commands(old: Fabric, new: Fabric) -> list[str] | None:
    """ibsim console commands that turn the running `old` fabric into `new` (cables moved, added or removed, all at
    their nominal width and speed), or None when only a restart can (a node description, a width or a speed:
    ibsim's console sets none of them)."""
    if old.cas != new.cas or old.switches != new.switches:
        return None
    # ibsim keeps a port's width and speed from its net file whatever is linked to it later: while any cable runs
    # below its nominal width or speed, only a restart puts the ports right
    nominal = {c.node_id: c.speed for c in old.cas}
    if any(c.width != "4x" or c.speed != nominal.get(_ca_end(c, nominal), old.speed)
           for c in (*old.cables, *new.cables)):
        return None
    gone = [c for c in old.cables if c not in new.cables]
    added = [c for c in new.cables if c not in old.cables]
    return [f'Unlink "{c.a[0]}"[{c.a[1]}]' for c in gone] + \
        [f'Link "{c.a[0]}"[{c.a[1]}] "{c.b[0]}"[{c.b[1]}]' for c in added]


def _ca_end(cable: Cable, cas: dict[str, str]) -> str:
    return cable.a[0] if cable.a[0] in cas else cable.b[0]


def change(state: FabricState, old: Fabric, new: Fabric, owner: tuple[int, int]) -> str:
    """Make the running simulator hold `new`; returns how ("console" or "restart")."""
    commands = console_commands(old, new)
    if commands is None or not all(alive(state).values()):
        stop(state)
        prepare(state, new, owner)
        start(state)
        return "restart"
    prepare(state, new, owner)  # the net file and the growing counters follow the fabric
    # a port whose errors stopped growing starts from zero again (as after `perfquery -R` on it)
    commands += [f'PerformanceSet "{node}"[{port}] PortCounters.{name}=0'
                 for node, port in old.growing if (node, port) not in new.growing for name in GROWTH]
    if commands:
        log = state.path / "ibsim.log"
        marks = _count(log, b"connected at")
        before = _count(state.path / "opensm.log", b"SUBNET UP")
        fd = os.open(state.path / CONSOLE, os.O_WRONLY | os.O_NONBLOCK)
        try:
            # "Attached" lists the clients: its answer in the log says ibsim has read every command before it
            os.write(fd, ("\n".join(commands) + "\nAttached\n").encode())
        finally:
            os.close(fd)
        deadline = time.monotonic() + 60.0
        while _count(log, b"connected at") <= marks and time.monotonic() < deadline:
            time.sleep(0.05)
        # SIGHUP: a heavy sweep, as an SM does when it sees a cable move; once more should a signal meet a sweep
        # under way and leave no trace (seen once on a loaded machine)
        for attempt in range(2):
            os.kill(state.opensm_pid, signal.SIGHUP)
            try:
                _wait_subnet_up(state, before, SUBNET_UP_TIMEOUT_S / 2)
                break
            except LabError:
                if attempt:
                    raise
    return "console"
