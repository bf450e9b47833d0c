"""Helpers shared by the emulated-node tests: what the lab answers to each collector, rendered in-process."""

from __future__ import annotations

from typing import Any

from fabricproof import tools
from fabricproof.collectors import COLLECTORS
from fabricproof_lab.emu import outputs, render_ib, render_links
from fabricproof_lab.emu.profiles import PROFILES
from fabricproof.model import CommandResult

#: collector id -> host file (relative to the fake root) its `sh -c cat/tail` script reads
ROOT_KEYS = {"cmdline": "proc/cmdline", "driver_version": "proc/driver/nvidia/version",
             "fm_config": "usr/share/nvidia/nvswitch/fabricmanager.cfg", "fm_log": "var/log/fabricmanager.log"}
PLATFORM = {"dgx-a100": "a100", "dgx-h100": "h100", "hgx-h200": "h200", "gb200-nvl72": "gb200"}


def _sysfs_listing(view: dict[str, Any]) -> str:
    """What the ib_counters script prints for the node's fake /sys (links resolved to the shared zeros)."""
    lines = []
    for rel, text in render_ib.sysfs_files(view).items():
        path = "/" + rel
        if isinstance(text, render_ib.Link):
            names = render_ib.IB_COUNTER_NAMES if text == render_ib.ZERO_COUNTERS else render_ib.IB_HW_COUNTER_NAMES
            lines += [f"{path}/{n}: 0" for n in names]
        elif not (rel.rsplit("/", 2)[-2] == "pkeys" and text.strip() == "0x0000"):  # the script drops empty slots
            lines.append(f"{path}: {text.strip()}")
    return "\n".join(sorted(lines)) + "\n"


def _imex_channels_listing(view: dict[str, Any]) -> str:
    """What `ls -l` prints for the node's fake /dev/nvidia-caps-imex-channels (the lab's channel0 is a plain file)."""
    present = outputs.root_files(view)["dev/nvidia-caps-imex-channels/channel0"] is not None
    return "total 0\n" + ("-rw-r--r-- 1 lab lab 0 Jan  6 09:00 channel0\n" if present else "")


def _mlxlink_listing(view: dict[str, Any]) -> str:
    """What the mlxlink collector's loop prints: one `=== <dev>` header and mlxlink output per RDMA device, in the
    order of the sysfs glob (C collation)."""
    return "".join(f"=== {h['name']}\n" + render_ib.render_mlxlink(view, h)
                   for h in sorted(view["hcas"], key=lambda h: h["name"]))


def pure_outputs(view: dict[str, Any]) -> dict[str, str]:
    """collector id -> the text the lab answers for its argv, rendered in-process."""
    outs = outputs.render_outputs(view)
    root = outputs.root_files(view)
    # a collector's tool answers under the collector's id (fabricproof.tools)
    text = {cid: outs[cid].stdout for cid in tools.TOOLS if cid not in ("fm_version", "imex_nodes")}
    text.update({
        "sminfo": outs["sminfo"].stdout + outs["sminfo"].stderr,  # the collector reads both (2>&1)
        "mlxlink": _mlxlink_listing(view),
        "cmdline": root["proc/cmdline"], "driver_version": root["proc/driver/nvidia/version"],
        "ib_counters": _sysfs_listing(view),
        "flint": render_ib.render_flint_q(view, view["hcas"][0]),
    })
    if PROFILES[view["profile"]]["fm"]["present"]:
        text.update(fm_version=outs["fm_version"].stdout, fm_config=root["usr/share/nvidia/nvswitch/fabricmanager.cfg"],
                    fm_log=root["var/log/fabricmanager.log"])
    if PROFILES[view["profile"]]["imex"]["present"]:
        text["imex_nodes"] = outs["imex_nodes"].stdout
        text["imex_channels"] = _imex_channels_listing(view)
    return text


def command_results(view: dict[str, Any]) -> dict[str, CommandResult]:
    """What each default collector applicable to the node would get back, as a transport returns it."""
    outs = outputs.render_outputs(view)
    root = outputs.root_files(view)
    results: dict[str, CommandResult] = {}
    for cid, collector in COLLECTORS.items():
        if not collector.default or PLATFORM[view["profile"]] not in collector.platforms:
            continue
        argv = tuple(collector.argv)
        if cid in ROOT_KEYS:
            text = root[ROOT_KEYS[cid]]
            results[cid] = (CommandResult(argv, text) if text is not None
                            else CommandResult(argv, "", f"cat: /{ROOT_KEYS[cid]}: No such file or directory\n", 1))
        elif cid == "ib_counters":
            results[cid] = CommandResult(argv, _sysfs_listing(view))
        elif cid == "mlxlink":
            results[cid] = CommandResult(argv, _mlxlink_listing(view))
        elif cid == "imex_channels":
            results[cid] = CommandResult(argv, _imex_channels_listing(view))
        else:
            out = outs[cid]
            if out.special == "hang":
                results[cid] = CommandResult(argv, "", "", None, error="timed out")
            elif out.special == "dynamic":
                results[cid] = CommandResult(argv, render_links.render_nvlink_errors(view))
            elif cid == "sminfo":  # `sh -c 'exec sminfo 2>&1'`
                results[cid] = CommandResult(argv, out.stdout + out.stderr, "", out.rc)
            else:
                results[cid] = CommandResult(argv, out.stdout, out.stderr, out.rc)
    return results
