"""perftest (ib_write_bw, ib_read_bw, ib_send_lat, ib_write_lat): each side's rows and headline, per target."""

from __future__ import annotations

import re
from typing import Any

from ..base import Collector, ParseError
from ..fragments import array, boolean, choice, integer, mapping, number, obj, string
from .declare import probe_collector
from .text import lines_of, split_targets
from .text import number as to_number

_TITLE = re.compile(r"^\s*(?P<test>(?:RDMA_Write|RDMA_Read|Send|Atomic \w+)) (?P<kind>BW|Latency) Test\s*$")
_BANNER = re.compile(r"Waiting for client to connect")
_SEPARATOR = re.compile(r"^-{20,}\s*$")
_PAIR = re.compile(r"([A-Za-z][A-Za-z0-9_.*\- ]*?)\s*:\s*(\S+)")
_ADDRESS = re.compile(r"^\s*(?P<side>local|remote) address: LID (?P<lid>\S+) QPN (?P<qpn>\S+)")
_GID = re.compile(r"^\s*GID: (?P<gid>\S+)")
# The column header names each column (a name may hold a space, a unit follows in brackets); any other token is a
# column perftest added that this parser does not know: it still takes its cell, so the row lines up.
_COLUMN = re.compile(r"(#bytes|#iterations|BW peak|BW average|MsgRate|t_min|t_max|t_typical|t_avg|t_stdev|"
                     r"99% percentile|99\.9% percentile|CPU_Util|[^\s\[]+)(?:\[(?P<unit>[^\]]+)\])?")
_COLUMN_KEYS = {"#bytes": "size_bytes", "#iterations": "iterations", "BW peak": "bw_peak", "BW average": "bw_average",
                "MsgRate": "msg_rate_mpps", "t_min": "t_min_us", "t_max": "t_max_us", "t_typical": "t_typical_us",
                "t_avg": "t_avg_us", "t_stdev": "t_stdev_us", "99% percentile": "p99_us",
                "99.9% percentile": "p99_9_us", "CPU_Util": "cpu_util_pct"}
_CUDA_DEVICE = re.compile(r"^Picking device No\. (?P<n>\d+)|^\[pid = \d+, dev = (?P<dev>\d+)\] device name = \[(?P<name>[^\]]*)\]")
_CUDA = re.compile(r"CUDA_MEM_DEVICE|creating CUDA Ctx|initializing CUDA")
_DMABUF = re.compile(r"using DMA-BUF|ibv_reg_dmabuf_mr")
# What a --use_cuda run prints between its server banner and its title (newer perftest sets CUDA up after the
# banner): not counted when looking for the banner just above a title.
_CUDA_CHATTER = re.compile(r"CUDA|^Picking device|^\[pid = |GPU buffer|ibv_reg_(?:dmabuf_)?mr|DMA-BUF|inline size")
_FREQ = re.compile(r"^Conflicting CPU frequency values detected")
# perftest's failures: "Couldn't allocate MR with error=14", "Completion with error at client", "Failed status 10:
# ...", "Failed to complete run_iter_bw function successfully", "Unable to open file descriptor for socket ...".
_ERROR = re.compile(r"^\s*(?:Couldn't|Could not|Failed|Completion with error|Unable to|Error|ERROR|Problems with)\b")
_HEADER_KEYS = {"Device": "device", "Number of qps": "qps", "Transport type": "transport", "Connection type":
                "connection", "Link type": "link_type", "Mtu": "mtu", "GID index": "gid_index", "rdma_cm QPs": "rdma_cm",
                "TX depth": "tx_depth", "RX depth": "rx_depth", "Max inline data": "max_inline_bytes",
                "Data ex. method": "exchange", "TOS": "tos", "Outstand reads": "outstanding_reads"}
_COUNTS = ("size_bytes", "iterations")
_INTS = {"qps", "mtu", "gid_index", "tx_depth", "rx_depth", "max_inline_bytes", "tos", "outstanding_reads"}
_GBITS_PER_MB = 1048576 * 8 / 1e9  # MB/sec is 2^20 bytes a second (perftest's format_factor 0x100000)


def _header_value(key: str, raw: str) -> Any:
    if key in _INTS:
        digits = re.match(r"\d+", raw)
        return int(digits.group(0)) if digits else None
    if key == "rdma_cm":
        return raw.upper() == "ON"
    return raw


