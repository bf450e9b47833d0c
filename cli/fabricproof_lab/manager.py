"""Lab lifecycle: `up` (idempotent), `status`, `down`, and fault injection on a lab's nodes."""

from __future__ import annotations

import fcntl
import os
import py_compile
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fabricproof.fsutil import atomic_write_text
from . import emu, latency, netstat, nodestore, procs, sshd, zipcache
from . import state as lab_state
from .emu.faults import FAULTS as EMU_FAULTS
from .emu.faults import FaultError
from .emu.store import StateError
from .errors import LabError
from .fabric import runtime as fabric_runtime
from .fabric.sim import FabricState
from .inventory import (
    dump_inventory,
    render_inventory,
    render_known_hosts,
    render_ssh_config,
)
from .layout import LAB_HOME, LabLayout
from .state import LabState, SshdGroup
from .topology import LabHost, chunk, plan_hosts, validate_shape
from .user import LabUser, ensure_user, lookup, require_traversable

Progress = Callable[[str], None]

RUNNING, DEGRADED, DEAD, STOPPED, ABSENT = "running", "degraded", "dead", "stopped", "absent"


def _quiet(_: str) -> None:
    pass


def require_root(action: str) -> None:
    if os.geteuid() != 0:
        raise LabError(f"`lab {action}` needs root: it creates the lab user, runs sshd (which must be root "
                       f"to log users in) and owns the lab's processes. Run it with sudo.")


@contextmanager
def _locked(layout: LabLayout) -> Iterator[None]:
    """Serialise lab commands on one directory (two `lab up` at once would start two fleets)."""
    fd = os.open(layout.lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _make_dir(path: Path, mode: int = 0o755) -> None:
    """mkdir -p, with `mode` set on every directory created whatever the umask: the lab user must
    traverse all of them."""
    missing = [d for d in (*reversed(path.parents), path) if not d.exists()]
    for directory in missing:
        directory.mkdir(exist_ok=True)
        os.chmod(directory, mode)


# ---------------------------------------------------------------------------------------- status


@dataclass(frozen=True)
class GroupStatus:
    group: SshdGroup
    alive: bool
    listening: int  # how many of the group's addresses have a listening socket on the lab port

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group.group, "pid": self.group.pid, "alive": self.alive,
                "listening": self.listening, "addresses": len(self.group.addresses),
                "first_address": self.group.addresses[0], "last_address": self.group.addresses[-1],
                "config": self.group.config, "log": self.group.log}


@dataclass(frozen=True)
class LabStatus:
    layout: LabLayout
    state: str
    lab: LabState | None
    groups: tuple[GroupStatus, ...] = ()

    @property
    def running(self) -> bool:
        return self.state == RUNNING

    def as_dict(self) -> dict[str, Any]:
        lab, layout = self.lab, self.layout
        doc: dict[str, Any] = {
            "running": self.running,
            "state": self.state,
            "dir": str(layout.root),
            "nodes": lab.nodes if lab else 0,
            "inventory": str(layout.inventory) if lab else None,
        }
        if lab is None:
            return doc
        profiles: dict[str, int] = {}
        for host in lab.hosts:
            profiles[host.profile] = profiles.get(host.profile, 0) + 1
        alive = sum(g.alive for g in self.groups)
        doc.update({
            "profile": lab.profile,
            "profiles": profiles,
            "port": lab.port,
            "user": lab.user,
            "known_hosts": str(layout.known_hosts),
            "ssh_config": str(layout.ssh_config),
            "client_key": str(layout.client_key),
            "node_store": lab.node_store,
            "latency": lab.latency,
            "first_host": {"name": lab.hosts[0].name, "address": lab.hosts[0].address},
            "last_host": {"name": lab.hosts[-1].name, "address": lab.hosts[-1].address},
            "started": lab.started,
            "stopped": lab.stopped,
            "fabric": fabric_runtime.describe(FabricState.from_dict(lab.fabric), lab.hosts, layout.root)
            if lab.fabric else None,
            "sshd": {"total": len(self.groups), "alive": alive, "dead": len(self.groups) - alive,
                     "processes": [g.as_dict() for g in self.groups]},
        })
        return doc


