"""Renderers of host output: lsmod, lspci (-n -d 10de:, -vvv), /proc/cmdline, dpkg-query, apt-mark, scontrol."""

from __future__ import annotations

import time
from collections.abc import Callable

from .model import Node, profile_of
from .profiles import KERNEL_MODULES

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

_MODULE_SIZE = dict(KERNEL_MODULES) | {"nv_peer_mem": 16384}
# module -> modules it depends on (what makes lsmod's "Used by" column).
MODULE_DEPS: dict[str, tuple[str, ...]] = {
    "nvidia_peermem": ("nvidia", "ib_uverbs", "ib_core"),
    "nv_peer_mem": ("nvidia", "ib_core"),
    "nvidia_uvm": ("nvidia",),
    "nvidia_modeset": ("nvidia",),
    "nvidia_drm": ("nvidia_modeset",),
    "mlx5_ib": ("ib_uverbs", "ib_core", "mlx5_core"),
    "ib_uverbs": ("ib_core",),
    "ib_ipoib": ("ib_cm", "ib_core"),
    "ib_umad": ("ib_core",),
    "rdma_ucm": ("ib_uverbs", "rdma_cm", "ib_core"),
    "rdma_cm": ("iw_cm", "ib_cm", "ib_core"),
    "iw_cm": ("ib_core",),
    "ib_cm": ("ib_core",),
    "mlx5_core": ("mlxfw",),
}
# References held by processes/devices rather than modules (nvidia: one per open GPU handle).
_EXTRA_REFS = {"nvidia": 56}


def users_of(loaded: list[str], module: str) -> list[str]:
    """Loaded modules that depend on `module`, most recently loaded first."""
    return [m for m in loaded if module in MODULE_DEPS.get(m, ())]


def render_lsmod(view: Node) -> str:
    """`lsmod` (most recently loaded module first)."""
    out = ["Module                  Size  Used by"]
    for mod in view["modules"]:
        users = users_of(view["modules"], mod)
        refs = len(users) + _EXTRA_REFS.get(mod, 0)
        out.append(f"{mod:<19} {_MODULE_SIZE.get(mod, 16384):>8}  {refs}" + (f" {','.join(users)}" if users else ""))
    return "\n".join(out) + "\n"


def _multi_domain(view: Node) -> bool:
    return any(not d["bdf"].startswith("0000:") for d in view["pcie"])


def _show_bdf(view: Node, bdf: str) -> str:
    """lspci drops the domain when every device is in domain 0000."""
    return bdf if _multi_domain(view) else bdf[5:]


def _pci_class(dev: dict[str, Any], view: Node) -> tuple[str, str, str]:
    """(class code, class name, vendor:device) of a device record."""
    kind = dev["kind"]
    if kind == "gpu":
        return "0302", "3D controller", f"10de:{profile_of(view)['gpu']['pci_device_id']}"
    if kind == "nvswitch":
        return "0680", "Bridge", f"10de:{profile_of(view)['nvswitch']['pci_device_id']}"
    if kind == "nic":
        hca = next(h for h in view["hcas"] if h["bdf"] == dev["bdf"])
        ib = hca["ports"][0]["link_layer"] == "InfiniBand"
        return ("0207", "Infiniband controller", "15b3:1021") if ib else ("0200", "Ethernet controller", "15b3:a2dc")
    name = dev["name"]
    if name.startswith("NVIDIA"):
        return "0604", "PCI bridge", f"10de:{name.split()[-1]}"
    if name.startswith("Intel"):
        return "0604", "PCI bridge", f"8086:{name.split()[3]}"
    if name.startswith("PMC-Sierra"):
        return "0604", "PCI bridge", "11f8:4128"
    if name.startswith("Broadcom"):
        return "0604", "PCI bridge", "1000:c030"
    return "0604", "PCI bridge", "15b3:1979"


def _present(view: Node) -> list[dict[str, Any]]:
    return [d for d in view["pcie"] if d.get("present", True)]


