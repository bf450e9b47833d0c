"""`nv-fabricmanager --version`: the installed Fabric Manager version."""

from __future__ import annotations

import re
from typing import Any

from ..base import Collector, ParseError
from ..fragments import string
from ..textutil import strip_ansi
from .platforms import FM_PLATFORMS

_FM_VERSION = re.compile(r"fabric\s*manager\s+version(?:\s+is)?\s*:?\s*(\d+(?:\.\d+)+)", re.IGNORECASE)


def parse_fm_version(text: str) -> str:
    """'Fabric Manager version is : 450.102.04' -> '450.102.04'."""
    m = _FM_VERSION.search(strip_ansi(text))
    if not m:
        raise ParseError("no 'Fabric Manager version' line found")
    return m.group(1)


FM_VERSION_SCHEMA: dict[str, Any] = string(
    "Fabric Manager version as printed by nv-fabricmanager --version, e.g. 535.161.08.", pattern=r"^\d+(\.\d+)+$"
)

FM_VERSION = Collector(
    id="fm_version",
    argv=("nv-fabricmanager", "--version"),
    parse=parse_fm_version,
    provides="/fm/version",
    schema=FM_VERSION_SCHEMA,
    family="fm",
    description="Installed Fabric Manager version (must equal the driver version).",
    platforms=FM_PLATFORMS,
    corpus=("fabricmanager",),
)

COLLECTORS = (FM_VERSION,)
