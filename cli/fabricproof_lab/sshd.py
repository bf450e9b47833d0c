"""Debian's OpenSSH sshd as the lab's front door: config rendering, keys, and starting one sshd per 16 nodes."""

from __future__ import annotations

import ipaddress
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import netstat, procs
from .errors import LabError

SSHD = Path("/usr/sbin/sshd")
SSH_KEYGEN = Path("/usr/bin/ssh-keygen")
PRIVSEP_DIR = Path("/run/sshd")  # compiled into Debian's sshd; it refuses to start without it
INSTALL_HINT = "apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y openssh-server"
# OpenSSH's compile-time MAX_LISTEN_SOCKS. A 17th ListenAddress kills sshd at start with
# "Too many listen sockets", and `sshd -t` does not notice, so the limit is enforced here.
MAX_LISTEN = 16
LOOPBACK = ipaddress.ip_network("127.0.0.0/8")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# Characters allowed in paths written into sshd_config and SetEnv values: sshd splits on
# whitespace and treats quotes specially, and the emulated tools are /bin/sh scripts.
SAFE_PATH_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+@:,")
READY_TIMEOUT_S = 10.0
#: The variable that names a session's node (sshd sets it per address); `lab down` finds a node's strays by it.
NODE_VAR = "FABRICPROOF_LAB_NODE"
#: A node's own temporary directory for Open MPI, inside its node directory (emu.api.create_node makes it).
NODE_TMP = "tmp"


def assert_loopback(addresses: Sequence[str]) -> None:
    """Refuse any listen address outside 127.0.0.0/8: the lab must never be reachable from the network."""
    for addr in addresses:
        ip = ipaddress.ip_address(addr)
        if ip.version != 4 or ip not in LOOPBACK:
            raise LabError(f"refusing to listen on {addr}: the lab listens on 127.0.0.0/8 only")


def assert_safe_path(path: Path) -> None:
    bad = sorted(set(str(path)) - SAFE_PATH_CHARS)
    if bad:
        raise LabError(f"lab directory {path} contains characters sshd_config cannot carry "
                       f"({''.join(bad)!r}); choose a --dir made of letters, digits and ./_-+@:,")


@dataclass(frozen=True)
class NodeEnv:
    """The environment one node's SSH sessions get: emulated tools first on PATH, and who they are."""

    address: str
    node_dir: Path
    host_root: Path


@dataclass(frozen=True)
class NodePython:
    """Where the nodes' Python finds the lab's sitecustomize (zipcache.py) and the cache it keeps."""

    path: Path
    zipcache: Path

    def setenv(self) -> str:
        for path in (self.path, self.zipcache):
            assert_safe_path(path)
        return f" PYTHONPATH={self.path} FABRICPROOF_LAB_ZIPCACHE={self.zipcache}"


def render_config(*, title: str, addresses: Sequence[str], port: int, host_key: Path, authorized_keys: Path,
                  user: str, tools_dir: Path, nodes: Sequence[NodeEnv], python: NodePython | None = None) -> str:
    """One sshd_config for up to 16 loopback addresses, with one Match block per address."""
    assert_loopback(addresses)
    if not 1 <= len(addresses) <= MAX_LISTEN:
        raise ValueError(f"one sshd takes 1..{MAX_LISTEN} listen addresses, got {len(addresses)}")
    lines = [
        f"# {title}",
        "# Written by `fabricproof lab up`; rewritten on every start. Do not edit.",
        *(f"ListenAddress {addr}:{port}" for addr in addresses),
        f"HostKey {host_key}",
        "PidFile none",  # started with -D as our child: the PID is recorded in lab.json
        f"AuthorizedKeysFile {authorized_keys}",
        # Lab files may sit under world-traversable dirs owned by others (/tmp); the lab is
        # loopback-only and key-only, so sshd's ownership checks on them buy nothing here.
        "StrictModes no",
        "PubkeyAuthentication yes",
        "PasswordAuthentication no",
        "KbdInteractiveAuthentication no",
        "PermitRootLogin no",
        f"AllowUsers {user}",
        "UsePAM no",  # PAM adds ~6 ms per connection and nothing the lab needs
        "UseDNS no",
        "PrintMotd no",
        "PrintLastLog no",
        "X11Forwarding no",
        "AllowTcpForwarding no",
        "AllowAgentForwarding no",
        "PermitTunnel no",
        "PermitUserEnvironment no",
        # Fan-out opens hundreds of connections at once; the default 10:30:100 drops pre-auth ones.
        "MaxStartups 2000",
        "MaxSessions 64",
        "LoginGraceTime 30",
        "LogLevel ERROR",
        "Subsystem sftp internal-sftp",  # Ansible falls back to sftp when pipelining is off
    ]
    # Per-node identity. Verified on OpenSSH 9.2p1 (Debian 12): SetEnv is accepted inside
    # `Match LocalAddress`, and a Match block's SetEnv REPLACES the global SetEnv list instead of
    # adding to it (sshd keeps the first SetEnv it sees for a connection, and the Match block's
    # list wins over the global one). So there is no global SetEnv: every block carries PATH too.
    # Without these variables the tools fall back to field 3 of $SSH_CONNECTION (the dialed address).
    # OMPI_MCA_orte_tmpdir_base: each node its own temporary directory for Open MPI, as a real machine has its own
    # /tmp. orted keeps its session directory in <tmpdir>/ompi.<hostname>.<uid>, and every lab node shares this
    # machine's host name and the lab user: in one /tmp the orteds of one mpirun race to create the same directory
    # and one fails to start. Not TMPDIR: the SSH transport's private directories stay on /dev/shm.
    # PYTHONPATH: the lab's sitecustomize, which keeps what Ansible's modules compile (zipcache.py).
    python_env = python.setenv() if python else ""
    by_address = {n.address: n for n in nodes}
    for addr in addresses:
        node = by_address[addr]
        for path in (tools_dir, node.node_dir, node.host_root):
            assert_safe_path(path)
        lines += [
            f"Match LocalAddress {addr}",
            (f"    SetEnv PATH={tools_dir}:{SYSTEM_PATH} {NODE_VAR}={node.node_dir}"
             f" FABRICPROOF_HOST_ROOT={node.host_root} OMPI_MCA_orte_tmpdir_base={node.node_dir / NODE_TMP}"
             f"{python_env}"),
        ]
    return "\n".join(lines) + "\n"


