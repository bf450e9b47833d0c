"""Emulated systemd and reboot: unit start/stop/enable/show/status, and what a reboot changes on a node."""

from __future__ import annotations

import time
from pathlib import Path

from . import faults, model, render_fabric
from .model import Node, installed_driver, profile_of
from .profiles import KERNEL_MODULES
from .store import transaction
from .tooling import Result, read

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

# Faults whose evidence is state of the running boot: a reboot makes them go away.
REBOOT_CLEARS = ("peermem-missing", "legacy-peermem", "gpu-xid-79", "nvswitch-sxid-fatal", "ib-link-flap",
                 "fm-down", "fm-restarts", "persistence-off", "imex-down")


def imex_start(node: Node) -> bool:
    """Start nvidia-imex; like FM it refuses a driver of another build."""
    svc = node["services"].get("nvidia-imex")
    version = model.installed_imex(node)
    if svc is None or version is None:
        return False
    model.journal(node, "imex", "systemd[1]", "Starting nvidia-imex.service - NVIDIA IMEX service...")
    if version != node["driver"]["loaded"]:
        model.journal(node, "imex", "nvidia-imex[2211]",
                      f"IMEX version {version} is not compatible with the loaded NVIDIA driver {node['driver']['loaded']}")
        model.journal(node, "imex", "systemd[1]", "nvidia-imex.service: Main process exited, code=exited, status=1/FAILURE")
        svc.update(active="failed", sub="failed", result="exit-code", exit_status=1, since=node["clock"])
        return False
    model.journal(node, "imex", "systemd[1]", "Started nvidia-imex.service - NVIDIA IMEX service.")
    svc.update(active="active", sub="running", result="success", exit_status=0, since=node["clock"])
    return True


def service_start(node: Node, name: str) -> bool:
    """Start a unit; True if it is active afterwards."""
    svc = node["services"][name]
    if svc["active"] == "active":
        return True
    model.advance(node, 2)
    if name == "nvidia-fabricmanager":
        return model.fm_start(node)
    if name == "nvidia-imex":
        return imex_start(node)
    svc.update(active="active", sub="running", result="success", exit_status=0, since=node["clock"])
    if name == "nvidia-persistenced":
        for gpu in node["gpus"]:
            gpu["persistence_mode"] = "Enabled"
    return True


def service_stop(node: Node, name: str) -> None:
    """Stop a unit."""
    model.advance(node, 2)
    if name == "nvidia-fabricmanager":
        model.fm_stop(node)
        return
    svc = node["services"][name]
    svc.update(active="inactive", sub="dead", since=node["clock"])
    if name == "nvidia-persistenced":
        for gpu in node["gpus"]:
            gpu["persistence_mode"] = "Disabled"


def _job_failed(name: str) -> str:
    return (f"Job for {name}.service failed because the control process exited with error code.\n"
            f"See \"systemctl status {name}.service\" and \"journalctl -xeu {name}.service\" for details.\n")


#: Options the real tools take (systemd 252); any other is refused as getopt_long refuses it, exit 1. Values: the
#: options that take one (the next argument unless given as --opt=VALUE or glued to a short option).
_SYSTEMCTL_OPTS = ({"-a", "--all", "-l", "--full", "-q", "--quiet", "--no-pager", "--no-block", "--system", "--user",
                    "--now", "--value", "--no-legend", "--plain", "--failed", "-r", "--recursive", "-f", "--force",
                    "--show-types", "--wait", "--no-ask-password", "--runtime", "--global", "-i",
                    "--ignore-inhibitors", "--no-reload"},
                   {"-p", "--property", "-t", "--type", "--state", "-n", "--lines", "-o", "--output", "--job-mode",
                    "-H", "--host", "-M", "--machine", "--root", "-s", "--signal", "--kill-whom", "-P"})
