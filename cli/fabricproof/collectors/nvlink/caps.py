"""`nvidia-smi nvlink -c`: capability flags per link (P2P, system memory access, atomics)."""

from __future__ import annotations

from typing import Any

from ..base import Collector
from ..fragments import array, boolean, mapping, obj
from .blocks import (
    CAPABILITIES,
    COMMON,
    GPU_SUMMARY,
    LINK_ID,
    known_message,
    link_line,
    parse_notes,
    require_output,
    split_gpu_blocks,
    unsupported,
)

_NO_CAPS = dict.fromkeys(CAPABILITIES.values())


def parse_caps(text: str) -> dict[str, Any]:
    """Per-link capability flags; p2p_all says whether every listed link supports P2P."""
    split = split_gpu_blocks(text)
    links: list[dict[str, Any]] = []
    gpus: list[dict[str, Any]] = []
    recognised = foreign = 0
    for block in split.gpus:
        by_link: dict[int, dict[str, Any]] = {}
        supported = True
        messages: list[str] = []
        for line in block.lines:
            parsed = link_line(line)
            if parsed and parsed[1][0] == "cap":
                digits, (_, title, key, flag) = parsed
                number = int(digits)
                recognised += 1
                link = by_link.get(number)
                if link is None:
                    link = by_link[number] = {"gpu": block.index, "link": number, **_NO_CAPS, "other": {}}
                if key:
                    link[key] = flag
                else:
                    link["other"][title] = flag
            elif parsed:
                foreign += 1
            else:
                recognised += known_message(line)
                supported = supported and not unsupported(line)
                messages.append(line)
        links.extend(by_link[k] for k in sorted(by_link))
        gpus.append(
            {"index": block.index, "name": block.name, "uuid": block.uuid, "supported": supported,
             "links": len(by_link), "note": "; ".join(messages) or None}
        )
    require_output(split, recognised, foreign, text, "-c")
    p2p = [link["p2p_supported"] for link in links]
    return {
        "supported": bool(gpus) and all(g["supported"] for g in gpus),
        "gpus": gpus,
        "links": links,
        "p2p_all": None if not p2p or None in p2p else all(p2p),
        "elided": split.elided,
        "notes": parse_notes(split, foreign, "-c"),
    }


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
        argv=("nvidia-smi", "nvlink", "-c"),
        parse=parse_caps,
        provides="/nvlink/caps",
        schema=CAPS_SCHEMA,
        family="nvlink",
        description="NVLink capabilities per link (P2P, system memory access, atomics).",
        corpus=("nvidia-smi-nvlink",),
    ),
)
