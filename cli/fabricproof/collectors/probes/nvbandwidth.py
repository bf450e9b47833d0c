"""nvbandwidth: each testcase's matrix, and its minimum, median and weakest pair (a degraded NVLink)."""

from __future__ import annotations

import re
from typing import Any

from ..base import ParseError
from ..fragments import array, boolean, integer, mapping, notes, number, obj, string
from .declare import probe_collector
from .text import lines_of, median, pct
from .text import number as to_number

_VERSION = re.compile(r"^nvbandwidth Version:\s*(?P<v>\S+)")
_GIT = re.compile(r"^Built from Git version:\s*(?P<v>\S*)")
_KEYS = {"CUDA Runtime Version": "cuda_runtime", "CUDA Driver Version": "cuda_driver",
         "CUDA Driver Version (API)": "cuda_driver", "Driver Version": "driver_version", "MPI version": "mpi_version"}
_KV = re.compile(r"^(?P<k>CUDA Runtime Version|CUDA Driver Version(?: \(API\))?|Driver Version|MPI version):\s*(?P<v>.*\S)")
_DEVICE = re.compile(r"^Device (?P<index>\d+): (?P<name>.*?)(?: \((?P<bus>[0-9a-fA-F:.]+)\))?\s*$")
_PROCESS = re.compile(r"^Process (?P<process>\d+) \((?P<host>[^)]*)\): device (?P<index>\d+): (?P<name>.*?)"
                      r"(?: \((?P<bus>[0-9a-fA-F:.]+)\))?\s*$")
# A pasted "Running ..." line may carry a markdown quote mark ("> Running host_to_device_memcpy_sm.").
_RUNNING = re.compile(r"^(?:>\s*)?Running (?P<name>\S+?)\.\s*$")
_WAIVED = re.compile(r"^(?:>\s*)?Waiving (?P<name>\S+?)\.\s*$")
_ELIDED = {"...", "[...]", "…"}
# "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)", "... Read1 bandwidth (GB/s)", "... latency (ns)"
_TITLE = re.compile(r"^(?P<title>.*\S)\s+\((?P<unit>[^()]+)\)\s*$")
_LABEL = re.compile(r"\b(?P<label>Read1|Read2|Write1|Write2|Total)\b")
_PEERS = re.compile(r"GPU\(row\).*GPU\(column\)")
_SUM = re.compile(r"^SUM (?P<name>\S+) (?P<value>\S+)\s*$")
# A bidirectional testcase's SUM lines name its matrices: "SUM <testcase>_read1", "..._total".
_SUM_PART = re.compile(r"_(?:read1|read2|write1|write2|total)$")
_COV = re.compile(r"^COEFFICIENT_OF_VARIATION (?P<name>\S+) (?P<value>\S+)\s*$")
_UNNAMED = ""  # the key of a testcase not yet named
# From v0.10 nvbandwidth lists no devices at all; before, a missing list is an elision.
_LISTS_NO_DEVICES = re.compile(r"^v?(?:0\.(?:[1-9]\d)|[1-9])")
_FAILED = re.compile(r"^\s*(?:ASSERT\b|.*\bCUDA_ERROR|.*\bcudaError|terminate called|Segmentation fault)")


def _failure(lines: list[str], at: int, testcase: str | None) -> str:
    """One line: the testcase, what the tool printed since 'Running ...' (the pattern check) and the ASSERT."""
    said: list[str] = []
    for line in reversed(lines[max(0, at - 4):at]):
        if not line.strip() or _RUNNING.match(line.strip()):
            break
        said.insert(0, line.strip())
    where = f" in {testcase}" if testcase else ""
    return f"nvbandwidth failed{where}: " + "; ".join([*said, lines[at].strip()])[:300]


def _matrix(lines: list[str], start: int, no: int) -> tuple[dict[str, Any], int]:
    """The column header and rows after a title line; returns (matrix, index after its last row)."""
    i = start
    columns = lines[i].split() if i < len(lines) else []
    if not columns or not all(c.isdigit() for c in columns):
        raise ParseError(f"line {no + 1}: a matrix title without a column header")
    rows: list[int] = []
    values: list[list[float | None]] = []
    i += 1
    while i < len(lines) and lines[i].strip():
        cells = lines[i].split()
        if not cells[0].isdigit():
            break
        if len(cells) != len(columns) + 1:
            raise ParseError(f"line {i + 1}: {len(cells) - 1} values under {len(columns)} columns")
        row = [to_number(c) for c in cells[1:]]
        if any(v is None and c != "N/A" for v, c in zip(row, cells[1:])):
            raise ParseError(f"line {i + 1}: a matrix cell is neither a number nor N/A: {lines[i].strip()[:80]}")
        rows.append(int(cells[0]))
        values.append(row)
        i += 1
    if not rows:
        raise ParseError(f"line {no + 1}: a matrix with no rows")
    return {"rows": rows, "columns": [int(c) for c in columns], "values": values}, i