_JOURNALCTL_OPTS = ({"-k", "--dmesg", "-b", "--boot", "-e", "--pager-end", "-x", "--catalog", "-f", "--follow",
                     "--no-pager", "-r", "--reverse", "-q", "--quiet", "--no-hostname", "-a", "--all", "--utc",
                     "--system", "--user", "--list-boots", "-m", "--merge", "--no-full", "-l", "--full", "-n",
                     "--lines"},
                    {"-u", "--unit", "-o", "--output", "-p", "--priority", "-S", "--since", "-U", "--until", "-t",
                     "--identifier", "-g", "--grep", "-D", "--directory", "--user-unit"})


def _bad_option(tool: str, args: list[str], known: tuple[set[str], set[str]]) -> Result | None:
    """The real refusal of the first option `tool` does not have, or None."""
    flags, valued = known
    it = iter(args)
    for a in it:
        if a == "--":
            return None
        if a.startswith("--"):
            name = a.split("=", 1)[0]
            if name not in flags | valued:
                return "", f"{tool}: unrecognized option '{name}'\n", 1
            if name in valued and "=" not in a:
                next(it, None)
        elif a.startswith("-") and len(a) > 1 and not a[1:].isdigit():  # `-b -1`: a boot offset, not options
            for i, ch in enumerate(a[1:], 1):
                if f"-{ch}" in valued:
                    if i == len(a) - 1:
                        next(it, None)
                    break
                if f"-{ch}" not in flags:
                    return "", f"{tool}: invalid option -- '{ch}'\n", 1
    return None


def systemctl(node_dir: Path, args: list[str]) -> Result:
    """systemctl start/stop/restart/enable/disable/is-active/is-enabled/is-failed/show/status/daemon-reload/reboot."""
    refused = _bad_option("systemctl", args, _SYSTEMCTL_OPTS)
    if refused:
        return refused
    props: list[str] = []
    now = value_only = False
    words: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-p", "--property"):
            props += next(it, "").split(",")
        elif a.startswith("--property="):
            props += a.split("=", 1)[1].split(",")
        elif a == "--now":
            now = True
        elif a == "--value":
            value_only = True
        elif a.startswith("-"):
            continue  # --no-block, -q, --no-pager, --system, -l ...: no effect on the lab
        else:
            words.append(a)
    if not words:
        return "", "systemctl: a command is required\n", 1
    verb, units = words[0], [render_fabric.unit_name(u) for u in words[1:]]
    if verb in ("daemon-reload", "daemon-reexec"):
        return "", "", 0
    if verb in ("reboot", "poweroff", "halt"):
        return reboot(node_dir, [])
    if verb in ("show", "status", "is-active", "is-enabled", "is-failed", "cat"):
        node = faults.view(read(node_dir))
        return _systemctl_query(node, verb, units, props, value_only)
    if verb not in ("start", "stop", "restart", "try-restart", "reload-or-restart", "reload", "enable", "disable",
                    "reset-failed", "mask", "unmask"):
        return "", f"Unknown command verb {verb}.\n", 1
    if not units and verb != "reset-failed":
        return "", "Too few arguments.\n", 1
    out, err, rc = "", "", 0
    with transaction(node_dir) as node:
        for name in units:
            if not render_fabric.unit_exists(node, name):
                label = {"start": "start", "restart": "restart", "stop": "stop", "enable": "enable",
                         "disable": "disable"}.get(verb, verb)
                if verb in ("enable", "disable"):
                    err += f"Failed to {label} unit: Unit file {name}.service does not exist.\n"
                else:
                    err += f"Failed to {label} {name}.service: Unit {name}.service not found.\n"
                rc = 5 if verb not in ("enable", "disable") else 1
                continue
            svc = node["services"][name]
            if verb in ("enable", "disable", "mask", "unmask"):
                if verb == "enable" and svc["enabled"] != "enabled":
                    svc["enabled"] = "enabled"
                    err += (f"Created symlink /etc/systemd/system/multi-user.target.wants/{name}.service "
                            f"\u2192 /lib/systemd/system/{name}.service.\n")
                elif verb == "disable" and svc["enabled"] != "disabled":
                    svc["enabled"] = "disabled"
                    err += f"Removed \"/etc/systemd/system/multi-user.target.wants/{name}.service\".\n"
                if now and verb == "enable" and not service_start(node, name):
                    err += _job_failed(name)
                    rc = 1
                if now and verb == "disable":
                    service_stop(node, name)
                continue
            if verb == "reset-failed":
                if svc["active"] == "failed":
                    svc.update(active="inactive", sub="dead")
                continue
            if verb == "stop":
                service_stop(node, name)
                continue
            if verb in ("restart", "reload-or-restart") or (verb == "try-restart" and svc["active"] == "active"):
                service_stop(node, name)
            elif verb in ("try-restart", "reload") and svc["active"] != "active":
                if verb == "reload":
                    err += f"Failed to reload {name}.service: Unit {name}.service is not active.\n"
                    rc = 1
                continue
            if not service_start(node, name):
                err += _job_failed(name)
                rc = 1
    return out, err, rc


