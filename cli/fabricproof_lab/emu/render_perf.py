"""Load-probe outputs in the real tools' formats (nccl-tests, nvbandwidth, perftest, dcgmi diag) and the idle-state
listings (nvidia-smi --query-compute-apps, scontrol listpids), from the node model (pure)."""

from __future__ import annotations

import math

from . import perfmodel
from .digest import sha256
from .model import Node, branch_of, installed_driver, profile_of
from .profiles import CUDA_BY_BRANCH

TYPE_CHECKING = False  # typing costs every emulated tool call its import; annotations only
if TYPE_CHECKING:
    from typing import Any

# ---------------------------------------------------------------------------------------------
# nccl-tests
# ---------------------------------------------------------------------------------------------

#: test binary -> (nominal key, redop column, bus factor of n ranks); nccl-tests' own busbw factors (PERFORMANCE.md).
NCCL_TESTS: dict[str, tuple[str, str]] = {
    "all_reduce_perf": ("all_reduce", "sum"),
    "all_gather_perf": ("all_gather", "none"),
    "alltoall_perf": ("alltoall", "none"),
}
NCCL_TESTS_VERSION = "2.17.8"  # as the corpus's H100 captures print it (nccl-headers=22902)
NCCL_CODE = 22902
#: Launch and synchronisation cost of one collective on NVSwitch (us): what small sizes measure.
NCCL_T0_US = 40.0
WARMUP, ITERS = 5, 20


def bus_factor(test: str, n: int) -> float:
    if n <= 1:
        return 1.0
    return 2.0 * (n - 1) / n if test == "all_reduce_perf" else (n - 1) / n


def sizes(min_bytes: int, max_bytes: int, factor: int) -> list[int]:
    out, s = [], max(0, min_bytes)
    while s <= max_bytes:
        out.append(s)
        if factor <= 1 or s == 0:
            s = s + 1 if s == 0 else s * 2
        else:
            s *= factor
    return out


def _time(us: float) -> str:
    """nccl-tests' time cell: two decimals below 10 ms, one above."""
    return f"{us:7.2f}" if us < 10000 else f"{us:7.1f}"


def nccl_rows(view: Node, test: str, byte_sizes: list[int], ngpus: int) -> list[dict[str, Any]]:
    """Per size: the count, and for out-of-place and in-place the time (us), algbw and busbw (GB/s)."""
    key, _redop = NCCL_TESTS[test]
    target = perfmodel.nominal(view, key) * perfmodel.nvlink_factor(view)
    return rows_at(view["hostname"], test, byte_sizes, ngpus, target)


def rows_at(seed: str, test: str, byte_sizes: list[int], nranks: int, target: float) -> list[dict[str, Any]]:
    """The rows of a run of `nranks` ranks whose busbw tends to `target` (GB/s), with noise seeded by `seed`."""
    bf = bus_factor(test, nranks)
    alg_peak = target / bf * 1e3  # bytes per us at the asymptote
    per = 4 if test == "all_reduce_perf" else 4 * nranks  # float elements (per rank for gather/alltoall)
    rows = []
    for size in byte_sizes:
        count = size // per
        real = count * per
        groups = []
        for g in ("out", "in"):
            n = perfmodel.noise(seed, test, real, g)
            t = (NCCL_T0_US + (real / alg_peak if alg_peak else 0.0)) / n
            alg = real / t / 1e3 if real else 0.0
            groups.append({"time_us": t, "algbw": alg, "busbw": alg * bf})
        rows.append({"size": real, "count": count, "groups": groups})
    return rows