def _rows(lines: list[str], columns: list[tuple[str, str | None]], start_no: int) -> list[dict[str, Any]]:
    rows = []
    for no, line in enumerate(lines, start_no):
        cells = line.split()
        if not cells or not cells[0].isdigit():
            continue
        if len(cells) != len(columns):
            raise ParseError(f"line {no}: {len(cells)} cells under {len(columns)} columns: {line.strip()[:80]}")
        row: dict[str, Any] = {}
        for (name, _), cell in zip(columns, cells):
            key = _COLUMN_KEYS.get(name)
            if key is None:
                continue  # a column this parser does not know: its cell is skipped, the others stay in place
            value = to_number(cell)
            if value is None:
                raise ParseError(f"line {no}: {name} cell {cell!r} is not a number")
            row[key] = int(value) if key in _COUNTS else value
        rows.append(row)
    return rows


def _run(title: re.Match[str], lines: list[str], offset: int, side: str, prelude: list[str]) -> dict[str, Any]:
    """One side's block (lines[0] is its title): the header up to the first separator, addresses, column header,
    rows. offset is lines[0]'s line number, for errors."""
    run: dict[str, Any] = {"side": side, "test": f"{title['test']} {title['kind']}",
                           "kind": "bw" if title["kind"] == "BW" else "lat", **{k: None for k in _HEADER_KEYS.values()},
                           "local_lid": None, "remote_lid": None, "local_gid": None, "remote_gid": None,
                           "units": None, "columns": [], "rows": [], "cuda": _cuda(prelude + lines),
                           "cpu_freq_warnings": sum(1 for line in lines if _FREQ.match(line))}
    i = 1
    while i < len(lines) and not _SEPARATOR.match(lines[i]):
        for key, raw in _PAIR.findall(lines[i]):
            if key.strip() in _HEADER_KEYS:
                run[_HEADER_KEYS[key.strip()]] = _header_value(_HEADER_KEYS[key.strip()], raw)
        i += 1
    last_address = None
    for j in range(i, len(lines)):
        line = lines[j]
        if m := _ADDRESS.match(line):
            last_address = m["side"]
            if run[f"{last_address}_lid"] is None:  # 4 QPs print 4 addresses: the first speaks for them
                run[f"{last_address}_lid"] = m["lid"]
        elif (m := _GID.match(line)) and last_address and run[f"{last_address}_gid"] is None:
            run[f"{last_address}_gid"] = m["gid"]
        elif line.lstrip().startswith("#bytes"):
            columns = [(m.group(1), m.group("unit")) for m in _COLUMN.finditer(line)]
            run["columns"] = [name + (f"[{unit}]" if unit else "") for name, unit in columns]
            units = [u for name, u in columns if name == "BW average"]
            run["units"] = units[0] if units else "usec"
            run["rows"] = _rows(lines[j + 1:], columns, offset + j + 1)
            break
    return run


def _cuda(lines: list[str]) -> dict[str, Any] | None:
    """The GPU buffer of a --use_cuda run, from perftest's CUDA lines; None for host memory."""
    if not any(_CUDA.search(line) for line in lines):
        return None
    cuda: dict[str, Any] = {"device": None, "name": None, "dmabuf": any(_DMABUF.search(line) for line in lines)}
    for line in lines:
        if m := _CUDA_DEVICE.match(line.strip()):
            if m["n"] is not None:
                cuda["device"] = int(m["n"])
            else:
                cuda["device"], cuda["name"] = int(m["dev"]), m["name"]
    return cuda


def _headline(run: dict[str, Any]) -> dict[str, Any]:
    """The run's figure: bw at its largest size in Gb/s (MB/sec converted), or latency at its smallest size."""
    rows = run["rows"]
    if run["kind"] == "bw":
        last = max(rows, key=lambda r: r["size_bytes"])
        scale = _GBITS_PER_MB if (run["units"] or "").upper().startswith("MB") else 1.0
        gbps = {f"{k}_gbps": round(last[k] * scale, 3) if k in last else None for k in ("bw_peak", "bw_average")}
        return {"size_bytes": last["size_bytes"], **gbps, "msg_rate_mpps": last.get("msg_rate_mpps")}
    first = min(rows, key=lambda r: r["size_bytes"])
    return {"size_bytes": first["size_bytes"], **{k: first.get(k) for k in
                                                   ("t_min_us", "t_max_us", "t_typical_us", "t_avg_us", "t_stdev_us",
                                                    "p99_us", "p99_9_us")}}


