"""`systemctl show nvidia-fabricmanager`: the FM unit state and restart count (parser in collectors.systemd_unit)."""

from __future__ import annotations

from ..base import Collector
from ..systemd_unit import SERVICE_SCHEMA, SHOW_PROPERTIES, parse_systemd_unit
from .platforms import FM_PLATFORMS

FM_SERVICE = Collector(
    id="fm_service",
    argv=("systemctl", "show", "nvidia-fabricmanager", SHOW_PROPERTIES),
    parse=parse_systemd_unit,
    provides="/fm/service",
    schema=SERVICE_SCHEMA,
    family="fm",
    description="nvidia-fabricmanager unit state and restart count.",
    platforms=FM_PLATFORMS,
    corpus=("fabricmanager",),
)

COLLECTORS = (FM_SERVICE,)
