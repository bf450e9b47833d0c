"""nccl-tests result tables (all_reduce/all_gather/alltoall/sendrecv_perf) and what a run says of itself."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from ..base import Collector, ParseError
from ..fragments import array, boolean, integer, number, obj, string
from .declare import probe_collector
from .text import lines_of
from .text import number as to_number

_VERSION = re.compile(r"nccl-tests version (?P<tests>\S+)(?: nccl-headers=(?P<headers>\d+))?(?: nccl-library=(?P<lib>\d+))?")
_STARTING = re.compile(r"Collective test starting: (?P<test>\S+)")
_PARAMS = re.compile(
    r"nThread (?P<nthread>\d+) nGpus (?P<ngpus>\d+) minBytes (?P<min>\d+) maxBytes (?P<max>\d+) "
    r"step: (?P<step>\S+) warmup iters: (?P<warmup>\d+) iters: (?P<iters>\d+)(?: agg iters: (?P<agg>\d+))? "
    r"validation: (?P<validation>\d+)(?: graph: (?P<graph>\d+))?")
_DEVICE = re.compile(r"^#\s*Rank\s+(?P<rank>\d+)(?:\s+Group\s+(?P<group>\d+))?\s+Pid\s+(?P<pid>\d+)\s+on\s+(?P<host>\S+)"
                     r"\s+device\s+(?P<device>\d+)\s+\[(?P<bus>[^\]]*)\]\s+(?P<name>.*\S)\s*$")
_REDUCED = re.compile(r"Reducing maxBytes to (?P<bytes>\d+)")
_NCCL_VERSION = re.compile(r"NCCL version (?P<v>\d+\.\d+\.\d+)")
# "host:pid:tid [dev] NCCL INFO <message>" (WARN likewise); the prefix varies, the marker does not.
_NCCL_LINE = re.compile(r"\bNCCL (?P<level>INFO|WARN) (?P<msg>.*)$")
_HEADER = re.compile(r"^#?\s*size\s+count\s+type\b")
_ROW = re.compile(r"^\s*\d+\s+\d+\s+\S")
_SUMMARY_OOB = re.compile(r"^#?\s*Out of bounds values\s*:\s*(?P<n>\d+)\s+(?P<verdict>\S+)")
_SUMMARY_AVG = re.compile(r"^#?\s*Avg bus bandwidth\s*:\s*(?P<bw>\S+)")
# nccl-tests' own failure reports: "Test NCCL failure common.cu:401 '...'", "Test CUDA failure ...", "Test failure ..."
_FAILURE = re.compile(r"Test (?:NCCL |CUDA )?failure\b.*")
_USING_NET = re.compile(r"^Using network (?P<net>.+?)\s*$")
_NET_USING = re.compile(r"^NET/(?P<net>IB|Socket)\s*: Using\b")
_VIA_NET = re.compile(r"via NET/(?P<net>[^/\s]+)(?P<rest>\S*)")
_RING_GDR = re.compile(r"Connected all rings.* GDR (?P<gdr>[01])\b")
_GDR_OFF = re.compile(r"GPU Direct RDMA Disabled|disabling GDR|GDR not supported")
_GDR_ON = re.compile(r"GPU Direct RDMA Enabled")
# NCCL's own prefix ("host:pid:tid [dev] NCCL INFO"): the ranks' hosts where nccl-tests' rank list was cut off
_INFO_HOST = re.compile(r"^(?P<host>[^\s:]+):\d+:\d+ \[\d+\] NCCL (?:INFO|WARN)\b")
_COMM = re.compile(r"\brank (?P<rank>\d+) n[Rr]anks (?P<n>\d+)\b(?: cudaDev (?P<dev>\d+))?")
_MNNVL = re.compile(r"\bnNodes \d+ .*\bMNNVL (?P<on>[01])\b")
_INIT = re.compile(r"ncclCommInitRank comm \S+ rank (?P<rank>\d+) nranks \d+ .*- Init (?P<state>START|COMPLETE)\b")
# The launcher's words when a task ended the run: srun's per-task epilogue, slurmstepd's cancellation, Open MPI's
# "mpirun noticed that process rank N ... exited on signal"
_LAUNCHER_END = re.compile(r"^(?:srun: error: (?P<srun>\S+): tasks? [\d,-]+: .*"
                           r"|slurmstepd: error: \*\*\* (?:STEP|JOB) \S+ ON (?P<step>\S+) CANCELLED AT .*"
                           r"|mpirun noticed that process rank \d+ with PID \d+ on node (?P<mpi>\S+) exited on .*)$")
# Open MPI's help messages (mpirun's or orted's own words when it cannot start a run or aborts one) stand between
# rules of 74 dashes; their first paragraph says what went wrong
_OMPI_RULE = "-" * 74
# "cnode2-001: Test NCCL failure ..." names the host whose rank reported the failure
_FAILURE_HOST = re.compile(r"^\s*(?:\.\. )?(?P<host>[^\s:]+)(?: pid \d+)?: Test ")

_GROUP_KEYS = ("time_us", "algbw_gbps", "busbw_gbps")


def _library_version(code: str | None) -> str | None:
    """nccl-headers/nccl-library codes: 22902 -> '2.29.2' (major*10000 + minor*100 + patch since NCCL 2.9)."""
    if not code:
        return None
    n = int(code)
    return f"{n // 10000}.{n // 100 % 100}.{n % 100}" if n >= 20900 else None


def _columns(line: str) -> tuple[int, str]:
    """(result groups in the header: 1 or 2, the correctness column's name: '#wrong' or the pre-2.11 'error')."""
    names = line.lstrip("#").split()
    groups = names.count("time")
    if groups not in (1, 2):
        raise ParseError(f"result header has {groups} time columns: {line.strip()[:80]}")
    return groups, "#wrong" if "#wrong" in names else "error"


def _inferred_columns(line: str) -> tuple[int, str]:
    """The layout of a table pasted without its header: two groups; #wrong when their last cells are counts."""
    cells = line.split()
    if not 11 <= len(cells) <= 13:
        raise ParseError(f"a result row without a header, and {len(cells)} cells: {line.strip()[:80]}")
    counts = all(c.isdigit() or c == "N/A" for c in (cells[-5], cells[-1]))
    return 2, "#wrong" if counts else "error"


def _group(cells: list[str], wrong_col: str, line_no: int) -> dict[str, Any]:
    values = [to_number(c) for c in cells[:3]]
    if any(v is None for v in values):
        raise ParseError(f"line {line_no}: a time/algbw/busbw cell is not a number: {' '.join(cells)}")
    out: dict[str, Any] = dict(zip(_GROUP_KEYS, values))
    tail = cells[3]
    if wrong_col == "#wrong":
        if tail != "N/A" and not tail.isdigit():
            raise ParseError(f"line {line_no}: #wrong cell {tail!r} is not a count")
        out["wrong"], out["error"] = (None if tail == "N/A" else int(tail)), None
    else:
        err = to_number(tail)
        if err is None and tail != "N/A":
            raise ParseError(f"line {line_no}: error cell {tail!r} is not a number")
        out["wrong"], out["error"] = None, err
    return out


def _row(line: str, groups: int, wrong_col: str, line_no: int) -> dict[str, Any]:
    """size, count, type, then the optional redop and root (alltoall's old layout leaves redop blank), then the
    out-of-place and in-place groups of four cells: reading from both ends copes with every layout."""
    cells = line.split()
    fixed = 4 * groups
    if len(cells) < 3 + fixed or len(cells) > 5 + fixed:
        raise ParseError(f"line {line_no}: {len(cells)} cells where the header has {3 + fixed} to {5 + fixed}")
    middle = cells[3:len(cells) - fixed]
    redop = next((c for c in middle if not c.lstrip("-").isdigit()), None)
    root = next((int(c) for c in middle if c.lstrip("-").isdigit()), None)
    row: dict[str, Any] = {"size_bytes": int(cells[0]), "count": int(cells[1]), "type": cells[2], "redop": redop,
                           "root": root, "out_of_place": _group(cells[-fixed:][:4], wrong_col, line_no)}
    row["in_place"] = _group(cells[-4:], wrong_col, line_no) if groups == 2 else None
    return row


def _net_facts(messages: list[str]) -> tuple[str | None, bool | None]:
    """The network NCCL used between nodes (IB, Socket = TCP, Libfabric...) and whether GPUDirect RDMA was on.
    "Using network X" is NCCL's choice and wins over the transports it found ("NET/IB : Using ...")."""
    chosen = [m["net"] for msg in messages if (m := _USING_NET.match(msg))]
    found = [m["net"] for msg in messages if (m := _NET_USING.match(msg) or _VIA_NET.search(msg))]
    net = chosen[-1] if chosen else (found[0] if found else None)
    gdr: bool | None = None
    for msg in messages:
        if m := _VIA_NET.search(msg):
            gdr = True if "GDRDMA" in m.group("rest") else (gdr if gdr is not None else False)
        if m := _RING_GDR.search(msg):
            gdr = m.group("gdr") == "1"
        elif _GDR_OFF.search(msg):
            gdr = False
        elif _GDR_ON.search(msg) and gdr is None:
            gdr = True
    return net, gdr


def _headline(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """busbw at the largest size, out-of-place and in-place kept apart, and the lower of the two: the gated figure
    (their mean, nccl-tests' own average for a one-size run, would let a slow in-place path pass on a fast
    out-of-place one); that size; the highest busbw of any cell."""
    last = max(rows, key=lambda r: r["size_bytes"])
    oop = last["out_of_place"]["busbw_gbps"]
    inp = last["in_place"]["busbw_gbps"] if last["in_place"] else None
    peak = max(g["busbw_gbps"] for r in rows for g in (r["out_of_place"], r["in_place"]) if g)
    return {"busbw_gbps": oop if inp is None else min(oop, inp), "busbw_out_of_place_gbps": oop,
            "busbw_in_place_gbps": inp, "busbw_size_bytes": last["size_bytes"], "peak_busbw_gbps": peak}


def _participants(devices: list[dict[str, Any]], info_ranks: dict[int, tuple[str, int | None]]
                  ) -> list[dict[str, Any]]:
    """Per host, the ranks and CUDA devices that took part: from nccl-tests' rank list, else from NCCL's INFO lines
    (their "host:pid:tid [dev]" prefix beside "rank N nranks M"), for outputs whose rank list was cut off."""
    per: dict[str, dict[str, Any]] = {}
    if devices:
        for d in devices:
            p = per.setdefault(d["host"], {"host": d["host"], "ranks": [], "devices": []})
            p["ranks"].append(d["rank"])
            p["devices"].append(d["device"])
    else:
        for rank, (host, dev) in info_ranks.items():
            p = per.setdefault(host, {"host": host, "ranks": [], "devices": []})
            p["ranks"].append(rank)
            p["devices"] = None if dev is None or p["devices"] is None else [*p["devices"], dev]
    for p in per.values():
        p["ranks"].sort()
        if p["devices"] is not None:
            p["devices"] = sorted(set(p["devices"]))
    return [per[h] for h in sorted(per)]


def _never_joined(expected_hosts: Sequence[str] | None, hosts: list[str]) -> str | None:
    """The launch's hosts nccl-tests did not list: their ranks never joined, so the figure is not the set's."""
    if expected_hosts is None:
        return None
    if not hosts:
        return (f"nccl-tests listed no rank: which of the {len(set(expected_hosts))} launched host(s) took part "
                "is unknown")
    missing = sorted(set(expected_hosts) - set(hosts))
    if not missing:
        return None
    return (f"rank(s) never joined: {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''} not in "
            f"nccl-tests' rank list ({len(set(expected_hosts)) - len(missing)} of {len(set(expected_hosts))} "
            "launched hosts listed)")


def parse_nccl_tests(text: str, expected_hosts: Sequence[str] | None = None) -> dict[str, Any]:
    """One nccl-tests run, its launcher's prefixes ("0: ", "[1,0]<stdout>:") and NCCL's INFO lines tolerated.
    A multi-node run also says who took part (hosts, ranks, devices per host); with expected_hosts (the launch's
    node list), a host missing from the rank list is a rank that never joined: an error, never a figure."""
    if not text.strip():
        raise ParseError("empty nccl-tests output")
    lines = lines_of(text, launcher=True)
    _one_run(lines)
    frag: dict[str, Any] = {"test": None, "nccl_tests_version": None, "nccl_version": None, "params": None,
                            "max_bytes_reduced_to": None, "devices": []}
    header: tuple[int, str] | None = None
    rows: list[dict[str, Any]] = []
    messages: list[str] = []
    warnings: list[str] = []
    failures: list[str] = []
    failing_hosts: list[str] = []
    launcher_ends: list[tuple[str, str]] = []
    info_ranks: dict[int, tuple[str, int | None]] = {}
    nranks: int | None = None
    mnnvl: bool | None = None
    init: dict[int, str] = {}
    oob: tuple[int, str] | None = None
    avg: float | None = None
    for no, line in enumerate(lines, 1):
        if m := _NCCL_LINE.search(line):
            msg = m.group("msg").strip()
            (messages if m.group("level") == "INFO" else warnings).append(msg)
            if v := _NCCL_VERSION.search(msg):
                frag["nccl_version"] = frag["nccl_version"] or v.group("v")
            if (c := _COMM.search(msg)) and (h := _INFO_HOST.match(line.strip())):
                info_ranks.setdefault(int(c["rank"]), (h["host"], int(c["dev"]) if c["dev"] else None))
                nranks = int(c["n"])
            if mn := _MNNVL.search(msg):
                mnnvl = mn["on"] == "1" or bool(mnnvl)
            if i := _INIT.search(msg):
                init[int(i["rank"])] = "COMPLETE" if init.get(int(i["rank"])) == "COMPLETE" else i["state"]
            continue
        if m := _FAILURE.search(line):
            failures.append(m.group(0).strip())
            if (fh := _FAILURE_HOST.match(line)) and fh["host"] not in failing_hosts:
                failing_hosts.append(fh["host"])
            continue
        if m := _LAUNCHER_END.match(line.strip()):
            launcher_ends.append((m.group(0), m["srun"] or m["step"] or m["mpi"]))
            continue
        if header is None and _HEADER.match(line):
            header = _columns(line)
            continue
        if _ROW.match(line):
            header = header or _inferred_columns(line)
            rows.append(_row(line, *header, no))
            continue
        if m := _SUMMARY_OOB.match(line):
            oob = (int(m.group("n")), m.group("verdict"))
        elif m := _SUMMARY_AVG.match(line):
            avg = to_number(m.group("bw"))
        elif m := _DEVICE.match(line):
            frag["devices"].append({"rank": int(m["rank"]), "group": int(m["group"]) if m["group"] else None,
                                    "pid": int(m["pid"]), "host": m["host"], "device": int(m["device"]),
                                    "bus_id": m["bus"], "name": m["name"]})
        elif m := _VERSION.search(line):
            frag["nccl_tests_version"] = m.group("tests")
            frag["nccl_version"] = frag["nccl_version"] or _library_version(m.group("lib") or m.group("headers"))
        elif m := _STARTING.search(line):
            frag["test"] = m.group("test")
        elif m := _PARAMS.search(line):
            frag["params"] = {"nthread": int(m["nthread"]), "ngpus": int(m["ngpus"]), "min_bytes": int(m["min"]),
                              "max_bytes": int(m["max"]), "step": m["step"], "warmup_iters": int(m["warmup"]),
                              "iters": int(m["iters"]), "validation": m["validation"] == "1"}
        elif m := _REDUCED.search(line):
            frag["max_bytes_reduced_to"] = int(m.group("bytes"))
        elif m := _NCCL_VERSION.match(line.strip()):
            frag["nccl_version"] = frag["nccl_version"] or m.group("v")
    if failures:
        by = f" (reported by {', '.join(failing_hosts)})" if failing_hosts else ""
        raise ParseError(f"nccl-tests failed: {failures[0]}{by}")
    if launcher_ends:
        ended = sorted({h for _, h in launcher_ends})
        raise ParseError(f"the launcher ended the run: {launcher_ends[0][0]} (host(s): {', '.join(ended)})")
    if header is None:
        if words := _ompi_words(lines):
            raise ParseError(f"the launcher did not run nccl-tests: {words}")
        raise ParseError("no nccl-tests result header (size count type ... busbw): not nccl-tests output")
    if not rows:
        raise ParseError("nccl-tests printed its result header but no row: the run hung or was stopped before its "
                         "first size completed" + _stuck(init, info_ranks, warnings))
    if avg is None:
        raise ParseError(f"nccl-tests stopped after {rows[-1]['size_bytes']} bytes: no '# Avg bus bandwidth' line")
    participants = _participants(frag["devices"], info_ranks)
    hosts = [p["host"] for p in participants]
    if reason := _never_joined(expected_hosts, hosts):
        raise ParseError(reason)
    wrongs = [g["wrong"] for r in rows for g in (r["out_of_place"], r["in_place"]) if g and g["wrong"] is not None]
    validated = frag["params"]["validation"] if frag["params"] else None
    oob_count = oob[0] if oob else None
    wrong_total = sum(wrongs) if wrongs else None
    known = [n for n in (oob_count, wrong_total) if n is not None]
    net, gdr = _net_facts(messages)
    listed = [d["rank"] for d in frag["devices"]] or list(info_ranks)
    frag.update(
        rows=rows, gpus=len(frag["devices"]) or None, hosts=hosts,
        ranks=nranks if nranks is not None else (max(listed) + 1 if listed else None),
        participants=participants, mnnvl=mnnvl,
        avg_busbw_gbps=avg, **_headline(rows),
        wrong_total=wrong_total, out_of_bounds=oob_count,
        # the run's correctness verdict: null when nccl-tests did not check (-c 0 prints "0 OK" regardless)
        data_errors=None if validated is False or not known else max(known),
        net_transport=net, gdr=gdr, nccl_warnings=warnings[:20],
    )
    return frag


def _ompi_words(lines: Sequence[str]) -> str | None:
    """The first paragraph of Open MPI's first help message, on one line (with the next one when it ends in ':',
    as "A call to mkdir was unable to create the desired directory:" does); None without one."""
    for i, line in enumerate(lines):
        if line.strip() != _OMPI_RULE:
            continue
        paragraphs: list[list[str]] = [[]]
        for nxt in lines[i + 1:]:
            if nxt.strip() == _OMPI_RULE:
                break
            if nxt.strip():
                paragraphs[-1].append(nxt.strip())
            elif paragraphs[-1]:
                paragraphs.append([])
        said = [" ".join(" ".join(p).split()) for p in paragraphs if p]
        if said:
            return " ".join(said[:2] if said[0].endswith(":") and len(said) > 1 else said[:1])
    return None


def _one_run(lines: Sequence[str]) -> None:
    """Refuse an output holding several runs (single-node outputs pasted together would read as one many-host run):
    each run prints its parameters, version, test name and average once."""
    marks = [[no for no, line in enumerate(lines, 1) if pattern(line)] for pattern in
             (_PARAMS.search, _VERSION.search, _STARTING.search, _SUMMARY_AVG.match)]
    most = max(marks, key=len)
    if len(most) > 1:
        raise ParseError(f"{len(most)} nccl-tests runs in one output (a header per run, at lines "
                         f"{', '.join(map(str, most[:5]))}{', ...' if len(most) > 5 else ''}): give one run's output")


def _stuck(init: dict[int, str], info_ranks: dict[int, tuple[str, int | None]], warnings: list[str]) -> str:
    """What NCCL said of a run that hung: the ranks that began ncclCommInitRank and never completed it, and its
    first warning, in its own words."""
    out = ""
    pending = sorted(r for r, state in init.items() if state == "START")
    if pending:
        where = sorted({info_ranks[r][0] for r in pending if r in info_ranks})
        out += (f"; NCCL rank(s) {', '.join(map(str, pending[:10]))} began ncclCommInitRank and never completed it"
                + (f" (on {', '.join(where[:10])})" if where else ""))
    if warnings:
        out += f"; NCCL WARN {warnings[0]}"
    return out


_GROUP = obj(
    "One result group of a row (out-of-place or in-place).",
    {
        "time_us": number("Time per operation in microseconds."),
        "algbw_gbps": number("Algorithm bandwidth in GB/s."),
        "busbw_gbps": number("Bus bandwidth in GB/s (algbw scaled to what each link carries)."),
        "wrong": integer("#wrong: elements that failed validation (null: N/A, or the old 'error' layout).", True),
        "error": number("Old (pre-2.11) layout: the largest numerical error of the result (null otherwise).", True),
    },
)

SCHEMA = obj(
    "One nccl-tests run: the result table per message size and what the run reports about itself.",
    {
        "test": string("The test binary, from 'Collective test starting:' (null where not printed).", True),
        "nccl_tests_version": string("nccl-tests version, e.g. 2.17.8 (null where not printed).", True),
        "nccl_version": string("NCCL library version, e.g. 2.29.2 (null where not printed).", True),
        "params": obj(
            "The run's parameters line (nThread, nGpus, minBytes, ...); null where not printed.",
            {
                "nthread": integer("Threads per process (nThread)."),
                "ngpus": integer("GPUs per thread (nGpus, -g)."),
                "min_bytes": integer("Smallest message size (minBytes)."),
                "max_bytes": integer("Largest message size requested (maxBytes)."),
                "step": string("Size step, e.g. '2(factor)'."),
                "warmup_iters": integer("Warm-up iterations per size."),
                "iters": integer("Timed iterations per size."),
                "validation": boolean("Whether results were checked (-c 1)."),
            },
            nullable=True,
        ),
        "max_bytes_reduced_to": integer("maxBytes after 'Reducing maxBytes ... due to memory limitation'.", True),
        "devices": array("The ranks' devices as listed under 'Using devices' (empty where not printed).", obj(
            "One rank's device.",
            {
                "rank": integer("Rank."),
                "group": integer("Group (null in the old layout).", True),
                "pid": integer("Process id."),
                "host": string("Host the rank ran on."),
                "device": integer("CUDA device index on that host."),
                "bus_id": string("PCI bus id as printed ('0000:1b:00', or '0x07' in old builds)."),
                "name": string("GPU name."),
            },
        )),
        "gpus": integer("Number of devices listed (null where not printed).", True),
        "hosts": array("Hosts the ranks ran on, sorted: from the rank list, else from NCCL's INFO line prefixes.",
                       string("Host name.")),
        "ranks": integer("The run's rank count: NCCL's nranks, else the highest listed rank + 1 (a rank list cut "
                         "short still tells it); null where neither is printed.", True),
        "participants": array("Per host, the ranks and CUDA devices that took part (a multi-node run's members).", obj(
            "One host of the run.",
            {
                "host": string("Host name."),
                "ranks": array("Its ranks.", integer("Rank.")),
                "devices": array("Its CUDA device indices (null: not printed).",
                                 integer("Device index."), nullable=True),
            },
        )),
        "mnnvl": boolean("Whether NCCL ran over multi-node NVLink ('MNNVL 1' in its INFO lines; null: not said).",
                         True),
        "rows": array("One row per message size.", obj(
            "One message size.",
            {
                "size_bytes": integer("Message size in bytes."),
                "count": integer("Elements per message."),
                "type": string("Element type, e.g. float."),
                "redop": string("Reduction operation (null where the column is empty or absent).", True),
                "root": integer("Root rank (-1: none; null in the old layout).", True),
                "out_of_place": _GROUP,
                "in_place": {**_GROUP, "type": ["object", "null"],
                             "description": "In-place result group (null when the table has none)."},
            },
        )),
        "avg_busbw_gbps": number("The '# Avg bus bandwidth' line: busbw averaged over every row, in GB/s."),
        "busbw_gbps": number("busbw at the largest size in GB/s: the lower of out-of-place and in-place (the gated "
                             "figure)."),
        "busbw_out_of_place_gbps": number("Out-of-place busbw at the largest size in GB/s."),
        "busbw_in_place_gbps": number("In-place busbw at the largest size in GB/s (null when the table has no "
                                      "in-place group).", True),
        "busbw_size_bytes": integer("The largest size, where busbw_gbps was measured."),
        "peak_busbw_gbps": number("Highest busbw of any row and group, in GB/s."),
        "wrong_total": integer("Sum of the #wrong cells (null: validation off or old layout).", True),
        "out_of_bounds": integer("The '# Out of bounds values' count (null where not printed).", True),
        "data_errors": integer("Wrong results the run found: the larger of out_of_bounds and wrong_total; null when "
                               "the run did not validate its results.", True),
        "net_transport": string("Inter-node network NCCL used per its INFO lines: IB, Socket (TCP), Libfabric...; "
                                "null without NCCL_DEBUG=INFO or on one node.", True),
        "gdr": boolean("Whether NCCL used GPUDirect RDMA per its INFO lines (null: not said).", True),
        "nccl_warnings": array("NCCL WARN messages (first 20).", string("Message after 'NCCL WARN'.")),
    },
    # facts collected before multi-node runs were read lack them
    optional=("ranks", "participants", "mnnvl"),
)

_TIMEOUT_S = 300.0  # a -b 8 -e 8G sweep on 8 GPUs takes about a minute, NCCL's init included; room for a slow start


def _collector(cid: str, binary: str, what: str) -> Collector:
    return probe_collector(cid, (binary, "-b", "8", "-e", "8G", "-f", "2", "-g", "8"), parse_nccl_tests, SCHEMA,
                           f"NCCL {what} bus bandwidth per message size on the node's GPUs, and #wrong ({binary}).",
                           _TIMEOUT_S, "nccl-tests")


COLLECTORS = (
    _collector("nccl_all_reduce", "all_reduce_perf", "all-reduce"),
    _collector("nccl_all_gather", "all_gather_perf", "all-gather"),
    _collector("nccl_alltoall", "alltoall_perf", "all-to-all"),
)

__all__ = ["COLLECTORS", "SCHEMA", "parse_nccl_tests"]