def render_nccl(view: Node, test: str, min_bytes: int, max_bytes: int, factor: int, ngpus: int) -> str:
    """One nccl-tests run in the 2.17 layout of the corpus (header, devices, table, summary lines)."""
    _key, redop = NCCL_TESTS[test]
    gpus = view["gpus"][:ngpus]
    rows = nccl_rows(view, test, sizes(min_bytes, max_bytes, factor), len(gpus))
    pid = 4000000 + view["index"] * 37 % 100000
    out = [f"# nccl-tests version {NCCL_TESTS_VERSION} nccl-headers={NCCL_CODE} nccl-library={NCCL_CODE}",
           f"# Collective test starting: {test}",
           f"# nThread 1 nGpus {len(gpus)} minBytes {min_bytes} maxBytes {max_bytes} step: {factor}(factor) "
           f"warmup iters: {WARMUP} iters: {ITERS} agg iters: 1 validation: 1 graph: 0",
           "#", "# Using devices"]
    name = profile_of(view)["gpu"]["model"]
    for gpu in gpus:
        bus = gpu["bus_id"][4:-2].lower()  # 00000000:1B:00.0 -> 0000:1b:00
        out.append(f"#  Rank {gpu['index']:2d} Group  0 Pid {pid:7d} on {view['hostname']:>10} device "
                   f"{gpu['index']:2d} [{bus}] {name}")
    out += _table(rows, redop, test)
    return "\n".join(out) + "\n"


def render_nccl_nodes(test: str, min_bytes: int, max_bytes: int, factor: int, ngpus: int,
                      nodes: list[dict[str, Any]], target: float) -> str:
    """A run across nodes as rank 0 prints it (layout of the corpus's 10-node H100 run): a rank line per host and
    device (ranks numbered task by task, `ngpus` devices each), the table of all ranks, the summary lines."""
    _key, redop = NCCL_TESTS[test]
    nranks = len(nodes) * ngpus
    rows = rows_at(",".join(n["host"] for n in nodes), test, sizes(min_bytes, max_bytes, factor), nranks, target)
    out = [f"# nccl-tests version {NCCL_TESTS_VERSION} nccl-headers={NCCL_CODE} nccl-library={NCCL_CODE}",
           f"# Collective test starting: {test}",
           f"# nThread 1 nGpus {ngpus} minBytes {min_bytes} maxBytes {max_bytes} step: {factor}(factor) "
           f"warmup iters: {WARMUP} iters: {ITERS} agg iters: 1 validation: 1 graph: 0",
           "#", "# Using devices"]
    for t, node in enumerate(nodes):
        for i, (index, bus) in enumerate(node["gpus"][:ngpus]):
            out.append(f"#  Rank {t * ngpus + i:2d} Group  0 Pid {node['pid'] + i:7d} on {node['host']:>10} device "
                       f"{index:2d} [{bus}] {node['model']}")
    out += _table(rows, redop, test)
    return "\n".join(out) + "\n"


def _table(rows: list[dict[str, Any]], redop: str, test: str) -> list[str]:
    out = ["#",
           "#                                                              out-of-place                       in-place"
           "          ",
           "#       size         count      type   redop    root     time   algbw   busbw  #wrong     time   algbw   "
           "busbw  #wrong ",
           "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             (us)  (GB/s)  "
           "(GB/s)         "]
    cells = []
    for r in rows:
        line = f"{r['size']:12d}  {r['count']:12d}  {'float':>8}  {redop:>6}  {-1:6d}"
        for g in r["groups"]:
            line += f"  {_time(g['time_us'])}  {g['algbw']:6.2f}  {g['busbw']:6.2f}  {0:6d}"
            cells.append(g["busbw"])
        out.append(line)
    avg = sum(cells) / len(cells) if cells else 0.0
    return out + ["# Out of bounds values : 0 OK", f"# Avg bus bandwidth    : {avg:g} ", "#",
                  f"# Collective test concluded: {test}", "#"]


def nccl_real_s(max_bytes: int) -> float:
    """How long the real sweep takes: NCCL init plus (warmup + iters) x 2 groups of the largest sizes; the
    8 B..8 GiB sweep of 8 GPUs is about a minute (nccl_tests collector's own estimate)."""
    return 20.0 + 40.0 * min(8.0, max(max_bytes, 1) / 8589934592)


