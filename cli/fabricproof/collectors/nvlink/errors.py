"""`nvidia-smi nvlink -e`: Replay, Recovery and CRC error counters per link, or the NVLink5 counters of Blackwell."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ... import tools
from ..base import Collector
from ..fragments import array, boolean, integer, mapping, number, obj
from ..textutil import to_int
from .blocks import COMMON, GPU_SUMMARY, LINK_ID, BlockCounts, GpuBlock, LinkReader, split_gpu_blocks

@lru_cache(maxsize=1024)
def _counter_value(text: str) -> int | None:
    """to_int, cached: counters print the same few values ("0") on every link."""
    return to_int(text)


# Blackwell (NVLink5) drivers print other counters than Replay/Recovery/CRC (which NVML no longer supports there).
# The names, as a live B300 on driver 595.91.07 prints them (public notes, code-index file id 71075276249), and the
# matching DCGM fields DCGM_FI_DEV_NVLINK_COUNT_*: the layout of each line is that of the older counters
# ("Link N: <name>: <value>"), documented-only until a real Blackwell `nvlink -e` sample is in the corpus.
NVLINK5_COUNTERS = {
    "malformed packet errors": "malformed_packet_errors",
    "buffer overrun errors": "buffer_overrun_errors",
    "rx errors": "rx_errors",
    "rx remote errors": "rx_remote_errors",
    "rx general errors": "rx_general_errors",
    "local link integrity errors": "local_link_integrity_errors",
    "tx discards": "tx_discards",
    "link recovery successful events": "link_recovery_successful",
    "link recovery failed events": "link_recovery_failed",
    "total link recovery events": "link_recovery_total",
    "effective errors": "effective_errors",
    "symbol errors": "symbol_errors",
}
# Bit error rates print as floats; "15e-255" is the floor NVML prints for "no error at all".
NVLINK5_RATES = {"effective ber": "effective_ber", "symbol ber": "symbol_ber"}
_FEC_BIN = re.compile(r"^fec errors\s*-\s*(\d+)$")
_FLOAT = re.compile(r"^[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?$")


def _rate(text: str) -> float | None:
    v = text.strip()
    return float(v) if _FLOAT.match(v) else None


def _nvlink5(link: dict[str, Any], name: str, printed: str) -> bool:
    """Store an NVLink5 counter of the link; False when the name is not one."""
    lower = name.lower()
    key = NVLINK5_COUNTERS.get(lower)
    rate = NVLINK5_RATES.get(lower)
    fec = _FEC_BIN.match(lower)
    if key is None and rate is None and fec is None:
        return False
    nvl5 = link["nvlink5"]
    if nvl5 is None:
        nvl5 = link["nvlink5"] = {**dict.fromkeys(NVLINK5_COUNTERS.values()), **dict.fromkeys(NVLINK5_RATES.values()),
                                  "fec_errors": {}}
    if key:
        nvl5[key] = _counter_value(printed)
    elif rate:
        nvl5[rate] = _rate(printed)
    else:
        # bin N counts codewords that needed N symbol corrections: bin 0 (no correction) grows by billions on a
        # healthy link and is not an error count
        nvl5["fec_errors"][fec.group(1)] = _counter_value(printed)
    return True


def parse_errors(text: str) -> dict[str, Any]:
    """Per-link Replay/Recovery/CRC counters; crc is 'CRC Errors' or flit + data CRC when split."""
    split = split_gpu_blocks(text)
    reader = LinkReader("counter")
    gpus: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for block in split.gpus:
        read, counts = _read_block(tuple(block.lines))
        # the block's reading is shared: each GPU gets its own copies, under its own index
        links.extend(_copy(link, block.index) for link in read)
        reader.took(counts)
        gpus.append(reader.gpu_summary(block, len(read)))
    return reader.fragment(
        split,
        text,
        "-e",
        gpus,
        links=links,
        totals={k: sum(link[k] or 0 for link in links) for k in ("replay", "recovery", "crc")},
    )


def _copy(link: dict[str, Any], gpu: int) -> dict[str, Any]:
    nvl5 = link["nvlink5"]
    return {**link, "gpu": gpu, "counters": dict(link["counters"]),
            "nvlink5": None if nvl5 is None else {**nvl5, "fec_errors": dict(nvl5["fec_errors"])}}


@lru_cache(maxsize=64)
def _read_block(lines: tuple[str, ...]) -> tuple[tuple[dict[str, Any], ...], BlockCounts]:
    """One GPU's lines read (its links in link order, what LinkReader counted and noted), once per distinct block:
    the GPUs of a node, and the nodes of a fleet, mostly print the same counters (zero). Never changed once made."""
    reader = LinkReader("counter")
    by_link: dict[int, dict[str, Any]] = {}
    for link_no, (_, name, printed, key), _line in reader.links(GpuBlock(0, None, None, list(lines))):
        link = by_link.get(link_no)
        if link is None:
            link = by_link[link_no] = {
                "gpu": 0, "link": link_no, "replay": None, "recovery": None,
                "crc_flit": None, "crc_data": None, "crc": None, "counters": {}, "nvlink5": None,
            }
        if _nvlink5(link, name, printed):
            rate = NVLINK5_RATES.get(name.lower())
            link["counters"][name] = link["nvlink5"][rate] if rate else _counter_value(printed)
            continue
        value = _counter_value(printed)
        link["counters"][name] = value
        if key:
            link[key] = value
    for link in by_link.values():
        split_crc = [v for v in (link["crc_flit"], link["crc_data"]) if v is not None]
        if link["crc"] is None and split_crc:
            link["crc"] = sum(split_crc)
    return tuple(by_link[k] for k in sorted(by_link)), reader.counts()


ERRORS_SCHEMA = obj(
    "NVLink error counters (nvidia-smi nvlink -e).",
    {
        "supported": boolean("Every GPU could be queried."),
        "gpus": array("Per-GPU summary.", GPU_SUMMARY),
        "links": array(
            "Counters per link.",
            obj(
                "One link.",
                {
                    **LINK_ID,
                    "replay": integer("Replay errors.", True),
                    "recovery": integer("Recovery errors.", True),
                    "crc_flit": integer("Flit CRC errors (when printed separately).", True),
                    "crc_data": integer("Data CRC errors (when printed separately).", True),
                    "crc": integer("CRC errors, or flit + data CRC errors.", True),
                    "counters": mapping("Every counter as printed (BER values as floats).", {"type": ["number", "null"]}),
                    "nvlink5": obj(
                        "The NVLink5 (Blackwell) counters of the link; null on older GPUs, which print Replay/Recovery/CRC.",
                        {
                            **{key: integer(f"{title.capitalize()}.", True) for title, key in NVLINK5_COUNTERS.items()},
                            **{key: number(f"{title.capitalize()} (a rate; 15e-255 is NVML's floor for none).", True)
                               for title, key in NVLINK5_RATES.items()},
                            "fec_errors": mapping("FEC Errors - N: codewords that needed N symbol corrections (bin 0 is "
                                                  "the corrected-codeword count, not an error count).",
                                                  {"type": ["integer", "null"]}),
                        },
                        nullable=True,
                    ),
                },
                optional=("counters", "nvlink5"),
            ),
        ),
        "totals": obj(
            "Sums over all links (missing counters count as 0).",
            {
                "replay": integer("Replay errors."),
                "recovery": integer("Recovery errors."),
                "crc": integer("CRC errors."),
            },
        ),
        **COMMON,
    },
    optional=("supported", "gpus", *COMMON),
)


COLLECTORS = (
    Collector(
        id="nvlink_errors",
        argv=tools.argv("nvlink_errors"),
        parse=parse_errors,
        provides="/nvlink/errors",
        schema=ERRORS_SCHEMA,
        family="nvlink",
        description="NVLink error counters per link: replay, recovery and CRC; NVLink5 counters on Blackwell.",
        corpus=("nvidia-smi-nvlink",),
    ),
)