def _systemctl_query(node: Node, verb: str, units: list[str], props: list[str], value_only: bool) -> Result:
    out, rc = [], 0
    for name in units:
        exists = render_fabric.unit_exists(node, name)
        svc = node["services"].get(name) if exists else None
        if verb == "show":
            text = render_fabric.render_systemctl_show(node, name, tuple(props) if props else None)
            if value_only:
                text = "".join(line.split("=", 1)[1] + "\n" for line in text.splitlines())
            out.append(text)
        elif verb == "is-active":
            text, code = render_fabric.is_active(node, name)
            out.append(text)
            rc = rc or code
        elif verb == "is-failed":
            state = svc["active"] if svc else "inactive"
            out.append(state + "\n")
            rc = rc or (0 if state == "failed" else 1)
        elif verb == "is-enabled":
            if svc is None:
                return "".join(out), f"Failed to get unit file state for {name}.service: No such file or directory\n", 1
            out.append(svc["enabled"] + "\n")
            rc = rc or (0 if svc["enabled"] == "enabled" else 1)
        elif verb == "status":
            if svc is None:
                return "".join(out), f"Unit {name}.service could not be found.\n", 4
            out.append(_status_text(node, name, svc))
            rc = rc or (0 if svc["active"] == "active" else 3)
        else:  # cat
            if svc is None:
                return "", f"No files found for {name}.service.\n", 1
            out.append(f"# /lib/systemd/system/{name}.service\n[Unit]\nDescription="
                       f"{render_fabric.UNIT_DESCRIPTIONS.get(name, name)}\n\n[Service]\n"
                       f"ExecStart={render_fabric.UNIT_EXEC.get(name, name)}\n\n[Install]\nWantedBy=multi-user.target\n")
    return "".join(out), "", rc


def _status_text(node: Node, name: str, svc: dict[str, Any]) -> str:
    desc = render_fabric.UNIT_DESCRIPTIONS.get(name, name)
    since = time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(svc["since"] or node["boot_time"]))
    if svc["active"] == "active":
        active = f"active (running) since {since}"
    elif svc["active"] == "failed":
        active = f"failed (Result: {svc['result']}) since {since}"
    else:
        active = f"inactive (dead) since {since}"
    lines = [f"\u25cf {name}.service - {desc}",
             f"     Loaded: loaded (/lib/systemd/system/{name}.service; {svc['enabled']}; vendor preset: enabled)",
             f"     Active: {active}"]
    if svc["active"] == "active":
        lines.append(f"   Main PID: {1000 + (svc['since'] or node['boot_time']) % 30000} ({name.split('-')[-1][:15]})")
    unit_journal = {"nvidia-fabricmanager": "fm", "nvidia-imex": "imex"}.get(name)
    if unit_journal:
        lines.append("")
        lines += render_fabric.render_journal(node, unit_journal).splitlines()[-10:]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# reboot
# ---------------------------------------------------------------------------------------------

