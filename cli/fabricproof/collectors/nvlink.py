"""NVLink link state, error counters, capabilities and firmware from `nvidia-smi nvlink` (-s, -e, -c, -info)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from .base import Collector, ParseError
from .fragments import array, boolean, integer, mapping, number, obj, string
from .textutil import first_line, strip_ansi, to_int

# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"; some drivers print no UUID part.
_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*(?:\(UUID:\s*([^)]*?)\s*\))?\s*$")
# A link line is "Link <n>", then ":" (-s, -e) or "," (-c), then a tail. Every GPU of a node prints the same link
# lines, and the tails repeat for every link ("P2P is supported: true", "26.562 GB/s"), so lines (_link_line) and
# tails (_link_tail) are read once each and looked up after that (bounded caches). The tail patterns are the rest
# of the full-line patterns "^Link\s+(\d+):\s*([^:]+?)\s*$" (status), "^Link\s+(\d+):\s*([^:]+?):\s*(.*?)\s*$"
# (counter) and "^Link\s+(\d+),\s*(.+?):\s*(\S+)\s*$" (capability): "Link\s+(\d+)" can only end right before the
# separator, so splitting there changes no match.
_LINK_HEAD = re.compile(r"Link\s+(\d+)([:,].*)")
_STATUS_TAIL = re.compile(r"\s*([^:]+?)\s*$")  # "Link 4: 26.562 GB/s" / "Link 4: <inactive>"
_COUNTER_TAIL = re.compile(r"\s*([^:]+?):\s*(.*?)\s*$")  # "Link 0: Replay Errors: 0"
_CAP_TAIL = re.compile(r"\s*(.+?):\s*(\S+)\s*$")  # "Link 0, P2P is supported: true"
_RATE = re.compile(r"^(\d+(?:\.\d+)?)\s*GB/s$", re.IGNORECASE)
_ELIDED = {"[...]", "...", "…"}


@dataclass
class _GpuBlock:
    """The lines printed under one `GPU N:` header (merged when a header repeats)."""

    index: int
    name: str | None
    uuid: str | None
    lines: list[str] = field(default_factory=list)
    implicit: bool = False  # no header: an excerpt that starts at the link lines


@dataclass
class _Split:
    gpus: list[_GpuBlock]
    headers: int
    elided: bool


def _split(text: str) -> _Split:
    blocks: dict[int, _GpuBlock] = {}
    current: _GpuBlock | None = None
    headers = 0
    elided = False
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        if not line:
            continue
        if line in _ELIDED:
            elided = True
            continue
        match = _GPU_LINE.match(line) if line.startswith("GPU") else None
        if match:
            headers += 1
            index = int(match[1])
            current = blocks.setdefault(index, _GpuBlock(index, None, None))
            current.name = current.name or (match[2] or None)
            current.uuid = current.uuid or (match[3] or None)
            continue
        if current is None:
            current = blocks.setdefault(0, _GpuBlock(0, None, None, implicit=True))
        current.lines.append(line)
    return _Split(sorted(blocks.values(), key=lambda b: b.index), headers, elided)


def _unsupported(line: str) -> bool:
    lower = line.lower()
    # "Nvlink queries are not supported for Devices in MIG mode",
    # "Device does not have or support Nvlink" (driver 595+ on boards without NVLink).
    return "not supported" in lower or "does not have or support" in lower


def _known_message(line: str) -> bool:
    """Messages nvidia-smi nvlink prints in place of link lines (they make the output readable)."""
    return _unsupported(line) or "all links are inactive" in line.lower()


def _notes(split: _Split, foreign: int, tool: str) -> list[str]:
    notes = []
    if any(b.implicit for b in split.gpus):
        notes.append("no 'GPU N:' header before the first link lines: they are attributed to GPU 0")
    if split.elided:
        notes.append("output elided in the source ([...] or ...): link lists are incomplete")
    if foreign:
        notes.append(f"{foreign} lines of another nvlink sub-command ignored (not {tool} output)")
    return notes


def _require(split: _Split, recognised: int, foreign: int, text: str, tool: str) -> None:
    """Refuse output with no GPU header and no line of this sub-command, or only another one's lines."""
    if (not split.headers and not recognised) or (foreign and not recognised):
        raise ParseError(f"not nvidia-smi nvlink {tool} output: {first_line(text)!r}")


def _min(values: Iterable[float]) -> float | None:
    return min(values, default=None)


def _max(values: Iterable[float]) -> float | None:
    return max(values, default=None)


