"""fabricmanager.cfg: FM settings as KEY=VALUE, and the digest of the file as collected."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ..base import Collector, ParseError, read_host_file
from ..fragments import array, mapping, obj, string
from .platforms import FM_PLATFORMS

_CFG_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def parse_fm_config(text: str) -> dict[str, Any]:
    """KEY=VALUE lines with '#' comments; the digest covers the raw text exactly as collected."""
    if not text.strip():
        raise ParseError("empty configuration file")
    settings: dict[str, str] = {}
    ignored: list[str] = []
    for raw in text.split("\n"):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition("=")
        if not sep or not _CFG_KEY.match(key.strip()):
            ignored.append(line)
            continue
        settings[key.strip()] = value.strip()
    if not settings:
        raise ParseError("no KEY=VALUE settings found")
    # surrogateescape round-trips bytes a transport decoded with that handler, so the digest
    # matches `sha256sum` of the file.
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()
    return {"sha256": digest, "settings": settings, "ignored_lines": ignored}


FM_CONFIG_SCHEMA: dict[str, Any] = obj(
    "fabricmanager.cfg as loaded by FM.",
    {
        "sha256": string("SHA-256 of the raw file text.", pattern="^[0-9a-f]{64}$"),
        "settings": mapping("KEY -> VALUE as written (values unparsed strings).", string("Setting value as written.")),
        "ignored_lines": array("Non-comment lines that are not KEY=VALUE.", string("Line text.")),
    },
)

FM_CONFIG = Collector(
    id="fm_config",
    argv=read_host_file("/usr/share/nvidia/nvswitch/fabricmanager.cfg"),
    parse=parse_fm_config,
    provides="/fm/config",
    schema=FM_CONFIG_SCHEMA,
    family="fm",
    description="fabricmanager.cfg settings and digest.",
    platforms=FM_PLATFORMS,
)

COLLECTORS = (FM_CONFIG,)