# ---------------------------------------------------------------------------------------------
# nvbandwidth (v0.10 layout)
# ---------------------------------------------------------------------------------------------

#: testcase -> (title, kind): kind d2d (GPU x GPU matrix) or h2d (one CPU row).
NVBANDWIDTH: dict[str, tuple[str, str]] = {
    "device_to_device_memcpy_read_ce": ("memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", "d2d"),
    "device_to_device_memcpy_write_ce": ("memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", "d2d"),
    "device_to_device_memcpy_read_sm": ("memcpy SM GPU(row) -> GPU(column) bandwidth (GB/s)", "d2d"),
    "device_to_device_memcpy_write_sm": ("memcpy SM GPU(row) <- GPU(column) bandwidth (GB/s)", "d2d"),
    "host_to_device_memcpy_ce": ("memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)", "h2d"),
    "device_to_host_memcpy_ce": ("memcpy CE CPU(row) <- GPU(column) bandwidth (GB/s)", "h2d"),
    "host_to_device_memcpy_sm": ("memcpy SM CPU(row) -> GPU(column) bandwidth (GB/s)", "h2d"),
    "device_to_host_memcpy_sm": ("memcpy SM CPU(row) <- GPU(column) bandwidth (GB/s)", "h2d"),
}
NVBANDWIDTH_VERSION = "v0.10.0"
NVBANDWIDTH_TESTCASE_REAL_S = 20.0  # estimate: one 8-GPU device-to-device testcase, 56 pairs of copies


def nvbandwidth_matrix(view: Node, testcase: str) -> tuple[list[int], list[list[float | None]]]:
    """(row labels, cells): a GPU pair carries the nominal figure times the weaker end's NVLink share; a CPU row
    carries each GPU's PCIe share of the host figure."""
    _title, kind = NVBANDWIDTH[testcase]
    gpus = view["gpus"]
    if kind == "h2d":
        base = perfmodel.nominal(view, "h2d")
        return [0], [[base * perfmodel.pcie_factor(view, g) * perfmodel.noise(view["hostname"], testcase, g["index"])
                      for g in gpus]]
    base = perfmodel.nominal(view, "d2d")
    share = [perfmodel.gpu_nvlink_factor(view, g) for g in gpus]
    cells: list[list[float | None]] = []
    for i in range(len(gpus)):
        cells.append([None if i == j else base * min(share[i], share[j]) *
                      perfmodel.noise(view["hostname"], testcase, i, j) for j in range(len(gpus))])
    return list(range(len(gpus))), cells


def _cuda(view: Node) -> str:
    drv = installed_driver(view) or view["driver"]["loaded"]
    v = CUDA_BY_BRANCH.get(branch_of(drv), "12.2")
    major, minor = (int(x) for x in v.split("."))
    return f"{v} ({major * 1000 + minor * 10})"


def render_nvbandwidth(view: Node, testcases: list[str]) -> str:
    """`nvbandwidth -t <testcase>...` as v0.10 prints it (the corpus's H100 run): versions, then per testcase its
    matrix, SUM and COEFFICIENT_OF_VARIATION lines."""
    drv = installed_driver(view) or view["driver"]["loaded"]
    out = [f"nvbandwidth Version: {NVBANDWIDTH_VERSION}", f"Built from Git version: {NVBANDWIDTH_VERSION}", "",
           f"CUDA Runtime Version: {_cuda(view)}", f"CUDA Driver Version (API): {_cuda(view)}",
           f"Driver Version: {drv}", ""]
    for tc in testcases:
        title, _kind = NVBANDWIDTH[tc]
        rows, cells = nvbandwidth_matrix(view, tc)
        out += [f"Running {tc}.", title, "  " + "".join(f"{c:>10}" for c in range(len(cells[0])))]
        values = []
        for r, row in zip(rows, cells):
            out.append(f"{r:>2}" + "".join(f"{'N/A' if v is None else f'{v:.2f}':>10}" for v in row))
            values += [round(v, 2) for v in row if v is not None]
        mean = sum(values) / len(values)
        cov = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean if mean else 0.0
        out += ["", f"SUM {tc} {sum(values):.2f}", f"COEFFICIENT_OF_VARIATION {tc} {cov:.2f}", ""]
    out += ["NOTE: The reported results may not reflect the full capabilities of the platform.",
            "Performance can vary with software drivers, hardware clocks, and system topology."]
    return "\n".join(out) + "\n"


