"""nvidia-smi invocations that have no pre-rendered output: any --query-gpu, -i filters, -pm, the table."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from . import faults, model, render_gpu, render_perf
from .model import Node, installed_driver, profile_of
from .outputs import RENDERERS, key_for, not_found
from .profiles import CUDA_BY_BRANCH
from .store import transaction
from .tooling import Abort, HangRequested, Result, read

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

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
    # what operators ask for by hand, with the idle values the plain table shows (corpus misc/query-gpu-csv-allfields-*)
    "pci.domain": lambda v, g: "0x" + g["bus_id"].split(":")[0][-4:],
    "pci.bus": lambda v, g: "0x" + g["bus_id"].split(":")[1],
    "pstate": lambda v, g: "P0",
    "fan.speed": lambda v, g: "[N/A]",
    "memory.used": lambda v, g: "0 MiB",
    "memory.free": lambda v, g: f"{profile_of(v)['gpu']['memory_mib'] - 478} MiB",
    "utilization.gpu": lambda v, g: "0 %",
    "utilization.memory": lambda v, g: "0 %",
    "temperature.gpu": lambda v, g: "31",
    "power.draw": lambda v, g: "69.00 W",
    "enforced.power.limit": lambda v, g: f"{g['power_limit_w']:.2f} W",
    "compute_mode": lambda v, g: "Default",
    "mig.mode.current": lambda v, g: g.get("mig_mode", "Disabled"),
    "ecc.errors.corrected.volatile.total": lambda v, g: "0",
    "ecc.errors.uncorrected.volatile.total": lambda v, g: "0",
    "clocks.current.sm": lambda v, g: "345 MHz",
    "clocks.sm": lambda v, g: "345 MHz",
    "clocks.max.sm": lambda v, g: "1980 MHz",
}
#: The unit a field's CSV header names ("power.draw [W]") and `nounits` drops from its values.
_UNITS = {"power.limit": "W", "power.draw": "W", "enforced.power.limit": "W", "memory.total": "MiB",
          "memory.used": "MiB", "memory.free": "MiB", "utilization.gpu": "%", "utilization.memory": "%",
          "fan.speed": "%", "clocks.current.sm": "MHz", "clocks.sm": "MHz", "clocks.max.sm": "MHz"}


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
        rows = [] if "noheader" in fmt else [", ".join(f if "nounits" in fmt or f not in _UNITS else f"{f} [{_UNITS[f]}]"
                                                        for f in fields)]
        for gpu in node["gpus"]:
            vals = [_QUERY_VALUES[f](node, gpu) for f in fields]
            if "nounits" in fmt:
                vals = [v.removesuffix(" " + _UNITS[f]) if f in _UNITS else v for f, v in zip(fields, vals)]
            rows.append(", ".join(vals))
        return "\n".join(rows) + "\n", "", 0
    key = key_for("nvidia-smi", rest)
    if key is not None and key in RENDERERS:
        return RENDERERS[key](node), "", 0
    display = _display_sections(rest)
    if display:
        return _only_sections(render_gpu.render_q(node), display), "", 0
    if len(rest) == 3 and rest[:2] == ["topo", "-p2p"] and rest[2] in _P2P_CAPS:
        return _render_p2p(node, rest[2]), "", 0
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
    """The plain `nvidia-smi` summary table: R550 and later in the corpus's layout (misc/nvidia-smi-default-h100-
    8gpu-driver550.90.07: 41/24/22-wide columns), older branches with the 22-wide Bus-Id column R535 had."""
    p = profile_of(node)
    drv = installed_driver(node) or node["driver"]["loaded"]
    branch = model.branch_of(drv)
    cuda = CUDA_BY_BRANCH.get(branch, "N/A")
    wide = branch.isdigit() and int(branch) >= 550
    bus_w = 24 if wide else 22  # inner widths: 41 | bus_w | 22
    width = 41 + bus_w + 22 + 4
    rule = "+" + "-" * (width - 2) + "+"

    def cols(a: str, b: str, c: str, fill: str = " ") -> str:
        return f"|{a:{fill}<41}|{b:{fill}<{bus_w}}|{c:{fill}<22}|"

    stamp = time.strftime("%a %b %d %H:%M:%S %Y", time.gmtime(node["clock"]))
    total_mib = p["gpu"]["memory_mib"]
    lines = [stamp, rule,
             f"| NVIDIA-SMI {drv:<23}Driver Version: {drv:<{bus_w - 9}}CUDA Version: {cuda:<9}|",
             f"|{'-' * 41}+{'-' * bus_w}+{'-' * 22}+",
             cols(" GPU  Name                 Persistence-M ", f"{'Bus-Id':<{bus_w - 8}}Disp.A ".rjust(bus_w),
                  " Volatile Uncorr. ECC "),
             cols(" Fan  Temp   Perf          Pwr:Usage/Cap ", "Memory-Usage ".rjust(bus_w), " GPU-Util  Compute M. "),
             cols("", "", "MIG M. ".rjust(22)),
             f"|{'=' * 41}+{'=' * bus_w}+{'=' * 22}|"]
    for g in node["gpus"]:
        pm = "On" if g["persistence_mode"] == "Enabled" else "Off"
        name = p["gpu"]["model"][:33 - len(pm) - 1]
        memory = f"0MiB / {total_mib:>6}MiB" if wide else f"0MiB / {total_mib}MiB"
        lines += [cols(f" {g['index']:>3}  {name}{pm:>{33 - len(name)}}  ", f"{g['bus_id'] + ' Off':>{bus_w - 1}} ",
                       f"{'0':>21} "),
                  cols(f" N/A   31C    P0{'69W / ' + format(int(g['power_limit_w']), '>4') + 'W':>24} ",
                       f"{memory:>{bus_w - 1}} ", f"{'0%':>8}{'Default':>13} "),
                  cols("", "", f"{'Disabled':>21} "),
                  f"+{'-' * 41}+{'-' * bus_w}+{'-' * 22}+"]
    inner = width - 2
    lines += ["", rule, f"|{' Processes:':<{inner}}|",
              f"|{'  GPU   GI   CI        PID   Type   Process name':<{inner - 11}}GPU Memory |",
              f"|{'        ID   ID':<{inner - 11}}Usage      |", "|" + "=" * inner + "|",
              f"|{'  No running processes found':<{inner}}|", rule]
    return "\n".join(lines) + "\n"

#: `-q -d NAME[,NAME]`: which blocks of `-q` each display name keeps (the R535 man page's -d list, and FABRIC).
DISPLAY: dict[str, tuple[str, ...]] = {
    "MEMORY": ("FB Memory Usage", "BAR1 Memory Usage", "Conf Compute Protected Memory Usage"),
    "UTILIZATION": ("Utilization",),
    "ECC": ("ECC Mode", "ECC Errors"),
    "TEMPERATURE": ("Temperature",),
    "POWER": ("GPU Power Readings", "Module Power Readings"),
    "CLOCK": ("Clocks", "Applications Clocks", "Default Applications Clocks", "Deferred Clocks", "Max Clocks",
              "Max Customer Boost Clocks", "Clock Policy"),
    "PERFORMANCE": ("Performance State", "Clocks Event Reasons"),
    "PAGE_RETIREMENT": ("Retired Pages",),
    "ROW_REMAPPER": ("Remapped Rows",),
    "VOLTAGE": ("Voltage",),
    "RESET_STATUS": ("GPU Reset Status",),
    "ENCODER_STATS": ("Encoder Stats",),
    "FBC_STATS": ("FBC Stats",),
    "FABRIC": ("Fabric",),
}


def _display_sections(rest: list[str]) -> tuple[str, ...]:
    """The -q blocks `-q -d A,B` (or --display=A,B) asks for; () when the arguments are not that form."""
    names: list[str] = []
    args = list(rest)
    if "-q" not in args and "--query" not in args:
        return ()
    args.remove("-q" if "-q" in args else "--query")
    if len(args) == 2 and args[0] == "-d":
        names = args[1].split(",")
    elif len(args) == 1 and args[0].startswith("--display="):
        names = args[0].split("=", 1)[1].split(",")
    if not names or any(n.upper() not in DISPLAY for n in names):
        return ()
    return tuple(t for n in names for t in DISPLAY[n.upper()])


def _only_sections(text: str, titles: tuple[str, ...]) -> str:
    """-q output cut to the header and, under each `GPU <bus>` line, only the named blocks (corpus
    nvidia-smi-q/q-d-page_retirement-*: a blank line after each GPU)."""
    out: list[str] = []
    keep = False
    for line in text.splitlines():
        if line.startswith("GPU "):
            if any(o.startswith("GPU ") for o in out):
                out.append("")
            out.append(line)
            keep = False
        elif line.startswith("    ") and not line.startswith("     "):
            keep = line[4:].split(" :", 1)[0].split(":", 1)[0].strip() in titles
            if keep:
                out.append(line)
        elif line.startswith("     "):
            if keep:
                out.append(line)
        elif not any(o.startswith("GPU ") for o in out):
            out.append(line)  # the header, up to "Attached GPUs"
    return "\n".join(out).rstrip("\n") + "\n\n"


#: `topo -p2p` capabilities: read, write, nvlink, atomics, prop
_P2P_CAPS = {"r", "w", "n", "a", "p"}


def _render_p2p(node: Node, cap: str) -> str:
    """`nvidia-smi topo -p2p r|w|n|a|p`: OK between every GPU pair for reads/writes/atomics, and for NVLink where
    both ends have an active link; NS (not supported) otherwise."""
    gpus = node["gpus"]
    nv = {g["index"]: any(link["active"] for link in g["nvlinks"]) for g in gpus}

    def cell(a: dict, b: dict) -> str:
        if a["index"] == b["index"]:
            return "X"
        if cap == "n":
            return "OK" if nv[a["index"]] and nv[b["index"]] else "NS"
        return "OK"

    rows = [" \t" + "".join(f"GPU{g['index']}\t" for g in gpus)]
    rows += [f" GPU{a['index']}\t" + "".join(cell(a, b) + "\t" for b in gpus) for a in gpus]
    legend = ["", "Legend:", "", "  X    = Self", "  OK   = Status Ok", "  CNS  = Chipset not supported",
              "  GNS  = GPU not supported", "  TNS  = Topology not supported", "  NS   = Not supported",
              "  U    = Unknown"]
    return "\n".join(rows + legend) + "\n"