def require_sshd() -> None:
    for binary in (SSHD, SSH_KEYGEN):
        if not os.access(binary, os.X_OK):
            raise LabError(f"{binary} not found: the lab runs Debian's OpenSSH server. Install it with:\n"
                           f"  {INSTALL_HINT}")


def ensure_key(path: Path, comment: str) -> None:
    """Create an ed25519 key pair at `path` (private 0600) unless one exists: a lab keeps its keys
    across restarts so known_hosts and client configs stay valid."""
    if path.exists() and path.with_suffix(".pub").exists():
        return
    path.unlink(missing_ok=True)
    path.with_suffix(".pub").unlink(missing_ok=True)
    subprocess.run([str(SSH_KEYGEN), "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
                   check=True, capture_output=True, text=True)
    os.chmod(path, 0o600)


def public_key(path: Path) -> str:
    """'ssh-ed25519 AAAA...' of a key pair, without the comment."""
    algo, blob, *_ = path.with_suffix(".pub").read_text().split()
    return f"{algo} {blob}"


def check_config(config: Path) -> None:
    """`sshd -t` on one rendered config: syntax errors surface before 60 daemons fail one by one."""
    done = subprocess.run([str(SSHD), "-t", "-f", str(config)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise LabError(f"sshd rejected {config}: {done.stderr.strip() or done.stdout.strip()}")


def ensure_privsep_dir() -> None:
    PRIVSEP_DIR.mkdir(mode=0o755, exist_ok=True)
    os.chmod(PRIVSEP_DIR, 0o755)


def start(config: Path, log: Path) -> int:
    """Start one sshd in the foreground (-D) as a detached process; return its PID.

    The config path must be absolute: sshd re-execs itself for every connection after
    chdir("/"), and a relative -f breaks every login ("Connection reset by peer").
    """
    if not config.is_absolute() or not log.is_absolute():
        raise ValueError("sshd needs absolute config and log paths")
    argv = [str(SSHD), "-D", "-f", str(config), "-E", str(log)]
    return procs.spawn_detached(argv, log, env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"})


def is_lab_sshd(pid: int, config: Path) -> bool:
    return procs.is_process_of(pid, SSHD, str(config))


def log_tail(log: Path, lines: int = 5) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return ""


def wait_listening(started: dict[int, tuple[Path, Sequence[str]]], port: int,
                   timeout_s: float = READY_TIMEOUT_S) -> None:
    """Wait until every started sshd listens on all of its addresses.

    Readiness is read from /proc/net/tcp rather than by connecting: a probe connection costs sshd
    a fork and re-exec (~7 ms) per address, and sshd binds all of its addresses before accepting,
    skipping (and only logging) any it cannot bind, so each address is checked on its own.
    """
    deadline = time.monotonic() + timeout_s
    pending = dict(started)
    while pending:
        listening = netstat.listeners()
        for pid, (log, addresses) in list(pending.items()):
            if not procs.is_running(pid):
                raise LabError(f"sshd (pid {pid}) exited at start; {log}:\n{log_tail(log)}",
                               exit_code=1)
            if netstat.listening_on(port, addresses, listening) == set(addresses):
                del pending[pid]
        if not pending:
            return
        if time.monotonic() > deadline:
            pid, (log, addresses) = next(iter(pending.items()))
            missing = sorted(set(addresses) - netstat.listening_on(port, addresses, netstat.listeners()))
            raise LabError(f"sshd (pid {pid}) did not listen on {', '.join(missing)} port {port} within "
                           f"{timeout_s:.0f} s; {log}:\n{log_tail(log)}", exit_code=1)
        time.sleep(0.05)