def render_lspci_nvidia(view: Node) -> str:
    """`lspci -n -d 10de:` (NVIDIA functions only: GPUs 0302, NVSwitches 0680, Grace root ports 0604)."""
    out = []
    for dev in _present(view):
        code, _name, ids = _pci_class(dev, view)
        if not ids.startswith("10de:"):
            continue
        rev = " (rev a1)" if dev["kind"] in ("gpu", "nvswitch") else ""
        out.append(f"{_show_bdf(view, dev['bdf'])} {code}: {ids}{rev}")
    return "\n".join(out) + "\n"


_ACS_FLAGS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


def _acs_line(acs: dict[str, bool]) -> str:
    return " ".join(f"{f}{'+' if acs.get(f) else '-'}" for f in _ACS_FLAGS)


def _bus(n: int) -> str:
    return f"{n:02x}"


def render_lspci_vvv(view: Node) -> str:
    """`lspci -vvv`: every bridge and endpoint of the GPU/NIC/NVSwitch PCIe trees (corpus lspci-vvv-hgx-h100)."""
    blocks = []
    for dev in _present(view):
        code, cls, ids = _pci_class(dev, view)
        bridge = dev["kind"] in ("root_port", "switch_up", "switch_down")
        head = f"{_show_bdf(view, dev['bdf'])} {cls}: {dev['name']}"
        if bridge:
            head += " (prog-if 00 [Normal decode])"
        # Grace GPUs carry their own NUMA ids (2, 10, ...) for memory; their PCIe function sits on the socket.
        numa = dev["numa"] if dev["numa"] < 2 else (0 if dev["numa"] < 18 else 1)
        lines = [head, f"\tSubsystem: {dev['name'].split(' Device')[0] if ' Device' in dev['name'] else dev['name']}",
                 "\tControl: I/O+ Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- DisINTx+",
                 "\tStatus: Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- >SERR- <PERR- INTx-",
                 "\tLatency: 0", f"\tNUMA node: {numa}"]
        if bridge:
            primary = int(dev["bdf"].split(":")[1], 16)
            lines.append(f"\tBus: primary={_bus(primary)}, secondary={_bus(dev['secondary'])}, "
                         f"subordinate={_bus(dev['subordinate'])}, sec-latency=0")
        port = {"root_port": "Root Port (Slot+)", "switch_up": "Upstream Port", "switch_down": "Downstream Port (Slot+)"}
        lines.append(f"\tCapabilities: [60] Express (v2) {port.get(dev['kind'], 'Endpoint')}, MSI 00")
        lines.append(f"\t\tLnkCap:\tPort #0, Speed {dev['speed']}, Width x{dev['width']}, ASPM not supported")
        speed, width = dev["speed"], dev["width"]
        if dev["kind"] == "gpu":
            gpu = next(g for g in view["gpus"] if g["uuid"] == dev["ref"])
            speed = {5: "32GT/s", 4: "16GT/s", 3: "8GT/s"}.get(gpu["pcie_gen"], speed)
            width = gpu["pcie_width"]
        ok_s = "ok" if speed == dev["speed"] else "downgraded"
        ok_w = "ok" if width == dev["width"] else "downgraded"
        lines.append(f"\t\tLnkSta:\tSpeed {speed} ({ok_s}), Width x{width} ({ok_w})")
        if dev["acs"] is not None:
            cap = dict.fromkeys(_ACS_FLAGS, True) | {"EgressCtrl": False}
            lines += ["\tCapabilities: [220 v1] Access Control Services",
                      f"\t\tACSCap:\t{_acs_line(cap)}", f"\t\tACSCtl:\t{_acs_line(dev['acs'])}"]
        driver = {"gpu": ("nvidia", "nvidiafb, nouveau, nvidia_drm, nvidia"), "nic": ("mlx5_core", "mlx5_core"),
                  "nvswitch": ("nvidia-nvswitch", "nvidia_drm, nvidia")}.get(dev["kind"], ("pcieport", None))
        lines.append(f"\tKernel driver in use: {driver[0]}")
        if driver[1]:
            lines.append(f"\tKernel modules: {driver[1]}")
        blocks.append("\n".join(lines) + "\n")
    return "\n".join(blocks) + "\n"


