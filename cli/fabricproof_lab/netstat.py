"""Which TCP ports are listening on which addresses (from /proc/net/tcp{,6}), and a free port for a lab."""

from __future__ import annotations

import errno
import ipaddress
import random
import socket
import struct
import sys
from collections.abc import Iterable
from pathlib import Path

TCP_LISTEN = "0A"
# Below Linux's ephemeral range (32768-60999) so an outgoing connection never holds our port.
AUTO_PORT_RANGE = range(20000, 30000)
WILDCARDS = frozenset({"0.0.0.0", "::"})


def _decode_address(hex_addr: str, byteorder: str) -> str:
    # The kernel prints each 32-bit word of the address in host byte order.
    words = [int(hex_addr[k:k + 8], 16) for k in range(0, len(hex_addr), 8)]
    fmt = "<I" if byteorder == "little" else ">I"
    raw = b"".join(struct.pack(fmt, w) for w in words)
    addr = ipaddress.ip_address(raw)
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return str(addr.ipv4_mapped)
    return str(addr)


def parse_listeners(text: str, byteorder: str = sys.byteorder) -> set[tuple[str, int]]:
    """(address, port) of every LISTEN socket in the text of /proc/net/tcp or /proc/net/tcp6."""
    found: set[tuple[str, int]] = set()
    for line in text.splitlines()[1:]:
        fields = line.split()
        if len(fields) < 4 or fields[3] != TCP_LISTEN:
            continue
        hex_addr, _, hex_port = fields[1].partition(":")
        found.add((_decode_address(hex_addr, byteorder), int(hex_port, 16)))
    return found


def listeners(proc_net: Path = Path("/proc/net")) -> set[tuple[str, int]]:
    """Every listening TCP socket of this network namespace."""
    found: set[tuple[str, int]] = set()
    for name in ("tcp", "tcp6"):
        try:
            found |= parse_listeners((proc_net / name).read_text())
        except FileNotFoundError:  # a kernel without IPv6
            continue
    return found


def holders(port: int, addresses: Iterable[str], listening: set[tuple[str, int]]) -> list[str]:
    """Which of `addresses` (or a wildcard, which blocks them all) already listen on `port`."""
    wanted = set(addresses) | WILDCARDS
    return sorted(addr for addr, p in listening if p == port and addr in wanted)


def listening_on(port: int, addresses: Iterable[str], listening: set[tuple[str, int]]) -> set[str]:
    """The subset of `addresses` with a socket listening on exactly (address, port)."""
    return {addr for addr, p in listening if p == port} & set(addresses)


def bind_free(address: str, port: int) -> bool:
    """True when a listening socket could be bound on (address, port) right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # sshd sets SO_REUSEADDR too, so a port held only by TIME_WAIT leftovers counts as free.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((address, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return False
            raise
    return True


def choose_port(addresses: list[str], rng: random.Random | None = None) -> int:
    """A port free on 127.0.0.1 and on every lab address; scanned from a random start so
    labs started at the same moment rarely race for the same port."""
    listening = listeners()
    span = len(AUTO_PORT_RANGE)
    start = (rng or random.Random()).randrange(span)
    probe = [addresses[0], "127.0.0.1"] if addresses else ["127.0.0.1"]
    for k in range(span):
        port = AUTO_PORT_RANGE[(start + k) % span]
        if holders(port, addresses, listening):
            continue
        if all(bind_free(a, port) for a in probe):
            return port
    raise OSError(f"no free TCP port in {AUTO_PORT_RANGE.start}-{AUTO_PORT_RANGE.stop - 1} on the lab addresses")
