"""/proc/driver/nvidia/version -> the loaded NVIDIA kernel module (version, open or proprietary)."""

from __future__ import annotations

import re
from typing import Any

from ..base import Collector, ParseError, read_host_file
from ..fragments import obj, string
from ..textutil import first_line

_NVRM = re.compile(
    r"^NVRM version:\s*NVIDIA UNIX\s+(?P<open>Open\s+)?(?:(?P<arch1>[\w-]+)\s+)?Kernel Module"
    r"(?:\s+for\s+(?P<arch2>[\w-]+))?\s+(?P<version>\d+(?:\.\d+)+)\s*(?P<build>.*?)\s*$",
    re.MULTILINE,
)
_GCC = re.compile(r"^GCC version:\s*(?:gcc version\s+)?(?P<version>\S+)", re.MULTILINE)


def parse_driver_version(text: str) -> dict[str, Any]:
    """Parse /proc/driver/nvidia/version: version, open vs proprietary kernel module, build line."""
    match = _NVRM.search(text)
    if not match:
        raise ParseError(f"no 'NVRM version:' line: {first_line(text)!r}")
    gcc = _GCC.search(text)
    return {
        "version": match["version"],
        "kernel_module": "open" if match["open"] else "proprietary",
        "build": match["build"],
        "arch": match["arch2"] or match["arch1"],
        "gcc_version": gcc["version"] if gcc else None,
    }


DRIVER_SCHEMA = obj(
    "The loaded NVIDIA kernel module (/proc/driver/nvidia/version).",
    {
        "version": string("Kernel module version, e.g. 570.195.03."),
        "kernel_module": string("open (Open Kernel Module) or proprietary.", enum=["open", "proprietary"]),
        "build": string("Build text after the version (Release Build, builder, date)."),
        "arch": string("CPU architecture the module was built for (x86_64, aarch64).", True),
        "gcc_version": string("GCC version the module was built with.", True),
    },
    optional=("arch", "gcc_version"),
)


COLLECTORS = (
    Collector(
        id="driver_version",
        argv=read_host_file("/proc/driver/nvidia/version"),
        parse=parse_driver_version,
        provides="/driver",
        schema=DRIVER_SCHEMA,
        family="gpu",
        description="Loaded NVIDIA kernel module version and flavour (open or proprietary).",
        corpus=("misc",),
    ),
)
