"""Renderers of Fabric Manager, systemd, journal, IMEX and nvfwupd output."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from fabricproof import tools

from .model import Node, installed_fm, installed_imex, profile_of

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

# systemd unit descriptions as the NVIDIA packages ship them.
UNIT_DESCRIPTIONS = {
    "nvidia-fabricmanager": "NVIDIA fabric manager service",
    "nvidia-imex": "NVIDIA IMEX service",
    "nvidia-persistenced": "NVIDIA Persistence Daemon",
    "nvidia-dcgm": "NVIDIA DCGM service",
    "slurmd": "Slurm node daemon",
}
UNIT_EXEC = {
    "nvidia-fabricmanager": "/usr/bin/nvidia-fabricmanager-start.sh --mode start",
    "nvidia-imex": "/usr/bin/nvidia-imex -c /etc/nvidia-imex/config.cfg",
    "nvidia-persistenced": "/usr/bin/nvidia-persistenced --user nvidia-persistenced",
    "nvidia-dcgm": "/usr/bin/nv-hostengine -n --service-account nvidia-dcgm",
    "slurmd": "/usr/sbin/slurmd --systemd",
}


def unit_exists(view: Node, name: str) -> bool:
    """A unit file exists while its package is installed (FM and IMEX units come with their packages)."""
    if name not in view["services"]:
        return False
    if name == "nvidia-fabricmanager":
        return installed_fm(view) is not None
    if name == "nvidia-imex":
        return installed_imex(view) is not None
    return True


def unit_name(name: str) -> str:
    """'nvidia-fabricmanager' or 'nvidia-fabricmanager.service' -> 'nvidia-fabricmanager'."""
    return name[: -len(".service")] if name.endswith(".service") else name


def render_fm_version(view: Node) -> str:
    """`nv-fabricmanager --version` (corpus fabricmanager/nv-fabricmanager-version-*)."""
    return f"Fabric Manager version is : {installed_fm(view)}\n"


def _stamp(t: int | None) -> str:
    if not t:
        return ""
    return time.strftime("%a %Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def unit_properties(view: Node, name: str) -> list[tuple[str, str]]:
    """The properties `systemctl show <unit>` prints (service-specific ones first, as systemd does)."""
    svc = view["services"].get(name) if unit_exists(view, name) else None
    if svc is None:
        return [("Type", "simple"), ("Restart", "no"), ("NRestarts", "0"), ("MainPID", "0"), ("Result", "success"),
                ("Id", f"{name}.service"), ("Names", f"{name}.service"), ("Description", f"{name}.service"),
                ("LoadState", "not-found"), ("ActiveState", "inactive"), ("SubState", "dead"),
                ("UnitFileState", ""), ("LoadError", f"org.freedesktop.systemd1.NoSuchUnit \"Unit {name}.service not found.\"")]
    active = svc["active"] == "active"
    pid = str(1000 + (svc["since"] or view["boot_time"]) % 30000) if active else "0"
    return [
        ("Type", "forking"), ("Restart", "no"), ("NRestarts", str(svc["restarts"])),
        ("ExecMainStatus", str(svc["exit_status"])), ("MainPID", pid), ("Result", svc["result"]),
        ("Id", f"{name}.service"), ("Names", f"{name}.service"),
        ("Description", UNIT_DESCRIPTIONS.get(name, name)),
        ("LoadState", "loaded"), ("ActiveState", svc["active"]), ("SubState", svc["sub"]),
        ("FragmentPath", f"/lib/systemd/system/{name}.service"),
        ("UnitFileState", svc["enabled"]), ("UnitFilePreset", "enabled"),
        ("ActiveEnterTimestamp", _stamp(svc["since"] or view["boot_time"]) if active else ""),
        ("ExecStart", f"{{ path={UNIT_EXEC.get(name, name).split()[0]} ; argv[]={UNIT_EXEC.get(name, name)} ; }}"),
    ]


def render_systemctl_show(view: Node, name: str, properties: tuple[str, ...] | None = None) -> str:
    """`systemctl show <unit> [--property=A,B]`: KEY=value lines in systemd's own order."""
    props = unit_properties(view, name)
    if properties is not None:
        wanted = set(properties)
        props = [(k, v) for k, v in props if k in wanted]
    return "".join(f"{k}={v}\n" for k, v in props)


def is_active(view: Node, name: str) -> tuple[str, int]:
    """`systemctl is-active <unit>`: the word and the exit status (0 only when active)."""
    svc = view["services"].get(name) if unit_exists(view, name) else None
    state = "inactive" if svc is None else svc["active"]
    return state + "\n", 0 if state == "active" else 3