def _summary(matrix: dict[str, Any], peers: bool) -> dict[str, Any] | None:
    """min, median and max of the matrix's cells, the (row, column) of the minimum, and min as % of the median.
    In a GPU-to-GPU matrix the diagonal is a GPU with itself: N/A in the corpus's versions (v0.2 on), 0.00 in the
    older example of nvbandwidth's README; it is never the weakest pair."""
    cells = [(v, r, c) for r, row in zip(matrix["rows"], matrix["values"])
             for c, v in zip(matrix["columns"], row) if v is not None and not (peers and r == c)]
    if not cells:
        return None
    low = min(cells)
    mid = median([v for v, _, _ in cells])
    return {"min": low[0], "median": round(mid, 3), "max": max(v for v, _, _ in cells),
            "min_pair": {"row": low[1], "column": low[2]}, "min_over_median_pct": pct(low[0], mid),
            "cells": len(cells)}


def _testcase(entry: dict[str, Any]) -> dict[str, Any]:
    """The summary is of the Total matrix where a bidirectional test prints per-direction ones, else its only one."""
    matrices = entry["matrices"]
    chosen = next((m for m in matrices if m["label"] == "total"), matrices[0] if matrices else None)
    peers = bool(entry["title"] and _PEERS.search(entry["title"]))
    entry["summary"] = _summary(chosen, peers) if chosen else None
    return entry


def parse_nvbandwidth(text: str) -> dict[str, Any]:
    """nvbandwidth v0.2 to v0.10, single- and multi-node (MPI) layouts."""
    if not text.strip():
        raise ParseError("empty nvbandwidth output")
    lines = lines_of(text, launcher=True)
    frag: dict[str, Any] = {"version": None, "git_version": None, "cuda_runtime": None, "cuda_driver": None,
                            "driver_version": None, "mpi_version": None, "devices": []}
    tests: dict[str, dict[str, Any]] = {}
    current: dict[str, Any] | None = None
    unnamed: dict[str, Any] | None = None  # a testcase whose 'Running' line is missing, until a SUM line names it
    summed = False  # the current testcase printed its last SUM line: a matrix after it starts another testcase
    noted: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped in _ELIDED:
            noted.append(f"line {i + 1}: output elided in the source ({stripped})")
        elif m := _RUNNING.match(stripped):
            current, summed = tests.setdefault(m["name"], _entry()), False
        elif m := _WAIVED.match(stripped):
            tests[m["name"]] = {**_entry(), "waived": True}
            current = None
        elif _FAILED.match(line):
            raise ParseError(_failure(lines, i, next(reversed(tests), None)))
        elif (m := _SUM.match(stripped)) and current is not None:
            if unnamed is current:
                unnamed = _name_unnamed(tests, m["name"], noted)
            summed = not m["name"].endswith(("_read1", "_read2", "_write1", "_write2"))
            value = to_number(m["value"])
            current["sums"][m["name"]] = value
            current["sum"] = value
        elif (m := _COV.match(stripped)) and current is not None:
            if unnamed is current:
                unnamed = _name_unnamed(tests, m["name"], noted)
            current["cov"] = to_number(m["value"])
        elif (m := _TITLE.match(stripped)) and ("(row)" in stripped or "(column)" in stripped):
            if current is None or summed:
                # a matrix with no 'Running' line before it: the SUM (or COEFFICIENT_OF_VARIATION) line after it
                # names its testcase
                if _UNNAMED in tests:
                    raise ParseError(f"line {i + 1}: two result matrices and no testcase name for the first")
                current, summed = tests.setdefault(_UNNAMED, _entry()), False
                unnamed = current
            matrix, i = _matrix(lines, i + 1, i)
            label = _LABEL.search(m["title"])
            current["title"] = current["title"] or m["title"]
            current["unit"] = m["unit"]
            current["matrices"].append({"label": label["label"].lower() if label else None, **matrix})
            continue
        elif m := _VERSION.match(stripped):
            frag["version"] = m["v"]
        elif m := _GIT.match(stripped):
            frag["git_version"] = m["v"] or None
        elif m := _KV.match(stripped):
            frag[_KEYS[m["k"]]] = m["v"]
        elif m := _PROCESS.match(stripped):
            frag["devices"].append({"index": int(m["index"]), "name": m["name"], "bus_id": m["bus"],
                                    "process": int(m["process"]), "host": m["host"]})
        elif m := _DEVICE.match(stripped):
            frag["devices"].append({"index": int(m["index"]), "name": m["name"], "bus_id": m["bus"],
                                    "process": None, "host": None})
        i += 1
    if _UNNAMED in tests:
        raise ParseError("a result matrix without its testcase name (no 'Running <testcase>.' line and no SUM line)")
    if not frag["devices"] and (frag["version"] is None or not _LISTS_NO_DEVICES.match(frag["version"])):
        noted.append("no device list (elided in the source, or not printed): device names unknown")
    if frag["version"] is None and not tests:
        raise ParseError("no 'nvbandwidth Version' line and no testcase: not nvbandwidth output")
    if not tests:
        raise ParseError("nvbandwidth ran no testcase (no 'Running <testcase>.' line)")
    for name, entry in tests.items():
        if not entry["waived"] and not entry["matrices"]:
            raise ParseError(f"nvbandwidth stopped in {name}: no result matrix")
    frag["testcases"] = {name: _testcase(entry) for name, entry in tests.items()}
    frag["notes"] = noted
    return frag