def render_cmdline(view: Node) -> str:
    """/proc/cmdline."""
    return view["cmdline"] + "\n"


def render_dpkg_query(view: Node, names: list[str] | None = None, fmt: str | None = None) -> tuple[str, str, int]:
    """`dpkg-query -W [-f=FMT] [names]`: (stdout, stderr, rc). Unknown names: dpkg's error, rc 1."""
    pkgs = view["packages"]
    out, err, rc = [], [], 0
    if not names:
        selected = sorted(pkgs.items())
    else:
        selected = []
        for pattern in names:
            matches = [(n, v) for n, v in sorted(pkgs.items()) if _glob(pattern, n)]
            if not matches:
                err.append(f"dpkg-query: no packages found matching {pattern}")
                rc = 1
            selected += matches
    for name, version in selected:
        if fmt is None:
            out.append(f"{name}\t{version}\n")
        else:
            status = "install ok installed"
            out.append(fmt.replace("${Package}", name).replace("${Version}", version)
                       .replace("${Status}", status).replace("${db:Status-Abbrev}", "ii ")
                       .replace("\\n", "\n").replace("\\t", "\t"))
    return "".join(out), "".join(e + "\n" for e in err), rc


def _glob(pattern: str, name: str) -> bool:
    import fnmatch

    return fnmatch.fnmatchcase(name, pattern)


def render_showhold(view: Node) -> str:
    """`apt-mark showhold`."""
    return "".join(f"{n}\n" for n in sorted(view["holds"]))


def render_scontrol_node(view: Node) -> str:
    """`scontrol show node <name>` (Slurm 23.x layout)."""
    p = profile_of(view)
    s = p["slurm"]
    sl = view["slurm"]
    boot = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(view["boot_time"]))
    now = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(view["clock"]))
    state = sl["state"]
    lines = [
        f"NodeName={view['hostname']} Arch={p['arch']} CoresPerSocket={s['cores']} ",
        f"   CPUAlloc=0 CPUEfctv={s['cpus']} CPUTot={s['cpus']} CPULoad=0.12",
        "   AvailableFeatures=(null)",
        "   ActiveFeatures=(null)",
        f"   Gres={s['gres']}",
        f"   NodeAddr={view['address']} NodeHostName={view['hostname']} Version=23.11.4",
        f"   OS=Linux {view['kernel_release']} #1 SMP ",
        f"   RealMemory={s['memory_mb']} AllocMem=0 FreeMem={s['memory_mb'] - 20480} Sockets={s['sockets']} Boards=1",
        f"   State={state} ThreadsPerCore={s['threads']} TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A",
        f"   Partitions={s['partition']} ",
        f"   BootTime={boot} SlurmdStartTime={boot}",
        f"   LastBusyTime={now} ResumeAfterTime=None",
        f"   CfgTRES=cpu={s['cpus']},mem={s['memory_mb']}M,billing={s['cpus']},gres/gpu={len(view['gpus'])}",
        "   AllocTRES=",
        "   CapWatts=n/a",
        "   CurrentWatts=0 AveWatts=0",
        "   ExtSensorsJoules=n/a ExtSensorsWatts=0 ExtSensorsTemp=n/a",
    ]
    if sl["reason"]:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sl["reason_time"] or view["clock"]))
        lines.append(f"   Reason={sl['reason']} [{sl['reason_user'] or 'root'}@{stamp}]")
    return "\n".join(lines) + "\n\n"


#: Output key (tools.TOOLS) -> renderer.
RENDERERS: dict[str, Callable[[Node], str]] = {
    "nvswitch_pci": render_lspci_nvidia, "lspci_vvv": render_lspci_vvv, "lsmod": render_lsmod,
    "showhold": render_showhold,
}
