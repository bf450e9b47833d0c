"""Emulated host tools: modprobe/rmmod (module dependencies), setpci (ACS control) and scontrol (Slurm)."""

from __future__ import annotations

import re
from pathlib import Path

from . import faults, render_perf, render_sys
from .model import Node, installed_driver
from .profiles import KERNEL_MODULES
from .store import transaction
from .tooling import Abort, Result, read

_KNOWN_MODULES = {m for m, _ in KERNEL_MODULES} | {"nv_peer_mem"}


def _modprobe_load(node: Node, name: str) -> None:
    if name in node["modules"]:
        return
    for dep in render_sys.MODULE_DEPS.get(name, ()):
        _modprobe_load(node, dep)
    node["modules"].insert(0, name)


def modprobe(node_dir: Path, args: list[str]) -> Result:
    """modprobe [-r] MODULE: loads dependencies first; refuses to remove a module in use."""
    remove = any(a in ("-r", "--remove") for a in args)
    names = [a for a in args if not a.startswith("-") and "=" not in a]
    if not names:
        return "", "modprobe: ERROR: missing parameters. See -h.\n", 1
    with transaction(node_dir) as node:
        rel = node["kernel_release"]
        for name in names:
            name = name.replace("-", "_")
            nvidia = name.startswith("nv")
            if name not in _KNOWN_MODULES or (nvidia and installed_driver(node) is None):
                if remove:
                    continue
                raise Abort("", f"modprobe: FATAL: Module {name} not found in directory /lib/modules/{rel}\n", 1)
            if remove:
                if name not in node["modules"]:
                    continue
                if render_sys.users_of(node["modules"], name):
                    raise Abort("", f"modprobe: FATAL: Module {name} is in use.\n", 1)
                node["modules"].remove(name)
            else:
                _modprobe_load(node, name)
    return "", "", 0




def rmmod(node_dir: Path, args: list[str]) -> Result:
    """rmmod MODULE."""
    names = [a.replace("-", "_") for a in args if not a.startswith("-")]
    if not names:
        return "", "rmmod: ERROR: missing module name.\n", 1
    with transaction(node_dir) as node:
        for name in names:
            if name not in node["modules"]:
                raise Abort("", f"rmmod: ERROR: Module {name} is not currently loaded\n", 1)
            users = render_sys.users_of(node["modules"], name)
            if users:
                raise Abort("", f"rmmod: ERROR: Module {name} is in use by: {' '.join(users)}\n", 1)
            node["modules"].remove(name)
    return "", "", 0


_ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
_ACS_REG = re.compile(r"^(?:ECAP_ACS|ECAP0?0?0?[dD])\+(?:0x)?6\.w$", re.IGNORECASE)


def setpci(node_dir: Path, args: list[str]) -> Result:
    """setpci -s BDF ECAP_ACS+0x6.w[=VALUE[:MASK]] (ACS Control register; not persistent across reboot)."""
    bdf = None
    ops: list[str] = []
    it = iter(args)
    for a in it:
        if a == "-s":
            bdf = next(it, None)
        elif a.startswith("-"):
            continue
        else:
            ops.append(a)
    if bdf is None or not ops:
        return "", "setpci: No devices selected.\n" if bdf is None else "setpci: Missing register.\n", 1
    out = []
    with transaction(node_dir) as node:
        dev = next((d for d in node["pcie"] if bdf in (d["bdf"], d["bdf"][5:])), None)
        if dev is None:
            raise Abort("", f"setpci: Warning: No devices selected for \"{bdf}\".\n", 0)
        for op in ops:
            reg, _, value = op.partition("=")
            if not _ACS_REG.match(reg):
                raise Abort("", f"setpci: lab node emulates only the ACS Control register, not \"{reg}\"\n", 1)
            if dev["acs"] is None:
                raise Abort("", f"setpci: Capability ECAP_ACS not found on {bdf}\n", 1)
            bits = sum(1 << i for i, f in enumerate(_ACS_BITS) if dev["acs"][f])
            if not value:
                out.append(f"{bits:04x}")
                continue
            val, _, mask = value.partition(":")
            v, m = int(val, 16), int(mask, 16) if mask else 0xFFFF
            bits = (bits & ~m) | (v & m)
            dev["acs"] = {f: bool(bits >> i & 1) for i, f in enumerate(_ACS_BITS)}
    return "".join(line + "\n" for line in out), "", 0


