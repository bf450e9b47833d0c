"""`nvidia-smi nvlink -s`: per-link state and speed."""

from __future__ import annotations

from typing import Any

from ... import tools
from ..base import Collector
from ..fragments import array, boolean, integer, number, obj, string
from .blocks import (
    COMMON,
    ELIDED_NOTE,
    GPU_ID,
    LINK_ID,
    LinkReader,
    max_or_none,
    min_or_none,
    split_gpu_blocks,
)


def parse_status(text: str) -> dict[str, Any]:
    """Per-link state and speed; `<inactive>` links, 'all links are inactive' and MIG are not errors."""
    split = split_gpu_blocks(text)
    reader = LinkReader("status")
    gpus: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    for block in split.gpus:
        by_link: dict[int, dict[str, Any]] = {}
        for link_no, (_, _, gbps, understood), line in reader.links(block):
            if not understood:
                reader.messages.append(line)  # an unknown link state is not counted as active
            by_link[link_no] = {
                "gpu": block.index,
                "link": link_no,
                "active": gbps is not None,
                "gbps": gbps,
            }
        gpu_links = [by_link[k] for k in sorted(by_link)]
        active = [link for link in gpu_links if link["active"]]
        if not gpu_links and not reader.messages and reader.supported:
            reader.messages.append("no link lines reported")
        if block.elided:
            # A GPU cut short in a paste is not a GPU with fewer links: its counts stay unknown, its listed
            # links (and any <inactive> one among them) are still facts.
            reader.messages.append(ELIDED_NOTE)
        counted = not block.elided
        all_inactive = not gpu_links and any("all links are inactive" in m.lower() for m in reader.messages)
        gpus.append(
            {
                "all_inactive": all_inactive,
                "index": block.index,
                "name": block.name,
                "uuid": block.uuid,
                "supported": reader.supported,
                "links_total": len(gpu_links) if counted else None,
                "links_active": len(active) if counted else None,
                "links_inactive": len(gpu_links) - len(active) if counted else None,
                "inactive_links": [link["link"] for link in gpu_links if not link["active"]],
                "gbps_min": min_or_none(link["gbps"] for link in active),
                "gbps_max": max_or_none(link["gbps"] for link in active),
                "note": reader.note(),
                "_numbers": [link["link"] for link in gpu_links],
            }
        )
        links.extend(gpu_links)
    unlisted = _count_all_inactive(gpus)
    speeds = [link["gbps"] for link in links if link["active"]]
    return reader.fragment(
        split,
        text,
        "-s",
        gpus,
        links=links,
        links_active_total=sum(1 for link in links if link["active"]),
        # a GPU that printed "all links are inactive" lists no link, yet every one of its links is down
        links_inactive_total=sum(1 for link in links if not link["active"]) + unlisted,
        # Over GPUs that answered in full: a GPU with "all links are inactive" counts as 0, an elided one not at all.
        links_per_gpu_min=min_or_none(g["links_active"] for g in gpus if g["supported"] and g["links_active"] is not None),
        gbps_min=min_or_none(speeds),
        gbps_max=max_or_none(speeds),
    )


def _count_all_inactive(gpus: list[dict[str, Any]]) -> int:
    """A GPU that says "all links are inactive" prints none of them: it has as many as a GPU of the same name that
    listed all of its own (the GPUs of one node are alike); with no such GPU in the output the count stays unknown.
    Returns how many such links were counted."""
    listed = {g["name"]: (g["links_total"], g["_numbers"]) for g in gpus
              if g["links_total"] and g["links_inactive"] is not None and not g["all_inactive"]}
    counted = 0
    for g in gpus:
        numbers = g.pop("_numbers")
        if not g.pop("all_inactive"):
            continue
        g["links_active"] = 0
        if g["name"] in listed:
            total, numbers = listed[g["name"]]
            g["links_total"] = g["links_inactive"] = total
            g["inactive_links"] = list(numbers)
            counted += total
        else:
            g["links_total"] = g["links_inactive"] = None
            g["note"] = "; ".join(filter(None, [g["note"], "how many links are inactive is not printed (no other "
                                                          "GPU of this model listed its links)"]))
    return counted


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
                    "links_total": integer(
                        "Links listed (for a GPU saying 'all links are inactive': as many as a GPU of the same model "
                        "listed); null when elided or not printed.", True),
                    "links_active": integer("Links with a speed; null when the source elided some.", True),
                    "links_inactive": integer(
                        "Links listed as <inactive>, or all of them on a GPU saying 'all links are inactive'; null "
                        "when the source elided some or the count is not printed.", True),
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
        "links_active_total": integer("Active links listed over all GPUs."),
        "links_inactive_total": integer("Inactive links listed over all GPUs."),
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
        argv=tools.argv("nvlink_status"),
        parse=parse_status,
        provides="/nvlink/status",
        schema=STATUS_SCHEMA,
        family="nvlink",
        description="NVLink links per GPU, active or inactive, and their speed.",
        corpus=("nvidia-smi-nvlink",),
    ),
)