def parse_perftest_output(text: str) -> dict[str, Any]:
    """One target's output: one run per side it holds (a loopback holds the client's and the server's)."""
    lines = lines_of(text)
    errors = [line.strip() for line in lines if _ERROR.match(line)]
    starts = [i for i, line in enumerate(lines) if _TITLE.match(line)]
    if errors:
        shown = "; ".join(dict.fromkeys(errors))[:300]
        if _CUDA.search(text) and any("allocate MR" in e or "create MR" in e for e in errors):
            shown += " (GPU memory could not be registered for RDMA: nvidia-peermem not loaded, or a DMA-BUF host " \
                     "run without --use_cuda_dmabuf)"
        raise ParseError(f"perftest failed: {shown}")
    if not starts:
        raise ParseError("no perftest test title (e.g. 'RDMA_Write BW Test'): not perftest output")
    runs = []
    for n, start in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        before = lines[(starts[n - 1] if n else 0):start]
        near = [line for line in before if not _CUDA_CHATTER.search(line)][-8:]
        side = "server" if any(_BANNER.search(line) for line in near) else "client"
        # the CUDA lines of a --use_cuda run come before its first title
        run = _run(_TITLE.match(lines[start]), lines[start:end], start + 1, side, lines[:start] if n == 0 else [])
        if not run["rows"]:
            raise ParseError(f"perftest {run['test']} ({side}) printed no result row: the run did not complete")
        runs.append(run)
    main = next((r for r in runs if r["side"] == "client"), runs[0])
    return {"test": main["test"], "kind": main["kind"], "device": main["device"], "gpu_memory": main["cuda"] is not None,
            "runs": runs, **_headline(main)}


def parse_perftest(text: str) -> dict[str, Any]:
    """A probe's raw evidence: outputs under '==> <target> <==' titles (an HCA for ib_gdr_bw, a peer host for the
    pair probes), or one output, keyed then by its device. Any target's failure fails the whole probe."""
    if not text.strip():
        raise ParseError("empty perftest output")
    targets: dict[str, Any] = {}
    for name, body in split_targets(text).items():
        try:
            result = parse_perftest_output(body)
        except ParseError as exc:
            raise ParseError(f"{name}: {exc}" if name else str(exc)) from None
        targets[name or result["device"] or "-"] = result
    return {"targets": targets, "pairing": None}  # the probe run fills pairing in from every host's pairs


_RUN = obj(
    "One side's run (the client's and, in a loopback, the server's).",
    {
        "side": choice("client, or server (its output starts with 'Waiting for client to connect').",
                       ["client", "server"]),
        "test": string("Test title without 'Test', e.g. 'RDMA_Write BW'."),
        "kind": choice("bw or lat.", ["bw", "lat"]),
        **{key: (integer if key in _INTS else boolean if key == "rdma_cm" else string)(f"Header '{name}'.", True)
           for name, key in _HEADER_KEYS.items()},
        "local_lid": string("Local LID as printed (0000 on RoCE).", True),
        "remote_lid": string("Remote LID as printed.", True),
        "local_gid": string("Local GID (RoCE).", True),
        "remote_gid": string("Remote GID (RoCE).", True),
        "units": string("Units of the bandwidth columns (MB/sec, or Gb/sec with --report_gbits); usec for latency.",
                        True),
        "columns": array("The result table's column header as printed, e.g. 'BW average[Gb/sec]' (--cpu_util adds "
                         "'CPU_Util[%]'); columns not listed under rows are read past.", string("Column.")),
        "rows": array("Result rows, one per message size, in the units printed.", obj(
            "One message size: the columns the test prints (bw: peak, average, rate; lat: t_* and percentiles).",
            {"size_bytes": integer("Column #bytes."), "iterations": integer("Column #iterations."),
             **{key: number(f"Column {name}.") for name, key in _COLUMN_KEYS.items() if key not in _COUNTS}},
            optional=[key for key in _COLUMN_KEYS.values() if key not in _COUNTS],
        )),
        "cuda": obj("The GPU buffer of a --use_cuda run (null: host memory).", {
            "device": integer("CUDA device used.", True),
            "name": string("GPU name as perftest printed it.", True),
            "dmabuf": boolean("Whether the buffer was registered through DMA-BUF (--use_cuda_dmabuf)."),
        }, nullable=True),
        "cpu_freq_warnings": integer("'Conflicting CPU frequency values' warnings (latency and rates may be off)."),
    },
    optional=("columns", "outstanding_reads"),
)

