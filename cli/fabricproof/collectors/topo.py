"""GPU/NIC topology from `nvidia-smi topo -m` (or -mp): NVLink bonds between GPUs and the nearest NIC of each GPU."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from .. import tools
from .base import Collector, ParseError
from .fragments import array, integer, mapping, obj, string
from .textutil import first_line, strip_ansi

_GPU = re.compile(r"^GPU\d+$")
_NV = re.compile(r"^NV(\d+)$")
_AFFINITY = re.compile(r"CPU Affinity|NUMA Affinity|GPU NUMA ID")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
_LEGEND_CODE = re.compile(r"^\s*(\S+)\s+=\s")  # "  PIX  = Connection traversing ..."

# Closeness of a connection, nearest first. SOC is the pre-2017 spelling of SYS.
_RANK = {"X": 0, "PIX": 2, "PXB": 3, "PHB": 4, "NODE": 5, "SYS": 6, "SOC": 6}
_NV_RANK = 1
_UNKNOWN_RANK = 9

_AFFINITY_KEYS = {"CPU Affinity": "cpu_affinity", "NUMA Affinity": "numa_affinity", "GPU NUMA ID": "gpu_numa_id"}

# Every cell the legend explains: X, SYS (SOC before 2017), NODE, PHB, PXB, PIX, NV#. Anything else, such as a
# relation glued to the CPU-affinity column ("PHB0-115"), means the row cannot be read column by column.
_CELL = re.compile(r"^(?:X|SYS|SOC|NODE|PHB|PXB|PIX|NV\d+)$")


def rank(cell: str) -> int:
    """Order of a matrix cell by closeness: X < NV# < PIX < PXB < PHB < NODE < SYS."""
    return _NV_RANK if _NV.match(cell) else _RANK.get(cell, _UNKNOWN_RANK)


def _header(lines: list[str]) -> tuple[int, list[str], list[str]] | None:
    """Index of the header line, its device columns, and the affinity column names after them.

    The header is the first line naming GPU columns without an "X" cell: every matrix row has
    "X" on its diagonal, and compacted pastes start the header with "GPU0" just like a row does.
    """
    for number, line in enumerate(lines):
        tail = _AFFINITY.search(line)
        devices = (line[: tail.start()] if tail else line).split()
        if "GPU0" in devices and "X" not in devices:
            return number, devices, _AFFINITY.findall(line)
    return None


def _na(value: str | None) -> str | None:
    # Not textutil.na_to_none: an affinity cell is missing only as "N/A"; any other text is kept as printed.
    return None if value is None or value.strip() in {"", "N/A"} else value.strip()


def parse_topo(text: str) -> dict[str, Any]:
    """Parse the matrix, the affinity columns and the NIC legend; TABs, spaces and ANSI all tolerated."""
    lines = strip_ansi(text).splitlines()
    if not any(line.strip() for line in lines):
        raise ParseError("empty output")
    header = _header(lines)
    if header is None:
        raise ParseError(f"not nvidia-smi topo -m output: {first_line(text)!r}")
    start, devices, affinity_cols = header

    matrix: dict[str, dict[str, str]] = {}
    affinity: list[dict[str, Any]] = []
    notes: list[str] = []
    malformed: list[str] = []
    legend: list[str] = []
    nic_names: dict[str, str] = {}
    in_legend = False
    for number, line in enumerate(lines[start + 1 :], start=start + 2):
        if line.strip().startswith(("Legend", "NIC Legend")):
            in_legend = True
            continue
        if in_legend:
            nic = _NIC_LEGEND.match(line)
            code = _LEGEND_CODE.match(line)
            if nic:
                nic_names[nic[1]] = nic[2]
            elif code:
                legend.append(code[1])
            continue
        tokens = line.split()
        if not tokens or tokens[0] not in devices:
            continue  # blank lines, markdown fences around pasted output
        row, cells, extra = tokens[0], tokens[1 : 1 + len(devices)], tokens[1 + len(devices) :]
        bad = [(col, cell) for col, cell in zip(devices, cells, strict=False) if not _CELL.match(cell)]
        if bad:
            col, cell = bad[0]
            notes.append(f"line {number}: {row} cell {cell!r} under {col} is not a topology code of the legend "
                         "(X, SYS, NODE, PHB, PXB, PIX, NV#): the row is not read")
            malformed.append(row)
            continue
        if len(cells) < len(devices):
            notes.append(f"line {number}: {row} has {len(cells)} cells for {len(devices)} columns: the row is not read")
            malformed.append(row)
            continue
        matrix[row] = dict(zip(devices, cells, strict=True))
        if _GPU.match(row):
            values = dict(zip(affinity_cols, extra, strict=False))
            affinity.append({"gpu": row, **{key: _na(values.get(col)) for col, key in _AFFINITY_KEYS.items()}})
    if not matrix and not malformed:
        raise ParseError("topology header without matrix rows")

    gpus = [d for d in devices if _GPU.match(d)]
    nics = [d for d in devices if not _GPU.match(d)]
    for nic in nics:
        if not nic.startswith("NIC"):
            nic_names.setdefault(nic, nic)  # older drivers label NIC columns with the device name itself
    if malformed:
        # A column that shifted in one row can make any other cell a plausible wrong fact (a GPU-NIC relation that
        # is really the affinity column): nothing is derived from the matrix, so the checks reading it say unknown.
        notes.append(f"malformed matrix (rows {', '.join(malformed)}): GPU pairs, nearest NICs and affinity not derived")
        pairs = nearest = affinity_out = None
    else:
        pairs = _gpu_pairs(gpus, matrix, notes)
        nearest, affinity_out = _nearest_nics(gpus, nics, nic_names, matrix), affinity
    return {
        "gpus": gpus,
        "nics": nics,
        "nic_names": {nic: nic_names[nic] for nic in nics if nic in nic_names},
        "matrix": matrix,
        "gpu_pairs": pairs,
        "nvlink_bonds_min": _bonds_min(gpus, pairs) if pairs is not None else None,
        "gpu_nearest_nic": nearest,
        "gpu_affinity": affinity_out,
        "legend": legend,
        "notes": notes,
    }