def nvbandwidth_unknown(testcase: str) -> str:
    return f"ERROR: Testcase {testcase} not found!\n"


# ---------------------------------------------------------------------------------------------
# perftest (ib_write_bw, ib_write_lat)
# ---------------------------------------------------------------------------------------------

SEPARATOR = "-" * 87
BANNER = "\n************************************\n* Waiting for client to connect... *\n************************************\n"
#: The real failure of a --use_cuda run without nvidia_peermem (corpus perftest/ib_write_bw-use_cuda-FAIL-couldnt-
#: allocate-MR-error14-...): the buffer is allocated, its registration for RDMA fails with EFAULT.
MR_FAILURE = ("Couldn't allocate MR with error=14\nfailed to create mr\nFailed to create MR\n"
              " Couldn't create IB resources\ndestroying current CUDA Ctx\n")
#: perftest_communication.c: a client that reaches no server, and a server whose accept() fails (the lab's
#: server gives up after a bounded wait: accept() then reports the timeout).
CONNECT_FAILURE = "Couldn't connect to {host}:{port}\n Unable to init the socket connection\n"
ACCEPT_FAILURE = "server accept: Connection timed out\naccept() failed\n Unable to init the socket connection\n"
#: A peer that went away in the middle of the exchange (perftest's ctx_hand_shake failing).
EXCHANGE_FAILURE = " Failed to exchange data between server and clients\n"
#: A port that is not Active: the QP cannot move to RTR (perftest's ctx_connect).
LINK_FAILURE = "Failed to modify QP {qpn} to RTR\n Unable to Connect the HCA's through the link\n"


def cuda_lines(view: Node, gpu: dict[str, Any], size: int) -> str:
    """What perftest prints while it sets up a --use_cuda buffer (corpus ib_write_bw-use_cuda-dmabuf-h200-...,
    without the DMA-BUF lines: the classic nvidia-peermem path)."""
    addr = 0x594CA7000000 + view["index"] * 0x1000 + gpu["index"] * 0x100
    return ("Perftest doesn't supports CUDA tests with inline messages: inline size set to 0\n"
            "initializing CUDA\nListing all CUDA devices in system:\n"
            + "".join(f"CUDA device {g['index']}: PCIe address is {g['bus_id'].split(':', 1)[1][:5]}\n"
                      for g in view["gpus"])
            + f"\nPicking device No. {gpu['index']}\n"
            f"[pid = {1000 + view['index'] % 30000}, dev = {gpu['index']}] device name = "
            f"[{profile_of(view)['gpu']['model']}]\n"
            "creating CUDA Ctx\nmaking it the current CUDA Ctx\nCUDA device integrated: 0\n"
            f"allocated GPU buffer of a {2 * size} address at 0x{addr:012x} for type CUDA_MEM_DEVICE\n")


def qp(view: Node, dev: dict[str, Any], port: int, side: str) -> dict[str, str]:
    """A QP's address line values: the port's LID and a QPN/PSN/RKey stable per node, device, port and side."""
    h = int(sha256(f"{view['hostname']}/{dev['name']}/{port}/{side}".encode()).hexdigest(), 16)
    lid = dev["ports"][0]["base_lid"]
    return {"lid": f"0x{lid:x}" if lid else "0000", "qpn": f"0x{h % 0xffff:04x}", "psn": f"0x{(h >> 16) % 0xffffff:06x}",
            "rkey": f"0x{(h >> 40) % 0xffffff:06x}", "vaddr": f"0x{0x7f0000000000 + ((h >> 64) % 0xffffffff) * 0x1000:014x}"}