_TARGET = obj(
    "One target's result: the client's headline figure (its only run's if there is no client).",
    {
        "test": string("Test, e.g. 'RDMA_Write BW'."),
        "kind": choice("bw or lat.", ["bw", "lat"]),
        "device": string("The local RDMA device.", True),
        "gpu_memory": boolean("Whether the headline run's buffer was GPU memory (--use_cuda): GPUDirect RDMA."),
        "runs": array("Each side's run in the order printed.", _RUN),
        "size_bytes": integer("Message size of the headline row (bw: the largest; lat: the smallest)."),
        "bw_peak_gbps": number("BW peak at that size in Gb/s (MB/sec converted at 2^20 bytes).", True),
        "bw_average_gbps": number("BW average at that size in Gb/s (the gated figure).", True),
        "msg_rate_mpps": number("Message rate at that size, Mpps.", True),
        "t_min_us": number("Minimum latency, usec.", True),
        "t_max_us": number("Maximum latency, usec.", True),
        "t_typical_us": number("Typical (median) latency, usec (the gated figure).", True),
        "t_avg_us": number("Average latency, usec (newer perftest).", True),
        "t_stdev_us": number("Latency standard deviation, usec (newer perftest).", True),
        "p99_us": number("99th percentile latency, usec (newer perftest).", True),
        "p99_9_us": number("99.9th percentile latency, usec (newer perftest).", True),
    },
    optional=("bw_peak_gbps", "bw_average_gbps", "msg_rate_mpps", "t_min_us", "t_max_us", "t_typical_us", "t_avg_us",
              "t_stdev_us", "p99_us", "p99_9_us"),
)

#: What the pairing rounds say about one host (pair probes run by fabricproof; null for a single pasted output).
PAIRING_VERDICTS = ("ok", "at fault", "pair only", "untested")
_PAIRING = obj(
    "The pairing's verdict on this host, from every pair it was in (the localisation round included).",
    {
        "verdict": choice("at fault: slow with every partner; pair only: slow with a partner that is fine elsewhere "
                          "(the path between the two); ok: never slow, or slow only with partners at fault; "
                          "untested: in no measured pair.", PAIRING_VERDICTS),
        "slow_with": array("Partners of the slow pairs.", string("A host.")),
        "good_with": array("Partners of the pairs that were fast enough.", string("A host.")),
        "rounds": integer("Rounds the probe ran (the localisation round included)."),
    },
    nullable=True,
)

SCHEMA = obj(
    "A perftest probe's results per target: the HCA (ib_gdr_bw) or the peer host (pair probes).",
    {"targets": mapping("Per target name (or the local device, for an output without '==> name <==' titles).",
                        _TARGET),
     "pairing": _PAIRING},
    optional=("pairing",),
)


def _collector(cid: str, argv: tuple[str, ...], what: str) -> Collector:
    # One 8 MiB x 5000 write takes a second at 400 Gb/s; the timeout is per target and covers the server's wait.
    return probe_collector(cid, argv, parse_perftest, SCHEMA, f"{what} ({argv[0]}); spec.PROBES builds each target's "
                           "server and client argv.", 60.0, "perftest")


COLLECTORS = (
    _collector("ib_gdr_bw", ("ib_write_bw", "-d", "mlx5_0", "--use_cuda=0", "-s", "8388608", "-F", "--report_gbits"),
               "GPUDirect RDMA write bandwidth per HCA, loopback on the node"),
    _collector("ib_pair_bw", ("ib_write_bw", "-s", "8388608", "-F", "--report_gbits"),
               "RDMA write bandwidth between two hosts"),
    _collector("ib_pair_lat", ("ib_write_lat", "-F"), "RDMA write latency between two hosts"),
)