def _name_unnamed(tests: dict[str, dict[str, Any]], printed: str, noted: list[str]) -> None:
    """Name the testcase pasted without its 'Running <testcase>.' line after a SUM or COV line that names it."""
    name = _SUM_PART.sub("", printed)
    tests[name] = tests.pop(_UNNAMED)
    noted.append(f"'Running {name}.' line elided: testcase named by its SUM line")


def _entry() -> dict[str, Any]:
    return {"waived": False, "title": None, "unit": None, "matrices": [], "sum": None, "sums": {}, "cov": None}


_MATRIX = obj(
    "One result matrix.",
    {
        "label": string("read1/read2/write1/write2/total for the matrices of a bidirectional test, else null.", True),
        "rows": array("Row indices (the GPU or CPU of the row).", integer("Index.")),
        "columns": array("Column indices (the GPU of the column).", integer("Index.")),
        "values": array("Cells by row then column; null for N/A (a GPU with itself).",
                        array("One row.", number("Bandwidth in the testcase's unit.", True))),
    },
)

_SUMMARY = obj(
    "The testcase's matrix in a few figures (the Total matrix of a bidirectional test); null if all N/A.",
    {
        "min": number("Lowest cell, in the testcase's unit (GB/s)."),
        "median": number("Median of the cells."),
        "max": number("Highest cell."),
        "min_pair": obj("Where the minimum is.", {"row": integer("Row index (source GPU for GPU(row) -> GPU(column))."),
                                                   "column": integer("Column index.")}),
        "min_over_median_pct": number("min as a percentage of the median: one degraded link pulls it down.", True),
        "cells": integer("Cells with a value."),
    },
    nullable=True,
)

SCHEMA = obj(
    "One nvbandwidth run: versions, devices, and each testcase's matrices with their summary.",
    {
        "version": string("nvbandwidth version, e.g. v0.10.0.", True),
        "git_version": string("'Built from Git version' (null when empty).", True),
        "cuda_runtime": string("CUDA Runtime Version as printed (12060, or '13.2 (13020)').", True),
        "cuda_driver": string("CUDA Driver Version (API) as printed.", True),
        "driver_version": string("NVIDIA driver version.", True),
        "mpi_version": string("MPI version line of multinode builds.", True),
        "devices": array("Devices as listed ('Device N:' or multinode 'Process N (host): device M:'); empty in "
                         "v0.10, which lists none.", obj(
                             "One device.",
                             {
                                 "index": integer("CUDA device index."),
                                 "name": string("GPU name."),
                                 "bus_id": string("PCI bus id (null where not printed).", True),
                                 "process": integer("MPI process of a multinode run (else null).", True),
                                 "host": string("Host of that process (else null).", True),
                             },
                         )),
        "testcases": mapping("Per testcase name, in the order run.", obj(
            "One testcase.",
            {
                "waived": boolean("Whether nvbandwidth waived it (e.g. no peer access): no matrix then."),
                "title": string("The matrix title, e.g. 'memcpy CE GPU(row) -> GPU(column) bandwidth'.", True),
                "unit": string("Unit of the cells, e.g. GB/s.", True),
                "matrices": array("Result matrices (three for bidirectional tests from v0.8 on).", _MATRIX),
                "sum": number("The last SUM line of the testcase.", True),
                "sums": mapping("Every SUM line by the name it prints (e.g. ..._read1, ..._total).", number("SUM.", True)),
                "cov": number("COEFFICIENT_OF_VARIATION (v0.10 on; null before).", True),
                "summary": _SUMMARY,
            },
        )),
        "notes": notes(),
    },
    optional=("notes",),
)

COLLECTORS = (
    probe_collector("nvbandwidth", ("nvbandwidth", "-t", "device_to_device_memcpy_read_ce"), parse_nvbandwidth, SCHEMA,
                    "GPU-to-GPU copy bandwidth matrix per testcase with its minimum pair and spread (nvbandwidth).",
                    180.0, "nvbandwidth"),  # one device-to-device testcase on 8 GPUs takes well under a minute
)