def _group_status(lab: LabState) -> tuple[GroupStatus, ...]:
    listening = netstat.listeners()
    return tuple(
        GroupStatus(group=g,
                    alive=g.pid is not None and sshd.is_lab_sshd(g.pid, Path(g.config)),
                    listening=len(netstat.listening_on(lab.port, g.addresses, listening)))
        for g in lab.sshd)


def _classify(lab: LabState, groups: tuple[GroupStatus, ...]) -> str:
    if all(g.group.pid is None for g in groups):
        return STOPPED
    healthy = [g.alive and g.listening == len(g.group.addresses) for g in groups]
    if all(healthy):
        return RUNNING
    # Started and never stopped, yet no sshd is left: they died (killed, OOM, reboot).
    return DEAD if not any(g.alive for g in groups) else DEGRADED


def status(directory: Path) -> LabStatus:
    layout = LabLayout.at(directory)
    lab = lab_state.load(layout.state)
    if lab is None:
        return LabStatus(layout=layout, state=ABSENT, lab=None)
    groups = _group_status(lab)
    return LabStatus(layout=layout, state=_classify(lab, groups), lab=lab, groups=groups)


# -------------------------------------------------------------------------------------------- up


def _write_client_files(layout: LabLayout, hosts: list[LabHost], port: int, user: LabUser, fabric: bool) -> None:
    host_pub = sshd.public_key(layout.host_key)
    # sshd reads AuthorizedKeysFile as the target user, so it must be world-readable.
    atomic_write_text(layout.authorized_keys, layout.client_key.with_suffix(".pub").read_text(), mode=0o644)
    atomic_write_text(layout.known_hosts, render_known_hosts(hosts, port, host_pub), mode=0o644)
    common = {"port": port, "user": user.name, "client_key": layout.client_key, "known_hosts": layout.known_hosts}
    vantage = hosts[0].name if fabric else None
    atomic_write_text(layout.inventory, dump_inventory(render_inventory(hosts, vantage=vantage, **common), layout.root),
                      mode=0o644)
    atomic_write_text(layout.ssh_config, render_ssh_config(hosts, **common), mode=0o644)


def _chown_dirs(top: Path, user: LabUser) -> None:
    """Hand a node's directories to the lab user: the mutating emulated tools run as that user and
    replace files in them (tmp + rename), which needs the directory, not the file, to be theirs."""
    for parent, _dirs, _files in os.walk(top):
        os.chown(parent, user.uid, user.gid)


def _install_node_python(layout: LabLayout, user: LabUser) -> None:
    """The nodes' sitecustomize (zipcache.py, world-readable) and the cache it writes as the lab user (theirs alone)."""
    _make_dir(layout.node_python)
    site = layout.node_python / "sitecustomize.py"
    atomic_write_text(site, Path(zipcache.__file__).read_text(), mode=0o644)
    # Byte-compiled here, readable by all: the lab user cannot write beside it, and every Python on a node loads it.
    os.chmod(py_compile.compile(str(site), doraise=True), 0o644)
    os.chmod(layout.node_python / "__pycache__", 0o755)
    layout.zipcache.mkdir(mode=0o700, exist_ok=True)
    os.chown(layout.zipcache, user.uid, user.gid)
    os.chmod(layout.zipcache, 0o700)


def _nodes_present(layout: LabLayout, hosts: list[LabHost]) -> bool:
    return all((layout.node_dir(h.address) / "state.json").is_file() for h in hosts)


def _rack_peers(hosts: list[LabHost]) -> dict[tuple[str, int], list[str]]:
    """Addresses of the trays of each (profile, rack): a GB200 rack is one IMEX domain."""
    peers: dict[tuple[str, int], list[str]] = {}
    for host in hosts:
        if host.rack is not None:
            peers.setdefault((host.profile, host.rack), []).append(host.address)
    return peers


def _create_nodes(layout: LabLayout, hosts: list[LabHost], user: LabUser, progress: Progress,
                  cabling: dict[str, dict[str, Any] | None] | None = None) -> None:
    peers = _rack_peers(hosts)
    started = time.monotonic()
    for k, host in enumerate(hosts, 1):
        emu.create_node(layout.root, host.address, host.profile, host.index, rack=host.rack, hostname=host.name,
                        peers=peers.get((host.profile, host.rack)) if host.rack is not None else None,
                        owner=(user.uid, user.gid), fabric=(cabling or {}).get(host.name))
        if k % 250 == 0 or k == len(hosts):
            progress(f"created {k}/{len(hosts)} nodes ({time.monotonic() - started:.1f} s)")


