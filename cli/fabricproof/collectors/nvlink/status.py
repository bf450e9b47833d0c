"""`nvidia-smi nvlink -s`: per-link state and speed."""

from __future__ import annotations

from typing import Any

from ..base import Collector
from ..fragments import array, boolean, integer, number, obj, string
from .blocks import (
    COMMON,
    GPU_ID,
    LINK_ID,
    known_message,
    link_line,
    max_or_none,
    min_or_none,
    parse_notes,
    require_output,
    split_gpu_blocks,
    unsupported,
)

def parse_status(text: str) -> dict[str, Any]:
    """Per-link state and speed; `<inactive>` links, 'all links are inactive' and MIG are not errors."""
    split = split_gpu_blocks(text)
    gpus: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    recognised = foreign = 0
    for block in split.gpus:
        by_link: dict[int, dict[str, Any]] = {}
        supported = True
        messages: list[str] = []
        for line in block.lines:
            parsed = link_line(line)
            if parsed and parsed[1][0] == "status":
                digits, (_, _, gbps, understood) = parsed
                number = int(digits)
                recognised += 1
                if not understood:
                    messages.append(line)  # an unknown link state is not counted as active
                by_link[number] = {
                    "gpu": block.index,
                    "link": number,
                    "active": gbps is not None,
                    "gbps": gbps,
                }
            elif parsed:
                foreign += 1
            else:
                recognised += known_message(line)
                supported = supported and not unsupported(line)
                messages.append(line)
        gpu_links = [by_link[k] for k in sorted(by_link)]
        active = [link for link in gpu_links if link["active"]]
        if not gpu_links and not messages and supported:
            messages.append("no link lines reported")
        gpus.append(
            {
                "index": block.index,
                "name": block.name,
                "uuid": block.uuid,
                "supported": supported,
                "links_total": len(gpu_links),
                "links_active": len(active),
                "links_inactive": len(gpu_links) - len(active),
                "inactive_links": [link["link"] for link in gpu_links if not link["active"]],
                "gbps_min": min_or_none(link["gbps"] for link in active),
                "gbps_max": max_or_none(link["gbps"] for link in active),
                "note": "; ".join(messages) or None,
            }
        )
        links.extend(gpu_links)
    require_output(split, recognised, foreign, text, "-s")
    speeds = [link["gbps"] for link in links if link["active"]]
    return {
        # False when any GPU cannot be queried (MIG mode, no NVLink): checks skip instead of guessing.
        "supported": bool(gpus) and all(g["supported"] for g in gpus),
        "gpus": gpus,
        "links": links,
        "links_active_total": sum(g["links_active"] for g in gpus),
        "links_inactive_total": sum(g["links_inactive"] for g in gpus),
        # Over GPUs that answered: a GPU with "all links are inactive" counts as 0.
        "links_per_gpu_min": min_or_none(g["links_active"] for g in gpus if g["supported"]),
        "gbps_min": min_or_none(speeds),
        "gbps_max": max_or_none(speeds),
        "elided": split.elided,
        "notes": parse_notes(split, foreign, "-s"),
    }


STATUS_SCHEMA = obj(
    "NVLink link state and per-link speed (nvidia-smi nvlink -s).",
    {
        "supported": boolean("Every GPU could be queried (false in MIG mode or without NVLink)."),
        "gpus": array(
            "Per-GPU summary.",
            obj(
                "One GPU.",
                {
                    **GPU_ID,
                    "supported": boolean("False when NVLink queries are not supported (MIG mode, no NVLink)."),
                    "links_total": integer("Links listed."),
                    "links_active": integer("Links with a speed."),
                    "links_inactive": integer("Links listed as <inactive>."),
                    "inactive_links": array("Numbers of the inactive links.", {"type": "integer"}),
                    "gbps_min": number("Lowest active link speed in GB/s.", True),
                    "gbps_max": number("Highest active link speed in GB/s.", True),
                    "note": string("Message such as 'all links are inactive' or MIG 'not supported'.", True),
                },
                optional=("inactive_links", "gbps_max"),
            ),
        ),
        "links": array(
            "Every listed link.",
            obj(
                "One link.",
                {
                    **LINK_ID,
                    "active": boolean("The link reports a speed (not <inactive>)."),
                    "gbps": number("Link speed in GB/s as printed (26.562, 53.125).", True),
                },
            ),
        ),
        "links_active_total": integer("Active links over all GPUs."),
        "links_inactive_total": integer("Inactive links over all GPUs."),
        "links_per_gpu_min": integer("Fewest active links on a queryable GPU; null when none answered.", True),
        "gbps_min": number("Lowest active link speed in GB/s.", True),
        "gbps_max": number("Highest active link speed in GB/s.", True),
        **COMMON,
    },
    optional=tuple(COMMON),
)


COLLECTORS = (
    Collector(
        id="nvlink_status",
        argv=("nvidia-smi", "nvlink", "-s"),
        parse=parse_status,
        provides="/nvlink/status",
        schema=STATUS_SCHEMA,
        family="nvlink",
        description="NVLink links per GPU, active or inactive, and their speed.",
        corpus=("nvidia-smi-nvlink",),
    ),
)