def _lab_node_dir(node_dir: Path, name: str) -> Path | None:
    """Another lab node by hostname (nodes/by-name/<hostname> links to its directory)."""
    if name == read(node_dir)["hostname"]:
        return node_dir
    link = node_dir.parent / "by-name" / name
    return link.resolve() if link.exists() else None


def scontrol(node_dir: Path, args: list[str]) -> Result:
    """scontrol [-o] listpids [JOB[.STEP]] | show node [NAME] | update NodeName=NAME State=DRAIN|RESUME|DOWN|UNDRAIN
    Reason=TEXT. With -o (one line a node) and no NAME, show lists every lab node, as Slurm lists every node."""
    oneline = any(a in ("-o", "--oneliner") for a in args)
    args = [a for a in args if a not in ("-o", "--oneliner")]
    if not args:
        return "", "scontrol: error: no command given\n", 1
    op = args[0].lower()
    if op == "listpids":
        return render_perf.render_listpids(faults.view(read(node_dir)), args[1] if len(args) > 1 else None)
    if op == "show":
        what = args[1].lower() if len(args) > 1 else ""
        if what not in ("node", "nodes") and not what.startswith("node="):
            return "", f"scontrol: error: lab node only shows nodes, not \"{what}\"\n", 1
        name = what.split("=", 1)[1] if "=" in what else (args[2] if len(args) > 2 else None)
        if oneline:
            if name is None:
                by_name = node_dir.parent / "by-name"
                targets = [link.resolve() for link in sorted(by_name.iterdir())] if by_name.is_dir() else [node_dir]
            elif (found := _lab_node_dir(node_dir, name)) is not None:
                targets = [found]
            else:
                return "", f"Node {name} not found\n", 1
            return "".join(" ".join(render_sys.render_scontrol_node(read(t)).split()) + "\n" for t in targets), "", 0
        target = node_dir if name is None else _lab_node_dir(node_dir, name)
        if target is None:
            return "", f"Node {name} not found\n", 1
        return render_sys.render_scontrol_node(read(target)), "", 0
    if op != "update":
        return "", f"scontrol: error: invalid keyword: {args[0]}\n", 1
    kv: dict[str, str] = {}
    last = None
    for a in args[1:]:
        if "=" in a:
            k, v = a.split("=", 1)
            last = k.lower()
            kv[last] = v.strip('"')
        elif last == "reason":  # an unquoted reason split by the shell
            kv["reason"] += " " + a
    name, state = kv.get("nodename"), kv.get("state", "").upper()
    if not name or not state:
        return "", "scontrol: error: No valid entity in update command\nRequest aborted\n", 1
    target = _lab_node_dir(node_dir, name)
    if target is None:
        return "", "slurm_update error: Invalid node name specified\n", 1
    if state in ("DRAIN", "DOWN", "FAIL") and not kv.get("reason"):
        return "", "You must specify a reason when DOWNING or DRAINING a node. Request denied\n", 1
    if state not in ("DRAIN", "DOWN", "RESUME", "UNDRAIN", "IDLE", "FAIL"):
        return "", "scontrol: error: Invalid node state specified\n", 1
    with transaction(target) as node:
        sl = node["slurm"]
        if state == "DRAIN":
            sl["state"] = "IDLE+DRAIN"
        elif state in ("DOWN", "FAIL"):
            sl["state"] = state
        else:
            sl["state"] = "IDLE"
        if state in ("DRAIN", "DOWN", "FAIL"):
            sl.update(reason=kv["reason"], reason_user="root", reason_time=node["clock"])
        else:
            sl.update(reason=None, reason_user=None, reason_time=None)
    return "", "", 0