def _use_tmpfs(kind: str, nodes: int, progress: Progress) -> bool:
    if kind == "disk":
        return False
    why_not = nodestore.tmpfs_room(nodes)
    if why_not is None:
        return True
    if kind == "tmpfs":
        raise LabError(f"--node-store tmpfs: {why_not}")
    progress(f"node state goes on disk ({why_not}); creating nodes is slower there")
    return False


def _sshd_groups(layout: LabLayout, hosts: list[LabHost]) -> list[SshdGroup]:
    return [SshdGroup(group=k, config=str(layout.sshd_config(k)), log=str(layout.sshd_log(k)), addresses=addrs)
            for k, addrs in enumerate(chunk([h.address for h in hosts], sshd.MAX_LISTEN))]


def _write_sshd_configs(layout: LabLayout, groups: list[SshdGroup], port: int, user: LabUser) -> None:
    nodes = [sshd.NodeEnv(address=a, node_dir=layout.node_dir(a), host_root=layout.host_root(a))
             for g in groups for a in g.addresses]
    for g in groups:
        text = sshd.render_config(title=f"fabricproof lab {layout.root}: sshd {g.group + 1} of {len(groups)}",
                                  addresses=g.addresses, port=port, host_key=layout.host_key,
                                  authorized_keys=layout.authorized_keys, user=user.name,
                                  tools_dir=layout.bin, nodes=nodes,
                                  python=sshd.NodePython(layout.node_python, layout.zipcache))
        atomic_write_text(Path(g.config), text, mode=0o644)


def _pick_port(requested: int | None, previous: int | None, addresses: list[str]) -> int:
    listening = netstat.listeners()
    if requested is not None:
        taken = netstat.holders(requested, addresses, listening)
        if taken:
            raise LabError(f"port {requested} is in use on {', '.join(taken[:3])}; choose another --port "
                           f"or leave it out to pick a free one")
        return requested
    if previous is not None and not netstat.holders(previous, addresses, listening):
        return previous  # keep the port a stopped lab had, so saved client settings stay valid
    return netstat.choose_port(addresses)


def _start_groups(groups: list[SshdGroup], port: int) -> None:
    """Start the sshd of every group without a live one; on any failure stop what this call started."""
    to_start = [g for g in groups if g.pid is None or not sshd.is_lab_sshd(g.pid, Path(g.config))]
    if not to_start:
        return
    addresses = [a for g in to_start for a in g.addresses]
    taken = netstat.holders(port, addresses, netstat.listeners())
    if taken:
        raise LabError(f"port {port} is already in use on {', '.join(taken[:3])}; "
                       f"stop what holds it or run `lab down` and `lab up --port <another>`")
    sshd.check_config(Path(to_start[0].config))
    started: dict[int, tuple[Path, list[str]]] = {}
    try:
        for g in to_start:
            g.pid = sshd.start(Path(g.config), Path(g.log))
            started[g.pid] = (Path(g.log), g.addresses)
        sshd.wait_listening(started, port)
    except BaseException:
        procs.terminate_tree(started)
        for g in to_start:
            g.pid = None
        raise


def up(directory: Path, nodes: int, profile: str, port: int | None = None, node_store: str = "auto",
       progress: Progress = _quiet, latency_profile: str = latency.OFF, fabric: bool = False) -> LabStatus:
    """Start a lab, or reuse the running one of the same shape; repair sshd that died.

    node_store: where new node trees go: `tmpfs`, `disk` (inside the lab dir), or `auto` (tmpfs
    when it has room). Existing nodes of the same shape are kept where they are.
    latency_profile: how long the emulated tools take to answer (lab/latency.py); a running lab takes a new one
    without a restart.
    fabric: cable the nodes' InfiniBand HCAs to a generated rail-optimised fabric (fabricproof_lab.fabric), run by
    ibsim with opensm as its SM; the fabric-scope tools of the nodes are then the real infiniband-diags.
    """
    require_root("up")
    sshd.require_sshd()
    try:
        validate_shape(nodes, profile)
    except ValueError as exc:
        raise LabError(str(exc)) from None
    if port is not None and not 1 <= port <= 65535:
        raise LabError(f"--port must be 1-65535, got {port}")
    if node_store not in nodestore.KINDS:
        raise LabError(f"--node-store {node_store!r}: choose {', '.join(nodestore.KINDS)}")
    latency.check(latency_profile)
    if fabric:
        fabric_runtime.sim.require_tools()
    layout = LabLayout.at(directory)
    sshd.assert_safe_path(layout.root)
    user = ensure_user(LAB_HOME)
    require_traversable(layout.root, user)  # before creating anything under a dir it cannot reach
    _make_dir(layout.root)
    require_traversable(layout.root, user)
    with _locked(layout):
        return _up_locked(layout, nodes, profile, port, node_store, user, progress, latency_profile, fabric)


