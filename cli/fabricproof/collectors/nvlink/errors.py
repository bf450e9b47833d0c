"""`nvidia-smi nvlink -e`: Replay, Recovery and CRC error counters per link."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ..base import Collector
from ..fragments import array, boolean, integer, mapping, obj
from ..textutil import to_int
from .blocks import COMMON, GPU_SUMMARY, LINK_ID, LinkReader, split_gpu_blocks

@lru_cache(maxsize=1024)
def _counter_value(text: str) -> int | None:
    """to_int, cached: counters print the same few values ("0") on every link."""
    return to_int(text)


def parse_errors(text: str) -> dict[str, Any]:
    """Per-link Replay/Recovery/CRC counters; crc is 'CRC Errors' or flit + data CRC when split."""
    split = split_gpu_blocks(text)
    reader = LinkReader("counter")
    gpus: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for block in split.gpus:
        by_link: dict[int, dict[str, Any]] = {}
        for link_no, (_, name, printed, key), _line in reader.links(block):
            link = by_link.get(link_no)
            if link is None:
                link = by_link[link_no] = {
                    "gpu": block.index, "link": link_no, "replay": None, "recovery": None,
                    "crc_flit": None, "crc_data": None, "crc": None, "counters": {},
                }
            value = _counter_value(printed)
            link["counters"][name] = value
            if key:
                link[key] = value
        for link in by_link.values():
            split_crc = [v for v in (link["crc_flit"], link["crc_data"]) if v is not None]
            if link["crc"] is None and split_crc:
                link["crc"] = sum(split_crc)
        links.extend(by_link[k] for k in sorted(by_link))
        gpus.append(reader.gpu_summary(block, len(by_link)))
    return reader.fragment(
        split,
        text,
        "-e",
        gpus,
        links=links,
        totals={k: sum(link[k] or 0 for link in links) for k in ("replay", "recovery", "crc")},
    )


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
                    "counters": mapping("Every counter as printed.", {"type": ["integer", "null"]}),
                },
                optional=("counters",),
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
        argv=("nvidia-smi", "nvlink", "-e"),
        parse=parse_errors,
        provides="/nvlink/errors",
        schema=ERRORS_SCHEMA,
        family="nvlink",
        description="NVLink replay, recovery and CRC error counters per link.",
        corpus=("nvidia-smi-nvlink",),
    ),
)