def _gpu_pairs(gpus: list[str], matrix: dict[str, dict[str, str]], notes: list[str]) -> list[dict[str, str]]:
    pairs = []
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            link = matrix.get(a, {}).get(b) or matrix.get(b, {}).get(a)
            if link is None:
                notes.append(f"no cell for {a}-{b}")
                continue
            pairs.append({"a": a, "b": b, "link": link})
    return pairs


def _bonds_min(gpus: list[str], pairs: Iterable[dict[str, str]]) -> int | None:
    if len(gpus) < 2:
        return None
    bonds = [int(m[1]) if (m := _NV.match(p["link"])) else 0 for p in pairs]
    return min(bonds) if bonds else None


def _nearest_nics(
    gpus: list[str], nics: list[str], nic_names: dict[str, str], matrix: dict[str, dict[str, str]]
) -> list[dict[str, Any]]:
    nearest = []
    for gpu in gpus:
        cells = [(nic, matrix.get(gpu, {}).get(nic)) for nic in nics]
        known = [(nic, cell) for nic, cell in cells if cell is not None]
        if not known:
            continue
        nic, cell = min(known, key=lambda item: rank(item[1]))  # ties: the lowest-numbered NIC
        nearest.append({"gpu": gpu, "nic": nic, "nic_name": nic_names.get(nic), "link": cell})
    return nearest


TOPO_SCHEMA = obj(
    "GPU/NIC topology matrix (nvidia-smi topo -m).",
    {
        "gpus": array("GPU columns in order (GPU0...).", {"type": "string"}),
        "nics": array("NIC columns in order (NIC0...).", {"type": "string"}),
        "nic_names": mapping(
            "NIC column -> RDMA device name from the NIC Legend (NIC0 -> mlx5_0).", {"type": "string"}
        ),
        "matrix": mapping(
            "Row device -> column device -> cell as printed (X, NV18, PIX, PXB, PHB, NODE, SYS); rows that do not "
            "read as legend codes are left out (see notes).",
            {"type": "object", "additionalProperties": {"type": "string"}},
        ),
        "gpu_pairs": array(
            "Each unordered GPU pair once, with its connection; null when the matrix is malformed.",
            obj(
                "One GPU pair.",
                {
                    "a": string("First GPU (lower index)."),
                    "b": string("Second GPU."),
                    "link": string("Connection cell (NV# = # bonded NVLinks)."),
                },
            ),
            nullable=True,
        ),
        "nvlink_bonds_min": integer(
            "Fewest bonded NVLinks over GPU pairs; 0 if a pair has no NVLink; null with fewer than 2 GPUs.", True
        ),
        "gpu_nearest_nic": array(
            "Closest NIC per GPU (X < NV# < PIX < PXB < PHB < NODE < SYS; ties: lowest NIC); empty without NICs; "
            "null when the matrix is malformed.",
            obj(
                "One GPU and its nearest NIC.",
                {
                    "gpu": string("GPU column name."),
                    "nic": string("NIC column name."),
                    "nic_name": string("RDMA device name of the NIC (from the NIC Legend).", True),
                    "link": string("Connection cell between the two."),
                },
            ),
            nullable=True,
        ),
        "gpu_affinity": array(
            "CPU/NUMA affinity columns of each GPU row; null when the matrix is malformed.",
            obj(
                "Affinity of one GPU.",
                {
                    "gpu": string("GPU column name."),
                    "cpu_affinity": string("CPU list as printed (0-51,104-155).", True),
                    "numa_affinity": string("NUMA node(s) as printed.", True),
                    "gpu_numa_id": string("GPU NUMA id (N/A unless the GPU memory is a NUMA node).", True),
                },
            ),
            nullable=True,
        ),
        "legend": array("Connection codes the legend explains; no NV# under topo -mp.", {"type": "string"}),
        "notes": array("What the parser noticed about odd output.", {"type": "string"}),
    },
    optional=("gpu_affinity", "legend", "notes"),
)


COLLECTORS = (
    Collector(
        id="topo",
        argv=tools.argv("topo"),
        parse=parse_topo,
        provides="/topo",
        schema=TOPO_SCHEMA,
        family="topo",
        description="GPU/NIC connection matrix: NVLink bonds between GPUs, PCIe distance from GPUs to NICs.",
        corpus=("nvidia-smi-topo",),
    ),
)
