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
