"""Emulated infiniband-diags `ibstat` beyond the plain listing: -l, -s, -p, CA, CA PORT, and its real usage errors.

Formats are those of Debian's infiniband-diags 44.0 ibstat, which tests/lab_emu/test_emu_ibstat.py runs over a
node's own sysfs as the oracle; the plain `ibstat` is pre-rendered (render_ib.render_ibstat).
"""

from __future__ import annotations

import os
from pathlib import Path

from . import faults, render_ib
from .tooling import Result, read

USAGE = """
Usage: ibstat [options] <ca_name> [portnum]

Options:
  --list_of_cas, -l       list all IB devices
  --short, -s             short output
  --port_list, -p         show port list
  --config, -z <config>   use config file, default: /etc/infiniband-diags/ibdiag.conf
  --verbose, -v           increase verbosity level
  --debug, -d             raise debug level
  --help, -h              help message
  --version, -V           show version

Examples:
  ibstat -l       # list all IB devices
  ibstat mthca0 2 # stat port 2 of 'mthca0'

"""
_LONG = {"--list_of_cas": "-l", "--short": "-s", "--port_list": "-p", "--verbose": "-v", "--debug": "-d",
         "--help": "-h", "--version": "-V"}


def ibstat(node_dir: Path, args: list[str]) -> Result:
    """ibstat [-l|-s|-p] [CA [PORT]]; a bad option prints the usage on stderr and exits 2, as the real one."""
    view = faults.view(read(node_dir))
    flags: set[str] = set()
    words: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-z", "--config"):
            next(it, None)
        elif a.startswith("--"):
            if a not in _LONG:
                return "", f"ibstat: unrecognized option '{a}'\n{USAGE}", 2
            flags.add(_LONG[a])
        elif a.startswith("-") and len(a) > 1:
            for ch in a[1:]:
                if ch not in "lspvdhV":
                    return "", f"ibstat: invalid option -- '{ch}'\n{USAGE}", 2
                flags.add("-" + ch)
        else:
            words.append(a)
    if "-h" in flags:
        return "", USAGE, 2
    if "-V" in flags:
        return "", "ibstat BUILD VERSION: 44.0\n", 0
    hcas = view["hcas"]
    pid = os.getpid()
    if words:
        hca = next((h for h in hcas if h["name"] == words[0]), None)
        if hca is None:
            return "", f"ibpanic: [{pid}] main: '{words[0]}' IB device can't be found: Success\n", 255
        hcas = [hca]
    if "-l" in flags:
        return "".join(h["name"] + "\n" for h in view["hcas"]), "", 0
    if "-p" in flags:
        return "".join(f"0x{p['port_guid']}\n" for h in hcas for p in h["ports"]), "", 0
    if len(words) > 1 and "-s" not in flags:
        hca = hcas[0]
        port = next((p for p in hca["ports"] if str(p["port"]) == words[1]), None)
        if port is None:
            return "", (f"ibwarn: [{pid}] ca_stat: CA: '{hca['name']}' has no port number {words[1]} - max "
                        f"({len(hca['ports'])})\nibpanic: [{pid}] main: stat of IB device '{hca['name']}' failed: "
                        "Success\n"), 255
        return "\n".join([f"CA: '{hca['name']}'", f"Port {port['port']}:", *render_ib.ibstat_port_lines(port, "")]) \
            + "\n", "", 0
    lines = [line for h in hcas for line in render_ib.ibstat_ca_lines(h, ports="-s" not in flags)]
    return "\n".join(lines) + "\n", "", 0


# rdma-core 44's libibverbs/examples/devinfo.c: its usage goes to stdout, the getopt complaint to stderr, exit 255.
DEVINFO_USAGE = ("Usage: ibv_devinfo             print the ca attributes\n\nOptions:\n"
                 "  -d, --ib-dev=<dev>     use IB device <dev> (default first device found)\n"
                 "  -i, --ib-port=<port>   use port <port> of IB device (default all ports)\n"
                 "  -l, --list             print only the IB devices names\n"
                 "  -v, --verbose          print all the attributes of the IB device(s)\n")


def ibv_devinfo(node_dir: Path, args: list[str]) -> Result:
    """ibv_devinfo [-v] [-d DEV] [-i PORT] | -l (the plain `-v` form is pre-rendered)."""
    view = faults.view(read(node_dir))
    device: str | None = None
    port: int | None = None
    verbose = listing = False
    it = iter(args)
    for a in it:
        if a in ("-d", "--ib-dev"):
            device = next(it, "")
        elif a.startswith("--ib-dev="):
            device = a.split("=", 1)[1]
        elif a.startswith("-d") and not a.startswith("--"):
            device = a[2:]  # getopt's -dmlx5_0
        elif a in ("-i", "--ib-port") or a.startswith("--ib-port="):
            value = a.split("=", 1)[1] if "=" in a else next(it, "")
            if not value.isdigit() or int(value) < 1:
                return DEVINFO_USAGE, "", 255
            port = int(value)
        elif a in ("-v", "--verbose", "-vv"):
            verbose = True
        elif a in ("-l", "--list"):
            listing = True
        else:
            bad = a.lstrip("-")[:1] if not a.startswith("--") else a
            err = f"ibv_devinfo: invalid option -- '{bad}'\n" if not a.startswith("--") else \
                f"ibv_devinfo: unrecognized option '{a}'\n"
            return DEVINFO_USAGE, err, 255
    hcas = view["hcas"]
    if listing:
        return f"{len(hcas)} HCA{'s' if len(hcas) != 1 else ''} found:\n" + "".join(f"\t{h['name']}\n" for h in hcas), \
            "", 0
    if device is not None and all(h["name"] != device for h in hcas):
        return "", f"IB device '{device}' wasn't found\n", 255
    return render_ib.render_ibv_devinfo(view, verbose, device, port), "", 0


def ibv_devices(node_dir: Path, args: list[str]) -> Result:
    """ibv_devices (libibverbs/examples/device_list.c): each device and its node GUID."""
    if args:
        return "", "Usage: ibv_devices\n", 1
    view = faults.view(read(node_dir))
    rows = [f"    {'device':<16}\t   node GUID", f"    {'------':<16}\t----------------"]
    rows += [f"    {h['name']:<16}\t{h['node_guid']}" for h in view["hcas"]]
    return "\n".join(rows) + "\n", "", 0
