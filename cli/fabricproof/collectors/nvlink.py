"""NVLink link state, error counters, capabilities and firmware from `nvidia-smi nvlink` (-s, -e, -c, -info)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .base import Collector, ParseError
from .textutil import strip_ansi, to_int

# "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)"; some drivers print no UUID part.
_GPU_LINE = re.compile(r"^GPU\s+(\d+):\s*(.*?)\s*(?:\(UUID:\s*([^)]*?)\s*\))?\s*$")
_STATUS_LINE = re.compile(r"^Link\s+(\d+):\s*([^:]+?)\s*$")  # "Link 4: 26.562 GB/s" / "Link 4: <inactive>"
_COUNTER_LINE = re.compile(r"^Link\s+(\d+):\s*([^:]+?):\s*(.*?)\s*$")  # "Link 0: Replay Errors: 0"
_CAP_LINE = re.compile(r"^Link\s+(\d+),\s*(.+?):\s*(\S+)\s*$")  # "Link 0, P2P is supported: true"
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
        match = _GPU_LINE.match(line)
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


def _first_line(text: str) -> str:
    return next((line.strip()[:120] for line in text.splitlines() if line.strip()), "")


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
        raise ParseError(f"not nvidia-smi nvlink {tool} output: {_first_line(text)!r}")


def _min(values: Iterable[float]) -> float | None:
    return min(values, default=None)


def _max(values: Iterable[float]) -> float | None:
    return max(values, default=None)


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
            status = _STATUS_LINE.match(line)
            if status:
                recognised += 1
                rate = _RATE.match(status[2])
                if not rate and status[2].lower() != "<inactive>":
                    messages.append(line)  # an unknown link state is not counted as active
                by_link[int(status[1])] = {
                    "gpu": block.index,
                    "link": int(status[1]),
                    "active": rate is not None,
                    "gbps": float(rate[1]) if rate else None,
                }
            elif _CAP_LINE.match(line) or _COUNTER_LINE.match(line):
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


def _counter_field(name: str) -> str | None:
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
            counter = _COUNTER_LINE.match(line)
            if counter:
                recognised += 1
                link = by_link.setdefault(
                    int(counter[1]),
                    {"gpu": block.index, "link": int(counter[1]), "replay": None, "recovery": None,
                     "crc_flit": None, "crc_data": None, "crc": None, "counters": {}},
                )
                value = to_int(counter[3])
                link["counters"][counter[2]] = value
                key = _counter_field(counter[2])
                if key:
                    link[key] = value
            elif _STATUS_LINE.match(line) or _CAP_LINE.match(line):
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


def _bool(value: str) -> bool | None:
    return {"true": True, "false": False}.get(value.strip().lower())


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
            cap = _CAP_LINE.match(line)
            if cap:
                recognised += 1
                link = by_link.setdefault(
                    int(cap[1]),
                    {"gpu": block.index, "link": int(cap[1]), **{k: None for k in CAPABILITIES.values()}, "other": {}},
                )
                key = CAPABILITIES.get(cap[2].strip().lower())
                if key:
                    link[key] = _bool(cap[3])
                else:
                    link["other"][cap[2].strip()] = _bool(cap[3])
            elif _STATUS_LINE.match(line) or _COUNTER_LINE.match(line):
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


def _t(kind: str | list[str], desc: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": desc, **extra}


def _obj(desc: str, props: dict[str, Any], required: Iterable[str]) -> dict[str, Any]:
    return {"type": "object", "description": desc, "additionalProperties": False,
            "required": list(required), "properties": props}


def _list(desc: str, items: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "description": desc, "items": items}


_NSTR = ["string", "null"]
_NINT = ["integer", "null"]
_NBOOL = ["boolean", "null"]

_GPU_ID = {
    "index": _t("integer", "nvidia-smi GPU index."),
    "name": _t(_NSTR, "Product name from the GPU header."),
    "uuid": _t(_NSTR, "GPU UUID from the GPU header."),
}
_COMMON = {
    "elided": _t("boolean", "The source elided lines ([...]); lists are incomplete."),
    "notes": _list("What the parser noticed about partial or odd output.", {"type": "string"}),
}
_GPU_SUMMARY = _obj(
    "One GPU as the sub-command reported it.",
    {
        **_GPU_ID,
        "supported": _t("boolean", "False when the GPU cannot be queried (MIG mode, no NVLink)."),
        "links": _t("integer", "Links listed for this GPU."),
        "note": _t(_NSTR, "Message printed instead of (or besides) link lines."),
    },
    required=("index", "supported", "note"),
)

STATUS_SCHEMA = _obj(
    "NVLink link state and per-link speed (nvidia-smi nvlink -s).",
    {
        "supported": _t("boolean", "Every GPU could be queried (false in MIG mode or without NVLink)."),
        "gpus": _list(
            "Per-GPU summary.",
            _obj(
                "One GPU.",
                {
                    **_GPU_ID,
                    "supported": _t("boolean", "False when NVLink queries are not supported (MIG mode, no NVLink)."),
                    "links_total": _t("integer", "Links listed."),
                    "links_active": _t("integer", "Links with a speed."),
                    "links_inactive": _t("integer", "Links listed as <inactive>."),
                    "inactive_links": _list("Numbers of the inactive links.", {"type": "integer"}),
                    "gbps_min": _t(["number", "null"], "Lowest active link speed in GB/s."),
                    "gbps_max": _t(["number", "null"], "Highest active link speed in GB/s."),
                    "note": _t(_NSTR, "Message such as 'all links are inactive' or MIG 'not supported'."),
                },
                required=("index", "name", "uuid", "supported", "links_total", "links_active",
                          "links_inactive", "gbps_min", "note"),
            ),
        ),
        "links": _list(
            "Every listed link.",
            _obj(
                "One link.",
                {
                    "gpu": _t("integer", "GPU index."),
                    "link": _t("integer", "Link number."),
                    "active": _t("boolean", "The link reports a speed (not <inactive>)."),
                    "gbps": _t(["number", "null"], "Link speed in GB/s as printed (26.562, 53.125)."),
                },
                required=("gpu", "link", "active", "gbps"),
            ),
        ),
        "links_active_total": _t("integer", "Active links over all GPUs."),
        "links_inactive_total": _t("integer", "Inactive links over all GPUs."),
        "links_per_gpu_min": _t(_NINT, "Fewest active links on a queryable GPU; null when none answered."),
        "gbps_min": _t(["number", "null"], "Lowest active link speed in GB/s."),
        "gbps_max": _t(["number", "null"], "Highest active link speed in GB/s."),
        **_COMMON,
    },
    required=("supported", "gpus", "links", "links_active_total", "links_inactive_total",
              "links_per_gpu_min", "gbps_min", "gbps_max"),
)

ERRORS_SCHEMA = _obj(
    "NVLink error counters (nvidia-smi nvlink -e).",
    {
        "supported": _t("boolean", "Every GPU could be queried."),
        "gpus": _list("Per-GPU summary.", _GPU_SUMMARY),
        "links": _list(
            "Counters per link.",
            _obj(
                "One link.",
                {
                    "gpu": _t("integer", "GPU index."),
                    "link": _t("integer", "Link number."),
                    "replay": _t(_NINT, "Replay errors."),
                    "recovery": _t(_NINT, "Recovery errors."),
                    "crc_flit": _t(_NINT, "Flit CRC errors (when printed separately)."),
                    "crc_data": _t(_NINT, "Data CRC errors (when printed separately)."),
                    "crc": _t(_NINT, "CRC errors, or flit + data CRC errors."),
                    "counters": _t("object", "Every counter as printed.", additionalProperties={"type": _NINT}),
                },
                required=("gpu", "link", "replay", "recovery", "crc_flit", "crc_data", "crc"),
            ),
        ),
        "totals": _obj(
            "Sums over all links (missing counters count as 0).",
            {
                "replay": _t("integer", "Replay errors."),
                "recovery": _t("integer", "Recovery errors."),
                "crc": _t("integer", "CRC errors."),
            },
            required=("replay", "recovery", "crc"),
        ),
        **_COMMON,
    },
    required=("links", "totals"),
)

CAPS_SCHEMA = _obj(
    "NVLink per-link capabilities (nvidia-smi nvlink -c).",
    {
        "supported": _t("boolean", "Every GPU could be queried."),
        "gpus": _list("Per-GPU summary.", _GPU_SUMMARY),
        "links": _list(
            "Capabilities per link.",
            _obj(
                "One link.",
                {
                    "gpu": _t("integer", "GPU index."),
                    "link": _t("integer", "Link number."),
                    "p2p_supported": _t(_NBOOL, "P2P is supported."),
                    "sysmem_access_supported": _t(_NBOOL, "Access to system memory supported."),
                    "p2p_atomics_supported": _t(_NBOOL, "P2P atomics supported."),
                    "sysmem_atomics_supported": _t(_NBOOL, "System memory atomics supported."),
                    "sli_supported": _t(_NBOOL, "SLI is supported."),
                    "link_supported": _t(_NBOOL, "Link is supported."),
                    "other": _t("object", "Capabilities this parser does not name.",
                                additionalProperties={"type": _NBOOL}),
                },
                required=("gpu", "link", "p2p_supported"),
            ),
        ),
        "p2p_all": _t(_NBOOL, "Every listed link supports P2P; null when no link was listed."),
        **_COMMON,
    },
    required=("links", "p2p_all"),
)

INFO_SCHEMA = _obj(
    "NVLink encryption state and NVLink firmware (nvidia-smi nvlink -info, GB200 and later).",
    {
        "gpus": _list(
            "Per GPU.",
            _obj(
                "One GPU.",
                {
                    **_GPU_ID,
                    "nvle": _t(_NSTR, "NVLink encryption state as printed (enabled/disabled)."),
                    "firmware": _t("object", "Firmware component -> version.", additionalProperties={"type": _NSTR}),
                    "note": _t(_NSTR, "Lines the parser did not recognise."),
                },
                required=("index", "nvle", "firmware"),
            ),
        ),
        "firmware": _list(
            "Flat list of firmware components.",
            _obj(
                "One component on one GPU.",
                {
                    "gpu": _t("integer", "GPU index."),
                    "component": _t("string", "Component name (MSE, NETIR, NETIR UPHY...)."),
                    "version": _t(_NSTR, "Version as printed."),
                },
                required=("gpu", "component", "version"),
            ),
        ),
        "firmware_versions": _t(
            "object",
            "Component -> distinct versions across GPUs (one entry each on a consistent node).",
            additionalProperties={"type": "array", "items": {"type": "string"}},
        ),
        **_COMMON,
    },
    required=("gpus", "firmware", "firmware_versions"),
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