@lru_cache(maxsize=1024)
def _link_tail(sep_tail: str) -> tuple[Any, ...] | None:
    """What a link line says after "Link <n>" (separator included), read once per distinct tail.

    ("status", state, GB/s or None, state understood), ("counter", name, value as printed, field), ("cap", title,
    field, flag), or None for a line of no nvlink sub-command. The patterns exclude one another (separator,
    colons). Nothing here can raise: a parser that only counts another sub-command's lines must not fail on them.
    """
    sep, tail = sep_tail[0], sep_tail[1:]
    if sep == ",":
        cap = _CAP_TAIL.match(tail)
        if cap is None:
            return None
        title = cap[1].strip()
        return ("cap", title, CAPABILITIES.get(title.lower()), _bool(cap[2]))
    if status := _STATUS_TAIL.match(tail):
        rate = _RATE.match(status[1])
        return ("status", status[1], float(rate[1]) if rate else None, bool(rate) or status[1].lower() == "<inactive>")
    if counter := _COUNTER_TAIL.match(tail):
        return ("counter", counter[1], counter[2], _counter_field(counter[1]))
    return None


@lru_cache(maxsize=4096)  # every GPU of a node prints the same link lines (18 links x 6 capabilities on H100)
def _link_line(line: str) -> tuple[str, tuple[Any, ...]] | None:
    """(link number as printed, _link_tail) of a link line of any nvlink sub-command, else None.

    The number stays text: a parser converts it only for its own lines, as the full-line patterns did.
    """
    head = _LINK_HEAD.match(line)
    if head is None:
        return None
    tail = _link_tail(head[2])
    return (head[1], tail) if tail else None


# ---------------------------------------------------------------------------------------------
# nvidia-smi nvlink -s


def parse_status(text: str) -> dict[str, Any]:
    """Per-link state and speed; `<inactive>` links, 'all links are inactive' and MIG are not errors."""
    split = _split(text)
    gpus: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    recognised = foreign = 0
    for block in split.gpus:
        by_link: dict[int, dict[str, Any]] = {}
        supported = True
        messages: list[str] = []
        for line in block.lines:
            parsed = _link_line(line)
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
                recognised += _known_message(line)
                supported = supported and not _unsupported(line)
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
                "gbps_min": _min(link["gbps"] for link in active),
                "gbps_max": _max(link["gbps"] for link in active),
                "note": "; ".join(messages) or None,
            }
        )
        links.extend(gpu_links)
    _require(split, recognised, foreign, text, "-s")
    speeds = [link["gbps"] for link in links if link["active"]]
    return {
        # False when any GPU cannot be queried (MIG mode, no NVLink): checks skip instead of guessing.
        "supported": bool(gpus) and all(g["supported"] for g in gpus),
        "gpus": gpus,
        "links": links,
        "links_active_total": sum(g["links_active"] for g in gpus),
        "links_inactive_total": sum(g["links_inactive"] for g in gpus),
        # Over GPUs that answered: a GPU with "all links are inactive" counts as 0.
        "links_per_gpu_min": _min(g["links_active"] for g in gpus if g["supported"]),
        "gbps_min": _min(speeds),
        "gbps_max": _max(speeds),
        "elided": split.elided,
        "notes": _notes(split, foreign, "-s"),
    }


# ---------------------------------------------------------------------------------------------
# nvidia-smi nvlink -e


@lru_cache(maxsize=1024)
def _counter_value(text: str) -> int | None:
    """to_int, cached: counters print the same few values ("0") on every link."""
    return to_int(text)


def _counter_field(name: str) -> str | None:
    """The fixed field a counter name feeds (Replay, Recovery, flit/data CRC, CRC), if any."""
    lower = name.lower()
    if "replay" in lower:
        return "replay"
    if "recovery" in lower:
        return "recovery"
    if "crc" in lower and "flit" in lower:
        return "crc_flit"
    if "crc" in lower and "data" in lower:
        return "crc_data"
    if "crc" in lower:
        return "crc"
    return None


