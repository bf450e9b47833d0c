"""Renderers of NVLink and topology output: nvidia-smi nvlink -s/-e/-c/-gt d and nvidia-smi topo -m."""

from __future__ import annotations

from collections.abc import Callable

from .model import Node, profile_of

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

ALL_INACTIVE = "NVML: Unable to retrieve NVLink information as all links are inactive"


def _gbps(v: float) -> str:
    """25.0 -> '25', 26.562 -> '26.562' (nvidia-smi prints no trailing zeros)."""
    return f"{v:g}"


def _header(view: Node, gpu: dict[str, Any]) -> str:
    return f"GPU {gpu['index']}: {profile_of(view)['gpu']['model']} (UUID: {gpu['uuid']})"


def _gpu_blocks(view: Node, link_lines: Callable[[dict[str, Any]], list[str]]) -> str:
    """Each GPU's header line, then its link lines, or NVML's message when all its links are inactive."""
    out: list[str] = []
    for gpu in view["gpus"]:
        out.append(_header(view, gpu))
        out += link_lines(gpu) if any(link["active"] for link in gpu["nvlinks"]) else [ALL_INACTIVE]
    return "\n".join(out) + "\n"


def render_nvlink_status(view: Node) -> str:
    """`nvidia-smi nvlink -s` with the native TAB+space link indent (corpus azurehpc gpu7 sample)."""
    return _gpu_blocks(view, lambda gpu: [
        f"\t Link {n}: " + (f"{_gbps(link['gbps'])} GB/s" if link["active"] else "<inactive>")
        for n, link in enumerate(gpu["nvlinks"])])


def render_nvlink_errors(view: Node) -> str:
    """`nvidia-smi nvlink -e`: Replay/Recovery/CRC per link (CRC = flit + data CRC errors); NVLink5 counters on
    Blackwell, whose drivers print no Replay/Recovery/CRC."""
    blackwell = profile_of(view)["gpu"]["architecture"] == "Blackwell"
    out: list[str] = []
    for gpu in view["gpus"]:
        out.append(_header(view, gpu))
        for n, link in enumerate(gpu["nvlinks"]):
            if n:
                out.append("")
            if blackwell:
                out += [f"\t Link {n}: {name}: {value}" for name, value in _nvlink5_counters(gpu, n, link)]
                continue
            out.append(f"\t Link {n}: Replay Errors: {link['replay']}")
            out.append(f"\t Link {n}: Recovery Errors: {link['recovery']}")
            out.append(f"\t Link {n}: CRC Errors: {link['crc_flit'] + link['crc_data']}")
    return "\n".join(out) + "\n"


#: NVML's BER floor, printed for a link with no error at all.
BER_NONE = "15e-255"
FEC_BINS = 16


def _nvlink5_counters(gpu: dict[str, Any], n: int, link: dict[str, Any]) -> list[tuple[str, object]]:
    """The NVLink5 error counters of one link, named as driver 595.91.07 prints them on a B300 (public capture notes;
    the order and line layout are documented-only): the fault's replay/CRC counters feed Rx and effective errors."""
    failed = link.get("recovery_failed", 0)
    effective = link.get("effective_errors", 0)
    corrected = 36_000_000_000 + int(gpu["uuid"][4:12], 16) % 100_000_000 + n  # FEC bin 0 grows by billions
    return [
        ("Malformed packet Errors", 0), ("Buffer overrun Errors", 0), ("Rx Errors", link["crc_data"]),
        ("Rx remote Errors", 0), ("Rx General Errors", 0), ("Local link integrity Errors", 0), ("Tx discards", 0),
        ("Link recovery successful events", link["recovery"]), ("Link recovery failed events", failed),
        ("Total link recovery events", link["recovery"] + failed), ("Effective Errors", effective),
        ("Effective BER", BER_NONE if not effective else f"{effective}e-13"), ("Symbol Errors", link["crc_flit"]),
        ("Symbol BER", BER_NONE if not link["crc_flit"] else f"{link['crc_flit']}e-12"),
        *((f"FEC Errors - {b}", corrected if b == 0 else 0) for b in range(FEC_BINS)),
    ]


_CAPS = ("P2P is supported", "Access to system memory supported", "P2P atomics supported",
         "System memory atomics supported", "SLI is supported", "Link is supported")


def render_nvlink_caps(view: Node) -> str:
    """`nvidia-smi nvlink -c`: six capability lines per active link."""
    out: list[str] = []
    for gpu in view["gpus"]:
        out.append(_header(view, gpu))
        for n, link in enumerate(gpu["nvlinks"]):
            if not link["active"]:
                continue
            for cap in _CAPS:
                out.append(f"\t Link {n}, {cap}: true")
    return "\n".join(out) + "\n"


#: What an idle link's data counters read: a few GB each way since the driver loaded, as the links of an idle
#: H800 show (corpus nvlink-i0-gt-d-h800-8links-data-tx-rx-kib-idle: 5,861,984 to 5,864,630 KiB).
IDLE_DATA_KIB = 5_860_000
_IDLE_SPREAD_KIB = 5_000


def data_kib(gpu: dict[str, Any], link: int, direction: str) -> int:
    """The Data Tx or Rx counter (KiB) of one active link: the idle level plus a spread that is stable per GPU,
    link and direction (from the GPU's UUID), so that a render is a function of the node state."""
    seed = int(gpu["uuid"][4:12], 16) + 7919 * link + (104729 if direction == "Rx" else 0)
    return IDLE_DATA_KIB + seed % _IDLE_SPREAD_KIB


