"""/proc/cmdline: boot parameters and the IOMMU mode they select."""

from __future__ import annotations

import re
import shlex
from typing import Any

from ..base import Collector, ParseError, read_host_file
from ..fragments import choice, mapping, obj, string
from ..textutil import strip_ansi

# What makes shlex.split (posix, whitespace_split) differ from str.split(): quotes, backslash escapes, and
# whitespace other than space/TAB (shlex splits only at those; str.split also at \v, \f, \xa0...). A cmdline
# without any is split by str.split(), ~50x cheaper than the shlex tokenizer.
_SHLEX_SPECIAL = re.compile(r"['\"\\]|[^\S \t]")


def parse_cmdline(text: str) -> dict[str, Any]:
    """/proc/cmdline: parameters and the IOMMU mode they select.

    iommu: "pt" with iommu=pt (or arm64 iommu.passthrough=1); "off" with intel_iommu=off,
    amd_iommu=off or iommu=off; "on" with intel_iommu=on/amd_iommu=on without passthrough;
    "default" otherwise (the kernel's build-time default applies).
    """
    lines = [line.strip() for line in strip_ansi(text).replace("\r", "").split("\n") if line.strip()]
    if not lines:
        raise ParseError("empty output")
    if len(lines) > 1:
        raise ParseError("more than one line: not /proc/cmdline")
    raw = lines[0]
    if not _SHLEX_SPECIAL.search(raw):
        tokens = raw.split()
    else:
        try:
            tokens = shlex.split(raw)  # the kernel honours double quotes around values with spaces
        except ValueError:
            tokens = raw.split()
    params: dict[str, str] = {}
    for tok in tokens:
        key, _, value = tok.partition("=")
        params[key] = value  # the kernel applies the last occurrence
    return {"raw": raw, "iommu": _iommu_mode(params), "params": params}


def _iommu_mode(params: dict[str, str]) -> str:
    iommu, intel, amd = params.get("iommu"), params.get("intel_iommu", ""), params.get("amd_iommu", "")
    if iommu == "pt" or params.get("iommu.passthrough") in ("1", "y", "Y", "on"):
        return "pt"
    if "off" in (iommu, *intel.split(","), *amd.split(",")):
        return "off"
    if "on" in intel.split(",") or "on" in amd.split(","):
        return "on"
    return "default"


CMDLINE_SCHEMA = obj(
    "Kernel boot command line.",
    {
        "raw": string("/proc/cmdline as read."),
        "iommu": choice("IOMMU mode selected by the parameters.", ["off", "pt", "on", "default"]),
        "params": mapping(
            "Parameter -> value (empty string for flags without '='); the last occurrence wins.", string("Value.")
        ),
    },
)

CMDLINE = Collector(
    id="cmdline",
    argv=read_host_file("/proc/cmdline"),
    parse=parse_cmdline,
    provides="/kernel/cmdline",
    schema=CMDLINE_SCHEMA,
    family="kernel",
    description="Kernel command line and IOMMU mode.",
)

COLLECTORS = (CMDLINE,)