def parse_errors(text: str) -> dict[str, Any]:
    """Per-link Replay/Recovery/CRC counters; crc is 'CRC Errors' or flit + data CRC when split."""
    split = _split(text)
    gpus: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    recognised = foreign = 0
    for block in split.gpus:
        by_link: dict[int, dict[str, Any]] = {}
        supported = True
        messages: list[str] = []
        for line in block.lines:
            parsed = _link_line(line)
            if parsed and parsed[1][0] == "counter":
                digits, (_, name, printed, key) = parsed
                number = int(digits)
                recognised += 1
                link = by_link.get(number)
                if link is None:
                    link = by_link[number] = {
                        "gpu": block.index, "link": number, "replay": None, "recovery": None,
                        "crc_flit": None, "crc_data": None, "crc": None, "counters": {},
                    }
                value = _counter_value(printed)
                link["counters"][name] = value
                if key:
                    link[key] = value
            elif parsed:
                foreign += 1
            else:
                recognised += _known_message(line)
                supported = supported and not _unsupported(line)
                messages.append(line)
        for link in by_link.values():
            split_crc = [v for v in (link["crc_flit"], link["crc_data"]) if v is not None]
            if link["crc"] is None and split_crc:
                link["crc"] = sum(split_crc)
        links.extend(by_link[k] for k in sorted(by_link))
        gpus.append(
            {"index": block.index, "name": block.name, "uuid": block.uuid, "supported": supported,
             "links": len(by_link), "note": "; ".join(messages) or None}
        )
    _require(split, recognised, foreign, text, "-e")
    return {
        "supported": bool(gpus) and all(g["supported"] for g in gpus),
        "gpus": gpus,
        "links": links,
        "totals": {k: sum(link[k] or 0 for link in links) for k in ("replay", "recovery", "crc")},
        "elided": split.elided,
        "notes": _notes(split, foreign, "-e"),
    }


# ---------------------------------------------------------------------------------------------
# nvidia-smi nvlink -c

CAPABILITIES = {
    "p2p is supported": "p2p_supported",
    "access to system memory supported": "sysmem_access_supported",
    "p2p atomics supported": "p2p_atomics_supported",
    "system memory atomics supported": "sysmem_atomics_supported",
    "sli is supported": "sli_supported",
    "link is supported": "link_supported",
}


_BOOLS = {"true": True, "false": False}
_NO_CAPS = dict.fromkeys(CAPABILITIES.values())


def _bool(value: str) -> bool | None:
    return _BOOLS.get(value.strip().lower())


def parse_caps(text: str) -> dict[str, Any]:
    """Per-link capability flags; p2p_all says whether every listed link supports P2P."""
    split = _split(text)
    links: list[dict[str, Any]] = []
    gpus: list[dict[str, Any]] = []
    recognised = foreign = 0
    for block in split.gpus:
        by_link: dict[int, dict[str, Any]] = {}
        supported = True
        messages: list[str] = []
        for line in block.lines:
            parsed = _link_line(line)
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
                recognised += _known_message(line)
                supported = supported and not _unsupported(line)
                messages.append(line)
        links.extend(by_link[k] for k in sorted(by_link))
        gpus.append(
            {"index": block.index, "name": block.name, "uuid": block.uuid, "supported": supported,
             "links": len(by_link), "note": "; ".join(messages) or None}
        )
    _require(split, recognised, foreign, text, "-c")
    p2p = [link["p2p_supported"] for link in links]
    return {
        "supported": bool(gpus) and all(g["supported"] for g in gpus),
        "gpus": gpus,
        "links": links,
        "p2p_all": None if not p2p or None in p2p else all(p2p),
        "elided": split.elided,
        "notes": _notes(split, foreign, "-c"),
    }


# ---------------------------------------------------------------------------------------------
# nvidia-smi nvlink -info (GB200 and later: NVLink encryption state and NVLink firmware)


def parse_info(text: str) -> dict[str, Any]:
    """NVLE state and the NVLink firmware components (MSE, NETIR...) per GPU."""
    split = _split(text)
    gpus: list[dict[str, Any]] = []
    firmware: list[dict[str, Any]] = []
    recognised = 0
    for block in split.gpus:
        record: dict[str, Any] = {"index": block.index, "name": block.name, "uuid": block.uuid,
                                  "nvle": None, "firmware": {}, "note": None}
        in_firmware = False
        messages: list[str] = []
        for line in block.lines:
            key, sep, value = line.partition(":")  # versions contain colons: "NETIR: 36:2014:1862"
            key, value = key.strip(), value.strip()
            if not sep:
                messages.append(line)
            elif key.lower() == "firmware version" and not value:
                in_firmware = True
                recognised += 1
            elif in_firmware:
                record["firmware"][key] = value or None
                firmware.append({"gpu": block.index, "component": key, "version": value or None})
            elif key.lower() == "nvle":
                record["nvle"] = value or None
                recognised += 1
            else:
                messages.append(line)
        record["note"] = "; ".join(messages) or None
        gpus.append(record)
    _require(split, recognised, 0, text, "-info")
    versions: dict[str, list[str]] = {}
    for entry in firmware:
        if entry["version"] and entry["version"] not in versions.setdefault(entry["component"], []):
            versions[entry["component"]].append(entry["version"])
    return {
        "gpus": gpus,
        "firmware": firmware,
        "firmware_versions": {k: sorted(v) for k, v in versions.items()},
        "elided": split.elided,
        "notes": _notes(split, 0, "-info"),
    }