def perftest_header(kind: str, dev: dict[str, Any], tx_depth: bool) -> str:
    """The test's title and settings block, up to the separator before the addresses (corpus layout)."""
    port = dev["ports"][0]
    link = "IB" if port["link_layer"] == "InfiniBand" else "Ethernet"
    title = "RDMA_Write BW Test" if kind == "bw" else "RDMA_Write Latency Test"
    lines = [SEPARATOR, f"                    {title}",
             f" Dual-port       : OFF\t\tDevice         : {dev['name']}",
             " Number of qps   : 1\t\tTransport type : IB",
             " Connection type : RC\t\tUsing SRQ      : OFF",
             f" PCIe relax order: {'ON' if kind == 'bw' else 'OFF'}",
             " ibv_wr* API     : ON"]
    if kind == "bw":
        if tx_depth:
            lines.append(" TX depth        : 128")
        lines.append(" CQ Moderation   : 100")
    lines += [f" Mtu             : {port['active_mtu']}[B]", f" Link type       : {link}"]
    if link == "Ethernet":
        lines.append(" GID index       : 3")
    lines += [f" Max inline data : {0 if kind == 'bw' else 220}[B]", " rdma_cm QPs\t : OFF",
              " Data ex. method : Ethernet", SEPARATOR]
    return "\n".join(lines) + "\n"


def perftest_addresses(local: dict[str, str], remote: dict[str, str]) -> str:
    return (f" local address: LID {local['lid']} QPN {local['qpn']} PSN {local['psn']} RKey {local['rkey']} "
            f"VAddr {local['vaddr']}\n"
            f" remote address: LID {remote['lid']} QPN {remote['qpn']} PSN {remote['psn']} RKey {remote['rkey']} "
            f"VAddr {remote['vaddr']}\n{SEPARATOR}\n")


def bw_table(size: int, gbps: float, gbits: bool, iterations: int = 5000) -> str:
    """One row at the run's size: BW peak a little above the average, in Gb/sec or MB/sec (2^20 bytes)."""
    peak = gbps * 1.0008
    rate = gbps * 1e9 / 8 / size / 1e6
    if gbits:
        return (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
                f" {size:<10d} {iterations:<10d}       {peak:.2f}             {gbps:.2f}               {rate:.6f}\n"
                f"{SEPARATOR}\n")
    mb = 1e9 / 8 / 1048576
    return (" #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
            f" {size:<10d} {iterations:<10d}       {peak * mb:.2f}            {gbps * mb:.2f}\t\t   {rate:.6f}\n"
            f"{SEPARATOR}\n")


def lat_table(size: int, typical: float, iterations: int = 1000) -> str:
    """One latency row in the 9-column layout of newer perftest (corpus ib_write_lat-a-cx6-hdr2x-...)."""
    t_min, t_max, t_avg = typical * 0.957, typical * 2.87, typical * 1.005
    return (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
            "99% percentile[usec]   99.9% percentile[usec] \n"
            f" {size:<7d} {iterations:<7d}       {t_min:.2f}           {t_max:.2f}         {typical:.2f}     \t       "
            f"{t_avg:.2f}        \t0.19   \t\t{typical * 1.09:.2f}    \t\t{t_max:.2f}   \n{SEPARATOR}\n")


# ---------------------------------------------------------------------------------------------
# dcgmi diag (DCGM 3.3 table)
# ---------------------------------------------------------------------------------------------

DCGM_VERSION = "3.3.3"  # the corpus's A100 capture
DCGM_REAL_S = {1: 10.0, 2: 120.0, 3: 900.0, 4: 3600.0}  # spec.dcgm_timeout_s: seconds, ~2 min, ~15 min, longer
_W = 48  # the result column's width


