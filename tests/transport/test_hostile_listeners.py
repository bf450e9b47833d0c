"""What a listener on a host's SSH port sends before any authentication never reaches the operator's terminal raw:
real TCP listeners on loopback (escape sequences, garbage, a dropped connection, an endless line) and a closed port,
collected by the real CLI; the output holds one escaped line per host and no library traceback."""

from __future__ import annotations

import logging
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from labkit import lab_baseline_children

from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof.inventory import load as load_inventory
from fabricproof.transport import liblog
from fabricproof.transport.ssh import BANNER_BYTES, SSHOptions

REPO = Path(__file__).resolve().parents[2]
ESC = b"\x1b"
#: Set the terminal's title, erase the line and return to its start, then a line that is not SSH: paramiko quotes the
#: 100th line it reads in its error.
ESCAPES = b"\x1b]0;you have been owned\x07\r\n" * 60 + b"\x1b[2K\r\x1b[1Aoverwritten\r\n" * 39 + \
    b"\x1b]0;owned\x07\x1b[31mnot ssh\r\n"


def _serve(conn: socket.socket, behaviour: str) -> None:
    with conn:
        try:
            if behaviour == "escapes":
                conn.sendall(ESCAPES)
            elif behaviour == "garbage":
                conn.sendall(b"\x1b[5m\xff\xfe\x00 binary garbage\r\n" + bytes(range(256)))
            elif behaviour == "endless":  # one line without end, far past what a banner may be
                conn.sendall(b"\x1b[5m" + b"A" * (4 * BANNER_BYTES))
            # "drops": closed at once, before any banner
            conn.settimeout(30)
            while behaviour != "drops" and conn.recv(65536):
                pass
        except OSError:
            pass


@pytest.fixture
def listeners() -> Iterator[dict[str, int]]:
    """Raw TCP listeners on 127.0.0.1, one per behaviour, and a port nothing listens on; all closed afterwards."""
    socks: dict[str, socket.socket] = {}
    stop = threading.Event()
    threads = []
    for behaviour in ("escapes", "garbage", "drops", "endless"):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        s.settimeout(0.2)
        socks[behaviour] = s

        def accept(s: socket.socket = s, behaviour: str = behaviour) -> None:
            while not stop.is_set():
                try:
                    conn, _ = s.accept()
                except (TimeoutError, OSError):
                    continue
                threading.Thread(target=_serve, args=(conn, behaviour), daemon=True).start()

        threads.append(threading.Thread(target=accept, daemon=True))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        closed = probe.getsockname()[1]
    for t in threads:
        t.start()
    try:
        yield {**{b: s.getsockname()[1] for b, s in socks.items()}, "closed": closed}
    finally:
        stop.set()
        for t in threads:
            t.join(5)
        for s in socks.values():
            s.close()


def inventory(tmp_path: Path, ports: dict[str, int]) -> Path:
    path = tmp_path / "inventory.yml"
    hosts = "".join(f"    {name}:\n      ansible_host: 127.0.0.1\n      ansible_port: {port}\n      ansible_user: root\n"
                    for name, port in ports.items())
    path.write_text(f"all:\n  hosts:\n{hosts}" + lab_baseline_children())
    return path


def cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "cli")}
    return subprocess.run([sys.executable, "-m", "fabricproof", *argv], env=env, cwd=tmp_path,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=300)


def test_listeners_before_ssh_print_one_escaped_line_per_host_and_no_traceback(listeners, tmp_path):
    proc = cli(tmp_path, "collect", "-i", str(inventory(tmp_path, listeners)), "-o", str(tmp_path / "run"), "-c", "lsmod")
    out = proc.stdout
    assert proc.returncode == 3, out.decode(errors="replace")
    assert ESC not in out and b"\r" not in out, out
    text = out.decode()
    assert "Traceback" not in text and "Exception (client)" not in text, text
    for host in listeners:
        # One line as the host finishes, one in the summary; nothing else names it.
        assert len(re.findall(rf"^{host}: not collected: unreachable: ", text, re.M)) == 1, text
        assert len(re.findall(rf"^  {host}: unreachable: ", text, re.M)) == 1, text
    ours = re.compile(r"^(\S+: not collected: .*|collect: \d+/\d+ hosts.*|collected \d+/\d+ hosts.*"
                      r"|not collected \(\d+\):|  \S+: unreachable: .*)$")
    assert [line for line in text.splitlines() if not ours.match(line)] == []
    said = dict(line.split(": not collected: ", 1) for line in text.splitlines() if ": not collected: " in line)
    assert "\\x1b]0;owned\\x07\\x1b[31mnot ssh" in said["escapes"]  # what the host sent, shown escaped
    assert f"the server sent more than {BANNER_BYTES >> 10} KiB before its SSH version line" in said["endless"]
    assert "connection refused" in said["closed"]
    # validate: the same lines, then a report that names each host's reason, escaped as well
    proc = cli(tmp_path, "validate", "-i", str(inventory(tmp_path, listeners)), "-b",
               str(REPO / "inventories" / "lab" / "baseline.yaml"), "--run-dir", str(tmp_path / "run2"))
    assert proc.returncode == 3 and ESC not in proc.stdout and b"Traceback" not in proc.stdout, proc.stdout
    assert b"Exception (client)" not in proc.stdout


def test_library_logs_are_captured_escaped_one_line_per_host(listeners, tmp_path):
    handler = liblog.capture()
    assert liblog.capture() is handler and logging.getLogger("paramiko").handlers.count(handler) == 1
    path = inventory(tmp_path, {"escapes": listeners["escapes"], "garbage": listeners["garbage"]})
    hosts = list(load_inventory(str(path)).hosts.values())
    options = SSHOptions(default_known_hosts=(), connect_attempts=1)
    result = collect(hosts, tmp_path / "run", via="ssh", options=options, collectors=[COLLECTORS["lsmod"]])
    assert sorted(result.errors) == ["escapes", "garbage"]
    lines = handler.lines()
    assert lines[liblog.thread_name("escapes")] == \
        'Exception (client): Indecipherable protocol version "\\x1b]0;owned\\x07\\x1b[31mnot ssh"'
    assert lines[liblog.thread_name("garbage")].startswith("Exception (client): Error reading SSH protocol banner")
    assert all("\n" not in line and "\x1b" not in line for line in lines.values())


def test_one_line_escapes_and_bounds_what_a_host_said():
    assert liblog.one_line("\n  first \x1b[2J line\r\nTraceback (most recent call last):\n") == "first \\x1b[2J line"
    assert len(liblog.one_line("x" * 10_000)) == liblog.LINE_CHARS
