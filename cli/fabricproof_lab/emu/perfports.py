"""The emulated perftest's TCP ports, private to each lab: a server publishes the one it took under the one asked."""

from __future__ import annotations

import fcntl
import os
import socket
from pathlib import Path

from .multinode import ensure_rendezvous_dir

# Labs side by side use the same node addresses (they differ by their sshd's port), so the port a command asks for
# cannot be the port its server listens on: a lab's client would meet another lab's server there, and a second lab's
# server could not listen at all. So a server listens where the kernel puts it and writes that port into a file named
# by (address, port asked for) in its lab's rendezvous directory, which only its own lab's clients read. Its claim is
# an flock on the file, held while it listens: a second server of the same lab on the same address and port cannot
# take it (real perftest's bind fails alike), and a killed server's claim ends with it, so no client dials a port
# that nobody of its lab holds.


def _path(node_dir: Path, address: str, port: int) -> Path:
    return ensure_rendezvous_dir(node_dir) / f"perftest-{address}-{port}"


class Listener:
    """A server's listening socket and its claim on the (address, port) it asked for, until close()."""

    def __init__(self, sock: socket.socket, claim: int) -> None:
        self.sock, self._claim = sock, claim

    def close(self) -> None:
        os.ftruncate(self._claim, 0)  # before the lock goes: no client reads a port nobody listens on any more
        os.close(self._claim)
        self.sock.close()


def listen(node_dir: Path, address: str, port: int) -> Listener:
    """Listen on `address` for a client of this lab that asks for `port`; OSError when this lab already listens
    there or the socket cannot be made."""
    claim = os.open(_path(node_dir, address, port), os.O_RDWR | os.O_CREAT, 0o666)
    sock = None
    try:
        try:
            os.fchmod(claim, 0o666)  # the lab user's and root's (Slurm tasks) servers share it, whoever made it
        except PermissionError:
            pass
        fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.ftruncate(claim, 0)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((address, 0))
        sock.listen(1)
        os.pwrite(claim, f"{sock.getsockname()[1]}\n".encode(), 0)
    except OSError:
        if sock is not None:
            sock.close()
        os.close(claim)
        raise
    return Listener(sock, claim)


def dial_port(node_dir: Path, address: str, port: int) -> int | None:
    """The port a server of this lab that asked for (address, port) listens on; None when none listens there."""
    try:
        claim = os.open(_path(node_dir, address, port), os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(claim, fcntl.LOCK_SH | fcntl.LOCK_NB)
            return None  # nobody holds the claim: what the file says is a finished or killed server's
        except BlockingIOError:
            pass
        text = os.pread(claim, 16, 0)
    finally:
        os.close(claim)
    return int(text) if text.endswith(b"\n") else None  # empty: a server between its claim and its listen
