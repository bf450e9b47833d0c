"""`nvidia-smi nvlink -gt d` (or `-gt r`): NVLink throughput counters per link, Tx and Rx in KiB."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..fragments import array, boolean, integer, obj, string
from .blocks import COMMON, GPU_SUMMARY, LINK_ID, LinkReader, split_gpu_blocks

# "Link 0: Data Tx: 5863784 KiB" (-gt d, data payload) or "Link 0: Raw Tx: 25305739 KiB" (-gt r, with protocol
# overhead): counter lines to the link-line reader, whose name gives the kind and the direction.
_COUNTER = re.compile(r"^(data|raw) (tx|rx)$", re.IGNORECASE)
_KIB = re.compile(r"^(\d{1,20})\s*KiB$")  # a 64-bit counter has at most 20 digits


def _is_throughput(tail: tuple[Any, ...]) -> bool:
    return _COUNTER.match(tail[1]) is not None


def parse_throughput(text: str) -> dict[str, Any]:
    """Tx/Rx KiB per link; which counters (data or raw) the link lines name. A value that is not '<n> KiB' is
    null and its line goes to the GPU's note."""
    split = split_gpu_blocks(text)
    reader = LinkReader("counter", accept=_is_throughput)
    gpus: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    kinds: set[str] = set()
    for block in split.gpus:
        by_link: dict[int, dict[str, Any]] = {}
        for link_no, (_, name, printed, _), line in reader.links(block):
            kind, direction = name.lower().split()  # "data tx": _is_throughput took only such names
            kinds.add(kind)
            link = by_link.get(link_no)
            if link is None:
                link = by_link[link_no] = {"gpu": block.index, "link": link_no, "tx_kib": None, "rx_kib": None}
            value = _KIB.match(printed)
            link[f"{direction}_kib"] = int(value[1]) if value else None
            if value is None:
                reader.messages.append(line)
        links.extend(by_link[k] for k in sorted(by_link))
        gpus.append(reader.gpu_summary(block, len(by_link)))
    if len(kinds) > 1:
        raise ParseError("Data and Raw counters mixed: not the output of one nvidia-smi nvlink -gt command")
    return reader.fragment(split, text, "-gt", gpus, counter=next(iter(kinds), None), links=links)


THROUGHPUT_SCHEMA = obj(
    "NVLink throughput counters per link (nvidia-smi nvlink -gt d: data payload; -gt r: raw, with protocol overhead).",
    {
        "supported": boolean("Every GPU could be queried (false in MIG mode or without NVLink)."),
        "gpus": array("Per-GPU summary.", GPU_SUMMARY),
        "counter": string(
            "Which counters the links list: data (-gt d) or raw (-gt r); null when no link was listed.",
            True,
            enum=["data", "raw", None],
        ),
        "links": array(
            "Counters per link.",
            obj(
                "One link.",
                {
                    **LINK_ID,
                    "tx_kib": integer("KiB transmitted as the counter reads (cumulative: compare two readings).", True),
                    "rx_kib": integer("KiB received as the counter reads (cumulative: compare two readings).", True),
                },
            ),
        ),
        **COMMON,
    },
)


COLLECTORS = (
    Collector(
        id="nvlink_throughput",
        argv=tools.argv("nvlink_throughput"),
        parse=parse_throughput,
        provides="/nvlink/throughput",
        schema=THROUGHPUT_SCHEMA,
        family="nvlink",
        description="NVLink data throughput counters per link, Tx and Rx in KiB (nvidia-smi nvlink -gt d).",
        default=False,  # counters for before/after comparisons (probes, soak), not a health fact
        corpus=("nvidia-smi-nvlink",),
    ),
)