def _dcgm_row(name: str, value: str) -> str:
    return f"| {name:<25} | {value:<{_W - 2}} |"


def _wrap(text: str) -> list[str]:
    width = _W - 2
    return [text[i:i + width] for i in range(0, len(text), width)] or [""]


def dcgm_findings(view: Node, expected_links: int | None) -> dict[str, list[str]]:
    """Test name -> its warnings: the PCIe test checks NVLinks up per GPU against -p pcie.gpu_nvlinks_expected_up
    (DCGM_FR_NVLINK_DOWN's message text) and the GPU's PCIe link width; the memory test fails on pending row
    remaps."""
    found: dict[str, list[str]] = {"PCIe": [], "GPU Memory": [], "Persistence Mode": []}
    width = profile_of(view)["gpu"]["pcie_width"]
    for gpu in view["gpus"]:
        if expected_links is not None:
            for n, link in enumerate(gpu["nvlinks"]):
                if not link["active"]:
                    found["PCIe"].append(f"GPU {gpu['index']}'s NvLink link {n} is currently down")
        if int(gpu["pcie_width"]) < width:
            found["PCIe"].append(f"GPU {gpu['index']}: PCIe link width x{gpu['pcie_width']} is below the maximum "
                                 f"x{width}")
        if gpu["persistence_mode"] != "Enabled":
            # DCGM_FR_PERSISTENCE_MODE's message (its own spelling)
            found["Persistence Mode"].append(f"Persistence mode for GPU {gpu['index']} is currently disabled. The "
                                             "DCGM diagnostic requires peristence mode to be enabled. Enable "
                                             "persistence mode by running \"nvidia-smi -i <gpuId> -pm 1 \" as root.")
        if gpu["remapped_rows"]["pending"]:
            found["GPU Memory"].append(f"GPU {gpu['index']} has pending row remappings: reset the GPU")
    return found


def render_dcgmi_diag(view: Node, level: int, expected_links: int | None) -> str:
    """`dcgmi diag -r <level>` as DCGM 3.3 prints it (corpus dcgmi/diag-r2-a100-...)."""
    drv = installed_driver(view) or view["driver"]["loaded"]
    ids = ",".join(profile_of(view)["gpu"]["pci_device_id"] for _ in view["gpus"])
    rule = "+---------------------------+------------------------------------------------+"
    out = ["Successfully ran diagnostic for group.", rule, _dcgm_row("Diagnostic", "Result"),
           "+===========================+================================================+",
           "|-----  Metadata  ----------+------------------------------------------------|",
           _dcgm_row("DCGM Version", DCGM_VERSION), _dcgm_row("Driver Version Detected", drv),
           _dcgm_row("GPU Device IDs Detected", ids),
           "|-----  Deployment  --------+------------------------------------------------|"]
    found = dcgm_findings(view, expected_links)

    def test(name: str, passed: str = "Pass - All") -> None:
        if found.get(name):
            out.append(_dcgm_row(name, "Fail"))
            for msg in found[name]:
                chunks = _wrap(msg)
                out.append(_dcgm_row("Warning", chunks[0]))
                out.extend(_dcgm_row("", c) for c in chunks[1:])
        else:
            out.append(_dcgm_row(name, passed))

    for name in ("Denylist", "NVML Library", "CUDA Main Library", "Permissions and OS Blocks", "Persistence Mode",
                 "Environment Variables", "Page Retirement/Row Remap", "Graphics Processes", "Inforom"):
        test(name, "Pass")

    if level >= 2:
        out.append("+-----  Integration  -------+------------------------------------------------+")
        test("PCIe")
        out.append("+-----  Hardware  ----------+------------------------------------------------+")
        test("GPU Memory")
    if level >= 3:
        out.append("+-----  Stress  ------------+------------------------------------------------+")
        for name in ("Targeted Stress", "Targeted Power", "Memory Bandwidth"):
            test(name)
    out.append(rule)
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------------------------------------
# idle state
# ---------------------------------------------------------------------------------------------