def _journal_lines(view: Node, unit: str) -> list[str]:
    host = view["hostname"]
    return [f"{time.strftime('%b %d %H:%M:%S', time.gmtime(t))} {host} {ident}: {msg}"
            for t, ident, msg in view["journal"].get(unit, []) if t >= view["boot_time"]]


def render_journal(view: Node, unit: str) -> str:
    """`journalctl -u <unit> -b --no-pager` / `journalctl -k -b --no-pager` (this boot only)."""
    lines = _journal_lines(view, unit)
    return ("\n".join(lines) + "\n") if lines else "-- No entries --\n"


def render_fm_log(view: Node) -> str:
    """/var/log/fabricmanager.log (corpus fabricmanager-log-hgx-h100-...): appended across restarts."""
    out = []
    tid = 1500 + 7 * view["boot_count"]
    for t, level, msg in view["fm_log"]:
        if level == "RAW":
            out.append(msg)
        else:
            out.append(f"[{time.strftime('%b %d %Y %H:%M:%S', time.gmtime(t))}] [{level}] [tid {tid}] {msg}")
    return "\n".join(out) + ("\n" if out else "")


_CFG_COMMENTS = {
    "LOG_LEVEL": "# Fabric Manager log verbosity level. Valid values 0 to 5. 4 = INFO",
    "LOG_FILE_NAME": "# Filename for Fabric Manager logs",
    "LOG_APPEND_TO_LOG": "# Log file mode, 1 = append to existing log file, 0 = overwrite",
    "LOG_FILE_MAX_SIZE": "# Max size of log file (in MB)",
    "LOG_USE_SYSLOG": "# Redirect all the logs to syslog instead of logging to file",
    "DAEMONIZE": "# daemonize Fabric Manager on start-up",
    "BIND_INTERFACE_IP": "# Network interface to listen for Global and Local Fabric Manager communication",
    "STARTING_TCP_PORT": "# Starting TCP port number for Global and Local Fabric Manager communication",
    "FABRIC_MODE": "# 0  - Start FM in bare metal or full pass through virtualization mode\n"
                   "# 1  - Start FM in shared NVSwitch multitenancy mode.\n# 2  - Start FM in vGPU based multitenancy mode.",
    "FABRIC_MODE_RESTART": "# Restart Fabric Manager after exit. Applicable only in Shared NVSwitch or vGPU multitenancy mode",
    "STATE_FILE_NAME": "# Specify the filename to be used to save Fabric Manager states.",
    "FM_CMD_BIND_INTERFACE": "# Network interface to listen for Fabric Manager SDK/API to communicate with running FM instance.",
    "FM_CMD_PORT_NUMBER": "# Port number to listen for Fabric Manager SDK/API to communicate with running FM instance.",
    "FM_STAY_RESIDENT_ON_FAILURES": "# Fabric Manager behaviour on initialization failures\n"
                                    "# 0  - Fabric Manager service will terminate on initialization failure\n"
                                    "# 1  - Fabric Manager service will stay running on initialization failure",
    "ACCESS_LINK_FAILURE_MODE": "# Degraded Mode options when there is an Access Link Failure (GPU to NVSwitch NVLink failure)",
    "TRUNK_LINK_FAILURE_MODE": "# Degraded Mode options when there is a Trunk Link Failure (NVSwitch to NVSwitch NVLink failure)",
    "NVSWITCH_FAILURE_MODE": "# Degraded Mode options when there is a NVSwitch failure or an NVSwitch is excluded",
    "ABORT_CUDA_JOBS_ON_FM_EXIT": "# Control running CUDA jobs behavior when Fabric Manager service is stopped or terminated\n"
                                  "# 0  - Do not abort running CUDA jobs when Fabric Manager exits\n"
                                  "# 1  - Abort all running CUDA jobs when Fabric Manager exits",
    "TOPOLOGY_FILE_PATH": "# Absolute directory path containing Fabric Manager topology files",
    "DATABASE_PATH": "# Absolute directory path containing Fabric Manager database files",
}


def render_fm_config(view: Node) -> str:
    """/usr/share/nvidia/nvswitch/fabricmanager.cfg: commented KEY=VALUE pairs as the package ships them."""
    cfg = view["fm_config"] or {}
    out = ["# NVIDIA Fabric Manager configuration file.",
           "# Note: This configuration file is read during Fabric Manager service startup. So, Fabric Manager",
           "# service restart is required for new settings to take effect.", ""]
    for key, value in cfg.items():
        out += [_CFG_COMMENTS.get(key, f"# {key}"), f"{key}={value}", ""]
    return "\n".join(out)


