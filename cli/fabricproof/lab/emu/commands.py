"""Emulated tools that change a node (apt-get, systemctl, reboot, modprobe, firmware tools, setpci, scontrol)
or whose output depends on their arguments (dpkg-query, nvidia-smi --query-gpu, flint q, ...).

Every handler takes the node directory and argv (without the tool name) and returns (stdout, stderr, rc),
behaving like the real tool closely enough that unmodified playbooks drive lab nodes.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import faults, model, render_fabric, render_gpu, render_ib, render_links, render_sys
from .model import Node, installed_driver, profile_of
from .outputs import not_found
from .profiles import CUDA_BY_BRANCH, DRIVER_RELEASES, FW_PACKAGES, KERNEL_MODULES, deb_version
from .store import StateError, load, transaction

Result = tuple[str, str, int]
Handler = Callable[[Path, list[str]], Result]

# Faults whose evidence is state of the running boot: a reboot makes them go away.
REBOOT_CLEARS = ("peermem-missing", "legacy-peermem", "gpu-xid-79", "nvswitch-sxid-fatal", "ib-link-flap",
                 "fm-down", "fm-restarts", "persistence-off", "imex-down")


def _read(node_dir: Path) -> Node:
    return load(node_dir)


# ---------------------------------------------------------------------------------------------
# services
# ---------------------------------------------------------------------------------------------

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


def systemctl(node_dir: Path, args: list[str]) -> Result:
    """systemctl start/stop/restart/enable/disable/is-active/is-enabled/is-failed/show/status/daemon-reload/reboot."""
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
        node = faults.view(_read(node_dir))
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


# ---------------------------------------------------------------------------------------------
# packages
# ---------------------------------------------------------------------------------------------

_STEMS = ("nvidia-driver-", "libnvidia-nscq-", "nvidia-fabricmanager-", "cuda-drivers-fabricmanager-", "nvidia-imex-")


def _pkg_branch(name: str) -> tuple[str, str] | None:
    for stem in _STEMS:
        if name.startswith(stem) and name[len(stem):] in DRIVER_RELEASES:
            return stem, name[len(stem):]
    return None


def available_versions(name: str) -> list[str]:
    """Debian versions the emulated repository has for a package, oldest first."""
    pb = _pkg_branch(name)
    if pb is None:
        return []
    return [deb_version(name, v) for v in DRIVER_RELEASES[pb[1]]]


def _vkey(deb: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", model.upstream_version(deb)))


_HEADER = "Reading package lists...\nBuilding dependency tree...\nReading state information...\n"


def apt_get(node_dir: Path, args: list[str], tool: str = "apt-get") -> Result:
    """apt-get/apt install|remove|purge|update|upgrade for the NVIDIA driver, FM, NSCQ and IMEX packages."""
    yes = allow_held = allow_down = False
    words: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-y", "--yes", "--assume-yes", "-qy", "-yq"):
            yes = True
        elif a == "--allow-change-held-packages":
            allow_held = True
        elif a == "--allow-downgrades":
            allow_down = True
        elif a in ("-o", "-c", "-t", "--target-release"):
            next(it, None)
        elif a.startswith("-"):
            continue
        else:
            words.append(a)
    warn = "\nWARNING: apt does not have a stable CLI interface. Use with caution in scripts.\n\n" if tool == "apt" else ""
    if not words:
        return "", warn + "E: Invalid operation\n" if tool == "apt" else "E: No command given\n", 100
    op, specs = words[0], words[1:]
    if op == "update":
        return ("Hit:1 https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64  InRelease\n"
                "Reading package lists...\n"), warn, 0
    if op in ("upgrade", "dist-upgrade", "full-upgrade", "autoremove", "clean", "autoclean", "check"):
        return _HEADER + "Calculating upgrade...\n0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded.\n", warn, 0
    if op not in ("install", "remove", "purge", "reinstall"):
        return "", warn + f"E: Invalid operation {op}\n", 100
    with transaction(node_dir) as node:
        out, err, rc = _apt_transaction(node, op, specs, yes, allow_held, allow_down)
        if rc != 0:
            raise _Abort(out, warn + err, rc)
    return out, warn + err, rc


class _Abort(Exception):
    """Leaves a transaction without saving (apt changes nothing when it refuses)."""

    def __init__(self, out: str, err: str, rc: int) -> None:
        super().__init__(err)
        self.result = (out, err, rc)


def _apt_transaction(node: Node, op: str, specs: list[str], yes: bool, allow_held: bool,
                     allow_down: bool) -> Result:
    pkgs = node["packages"]
    install: dict[str, str] = {}
    remove: list[str] = []
    notes: list[str] = []
    for spec in specs:
        name, _, ver = spec.partition("=")
        if op in ("remove", "purge"):
            if name in pkgs:
                remove.append(name)
            else:
                notes.append(f"Package '{name}' is not installed, so not removed")
            continue
        versions = available_versions(name)
        if not versions:
            return _HEADER, f"E: Unable to locate package {name}\n", 100
        if ver and ver not in versions:
            return _HEADER, f"E: Version '{ver}' for '{name}' was not found\n", 100
        target = ver or versions[-1]
        install[name] = target
        # cuda-drivers-fabricmanager-<br> = X depends on nvidia-driver-<br> = X and nvidia-fabricmanager-<br> = X.
        if name.startswith("cuda-drivers-fabricmanager-"):
            br = name.rsplit("-", 1)[1]
            up = model.upstream_version(target)
            install.setdefault(f"nvidia-driver-{br}", deb_version(f"nvidia-driver-{br}", up))
            install.setdefault(f"nvidia-fabricmanager-{br}", deb_version(f"nvidia-fabricmanager-{br}", up))
    if "upgrade-breaks-fm" in node["faults"] and any(
            n.startswith("nvidia-driver-") and pkgs.get(n) != v for n, v in install.items()):
        # The armed fault fires once: the FM packages silently stay where they are.
        for n in [n for n in install if "fabricmanager" in n]:
            del install[n]
        del node["faults"]["upgrade-breaks-fm"]
    # Another branch of a package family conflicts with (replaces) the installed one.
    for name in list(install):
        stem = _pkg_branch(name)[0]  # type: ignore[index]
        for other in pkgs:
            if other != name and other.startswith(stem) and _pkg_branch(other) and other not in remove:
                remove.append(other)
    changes = {n: v for n, v in install.items() if pkgs.get(n) != v or op == "reinstall"}
    for n, v in install.items():
        if n not in changes:
            notes.append(f"{n} is already the newest version ({v}).")
    held = sorted({n for n in list(changes) + remove if n in node["holds"]})
    if held and not allow_held:
        body = "The following held packages will be changed:\n" + "".join(f"  {n}\n" for n in held)
        return _HEADER + body, "E: Held packages were changed and -y was used without --allow-change-held-packages.\n", 100
    downgrades = sorted(n for n, v in changes.items() if n in pkgs and _vkey(v) < _vkey(pkgs[n]))
    if downgrades and not allow_down:
        body = "The following packages will be DOWNGRADED:\n" + "".join(f"  {n}\n" for n in downgrades)
        return _HEADER + body, "E: Packages were downgraded and -y was used without --allow-downgrades.\n", 100
    upgraded = sorted(n for n in changes if n in pkgs and n not in downgrades)
    new = sorted(n for n in changes if n not in pkgs)
    lines = [_HEADER.rstrip("\n")] + notes
    if remove:
        lines += ["The following packages will be REMOVED:", "  " + " ".join(sorted(remove))]
    if new:
        lines += ["The following NEW packages will be installed:", "  " + " ".join(new)]
    if downgrades:
        lines += ["The following packages will be DOWNGRADED:", "  " + " ".join(downgrades)]
    if upgraded:
        lines += ["The following packages will be upgraded:", "  " + " ".join(upgraded)]
    down = f"{len(downgrades)} downgraded, " if downgrades else ""
    lines.append(f"{len(upgraded)} upgraded, {len(new)} newly installed, {down}{len(remove)} to remove and 0 not upgraded.")
    if (changes or remove) and not yes:
        return "\n".join(lines) + "\nDo you want to continue? [Y/n] Abort.\n", "", 1
    for n in sorted(remove):
        lines.append(f"Removing {n} ({pkgs[n]}) ...")
        del pkgs[n]
        if n in node["holds"]:
            node["holds"].remove(n)
    for n, v in sorted(changes.items()):
        lines.append(f"Unpacking {n} ({v}) ...")
    for n, v in sorted(changes.items()):
        pkgs[n] = v
        lines.append(f"Setting up {n} ({v}) ...")
    if any(n.startswith("nvidia-fabricmanager-") for n in list(changes) + remove):
        # The package scripts stop the old daemon; the new unit is not started until a restart or reboot.
        if "nvidia-fabricmanager" in node["services"]:
            model.fm_stop(node)
    model.advance(node, 45)
    return "\n".join(lines) + "\n", "", 0


def apt_get_safe(node_dir: Path, args: list[str]) -> Result:
    try:
        return apt_get(node_dir, args)
    except _Abort as abort:
        return abort.result


def apt(node_dir: Path, args: list[str]) -> Result:
    try:
        return apt_get(node_dir, args, tool="apt")
    except _Abort as abort:
        return abort.result


def apt_mark(node_dir: Path, args: list[str]) -> Result:
    """apt-mark hold|unhold|showhold|auto|manual."""
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return "", "E: No command given\n", 100
    op, names = words[0], words[1:]
    if op == "showhold":
        return render_sys.render_showhold(_read(node_dir)), "", 0
    if op in ("auto", "manual", "showauto", "showmanual"):
        return "", "", 0
    if op not in ("hold", "unhold"):
        return "", f"E: Invalid operation {op}\n", 100
    out = []
    with transaction(node_dir) as node:
        for n in names:
            if n not in node["packages"] and not available_versions(n):
                raise _Abort("", f"E: Unable to locate package {n}\n", 100)
            if op == "hold":
                out.append(f"{n} was already set on hold." if n in node["holds"] else f"{n} set on hold.")
                if n not in node["holds"]:
                    node["holds"].append(n)
            else:
                out.append(f"Canceled hold on {n}." if n in node["holds"] else f"{n} was already not on hold.")
                if n in node["holds"]:
                    node["holds"].remove(n)
    return "".join(line + "\n" for line in out), "", 0


def apt_mark_safe(node_dir: Path, args: list[str]) -> Result:
    try:
        return apt_mark(node_dir, args)
    except _Abort as abort:
        return abort.result


def dpkg_query(node_dir: Path, args: list[str]) -> Result:
    """dpkg-query -W [-f=FMT|--showformat=FMT] [names] and dpkg-query -l [names]."""
    node = _read(node_dir)
    fmt: str | None = None
    names: list[str] = []
    mode = None
    it = iter(args)
    for a in it:
        if a in ("-W", "--show"):
            mode = "show"
        elif a in ("-l", "--list"):
            mode = "list"
        elif a in ("-s", "--status"):
            mode = "status"
        elif a in ("-f", "--showformat"):
            fmt = next(it, "")
        elif a.startswith("-f=") or a.startswith("--showformat="):
            fmt = a.split("=", 1)[1]
        elif a.startswith("-f") and len(a) > 2:
            fmt = a[2:]
        elif not a.startswith("-"):
            names.append(a)
    if mode == "show":
        return render_sys.render_dpkg_query(node, names or None, fmt)
    if mode == "list":
        return _dpkg_list(node, names)
    if mode == "status":
        return _dpkg_status(node, names)
    return "", "dpkg-query: need an action option\n\nType dpkg-query --help for help.\n", 2


def _dpkg_list(node: Node, names: list[str]) -> Result:
    rows = ["Desired=Unknown/Install/Remove/Purge/Hold",
            "| Status=Not/Inst/Conf-files/Unpacked/halF-conf/Half-inst/trig-aWait/Trig-pend",
            "|/ Err?=(none)/Reinst-required (Status,Err: uppercase=bad)",
            "||/ Name                             Version              Architecture Description",
            "+++-================================-====================-============-================================"]
    arch = "arm64" if profile_of(node)["arch"] == "aarch64" else "amd64"
    stdout, stderr, rc = render_sys.render_dpkg_query(node, names or None, "${Package}\t${Version}\n")
    for line in stdout.splitlines():
        n, v = line.split("\t")
        flag = "hi" if n in node["holds"] else "ii"
        rows.append(f"{flag}  {n:<32} {v:<20} {arch:<12} NVIDIA package {n}")
    return "\n".join(rows) + "\n", stderr, rc


def _dpkg_status(node: Node, names: list[str]) -> Result:
    out = []
    for n in names:
        if n not in node["packages"]:
            return "\n".join(out), f"dpkg-query: package '{n}' is not installed and no information is available\n", 1
        status = "hold ok installed" if n in node["holds"] else "install ok installed"
        out.append(f"Package: {n}\nStatus: {status}\nVersion: {node['packages'][n]}\n")
    return "\n".join(out), "", 0


def dpkg(node_dir: Path, args: list[str]) -> Result:
    """dpkg -l / -s / --get-selections (query forms only)."""
    if args and args[0] in ("-l", "--list", "-s", "--status"):
        return dpkg_query(node_dir, args)
    if args and args[0] == "--get-selections":
        node = _read(node_dir)
        return "".join(f"{n:<48}{'hold' if n in node['holds'] else 'install'}\n" for n in sorted(node["packages"])), "", 0
    return "", "dpkg: error: this lab node only answers dpkg -l, -s and --get-selections\n", 2


# ---------------------------------------------------------------------------------------------
# kernel modules
# ---------------------------------------------------------------------------------------------

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
                raise _Abort("", f"modprobe: FATAL: Module {name} not found in directory /lib/modules/{rel}\n", 1)
            if remove:
                if name not in node["modules"]:
                    continue
                if render_sys.users_of(node["modules"], name):
                    raise _Abort("", f"modprobe: FATAL: Module {name} is in use.\n", 1)
                node["modules"].remove(name)
            else:
                _modprobe_load(node, name)
    return "", "", 0


def modprobe_safe(node_dir: Path, args: list[str]) -> Result:
    try:
        return modprobe(node_dir, args)
    except _Abort as abort:
        return abort.result


def rmmod(node_dir: Path, args: list[str]) -> Result:
    """rmmod MODULE."""
    names = [a.replace("-", "_") for a in args if not a.startswith("-")]
    if not names:
        return "", "rmmod: ERROR: missing module name.\n", 1
    try:
        with transaction(node_dir) as node:
            for name in names:
                if name not in node["modules"]:
                    raise _Abort("", f"rmmod: ERROR: Module {name} is not currently loaded\n", 1)
                users = render_sys.users_of(node["modules"], name)
                if users:
                    raise _Abort("", f"rmmod: ERROR: Module {name} is in use by: {' '.join(users)}\n", 1)
                node["modules"].remove(name)
    except _Abort as abort:
        return abort.result
    return "", "", 0


# ---------------------------------------------------------------------------------------------
# ConnectX firmware
# ---------------------------------------------------------------------------------------------

def find_hca(node: Node, dev: str) -> dict[str, Any] | None:
    """A device by PCI address (with or without domain), mlx5_N name or /dev/mst/mtXXXX_pciconfN path."""
    for hca in node["hcas"]:
        if dev in (hca["bdf"], hca["bdf"][5:], hca["name"]):
            return hca
    m = re.fullmatch(r"/dev/mst/mt(\d+)_pciconf(\d+)", dev)
    if m:
        same = [h for h in node["hcas"] if h["ca_type"] == f"MT{m.group(1)}"]
        k = int(m.group(2))
        return same[k] if k < len(same) else None
    return None


def parse_image(path: str) -> tuple[str | None, str | None]:
    """(firmware version, PSID) from a firmware image name such as
    fw-ConnectX7-rel-28_43_1014-MCX75310AAS-NEA_Ax-UEFI-14.36.16-FlexBoot-3.7.500.signed.bin.

    A file holding JSON {"fw": "28.43.1014", "psid": "MT_0000000838"} is read instead (lab images).
    """
    p = Path(path)
    try:
        if p.is_file() and p.stat().st_size < 4096:
            doc = json.loads(p.read_text())
            return doc.get("fw"), doc.get("psid")
    except (OSError, ValueError):
        pass
    name = p.name
    m = re.search(r"(?<![\d.])(\d{2})[._](\d{2})[._](\d{4})(?![\d])", name)
    psid = re.search(r"\b((?:MT|[A-Z]{3})_?\d{10})\b", name)
    return (f"{m.group(1)}.{m.group(2)}.{m.group(3)}" if m else None), (psid.group(1) if psid else None)


def _burn(hca: dict[str, Any], fw: str, psid: str | None, allow_psid: bool) -> str | None:
    """Write an image to flash (pending until reset/reboot); an error text when refused."""
    if fw.split(".")[0] != hca["fw"].split(".")[0]:
        return f"-E- The image is not for this device family (device FW {hca['fw']}, image FW {fw})."
    if psid and psid != hca["psid"] and not allow_psid:
        return (f"-E- PSID mismatch. The PSID on flash ({hca['psid']}) differs from the PSID in the given image "
                f"({psid}).")
    hca["fw_pending"] = fw if fw != hca["fw"] else None
    if psid and psid != hca["psid"]:
        hca["psid_pending"] = psid
    return None


def mlxfwmanager(node_dir: Path, args: list[str]) -> Result:
    """mlxfwmanager --query [-d DEV] | -u -i IMAGE [-d DEV] [-y] [-f] [--allow_psid_change]."""
    dev = image = None
    update = query = allow_psid = False
    it = iter(args)
    for a in it:
        if a in ("-d", "--dev"):
            dev = next(it, None)
        elif a in ("-i", "--image"):
            image = next(it, None)
        elif a in ("-u", "--update"):
            update = True
        elif a == "--query":
            query = True
        elif a == "--allow_psid_change":
            allow_psid = True
    if query and not update:
        node = faults.view(_read(node_dir))
        if dev:
            hca = find_hca(node, dev)
            if hca is None:
                return "", f"-E- Device {dev} not found\n", 1
            node["hcas"] = [hca]
        return render_ib.render_mlxfwmanager(node), "", 0
    if not update or not image:
        return "", "-E- Missing image file (use -i <image> with -u, or --query)\n", 1
    fw, psid = parse_image(image)
    if fw is None:
        return "", f"-E- Failed to open image {image}: not a firmware image\n", 1
    out = ["Querying Mellanox devices firmware ...", ""]
    errors = []
    with transaction(node_dir) as node:
        targets = [find_hca(node, dev)] if dev else list(node["hcas"])
        if targets == [None]:
            raise _Abort("", f"-E- Device {dev} not found\n", 1)
        matched = [h for h in targets if h and fw.split(".")[0] == h["fw"].split(".")[0]]
        for n, hca in enumerate(matched, start=1):
            out += [f"Device #{n}:", "----------", "", f"  Device Type:      {hca['device_type']}",
                    f"  Part Number:      {hca['part_number']}", f"  PSID:             {hca['psid']}",
                    f"  PCI Device Name:  {hca['bdf']}", "  Versions:         Current        Available     ",
                    f"     FW             {hca['fw_pending'] or hca['fw']:<15}{fw:<14}", "",
                    "  Status:           " + ("Up to date" if (hca["fw_pending"] or hca["fw"]) == fw
                                             else "Update required"), ""]
        todo = [h for h in matched if (h["fw_pending"] or h["fw"]) != fw]
        out += ["---------", f"Found {len(todo)} device(s) requiring firmware update...", ""]
        for n, hca in enumerate(todo, start=1):
            err = _burn(hca, fw, psid, allow_psid)
            if err:
                errors.append(err)
                out.append(f"Device #{n}: Updating FW ...     \nFailed")
                continue
            out += [f"Device #{n}: Updating FW ...     ", "FSMST_INITIALIZE -   OK          ",
                    "Writing Boot image component -   OK          ", "Done"]
        if not matched:
            out.append("No devices matching the image were found.")
        if errors:
            raise _Abort("\n".join(out) + "\n", "".join(e + "\n" for e in errors), 1)
        if todo:
            out += ["", "Restart needed for updates to take effect."]
    return "\n".join(out) + "\n", "", 0


def mlxfwmanager_safe(node_dir: Path, args: list[str]) -> Result:
    try:
        return mlxfwmanager(node_dir, args)
    except _Abort as abort:
        return abort.result


def flint(node_dir: Path, args: list[str]) -> Result:
    """flint|mstflint -d DEV q | -d DEV -i IMAGE [-y] [--allow_psid_change] burn|b."""
    dev = image = None
    allow_psid = False
    words = []
    it = iter(args)
    for a in it:
        if a in ("-d", "--device"):
            dev = next(it, None)
        elif a in ("-i", "--image"):
            image = next(it, None)
        elif a == "--allow_psid_change":
            allow_psid = True
        elif not a.startswith("-"):
            words.append(a)
    if dev is None:
        return "", "-E- Missing device argument (-d <device>)\n", 1
    cmd = words[0] if words else ""
    if cmd in ("q", "query"):
        node = faults.view(_read(node_dir))
        hca = find_hca(node, dev)
        if hca is None:
            return "", f"-E- Cannot open Device: {dev}. No such file or directory. MFE_CR_ERROR\n", 1
        return render_ib.render_flint_q(node, hca), "", 0
    if cmd not in ("b", "burn"):
        return "", f"-E- Invalid command \"{cmd}\"\n", 1
    if image is None:
        return "", "-E- Burn command requires an image (-i <image>)\n", 1
    fw, psid = parse_image(image)
    if fw is None:
        return "", f"-E- Cannot open {image}: not a firmware image\n", 1
    try:
        with transaction(node_dir) as node:
            hca = find_hca(node, dev)
            if hca is None:
                raise _Abort("", f"-E- Cannot open Device: {dev}. No such file or directory. MFE_CR_ERROR\n", 1)
            current = hca["fw_pending"] or hca["fw"]
            err = _burn(hca, fw, psid, allow_psid)
            if err:
                raise _Abort("", err + "\n", 1)
    except _Abort as abort:
        return abort.result
    return (f"\n    Current FW version on flash:  {current}\n    New FW version:               {fw}\n\n"
            "FSMST_INITIALIZE -   OK\nWriting Boot image component -   OK\n"
            "-I- To load new FW run mlxfwreset or reboot machine.\n"), "", 0


def mlxfwreset(node_dir: Path, args: list[str]) -> Result:
    """mlxfwreset -d DEV [-l LEVEL] [-y] reset|r | query|q: activates a burned image without a reboot."""
    dev = None
    words = []
    it = iter(args)
    for a in it:
        if a in ("-d", "--device"):
            dev = next(it, None)
        elif a in ("-l", "--level", "-t", "--type"):
            next(it, None)
        elif not a.startswith("-"):
            words.append(a)
    if dev is None:
        return "", "-E- Missing device argument (-d <device>)\n", 1
    cmd = words[0] if words else ""
    if cmd in ("q", "query"):
        return ("Reset-levels:\n0: Driver, PCI link, network link will remain up (\"live-Patch\")  -Supported     (default)\n"
                "3: Driver restart and PCI reset                                  -Supported\n"
                "4: Warm Reboot                                                   -Supported\n"), "", 0
    if cmd not in ("r", "reset"):
        return "", f"-E- Unknown command \"{cmd}\"\n", 1
    try:
        with transaction(node_dir) as node:
            hca = find_hca(node, dev)
            if hca is None:
                raise _Abort("", f"-E- Failed to open device: {dev}\n", 1)
            if hca["fw_pending"]:
                hca["fw"], hca["fw_pending"] = hca["fw_pending"], None
            if hca.get("psid_pending"):
                hca["psid"], hca["psid_pending"] = hca["psid_pending"], None
            model.advance(node, 20)
            model.journal(node, "kernel", "kernel", f"mlx5_core {hca['bdf']}: firmware version: {hca['fw']}")
    except _Abort as abort:
        return abort.result
    return (f"The reset level for device, {dev} is:\n\n3: Driver restart and PCI reset\n"
            "-I- Sending Reset Command To Fw             -Done\n-I- Stopping Driver                         -Done\n"
            "-I- Resetting PCI                           -Done\n-I- Starting Driver                         -Done\n"
            "-I- Restarting MST                          -Done\n-I- FW was loaded successfully.\n"), "", 0


# ---------------------------------------------------------------------------------------------
# HGX firmware (nvfwupd)
# ---------------------------------------------------------------------------------------------

def _fw_package(path: str) -> dict[str, Any] | None:
    p = Path(path)
    try:
        if p.is_file() and p.stat().st_size < 65536:
            return json.loads(p.read_text())
    except (OSError, ValueError):
        pass
    return FW_PACKAGES.get(p.name)


def nvfwupd(node_dir: Path, args: list[str]) -> Result:
    """nvfwupd [-t ip=.. user=.. password=..] [-c CFG] show_version [-p PKG] | update_fw -p PKG [-y]."""
    words: list[str] = []
    pkgs: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-t", "--target", "-o", "--os_target"):
            continue  # the ip=/user=/password= tokens that follow contain '=' and are skipped below
        if a in ("-c", "--config", "-s", "--special"):
            next(it, None)
        elif a in ("-p", "--package"):
            pkgs.append(next(it, ""))
        elif "=" in a or a.startswith("-"):
            continue
        else:
            words.append(a)
    cmd = words[0] if words else ""
    if cmd == "show_version":
        node = faults.view(_read(node_dir))
        text = render_fabric.render_nvfwupd(node)
        if pkgs:
            text = _with_package(node, text, pkgs)
        return text, "", 0
    if cmd != "update_fw":
        return "", f"Error: unknown command '{cmd}'. Run nvfwupd -h for usage.\n", 1
    if not pkgs:
        return "", "Error: update_fw requires a firmware package (-p)\n", 1
    pkg = _fw_package(pkgs[0])
    if pkg is None:
        return "", f"Error: cannot read firmware package {pkgs[0]}\n", 1
    with transaction(node_dir) as node:
        model_name = profile_of(node)["gpu"]["model"]
        for sw in node["nvswitches"]:
            if pkg.get("nvswitch") and pkg["nvswitch"] != sw["firmware"]:
                sw["firmware_pending"] = pkg["nvswitch"]
        gpu_fw = (pkg.get("gpu") or {}).get(model_name)
        for gpu in node["gpus"]:
            if gpu_fw and gpu_fw != gpu["vbios"]:
                gpu["vbios_pending"] = gpu_fw
        model.advance(node, 760)
    return (f"Updating ip address: ip=BMC\nFW package: ['{Path(pkgs[0]).name}']\nOk to proceed with firmware update? "
            "<Y/N>\nY\nFW update started, Task Id: HGX_9\nWait for Firmware Update to Start...\nTaskState: Running\n"
            "PercentComplete: 100\nTaskStatus: OK\nFirmware update successful!\nOverall Time Taken: 0:12:40\n"
            "Refer to the firmware update guide: a chassis power cycle activates the new firmware.\n"), "", 0


def _with_package(node: Node, text: str, pkgs: list[str]) -> str:
    pkg = _fw_package(pkgs[0]) or {}
    model_name = profile_of(node)["gpu"]["model"]
    out = []
    for line in text.splitlines():
        name = line.split(" ", 1)[0]
        pkg_ver = None
        if name.startswith("HGX_FW_NVSwitch_"):
            pkg_ver = pkg.get("nvswitch")
        elif name.startswith("HGX_FW_GPU_"):
            pkg_ver = (pkg.get("gpu") or {}).get(model_name)
        if pkg_ver:
            sys_ver = line[31:62].strip()
            line = f"{name:<31}{sys_ver:<31}{pkg_ver:<31}{'Yes' if sys_ver == pkg_ver else 'No'}"
        elif line.startswith("Packages:"):
            line = f"Packages: ['{Path(pkgs[0]).name.rsplit('.fwpkg', 1)[0].removeprefix('nvfw_')}']"
        out.append(line)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# PCIe ACS (setpci)
# ---------------------------------------------------------------------------------------------

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
    try:
        with transaction(node_dir) as node:
            dev = next((d for d in node["pcie"] if bdf in (d["bdf"], d["bdf"][5:])), None)
            if dev is None:
                raise _Abort("", f"setpci: Warning: No devices selected for \"{bdf}\".\n", 0)
            for op in ops:
                reg, _, value = op.partition("=")
                if not _ACS_REG.match(reg):
                    raise _Abort("", f"setpci: lab node emulates only the ACS Control register, not \"{reg}\"\n", 1)
                if dev["acs"] is None:
                    raise _Abort("", f"setpci: Capability ECAP_ACS not found on {bdf}\n", 1)
                bits = sum(1 << i for i, f in enumerate(_ACS_BITS) if dev["acs"][f])
                if not value:
                    out.append(f"{bits:04x}")
                    continue
                val, _, mask = value.partition(":")
                v, m = int(val, 16), int(mask, 16) if mask else 0xFFFF
                bits = (bits & ~m) | (v & m)
                dev["acs"] = {f: bool(bits >> i & 1) for i, f in enumerate(_ACS_BITS)}
    except _Abort as abort:
        return abort.result
    return "".join(line + "\n" for line in out), "", 0


# ---------------------------------------------------------------------------------------------
# Slurm
# ---------------------------------------------------------------------------------------------

def _lab_node_dir(node_dir: Path, name: str) -> Path | None:
    """Another lab node by hostname (nodes/by-name/<hostname> links to its directory)."""
    if name == _read(node_dir)["hostname"]:
        return node_dir
    link = node_dir.parent / "by-name" / name
    return link.resolve() if link.exists() else None


def scontrol(node_dir: Path, args: list[str]) -> Result:
    """scontrol show node [NAME] | update NodeName=NAME State=DRAIN|RESUME|DOWN|UNDRAIN Reason=TEXT."""
    if not args:
        return "", "scontrol: error: no command given\n", 1
    op = args[0].lower()
    if op == "show":
        what = args[1].lower() if len(args) > 1 else ""
        if what not in ("node", "nodes") and not what.startswith("node="):
            return "", f"scontrol: error: lab node only shows nodes, not \"{what}\"\n", 1
        name = what.split("=", 1)[1] if "=" in what else (args[2] if len(args) > 2 else None)
        target = node_dir if name is None else _lab_node_dir(node_dir, name)
        if target is None:
            return "", f"Node {name} not found\n", 1
        return render_sys.render_scontrol_node(_read(target)), "", 0
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


# ---------------------------------------------------------------------------------------------
# nvidia-smi forms that are not pre-rendered
# ---------------------------------------------------------------------------------------------

_QUERY_VALUES: dict[str, Callable[[Node, dict[str, Any]], str]] = {
    "index": lambda v, g: str(g["index"]),
    "pci.bus_id": lambda v, g: g["bus_id"],
    "gpu_bus_id": lambda v, g: g["bus_id"],
    "name": lambda v, g: profile_of(v)["gpu"]["model"],
    "gpu_name": lambda v, g: profile_of(v)["gpu"]["model"],
    "uuid": lambda v, g: g["uuid"],
    "gpu_uuid": lambda v, g: g["uuid"],
    "serial": lambda v, g: g["serial"],
    "driver_version": lambda v, g: installed_driver(v) or v["driver"]["loaded"],
    "vbios_version": lambda v, g: g["vbios"],
    "persistence_mode": lambda v, g: g["persistence_mode"],
    "ecc.mode.current": lambda v, g: g["ecc_mode"],
    "power.limit": lambda v, g: f"{g['power_limit_w']:.2f} W",
    "clocks_throttle_reasons.active": lambda v, g: f"0x{sum(render_gpu.THROTTLE_BITS[r] for r in g['throttle_reasons']):016X}",
    "clocks_event_reasons.active": lambda v, g: f"0x{sum(render_gpu.THROTTLE_BITS[r] for r in g['throttle_reasons']):016X}",
    "pcie.link.gen.current": lambda v, g: str(g["pcie_gen"]),
    "pcie.link.width.current": lambda v, g: str(g["pcie_width"]),
    "fabric.state": lambda v, g: g["fabric"]["state"] or "[N/A]",
    "fabric.status": lambda v, g: g["fabric"]["status"] or "[N/A]",
    "memory.total": lambda v, g: f"{profile_of(v)['gpu']['memory_mib']} MiB",
    "count": lambda v, g: str(len(v["gpus"])),
    "remapped_rows.pending": lambda v, g: "Yes" if g["remapped_rows"]["pending"] else "No",
    "remapped_rows.failure": lambda v, g: "Yes" if g["remapped_rows"]["failure"] else "No",
}


def nvidia_smi(node_dir: Path, args: list[str]) -> Result:
    """nvidia-smi forms beyond the pre-rendered ones: any --query-gpu, -i N filters, -pm, and the NVML error."""
    node = faults.view(_read(node_dir))
    if model.installed_driver(node) is None:
        out = not_found("nvidia-smi")
        return out.stdout, out.stderr, out.rc
    if "tool-hangs" in node["faults"]:
        raise HangRequested
    if model.nvml_mismatch(node):
        return render_gpu.NVML_MISMATCH, "", 18
    gpus = node["gpus"]
    rest = list(args)
    if "-i" in rest or "--id" in rest:
        flag = "-i" if "-i" in rest else "--id"
        k = rest.index(flag)
        sel = rest[k + 1] if k + 1 < len(rest) else ""
        del rest[k:k + 2]
        chosen = [g for g in gpus if sel in (str(g["index"]), g["uuid"], g["bus_id"])]
        if not chosen:
            return "No devices were found\n", "", 6
        node["gpus"] = chosen
    if rest in (["-pm", "1"], ["-pm", "ENABLED"], ["--persistence-mode=1"]):
        with transaction(node_dir) as stored:
            for gpu in stored["gpus"]:
                if gpu["index"] in {g["index"] for g in node["gpus"]}:
                    gpu["persistence_mode"] = "Enabled"
        return "".join(f"Enabled persistence mode for GPU {g['bus_id']}.\n" for g in node["gpus"]) + "All done.\n", "", 0
    query = next((a for a in rest if a.startswith("--query-gpu=")), None)
    if query:
        fmt = next((a.split("=", 1)[1] for a in rest if a.startswith("--format=")), "")
        if "csv" not in fmt:
            return "--format must be specified with --query-gpu\n", "", 2
        fields = [f.strip() for f in query.split("=", 1)[1].split(",") if f.strip()]
        bad = [f for f in fields if f not in _QUERY_VALUES]
        if bad:
            return f'Field "{bad[0]}" is not a valid field to query.\n\n', "", 2
        rows = [] if "noheader" in fmt else [", ".join(fields if "nounits" in fmt else
                                                        [f + (" [W]" if f == "power.limit" else " [MiB]" if f == "memory.total" else "") for f in fields])]
        for gpu in node["gpus"]:
            vals = [_QUERY_VALUES[f](node, gpu) for f in fields]
            if "nounits" in fmt:
                vals = [v.removesuffix(" W").removesuffix(" MiB") for v in vals]
            rows.append(", ".join(vals))
        return "\n".join(rows) + "\n", "", 0
    simple: dict[tuple[str, ...], Callable[[Node], str]] = {
        ("-L",): render_gpu.render_list, ("-q",): render_gpu.render_q, ("-q", "-x"): render_gpu.render_q_xml,
        ("nvlink", "-s"): render_links.render_nvlink_status, ("nvlink", "--status"): render_links.render_nvlink_status,
        ("nvlink", "-e"): render_links.render_nvlink_errors, ("nvlink", "-c"): render_links.render_nvlink_caps,
        ("topo", "-m"): render_links.render_topo,
    }
    if tuple(rest) in simple:
        return simple[tuple(rest)](node), "", 0
    if not rest:
        return _default_table(node), "", 0
    return "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", "", 2


def _default_table(node: Node) -> str:
    """The plain `nvidia-smi` summary table (R535 layout, no processes)."""
    p = profile_of(node)
    drv = installed_driver(node) or node["driver"]["loaded"]
    cuda = CUDA_BY_BRANCH.get(model.branch_of(drv), "N/A")
    stamp = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(node["clock"]))
    lines = [stamp,
             "+---------------------------------------------------------------------------------------+",
             f"| NVIDIA-SMI {drv:<18}Driver Version: {drv:<15}CUDA Version: {cuda:<9}|",
             "|-----------------------------------------+----------------------+----------------------+",
             "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |",
             "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |",
             "|                                         |                      |               MIG M. |",
             "|=========================================+======================+======================|"]
    for g in node["gpus"]:
        pm = "On" if g["persistence_mode"] == "Enabled" else "Off"
        name = p["gpu"]["model"][:20]
        lines += [f"| {g['index']:>3}  {name:<20}{pm:>15}  | {g['bus_id']} Off |{'0':>21} |",
                  f"| N/A   31C    P0              69W / {int(g['power_limit_w']):>4}W |"
                  f"{'0MiB / ' + str(p['gpu']['memory_mib']) + 'MiB':>21} |      0%      Default |",
                  "|                                         |                      |             Disabled |",
                  "+-----------------------------------------+----------------------+----------------------+"]
    return "\n".join(lines) + "\n"


class HangRequested(Exception):
    """The caller should hang (tool-hangs fault)."""


def flint_safe(node_dir: Path, args: list[str]) -> Result:
    return flint(node_dir, args)


def systemctl_safe(node_dir: Path, args: list[str]) -> Result:
    try:
        return systemctl(node_dir, args)
    except _Abort as abort:
        return abort.result


HANDLERS: dict[str, Handler] = {
    "apt-get": apt_get_safe,
    "apt": apt,
    "apt-mark": apt_mark_safe,
    "dpkg-query": dpkg_query,
    "dpkg": dpkg,
    "systemctl": systemctl_safe,
    "reboot": reboot,
    "poweroff": reboot,
    "shutdown": shutdown,
    "modprobe": modprobe_safe,
    "rmmod": rmmod,
    "mlxfwmanager": mlxfwmanager_safe,
    "flint": flint_safe,
    "mstflint": flint_safe,
    "mlxfwreset": mlxfwreset,
    "nvfwupd": nvfwupd,
    "setpci": setpci,
    "scontrol": scontrol,
    "nvidia-smi": nvidia_smi,
}

__all__ = ["HANDLERS", "HangRequested", "StateError", "do_reboot", "service_start", "service_stop"]
