"""Entry point of the emulated tools when a pre-rendered file is not enough: `python3 -m <pkg>.cli TOOL ARGS...`.

The /bin/sh tool scripts `exec cat` a node's pre-rendered output when it exists; they fall back to this
module for mutating tools, arguments that have no pre-rendered output, and special outputs (an exit code
other than 0, stderr, a hang, counters that grow on every read).
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
from pathlib import Path

#: A hanging tool gives up after this long even if nobody kills it.
HANG_LIMIT_S = 3600.0

USAGE = {
    "nvidia-smi": ("Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", "", 2),
    "lspci": ("", "lspci: Invalid option -- see lspci --help\n", 2),
    "nvidia-imex-ctl": ("", "Usage: nvidia-imex-ctl [-i <IP> <PORT>|-u <unix domain socket path>|-c <nvidia-imex "
                            "config.cfg path>] <-n|-N|-q|-s|-d|-m> [-t <timeout>]\n", 1),
    "nv-fabricmanager": ("", "nv-fabricmanager: unrecognized option\n", 1),
    "ofed_info": ("", "Usage: ofed_info [-s|-n|-l|-p]\n", 1),
}


def node_dir() -> Path | None:
    """This session's node: $FABRICPROOF_LAB_NODE, else <labdir>/nodes/<dialed address> from $SSH_CONNECTION."""
    env = os.environ.get("FABRICPROOF_LAB_NODE")
    if env:
        return Path(env)
    conn = os.environ.get("SSH_CONNECTION", "").split()
    if len(conn) >= 3:
        # Installed as <labdir>/lib/<pkg>/cli.py.
        return Path(__file__).resolve().parents[2] / "nodes" / conn[2]
    return None


def hang() -> int:
    """Sleep like a stuck tool, but go away as soon as the caller does (parent gone or stdout closed)."""
    parent = os.getppid()
    poller = select.poll()
    poller.register(sys.stdout.fileno(), select.POLLERR | select.POLLHUP)
    deadline = time.monotonic() + HANG_LIMIT_S
    while time.monotonic() < deadline:
        if poller.poll(500) or os.getppid() != parent:
            return 124
    return 124


def _emit(stdout: str, stderr: str, rc: int) -> int:
    if stdout:
        sys.stdout.buffer.write(stdout.encode("utf-8", "surrogateescape"))
        sys.stdout.flush()
    if stderr:
        sys.stderr.write(stderr)
        sys.stderr.flush()
    return rc


def _special(nd: Path, key: str, spec: dict) -> int:
    if spec.get("special") == "hang":
        return hang()
    if spec.get("special") == "dynamic":
        from . import faults, render_links
        from .store import transaction

        # Counters that grow on every read: bump the read count, then print from the new state.
        with transaction(nd) as node:
            node["ticks"] += 1
        return _emit(render_links.render_nvlink_errors(faults.view(node)), "", 0)
    if spec.get("special") == "flood":
        from .faults.tool import flood_mib
        from .store import load

        return flood(flood_mib(load(nd)))
    return _emit(spec.get("stdout", ""), spec.get("stderr", ""), int(spec.get("rc", 0)))


def flood(mib: int) -> int:
    """Print `mib` MiB of text lines as fast as the reader takes them (tool-floods); stop when it goes away."""
    line = b"mlx5_0: port 1: event queue overrun, dumping state again\n"
    block = line * ((1 << 20) // len(line)) + line[: (1 << 20) % len(line) - 1] + b"\n"
    try:
        for _ in range(mib):
            sys.stdout.buffer.write(block)
        sys.stdout.flush()
    except BrokenPipeError:
        return 141
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run one emulated tool invocation; returns its exit status."""
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        return _emit("", "usage: python3 -m fabricproof_lab_emu.cli TOOL [ARGS...]\n", 2)
    from .outputs import key_for

    return answer(argv[0], argv[1:], key_for(argv[0], argv[1:]))


def answer(tool: str, args: list[str], key: str | None) -> int:
    """main, given the invocation's output key (None: not a read-only one). The tool scripts' launcher (api.LAUNCHER)
    passes the key their `case` found: the command table's import (the product's tools vocabulary, every
    renderer) was most of a fallback call's CPU."""
    nd = node_dir()
    if nd is None or not (nd / "state.json").exists():
        return _emit("", f"{tool}: fabricproof lab: no emulated node here (FABRICPROOF_LAB_NODE / SSH_CONNECTION "
                         f"do not name a lab node: {nd})\n", 1)
    if key is not None:
        spec_path, plain = nd / "out" / f"{key}.json", nd / "out" / key
        try:
            return _special(nd, key, json.loads(spec_path.read_text()))
        except FileNotFoundError:
            pass
        try:
            return _emit(plain.read_text(), "", 0)
        except FileNotFoundError:
            pass
    from .commands import HangRequested, handler, run

    found = handler(tool)
    if found is None:
        return _emit(*USAGE.get(tool, ("", f"{tool}: invalid arguments: {' '.join(args)}\n", 2)))
    try:
        return _emit(*run(found, nd, args))
    except HangRequested:
        return hang()


if __name__ == "__main__":
    sys.exit(main())
