"""nvidia-smi invocations that have no pre-rendered output: any --query-gpu, -i filters, -pm, the table."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import faults, model, render_gpu, render_links, render_perf
from .model import Node, installed_driver, profile_of
from .outputs import not_found
from .profiles import CUDA_BY_BRANCH
from .store import transaction
from .tooling import Abort, HangRequested, Result, read

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
    node = faults.view(read(node_dir))
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
    if rest in (["-r"], ["--gpu-reset"]):
        return _reset(node_dir, {g["index"] for g in node["gpus"]})
    apps = next((a for a in rest if a.startswith("--query-compute-apps=")), None)
    if apps:
        return _compute_apps(node, apps, rest)
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
        ("nvlink", "-gt", "d"): render_links.render_nvlink_throughput,
        ("topo", "-m"): render_links.render_topo,
    }
    if tuple(rest) in simple:
        return simple[tuple(rest)](node), "", 0
    if not rest:
        return _default_table(node), "", 0
    return "Invalid combination of input arguments. Please run 'nvidia-smi -h' for help.\n", "", 2


def _compute_apps(node: Node, query: str, rest: list[str]) -> Result:
    """`--query-compute-apps=pid,process_name,used_memory --format=csv[,noheader][,nounits]`: the GPU compute
    processes (fault gpu-busy); an idle node prints the header alone, or nothing with noheader."""
    fmt = next((a.split("=", 1)[1] for a in rest if a.startswith("--format=")), "")
    if "csv" not in fmt:
        return "--format must be specified with --query-compute-apps\n", "", 2
    fields = [f.strip() for f in query.split("=", 1)[1].split(",") if f.strip()]
    bad = [f for f in fields if f not in render_perf.COMPUTE_APP_FIELDS]
    if bad or not fields:
        return f'Field "{bad[0] if bad else ""}" is not a valid field to query.\n\n', "", 2
    return render_perf.render_compute_apps(node, fields, "noheader" not in fmt, "nounits" not in fmt), "", 0


def _reset(node_dir: Path, indexes: set[int]) -> Result:
    """`nvidia-smi -r`: refused while Fabric Manager (or another client) holds the GPUs, as the FM guide's
    stop clients -> stop FM -> reset -> start FM sequence requires; a reset GPU waits for FM to register it."""
    with transaction(node_dir) as node:
        chosen = [g for g in node["gpus"] if g["index"] in indexes]
        busy = [name for name in ("nvidia-fabricmanager", "nvidia-dcgm")
                if node["services"].get(name, {}).get("active") == "active"]
        if busy:
            gpus = "".join(f"  GPU {g['bus_id']}: In use by another client\n" for g in chosen)
            raise Abort(f"The following GPUs could not be reset:\n{gpus}\n{len(chosen)} device(s) are currently being "
                        "used by one or more other processes (e.g., Fabric Manager, CUDA application, graphics "
                        "application such as an X server, or a monitoring application such as another instance of "
                        "nvidia-smi). Please first kill all processes using this device and all compute applications "
                        "running in the system.\n", "", 255)
        for gpu in chosen:
            if gpu["fabric"]["state"] is not None and profile_of(node)["fm"]["present"]:
                gpu["fabric"]["state"], gpu["fabric"]["status"] = "In Progress", "N/A"
        model.advance(node, 10)
    return "".join(f"GPU {g['bus_id']} was successfully reset.\n" for g in chosen) + "All done.\n", "", 0


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
