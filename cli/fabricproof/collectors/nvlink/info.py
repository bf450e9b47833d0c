"""`nvidia-smi nvlink -info` (GB200 and later): NVLink encryption state and NVLink firmware per GPU."""

from __future__ import annotations

from typing import Any

from ... import tools
from ..base import Collector
from ..fragments import array, integer, mapping, obj, string
from .blocks import COMMON, GPU_ID, parse_notes, require_output, split_gpu_blocks

def parse_info(text: str) -> dict[str, Any]:
    """NVLE state and the NVLink firmware components (MSE, NETIR...) per GPU."""
    split = split_gpu_blocks(text)
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
    require_output(split, recognised, 0, text, "-info")
    versions: dict[str, list[str]] = {}
    for entry in firmware:
        if entry["version"] and entry["version"] not in versions.setdefault(entry["component"], []):
            versions[entry["component"]].append(entry["version"])
    return {
        "gpus": gpus,
        "firmware": firmware,
        "firmware_versions": {k: sorted(v) for k, v in versions.items()},
        "elided": split.elided,
        "notes": parse_notes(split, 0, "-info"),
    }


INFO_SCHEMA = obj(
    "NVLink encryption state and NVLink firmware (nvidia-smi nvlink -info, GB200 and later).",
    {
        "gpus": array(
            "Per GPU.",
            obj(
                "One GPU.",
                {
                    **GPU_ID,
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
        **COMMON,
    },
    optional=tuple(COMMON),
)


COLLECTORS = (
    Collector(
        id="nvlink_info",
        argv=tools.argv("nvlink_info"),
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