def render_imex_nodes(view: Node) -> tuple[str, str, int]:
    """`nvidia-imex-ctl -N -j`: (stdout, stderr, rc). The domain is the rack's trays (nodes_config.cfg)."""
    svc = view["services"].get("nvidia-imex")
    if svc is None or svc["active"] != "active":
        # The control tool talks to the local daemon's command service; with the daemon down it cannot.
        return "", "Failed to connect to IMEX daemon command service at 127.0.0.1:50005\n", 1
    peers = view["imex_peers"] or [view["address"]]
    down = set(view.get("imex_unready", []))
    version = installed_imex(view) or view["driver"]["loaded"]
    nodes: dict[str, Any] = {}
    for i, host in enumerate(peers):
        status = "UNAVAILABLE" if host in down else "READY"
        conns = {str(j): {"host": other, "status": "NEVER_CONNECTED" if (other in down or host in down) else "CONNECTED"}
                 for j, other in enumerate(peers) if j != i}
        nodes[str(i)] = {"host": host, "status": status, "version": version, "connections": conns}
    doc = {
        "timestamp": time.strftime("%m/%d/%Y %H:%M:%S.000", time.gmtime(view["clock"])),
        "status": "DEGRADED" if down else "UP",
        "nodes": nodes,
    }
    return json.dumps(doc, indent=4) + "\n", "", 0


def firmware_components(view: Node) -> list[tuple[str, str]]:
    """(AP Name, Sys Version) pairs the BMC reports, in nvfwupd's (sorted) order."""
    p = profile_of(view)
    comps: list[tuple[str, str]] = [("HGX_FW_BMC_0", "HGX-22.10-1-rc80"), ("HGX_FW_FPGA_0", "3.10")]
    arch = p["gpu"]["architecture"]
    for gpu in view["gpus"]:
        name = f"HGX_FW_GPU_{gpu['index']}" if arch == "Blackwell" else f"HGX_FW_GPU_SXM_{gpu['index'] + 1}"
        comps.append((name, gpu["vbios"]))
        comps.append((f"HGX_FW_ERoT_GPU_SXM_{gpu['index'] + 1}" if arch != "Blackwell" else f"HGX_FW_ERoT_GPU_{gpu['index']}",
                      "01.03.0183.0000_n04"))
    for sw in view["nvswitches"]:
        comps.append((f"{p['nvswitch']['component_prefix']}{sw['index']}", sw["firmware"]))
        comps.append((f"HGX_FW_ERoT_NVSwitch_{sw['index']}", "01.03.0183.0000_n04"))
    return sorted(comps)


def render_nvfwupd(view: Node) -> str:
    """`nvfwupd ... show_version` table (layout of the DGX H100 firmware update guide example)."""
    model = {"dgx-a100": "DGXA100", "dgx-h100": "DGXH100", "hgx-h200": "HGX-H200x8", "gb200-nvl72": "GB200 NVL"}
    out = [f"System Model: {model.get(view['profile'], view['profile'])}",
           "Part number: 965-24387-0002-003",
           f"Serial number: {1660224000000 + view['index']}",
           "Packages: []",
           "Connection Status: Successful",
           "",
           "Firmware Devices:",
           f"{'AP Name':<31}{'Sys Version':<31}{'Pkg Version':<29}Up-To-Date",
           f"{'-------':<31}{'-----------':<31}{'-----------':<29}----------"]
    for name, version in firmware_components(view):
        out.append(f"{name:<31}{version:<31}{'N/A':<31}No")
    return "\n".join(out) + "\n"


#: Output key (tools.TOOLS, and the IMEX unit's journal) -> renderer.
RENDERERS: dict[str, Callable[[Node], str]] = {
    "fm_version": render_fm_version,
    "fm_service": lambda v: render_systemctl_show(v, "nvidia-fabricmanager", tools.SHOW_PROPERTIES),
    "imex_service": lambda v: render_systemctl_show(v, "nvidia-imex", tools.SHOW_PROPERTIES),
    "fm_journal": lambda v: render_journal(v, "fm"),
    "journal_imex": lambda v: render_journal(v, "imex"),
    "kernel_log": lambda v: render_journal(v, "kernel"),
    "nvswitch_firmware": render_nvfwupd,
}