def _up_locked(layout: LabLayout, nodes: int, profile: str, port: int | None, node_store: str, user: LabUser,
               progress: Progress, latency_profile: str, fabric: bool = False) -> LabStatus:
    t0 = time.monotonic()
    previous = lab_state.load(layout.state)
    current = status(layout.root) if previous else None
    if previous and current and current.state in (RUNNING, DEGRADED):
        if previous.shape != (nodes, profile) or (port is not None and port != previous.port) \
                or bool(previous.fabric) != fabric:
            with_fabric = " with an InfiniBand fabric" if previous.fabric else ""
            raise LabError(f"a lab of {previous.nodes} {previous.profile} node(s){with_fabric} on port {previous.port} "
                           f"is running "
                           f"in {layout.root}; run `fabricproof lab down --dir {layout.root}` first, "
                           f"or use another --dir")
        if current.state == RUNNING:
            if previous.fabric and _fabric_running(layout, previous, user):
                progress("lab fabric: ibsim and opensm started again")
            if previous.latency != latency_profile:
                emu.install(layout.root, latency.delays(latency_profile))  # the tools only: sessions pick them up
                previous.latency = latency_profile
                lab_state.save(layout.state, previous)
                progress(f"lab already running in {layout.root}: reusing it, tool latency now {latency_profile}")
                return status(layout.root)
            progress(f"lab already running in {layout.root}: reusing it")
            return current
    # A degraded lab keeps its live sshd and port; only the dead ones are started again.
    repair = previous if previous and current and current.state == DEGRADED else None

    hosts = plan_hosts(nodes, profile)
    sshd.assert_loopback([h.address for h in hosts])
    reuse_nodes = previous is not None and previous.shape == (nodes, profile) and _nodes_present(layout, hosts)
    port = repair.port if repair else _pick_port(port, previous.port if previous else None,
                                                 [h.address for h in hosts])
    for directory in (layout.keys, layout.sshd):
        _make_dir(directory)
    sshd.ensure_key(layout.host_key, "fabricproof-lab-host")
    sshd.ensure_key(layout.client_key, "fabricproof-lab-client")
    _write_client_files(layout, hosts, port, user, fabric)
    if reuse_nodes:
        progress(f"keeping the {nodes} existing node(s) and their state")
    else:
        nodestore.remove_nodes(layout.nodes)
        for orphan in nodestore.sweep_orphans():
            progress(f"freed {orphan}: its lab directory was deleted without `lab down --purge`")
        nodestore.make_nodes_dir(layout.nodes, _use_tmpfs(node_store, nodes, progress))
    emu.install(layout.root, latency.delays(latency_profile))
    _install_node_python(layout, user)
    fstate = _fabric_state(layout, hosts, fabric, previous if reuse_nodes else None)
    cabling = fabric_runtime.cabling(fstate, hosts)
    if not reuse_nodes:
        _create_nodes(layout, hosts, user, progress, cabling)  # created on the fabric: one render each
    elif fstate is not None or (previous is not None and previous.fabric):
        changed = fabric_runtime.recable(layout.root, hosts, cabling)
        for host in changed:
            _chown_dirs(layout.node_dir(host.address), user)
    if fstate is not None:
        fabric_runtime.prepare(layout.root, fstate, hosts, (user.uid, user.gid))

    groups = repair.sshd if repair else _sshd_groups(layout, hosts)
    _write_sshd_configs(layout, groups, port, user)
    sshd.ensure_privsep_dir()
    lab = LabState(dir=str(layout.root), profile=profile, nodes=nodes, port=port, user=user.name, hosts=hosts,
                   sshd=groups, node_store=str(layout.nodes.resolve()), latency=latency_profile,
                   fabric=fstate.as_dict() if fstate else None,
                   created=previous.created if reuse_nodes and previous else lab_state.now())
    try:
        _start_groups(groups, port)
        if fstate is not None:
            started = time.monotonic()
            fabric_runtime.ensure_running(fstate)
            progress(f"lab fabric: ibsim and opensm up in {time.monotonic() - started:.1f} s, plan "
                     f"{layout.root / 'fabric-plan.yaml'}")
    finally:
        # Saved even when a start failed: lab.json must always name every sshd (and simulator) that may be running.
        lab.started = lab_state.now() if any(g.pid for g in groups) else None
        lab.fabric = fstate.as_dict() if fstate else None
        lab_state.save(layout.state, lab)
    progress(f"lab up: {nodes} {profile} node(s) on {hosts[0].address}..{hosts[-1].address} port {port}, "
             f"{len(groups)} sshd, tool latency {latency_profile}, in {time.monotonic() - t0:.1f} s")
    return status(layout.root)