def render_nvlink_throughput(view: Node) -> str:
    """`nvidia-smi nvlink -gt d`: Data Tx/Rx KiB of each active link, with the 9-space link indent of the corpus
    sample (nvlink-i0-gt-d-h800-8links-data-tx-rx-kib-idle)."""
    return _gpu_blocks(view, lambda gpu: [
        f"         Link {n}: Data {d}: {data_kib(gpu, n, d)} KiB"
        for n, link in enumerate(gpu["nvlinks"]) if link["active"] for d in ("Tx", "Rx")])


# ---------------------------------------------------------------------------------------------
# topo -m
# ---------------------------------------------------------------------------------------------

_LEGEND = """Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnect between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks"""


def _ancestors(devs: dict[str, dict[str, Any]], bdf: str) -> list[str]:
    chain, cur = [], devs[bdf]["parent"]
    while cur is not None:
        chain.append(cur)
        cur = devs[cur]["parent"]
    return chain


def pcie_relation(view: Node, a: str, b: str) -> str:
    """PIX/PXB/NODE/SYS between two PCIe endpoints, from the bridge tree of the node."""
    devs = {d["bdf"]: d for d in view["pcie"]}
    up_a, up_b = _ancestors(devs, a), _ancestors(devs, b)
    common = [x for x in up_a if x in up_b]
    if common:
        # Bridges crossed below the closest common switch port: one switch (up + down) = PIX.
        kinds = {devs[x]["kind"] for x in up_a[: up_a.index(common[0])] + up_b[: up_b.index(common[0])]}
        return "PIX" if devs[common[0]]["kind"] == "switch_up" and kinds <= {"switch_down"} else "PXB"
    return "NODE" if devs[a]["numa"] == devs[b]["numa"] else "SYS"


def topo_nics(view: Node) -> list[dict[str, Any]]:
    """HCAs in mlx5 order (the NIC numbering of topo -m)."""
    return sorted(view["hcas"], key=lambda h: int(h["name"].split("_")[1]))


def render_topo(view: Node) -> str:
    """`nvidia-smi topo -m` in the native TAB layout (corpus topo-mp-8gpu-12nic-dell-cx7-native-tabs)."""
    p = profile_of(view)
    gpus = view["gpus"]
    nics = topo_nics(view)
    gpu_bdf = {g["index"]: f"{g['domain'].lower()}:{g['bus']}:00.0" for g in gpus}
    present = {d["bdf"] for d in view["pcie"]}
    names = [f"GPU{g['index']}" for g in gpus] + [f"NIC{n}" for n in range(len(nics))]
    rows: list[str] = ["\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"]
    active = [sum(1 for link in g["nvlinks"] if link["active"]) for g in gpus]

    def cell(kind_a: str, ia: int, kind_b: str, ib: int) -> str:
        if (kind_a, ia) == (kind_b, ib):
            return " X "
        if kind_a == kind_b == "gpu" and active[ia] and active[ib]:
            return f"NV{min(active[ia], active[ib])}"
        bdf_a = gpu_bdf[ia] if kind_a == "gpu" else nics[ia]["bdf"]
        bdf_b = gpu_bdf[ib] if kind_b == "gpu" else nics[ib]["bdf"]
        if bdf_a not in present or bdf_b not in present:
            return "SYS"
        return pcie_relation(view, bdf_a, bdf_b)

    items = [("gpu", g["index"]) for g in gpus] + [("nic", n) for n in range(len(nics))]
    half = max(1, len(gpus) // 2)
    numa_ids = p.get("gpu_numa_ids")
    for kind, i in items:
        cells = [cell(kind, i, k2, j) for k2, j in items]
        if kind == "gpu":
            cpu, numa = p["topo_affinity"][min(i // half, 1)]
            gpu_numa = str(numa_ids[i]) if numa_ids else "N/A"
            rows.append(f"GPU{i}\t" + "\t".join(cells) + f"\t{cpu}\t{numa}\t\t{gpu_numa}")
        else:
            rows.append(f"NIC{i}\t" + "\t".join(cells) + "\t\t\t\t")
    legend = [_LEGEND, "", "NIC Legend:", ""] + [f"  NIC{n}: {h['name']}" for n, h in enumerate(nics)]
    return "\n".join(rows) + "\n\n" + "\n".join(legend) + "\n\n"


def render_nvlink_info(view: Node) -> str:
    """`nvidia-smi nvlink -info`: each GPU's NVLink encryption (NVLE) and, on Blackwell, its link firmware."""
    out = []
    for gpu in view["gpus"]:
        out.append(f"GPU {gpu['index']}: {profile_of(view)['gpu']['model']} (UUID: {gpu['uuid']})")
        if profile_of(view)["gpu"]["architecture"] == "Blackwell":
            out += ["\t NVLE: disabled", "\t Firmware Version:", "\t     MSE: 14:4:0", "\t     NETIR: 36:2014:1862",
                    "\t     NETIR UPHY: 7:0:0", "\t     NETIR CLN: 0:9:0", "\t     NETIR DLN: 0:9:0"]
        else:
            out.append("\t NVLE: N/A")
    return "\n".join(out) + "\n"


#: Output key (tools.TOOLS) -> renderer.
RENDERERS: dict[str, Callable[[Node], str]] = {
    "nvlink_status": render_nvlink_status, "nvlink_errors": render_nvlink_errors, "nvlink_caps": render_nvlink_caps,
    "nvlink_info": render_nvlink_info, "nvlink_throughput": render_nvlink_throughput, "topo": render_topo,
}