# ---------------------------------------------------------------------------------------------
# Schemas


_GPU_ID = {
    "index": integer("nvidia-smi GPU index."),
    "name": string("Product name from the GPU header.", True),
    "uuid": string("GPU UUID from the GPU header.", True),
}
_LINK_ID = {
    "gpu": integer("GPU index."),
    "link": integer("Link number."),
}
_COMMON = {
    "elided": boolean("The source elided lines ([...]); lists are incomplete."),
    "notes": array("What the parser noticed about partial or odd output.", {"type": "string"}),
}
_GPU_SUMMARY = obj(
    "One GPU as the sub-command reported it.",
    {
        **_GPU_ID,
        "supported": boolean("False when the GPU cannot be queried (MIG mode, no NVLink)."),
        "links": integer("Links listed for this GPU."),
        "note": string("Message printed instead of (or besides) link lines.", True),
    },
    optional=("name", "uuid", "links"),
)

STATUS_SCHEMA = obj(
    "NVLink link state and per-link speed (nvidia-smi nvlink -s).",
    {
        "supported": boolean("Every GPU could be queried (false in MIG mode or without NVLink)."),
        "gpus": array(
            "Per-GPU summary.",
            obj(
                "One GPU.",
                {
                    **_GPU_ID,
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
                    **_LINK_ID,
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
        **_COMMON,
    },
    optional=tuple(_COMMON),
)

ERRORS_SCHEMA = obj(
    "NVLink error counters (nvidia-smi nvlink -e).",
    {
        "supported": boolean("Every GPU could be queried."),
        "gpus": array("Per-GPU summary.", _GPU_SUMMARY),
        "links": array(
            "Counters per link.",
            obj(
                "One link.",
                {
                    **_LINK_ID,
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
        **_COMMON,
    },
    optional=("supported", "gpus", *_COMMON),
)

CAPS_SCHEMA = obj(
    "NVLink per-link capabilities (nvidia-smi nvlink -c).",
    {
        "supported": boolean("Every GPU could be queried."),
        "gpus": array("Per-GPU summary.", _GPU_SUMMARY),
        "links": array(
            "Capabilities per link.",
            obj(
                "One link.",
                {
                    **_LINK_ID,
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
        **_COMMON,
    },
    optional=("supported", "gpus", *_COMMON),
)

INFO_SCHEMA = obj(
    "NVLink encryption state and NVLink firmware (nvidia-smi nvlink -info, GB200 and later).",
    {
        "gpus": array(
            "Per GPU.",
            obj(
                "One GPU.",
                {
                    **_GPU_ID,
                    "nvle": string("NVLink encryption state as printed (enabled/disabled).", True),
                    "firmware": mapping("Firmware component -> version.", {"type": ["string", "null"]}),
                    "note": string("Lines the parser did not recognise.", True),
                },
                optional=("name", "uuid", "note"),
            ),
        ),
        "firmware": array(
            "Flat list of firmware components.",
            obj(
                "One component on one GPU.",
                {
                    "gpu": integer("GPU index."),
                    "component": string("Component name (MSE, NETIR, NETIR UPHY...)."),
                    "version": string("Version as printed.", True),
                },
            ),
        ),
        "firmware_versions": mapping(
            "Component -> distinct versions across GPUs (one entry each on a consistent node).",
            {"type": "array", "items": {"type": "string"}},
        ),
        **_COMMON,
    },
    optional=tuple(_COMMON),
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
    Collector(
        id="nvlink_info",
        argv=("nvidia-smi", "nvlink", "-info"),
        parse=parse_info,
        provides="/nvlink/info",
        schema=INFO_SCHEMA,
        family="nvlink",
        description="NVLink encryption state and NVLink firmware versions (GB200 and later).",
        platforms=("gb200",),
        default=False,  # older drivers do not know -info
        corpus=("nvidia-smi-nvlink",),
    ),
)