def _fabric_state(layout: LabLayout, hosts: list[LabHost], fabric: bool,
                  previous: LabState | None) -> FabricState | None:
    """The fabric's state (a reused lab keeps its fabric faults), or None when the lab has none."""
    if not fabric:
        return None
    fstate = FabricState.from_dict(previous.fabric) if previous is not None and previous.fabric else \
        fabric_runtime.new_state(layout.root, hosts)
    fabric_runtime.healthy(fstate, hosts)  # a shape the fabric cannot take is refused before anything changes
    return fstate


def _fabric_running(layout: LabLayout, lab: LabState, user: LabUser) -> bool:
    """Start a running lab's ibsim and opensm again if they died; True when they had to be."""
    fstate = FabricState.from_dict(lab.fabric or {})
    fabric_runtime.prepare(layout.root, fstate, lab.hosts, (user.uid, user.gid))
    try:
        return fabric_runtime.ensure_running(fstate)
    finally:
        lab.fabric = fstate.as_dict()
        lab_state.save(layout.state, lab)


# ------------------------------------------------------------------------------------------ down


@dataclass(frozen=True)
class DownReport:
    layout: LabLayout
    stopped_pids: tuple[int, ...]
    purged: bool
    had_lab: bool


def down(directory: Path, purge: bool = False, timeout_s: float = 5.0) -> DownReport:
    """Stop every sshd of the lab and all processes below them (sessions, tools), by PID, and what its nodes'
    sessions left running outside that tree (they carry the node's FABRICPROOF_LAB_NODE); verify no socket still
    listens on the lab's addresses. Keeps the lab's files unless `purge`."""
    layout = LabLayout.at(directory)
    lab = lab_state.load(layout.state)
    if lab is None:
        if purge and layout.root.exists() and any(layout.root.iterdir()):
            raise LabError(f"{layout.root} holds no lab (no lab.json); not removing it")
        return DownReport(layout=layout, stopped_pids=(), purged=False, had_lab=False)
    ours = [g.pid for g in lab.sshd if g.pid is not None and sshd.is_lab_sshd(g.pid, Path(g.config))]
    # A session whose shell died alone leaves its watchdog re-parented to init until a command's deadline.
    strays = procs.with_environment(sshd.NODE_VAR, f"{layout.nodes}/")
    fstate = FabricState.from_dict(lab.fabric) if lab.fabric else None
    sim_pids = [p for p, ok in zip(fstate.pids(), _alive_pids(fstate), strict=True) if ok] if fstate else []
    if ours or sim_pids or strays:
        require_root("down")
    with _locked(layout):
        survivors = fabric_runtime.stop(fstate) if fstate else []
        if fstate:
            lab.fabric = fstate.as_dict()
        survivors += procs.terminate_tree([*ours, *strays], timeout_s)
        if survivors:
            raise LabError(f"processes {survivors} of the lab in {layout.root} did not exit after SIGKILL",
                           exit_code=1)
        for g in lab.sshd:
            g.pid = None
        lab.stopped = lab_state.now()
        lab_state.save(layout.state, lab)
        addresses = [h.address for h in lab.hosts]
        left = netstat.listening_on(lab.port, addresses, netstat.listeners())
        if left:
            raise LabError(f"the lab's sshd are stopped but something still listens on port {lab.port} of "
                           f"{', '.join(sorted(left)[:3])}", exit_code=1)
    if purge:
        nodestore.remove_nodes(layout.nodes)
        shutil.rmtree(layout.root)
    return DownReport(layout=layout, stopped_pids=tuple(sim_pids + ours), purged=purge, had_lab=True)


