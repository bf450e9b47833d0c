"""Emulated firmware and MFT tools: mlxfwmanager, flint/mstflint, mlxfwreset, mlxlink (ConnectX) and nvfwupd (HGX);
new firmware is pending until a reset or a reboot, as on real adapters and baseboards."""

from __future__ import annotations

import json
import re
from pathlib import Path

from . import faults, model, render_fabric, render_ib
from .model import Node, profile_of
from .profiles import FW_PACKAGES
from .store import transaction
from .tooling import Abort, Result, read

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any


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
        node = faults.view(read(node_dir))
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
            raise Abort("", f"-E- Device {dev} not found\n", 1)
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
            raise Abort("\n".join(out) + "\n", "".join(e + "\n" for e in errors), 1)
        if todo:
            out += ["", "Restart needed for updates to take effect."]
    return "\n".join(out) + "\n", "", 0




def mlxlink(node_dir: Path, args: list[str]) -> Result:
    """mlxlink -d DEV [-p 1] [-m] [-c]: port 1's link, module and BER (read-only)."""
    dev = next((args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-d", "--device")), None)
    if dev is None:
        return "", "-E- Device is not specified\n", 1
    node = faults.view(read(node_dir))
    hca = find_hca(node, dev)
    if hca is None:
        return "", f"-E- Failed to open device: {dev}\n", 1
    return render_ib.render_mlxlink(node, hca), "", 0


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
        node = faults.view(read(node_dir))
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
    with transaction(node_dir) as node:
        hca = find_hca(node, dev)
        if hca is None:
            raise Abort("", f"-E- Cannot open Device: {dev}. No such file or directory. MFE_CR_ERROR\n", 1)
        current = hca["fw_pending"] or hca["fw"]
        err = _burn(hca, fw, psid, allow_psid)
        if err:
            raise Abort("", err + "\n", 1)
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
    with transaction(node_dir) as node:
        hca = find_hca(node, dev)
        if hca is None:
            raise Abort("", f"-E- Failed to open device: {dev}\n", 1)
        if hca["fw_pending"]:
            hca["fw"], hca["fw_pending"] = hca["fw_pending"], None
        if hca.get("psid_pending"):
            hca["psid"], hca["psid_pending"] = hca["psid_pending"], None
        model.advance(node, 20)
        model.journal(node, "kernel", "kernel", f"mlx5_core {hca['bdf']}: firmware version: {hca['fw']}")
    return (f"The reset level for device, {dev} is:\n\n3: Driver restart and PCI reset\n"
            "-I- Sending Reset Command To Fw             -Done\n-I- Stopping Driver                         -Done\n"
            "-I- Resetting PCI                           -Done\n-I- Starting Driver                         -Done\n"
            "-I- Restarting MST                          -Done\n-I- FW was loaded successfully.\n"), "", 0


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
        if a in ("-c", "--config"):
            config = next(it, "")
            # Its BMC address and credentials come from this file: without it there is no BMC to ask (the
            # wording is the lab's; the collector's guard keeps a node without the file from getting here).
            if not (node_dir / "root" / config.lstrip("/")).is_file():
                return "", f"Error: config file {config} not found\n", 1
        elif a in ("-s", "--special"):
            next(it, None)
        elif a in ("-p", "--package"):
            pkgs.append(next(it, ""))
        elif "=" in a or a.startswith("-"):
            continue
        else:
            words.append(a)
    cmd = words[0] if words else ""
    if cmd == "show_version":
        node = faults.view(read(node_dir))
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