def do_reboot(node: Node) -> None:
    """What a reboot does: pending driver/firmware become active, BIOS ACS settings return, services restart."""
    p = profile_of(node)
    model.advance(node, 90)
    node["boot_time"] = node["clock"]
    node["boot_count"] += 1
    for name in [n for n in node["faults"] if n in REBOOT_CLEARS]:
        del node["faults"][name]
    inst = installed_driver(node)
    if inst is not None:
        node["driver"]["loaded"] = inst
    for hca in node["hcas"]:
        if hca["fw_pending"]:
            hca["fw"], hca["fw_pending"] = hca["fw_pending"], None
        if hca.get("psid_pending"):
            hca["psid"], hca["psid_pending"] = hca["psid_pending"], None
    for sw in node["nvswitches"]:
        if sw["firmware_pending"]:
            sw["firmware"], sw["firmware_pending"] = sw["firmware_pending"], None
    for gpu in node["gpus"]:
        if gpu["vbios_pending"]:
            gpu["vbios"], gpu["vbios_pending"] = gpu["vbios_pending"], None
        if gpu["fabric"]["state"] is not None:
            gpu["fabric"]["state"], gpu["fabric"]["status"] = "Not Started", "N/A"
    for dev in node["pcie"]:
        if dev["acs_boot"] is not None:
            dev["acs"] = dict(dev["acs_boot"])
    modules = [m for m, _ in KERNEL_MODULES]
    if inst is None:
        modules = [m for m in modules if not m.startswith("nvidia")]
    node["modules"] = modules
    for svc in node["services"].values():
        svc.update(active="inactive", sub="dead", restarts=0, result="success", exit_status=0)
    model.kernel_boot_lines(node)
    model.advance(node, 30)
    for name in ("nvidia-persistenced", "nvidia-dcgm", "slurmd", "nvidia-imex", "nvidia-fabricmanager"):
        svc = node["services"].get(name)
        if svc is not None and svc["enabled"] == "enabled" and render_fabric.unit_exists(node, name):
            service_start(node, name)
    if "nvidia-persistenced" in node["services"] and node["services"]["nvidia-persistenced"]["active"] != "active":
        for gpu in node["gpus"]:
            gpu["persistence_mode"] = "Disabled"
    if not p["fm"]["present"]:
        # GB200: the NVLink domain is managed by NMX on the switch trays; trays register on their own.
        for gpu in node["gpus"]:
            if gpu["fabric"]["state"] is not None:
                gpu["fabric"]["state"], gpu["fabric"]["status"] = "Completed", "Success"


def reboot(node_dir: Path, args: list[str]) -> Result:
    """reboot / shutdown -r / systemctl reboot: the emulated node is back at once (a new boot id)."""
    with transaction(node_dir) as node:
        do_reboot(node)
    return "", "", 0


def shutdown(node_dir: Path, args: list[str]) -> Result:
    """shutdown [-r|-h|-P] [TIME] [MESSAGE]: every form power-cycles the lab node (it never stays off)."""
    if "-c" in args:
        return "", "", 0
    return reboot(node_dir, args)


def journalctl(node_dir: Path, args: list[str]) -> Result:
    """journalctl -u UNIT | -k, with -b, -n N, -e, -x, --no-pager (the forms runbooks use)."""
    refused = _bad_option("journalctl", args, _JOURNALCTL_OPTS)
    if refused:
        return refused
    units = {"nvidia-fabricmanager": "fm", "nvidia-imex": "imex"}
    unit, lines = None, None
    it = iter(args)
    for a in it:
        if a in ("-u", "--unit"):
            unit = render_fabric.unit_name(next(it, ""))
        elif a.startswith("--unit="):
            unit = render_fabric.unit_name(a.split("=", 1)[1])
        elif a in ("-k", "--dmesg"):
            unit = "kernel"
        elif a in ("-n", "--lines"):
            lines = int(next(it, "10"))
        elif a.startswith("-xeu") or a.startswith("-eu"):
            unit = render_fabric.unit_name(next(it, ""))
    node = faults.view(read(node_dir))
    key = "kernel" if unit == "kernel" else units.get(unit or "")
    text = render_fabric.render_journal(node, key) if key else "-- No entries --\n"
    if lines is not None and text != "-- No entries --\n":
        text = "\n".join(text.splitlines()[-lines:]) + "\n"
    return text, "", 0