#: --query-compute-apps fields -> (header name, value of one process entry, unit)
COMPUTE_APP_FIELDS: dict[str, tuple[str, str, str]] = {
    "pid": ("pid", "pid", ""), "process_name": ("process_name", "name", ""), "name": ("process_name", "name", ""),
    "used_memory": ("used_gpu_memory", "used_mib", " [MiB]"), "used_gpu_memory": ("used_gpu_memory", "used_mib", " [MiB]"),
    "gpu_uuid": ("gpu_uuid", "gpu_uuid", ""), "gpu_bus_id": ("gpu_bus_id", "gpu_bus_id", ""),
    "gpu_name": ("gpu_name", "gpu_name", ""), "gpu_serial": ("gpu_serial", "gpu_serial", ""),
}


def render_compute_apps(view: Node, fields: list[str], header: bool, units: bool) -> str:
    """`nvidia-smi --query-compute-apps=<fields> --format=csv[,noheader][,nounits]`: one row per process; with
    no process, the header alone (or nothing with noheader), as on an idle node."""
    by_gpu = {g["index"]: g for g in view["gpus"]}
    rows = []
    if header:
        rows.append(", ".join(COMPUTE_APP_FIELDS[f][0] + (COMPUTE_APP_FIELDS[f][2] if units else "") for f in fields))
    for proc in perfmodel.compute_apps(view):
        gpu = by_gpu.get(proc["gpu"], view["gpus"][0])
        entry = {"pid": str(proc["pid"]), "name": proc["name"],
                 "used_mib": f"{proc['used_mib']}" + (" MiB" if units else ""), "gpu_uuid": gpu["uuid"],
                 "gpu_bus_id": gpu["bus_id"], "gpu_name": profile_of(view)["gpu"]["model"],
                 "gpu_serial": gpu["serial"]}
        rows.append(", ".join(entry[COMPUTE_APP_FIELDS[f][1]] for f in fields))
    return "".join(r + "\n" for r in rows)


#: scontrol listpids (Slurm 23.11, src/scontrol/info_job.c): header and rows "%-8d %-8d %-8s %-7d %-8d ".
LISTPIDS_HEADER = f"{'PID':<8} {'JOBID':<8} {'STEPID':<8} {'LOCALID':<7} {'GLOBALID':<8}\n"
LISTPIDS_NONE = "No job steps exist on this node.\n"


def render_listpids(view: Node, job: str | None) -> tuple[str, str, int]:
    """`scontrol listpids [JOBID[.STEPID]]`: the processes of the node's job steps. Slurm 23.11 prints the header
    only when there is a step to list; with none, "No job steps exist on this node." on stderr and exit 1."""
    steps = perfmodel.slurm_steps(view)
    if job is not None and job != "*":
        jid, _, sid = job.partition(".")
        steps = [s for s in steps if str(s["job"]) == jid and (not sid or s["step"] == sid)]
        if not steps:
            what = f"StepId={job}" if sid else None
            msg = (f"{what} does not exist on node {view['hostname']}.\n" if what else
                   f"There are no steps for job {jid} on node {view['hostname']}.\n")
            return "", msg, 1
    elif not steps:
        return "", LISTPIDS_NONE, 1
    rows = [LISTPIDS_HEADER]
    for step in steps:
        for local, pid in enumerate(step["pids"]):
            rows.append(f"{pid:<8d} {step['job']:<8d} {step['step']:<8} {local:<7d} {local:<8d} \n")
        # a process of the step that is no task (a child a task forked): listed without task ids
        rows.append(f"{step['child_pid']:<8d} {step['job']:<8d} {step['step']:<8} {'-':<7} {'-':<8} \n")
    return "".join(rows), "", 0