def _alive_pids(fstate: FabricState) -> list[bool]:
    running = fabric_runtime.sim.alive(fstate)
    return [running[name] for name, pid in (("opensm", fstate.opensm_pid), ("ibsim", fstate.ibsim_pid))
            if pid is not None]


# ---------------------------------------------------------------------------------------- faults


def faults() -> list[dict[str, Any]]:
    """The fault catalog as plain data: name, description, catches (and per-profile, over-time, fleet lists)."""
    return [fault.to_dict() for fault in emu.FAULTS.values()]


def _lab_host(layout: LabLayout, host: str) -> tuple[LabState, LabHost]:
    lab = lab_state.load(layout.state)
    if lab is None:
        raise LabError(f"no lab in {layout.root}; start one with `fabricproof lab up --dir {layout.root}`")
    found = lab.host(host)
    if found is None:
        raise LabError(f"no host {host!r} in the lab in {layout.root} "
                       f"(hosts {lab.hosts[0].name}..{lab.hosts[-1].name}, or an address)")
    return lab, found


@contextmanager
def _emu_errors(target: LabHost) -> Iterator[None]:
    """A fault that does not apply to the node's profile, or a node without state, is the operator's input."""
    try:
        yield
    except (FaultError, StateError) as exc:
        raise LabError(f"{target.name} ({target.address}, {target.profile}): {exc}") from None


def _require_fault(name: str) -> None:
    if name not in emu.FAULTS:
        raise LabError(f"unknown fault {name!r}; known faults: {', '.join(sorted(emu.FAULTS))}")


def fault_inject(directory: Path, host: str, fault: str, *more: str) -> LabHost:
    """Inject `fault` (and `more`) into one node. The fabric faults among them change the running simulator once,
    together: each change of its own waits for opensm's sweeps to settle, and a restart of ibsim when one needs it."""
    require_root("fault inject")
    layout = LabLayout.at(directory)
    names = [fault, *more]
    for name in names:
        _require_fault(name)
    lab, target = _lab_host(layout, host)
    fabric_faults = [n for n in names if EMU_FAULTS[n].kind == "fabric"]
    if fabric_faults and not lab.fabric:
        raise LabError(f"fault {fabric_faults[0]!r} changes the lab's InfiniBand fabric, and the lab in {layout.root} "
                       f"has none; start it with `fabricproof lab up --fabric`")
    with _locked(layout), _emu_errors(target):
        for name in names:
            emu.inject(layout.root, target.address, name)
        user = _lab_user(lab)
        _chown_dirs(layout.node_dir(target.address), user)
        if fabric_faults:
            _change_fabric(layout, lab, user, lambda fs: fabric_runtime.inject(fs, lab.hosts, target, fabric_faults,
                                                                                (user.uid, user.gid)))
    return target


def _change_fabric(layout: LabLayout, lab: LabState, user: LabUser, change: Callable[[FabricState], str]) -> None:
    fstate = FabricState.from_dict(lab.fabric or {})
    try:
        change(fstate)
    finally:
        lab.fabric = fstate.as_dict()
        lab_state.save(layout.state, lab)


def fault_clear(directory: Path, host: str, fault: str | None = None) -> LabHost:
    require_root("fault clear")
    layout = LabLayout.at(directory)
    if fault is not None:
        _require_fault(fault)
    lab, target = _lab_host(layout, host)
    with _locked(layout), _emu_errors(target):
        cleared = emu.clear(layout.root, target.address, fault)
        user = _lab_user(lab)
        _chown_dirs(layout.node_dir(target.address), user)
        names = [n for n in cleared if EMU_FAULTS[n].kind == "fabric"]
        if lab.fabric and names:
            _change_fabric(layout, lab, user, lambda fs: fabric_runtime.clear(fs, lab.hosts, target, names,
                                                                               (user.uid, user.gid)))
    return target


def _lab_user(lab: LabState) -> LabUser:
    user = lookup(lab.user)
    if user is None:
        raise LabError(f"the lab user {lab.user} no longer exists; run `fabricproof lab up` to recreate it")
    return user
