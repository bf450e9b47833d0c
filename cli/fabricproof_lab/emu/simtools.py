"""The fabric-scope tools of a lab node with an InfiniBand fabric: Debian's real infiniband-diags run against the lab's
ibsim through libumad2sim, their output changed only where ibsim cannot model the real fabric.

What the lab changes, and why:

- NDR: ibsim parses speeds up to HDR, so an NDR fabric runs one generation down in ibsim (netfile.SIM_STEP_DOWN)
  and every speed the tools print is raised back by one generation ("4xHDR" -> "4xNDR", 53.125 -> 106.25 Gbps).
- "Could be 12X": ibsim's ports all claim 12X support, so iblinkinfo hints it on every link; a Quantum switch or a
  ConnectX port supports at most 4X, and real outputs of the same fabric print "( )".
- ibsim's client library prints "ibwarn: [pid] sim_connect: attached as client ..." on stderr; no real tool does.
Everything else is the real tool's output, byte for byte.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

from . import render_ib
from .faults import view
from .tooling import Handler, Result, read

#: Debian's ibsim-utils preload library: the tools talk MADs to ibsim instead of /dev/infiniband.
UMAD2SIM = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so"
#: The real tools the lab runs (Debian's infiniband-diags).
REAL = {"ibnetdiscover": "/usr/sbin/ibnetdiscover", "iblinkinfo": "/usr/sbin/iblinkinfo",
        "ibqueryerrors": "/usr/sbin/ibqueryerrors", "sminfo": "/usr/sbin/sminfo", "perfquery": "/usr/sbin/perfquery"}
#: A real tool gives up on its own long before this; the bound keeps a wedged simulator from holding a session.
TOOL_TIMEOUT_S = 300.0
#: Where the lab fabric's growing switch-port counters are kept (in the fabric directory) and what they count.
GROWING = "growing.json"
CONSOLE = "console"
#: Per read: what each counter of a port with growing errors gains (PortCounters fields ibsim's console sets).
GROWTH = {"SymbolErrorCounter": 7, "LinkDownedCounter": 1, "PortRcvErrors": 3}

_UP = {"HDR": "NDR", "EDR": "HDR", "FDR": "EDR"}
_LANE_UP = {"53.125": "106.25", "25.78125": "53.125", "14.0625": "25.78125"}
_TOKEN = re.compile(r"\b([1-9]\d?x) ?(HDR|EDR|FDR)\b")
_LANE = re.compile(r"(?<![\d.])( *)(53\.125|25\.78125|14\.0625) Gbps")
_SIM_LINE = re.compile(r"^ibwarn: \[\d+\] sim_connect: attached as client .*\n?", re.M)


def raise_speeds(text: str) -> str:
    """Every speed one generation up (an NDR fabric's ibsim ran it one down), keeping iblinkinfo's column widths."""
    text = _TOKEN.sub(lambda m: m.group(0).replace(m.group(2), _UP[m.group(2)]), text)

    def lane(m: re.Match[str]) -> str:
        new = _LANE_UP[m.group(2)]
        width = len(m.group(1)) + len(m.group(2))
        return new.rjust(width) + " Gbps"

    return _LANE.sub(lane, text)


def stdout(tool: str, text: str, shifted: bool) -> str:
    """A real tool's stdout as the lab serves it."""
    if shifted:
        text = raise_speeds(text)
    if tool == "iblinkinfo":
        text = text.replace("(Could be 12X )", "( )").replace("Could be 12X ", "")
    return text


def stderr(text: str) -> str:
    return _SIM_LINE.sub("", text)


def _no_umad(tool: str) -> Result:
    """What a real diagnostic prints on a host with no umad device: this lab node is not cabled to a fabric."""
    pid = os.getpid()
    return "", (f"ibwarn: [{pid}] mad_rpc_open_port: can't open UMAD port ((null):0)\n"
                f"{tool}: iberror: failed: Failed to open '(null)' port '0'\n"), 255


def grow_counters(fabric_dir: Path, timeout_s: float = 10.0) -> None:
    """One read of a fabric whose switch ports have growing errors (fault subnet-switch-errors): raise each such
    port's counters by GROWTH through ibsim's console (PerformanceSet), and wait until ibsim has set them."""
    path = fabric_dir / GROWING
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        doc = json.loads(os.pread(fd, 1 << 20, 0) or b"{}")
        ports = doc.get("ports", [])
        if not ports:
            return
        doc["reads"] = reads = int(doc.get("reads", 0)) + 1
        lines = [f'PerformanceSet "{node}"[{port}] PortCounters.{name}={min(step * reads, 255 if name == "LinkDownedCounter" else 65535)}'
                 for node, port in ports for name, step in GROWTH.items()]
        log = fabric_dir / "ibsim.log"
        start = log.stat().st_size if log.exists() else 0
        console = os.open(fabric_dir / CONSOLE, os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(console, ("\n".join(lines) + "\n").encode())
        finally:
            os.close(console)
        data = json.dumps(doc).encode()
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with open(log, "rb") as f:
                f.seek(start)
                if f.read().count(b"has been set to") >= len(lines):
                    return
            time.sleep(0.02)
    finally:
        os.close(fd)


def real_tool(tool: str) -> Handler:
    """The handler of one fabric-scope tool: the real one when the node is cabled to the lab's fabric."""

    def handler(node_dir: Path, args: list[str]) -> Result:
        node = read(node_dir)
        attachment = node.get("fabric")
        if not attachment:
            if tool == "sminfo" and not args:
                return render_ib.render_sminfo(view(node))
            return _no_umad(tool)
        fabric_dir = Path(attachment["dir"])
        if tool in ("ibqueryerrors", "perfquery"):
            grow_counters(fabric_dir)
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LD_PRELOAD": UMAD2SIM,
               "IBSIM_SOCKNAME": attachment["socket"], "SIM_HOST": attachment["sim_host"]}
        # libumad2sim makes its sysfs stand-in in the working directory: a private one, removed afterwards
        with tempfile.TemporaryDirectory(prefix="fabricproof-umad2sim-") as cwd:
            try:
                done = subprocess.run([REAL[tool], *args], env=env, cwd=cwd, capture_output=True,
                                      timeout=TOOL_TIMEOUT_S, check=False)
            except subprocess.TimeoutExpired:
                return "", f"{tool}: fabricproof lab: no answer from the fabric simulator in {TOOL_TIMEOUT_S:g} s\n", 124
        out = done.stdout.decode("utf-8", "surrogateescape")
        err = done.stderr.decode("utf-8", "surrogateescape")
        return stdout(tool, out, bool(attachment.get("shifted"))), stderr(err), done.returncode

    return handler


HANDLERS: dict[str, Handler] = {tool: real_tool(tool) for tool in REAL}
