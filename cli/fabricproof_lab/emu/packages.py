"""Emulated apt-get/apt, apt-mark, dpkg-query and dpkg for the NVIDIA driver, FM, NSCQ and IMEX packages."""

from __future__ import annotations

import re
from pathlib import Path

from . import model, render_sys
from .model import Node, profile_of
from .profiles import DRIVER_RELEASES, deb_version
from .store import transaction
from .tooling import Abort, Result, read

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
            raise Abort(out, warn + err, rc)
    return out, warn + err, rc




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




def apt(node_dir: Path, args: list[str]) -> Result:
    """`apt`: apt-get plus the CLI-stability warning on stderr."""
    return apt_get(node_dir, args, tool="apt")


def apt_mark(node_dir: Path, args: list[str]) -> Result:
    """apt-mark hold|unhold|showhold|auto|manual."""
    words = [a for a in args if not a.startswith("-")]
    if not words:
        return "", "E: No command given\n", 100
    op, names = words[0], words[1:]
    if op == "showhold":
        return render_sys.render_showhold(read(node_dir)), "", 0
    if op in ("auto", "manual", "showauto", "showmanual"):
        return "", "", 0
    if op not in ("hold", "unhold"):
        return "", f"E: Invalid operation {op}\n", 100
    out = []
    with transaction(node_dir) as node:
        for n in names:
            if n not in node["packages"] and not available_versions(n):
                raise Abort("", f"E: Unable to locate package {n}\n", 100)
            if op == "hold":
                out.append(f"{n} was already set on hold." if n in node["holds"] else f"{n} set on hold.")
                if n not in node["holds"]:
                    node["holds"].append(n)
            else:
                out.append(f"Canceled hold on {n}." if n in node["holds"] else f"{n} was already not on hold.")
                if n in node["holds"]:
                    node["holds"].remove(n)
    return "".join(line + "\n" for line in out), "", 0




def dpkg_query(node_dir: Path, args: list[str]) -> Result:
    """dpkg-query -W [-f=FMT|--showformat=FMT] [names] and dpkg-query -l [names]."""
    node = read(node_dir)
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
        node = read(node_dir)
        return "".join(f"{n:<48}{'hold' if n in node['holds'] else 'install'}\n" for n in sorted(node["packages"])), "", 0
    return "", "dpkg: error: this lab node only answers dpkg -l, -s and --get-selections\n", 2
