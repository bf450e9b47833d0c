"""`nvidia-smi nvlink -c`: capability flags per link (P2P, system memory access, atomics)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from ... import tools
from ..base import Collector
from ..fragments import array, boolean, mapping, obj
from .blocks import CAPABILITIES, COMMON, GPU_SUMMARY, LINK_ID, BlockCounts, GpuBlock, LinkReader, split_gpu_blocks

_NO_CAPS = dict.fromkeys(CAPABILITIES.values())


def parse_caps(text: str) -> dict[str, Any]:
    """Per-link capability flags; p2p_all says whether every listed link supports P2P."""
    split = split_gpu_blocks(text)
    reader = LinkReader("cap")
    links: list[dict[str, Any]] = []
    gpus: list[dict[str, Any]] = []
    for block in split.gpus:
        read, counts = _read_block(tuple(block.lines))
        # the block's reading is shared: each GPU gets its own copies, under its own index
        links.extend({**link, "gpu": block.index, "other": dict(link["other"])} for link in read)
        reader.took(counts)
        gpus.append(reader.gpu_summary(block, len(read)))
    p2p = [link["p2p_supported"] for link in links]
    return reader.fragment(
        split, text, "-c", gpus, links=links, p2p_all=None if not p2p or None in p2p else all(p2p)
    )


@lru_cache(maxsize=64)
def _read_block(lines: tuple[str, ...]) -> tuple[tuple[dict[str, Any], ...], BlockCounts]:
    """One GPU's lines read (its links in link order, what LinkReader counted and noted), once per distinct block:
    every GPU of a node, and every node of a SKU, lists the same capabilities. Never changed once made."""
    reader = LinkReader("cap")
    by_link: dict[int, dict[str, Any]] = {}
    for link_no, (_, title, key, flag), _line in reader.links(GpuBlock(0, None, None, list(lines))):
        link = by_link.get(link_no)
        if link is None:
            link = by_link[link_no] = {"gpu": 0, "link": link_no, **_NO_CAPS, "other": {}}
        if key:
            link[key] = flag
        else:
            link["other"][title] = flag
    return tuple(by_link[k] for k in sorted(by_link)), reader.counts()


CAPS_SCHEMA = obj(
    "NVLink per-link capabilities (nvidia-smi nvlink -c).",
    {
        "supported": boolean("Every GPU could be queried."),
        "gpus": array("Per-GPU summary.", GPU_SUMMARY),
        "links": array(
            "Capabilities per link.",
            obj(
                "One link.",
                {
                    **LINK_ID,
                    "p2p_supported": boolean("P2P is supported.", True),
                    "sysmem_access_supported": boolean("Access to system memory supported.", True),
                    "p2p_atomics_supported": boolean("P2P atomics supported.", True),
                    "sysmem_atomics_supported": boolean("System memory atomics supported.", True),
                    "sli_supported": boolean("SLI is supported.", True),
                    "link_supported": boolean("Link is supported.", True),
                    "other": mapping("Capabilities this parser does not name.", {"type": ["boolean", "null"]}),
                },
                optional=(
                    "sysmem_access_supported", "p2p_atomics_supported", "sysmem_atomics_supported",
                    "sli_supported", "link_supported", "other",
                ),
            ),
        ),
        "p2p_all": boolean("Every listed link supports P2P; null when no link was listed.", True),
        **COMMON,
    },
    optional=("supported", "gpus", *COMMON),
)


COLLECTORS = (
    Collector(
        id="nvlink_caps",
        argv=tools.argv("nvlink_caps"),
        parse=parse_caps,
        provides="/nvlink/caps",
        schema=CAPS_SCHEMA,
        family="nvlink",
        description="NVLink capabilities per link (P2P, system memory access, atomics).",
        corpus=("nvidia-smi-nvlink",),
    ),
)
