"""`nv-fabricmanager --version`: the installed Fabric Manager version and the build branch it was cut from."""

from __future__ import annotations

import re
from typing import Any

from ... import tools
from ..base import Collector, ParseError
from ..fragments import obj, string
from ..textutil import strip_ansi
from .platforms import FM_PLATFORMS

_FM_VERSION = re.compile(r"fabric\s*manager\s+version(?:\s+is)?\s*:?\s*(\d+(?:\.\d+)+)", re.IGNORECASE)
# Newer builds add a second line: "Build Info - Branch: rel/gpu_drv/r610/r610_85-4, Changelist: 0". The
# changelist is a number; the output ends without a newline, so a shell prompt can follow it on the same line.
_BUILD_INFO = re.compile(r"Build\s+Info\s*-\s*Branch:\s*([^,\s]+)(?:\s*,\s*Changelist:\s*(\d+))?", re.IGNORECASE)


def parse_fm_version(text: str) -> dict[str, Any]:
    """'Fabric Manager version is : 610.57.04' [+ 'Build Info - Branch: ..., Changelist: N'] -> version, branch."""
    clean = strip_ansi(text)
    m = _FM_VERSION.search(clean)
    if not m:
        raise ParseError("no 'Fabric Manager version' line found")
    build = _BUILD_INFO.search(clean)
    return {
        "version": m.group(1),
        "branch": build.group(1) if build else None,
        "changelist": build.group(2) if build else None,
    }


FM_BUILD_SCHEMA: dict[str, Any] = obj(
    "The Fabric Manager build as nv-fabricmanager --version prints it.",
    {
        "version": string("Fabric Manager version, e.g. 535.161.08 (must equal the driver's).",
                          pattern=r"^\d+(\.\d+)+$"),
        "branch": string("Source branch of the build ('Build Info - Branch:', newer releases), e.g. "
                         "rel/gpu_drv/r610/r610_85-4; null when the binary prints none.", True),
        "changelist": string("Changelist number printed next to the branch.", True),
    },
)

FM_VERSION = Collector(
    id="fm_version",
    argv=tools.argv("fm_version"),
    parse=parse_fm_version,
    provides="/fm/build",
    schema=FM_BUILD_SCHEMA,
    family="fm",
    description="Installed Fabric Manager version (must equal the driver version) and its build branch.",
    platforms=FM_PLATFORMS,
    corpus=("fabricmanager",),
)

COLLECTORS = (FM_VERSION,)
