"""`systemctl show nvidia-imex`: the IMEX unit state and restart count (parser in collectors.systemd_unit)."""

from __future__ import annotations

from ..base import Collector
from ..systemd_unit import SERVICE_SCHEMA, SHOW_PROPERTIES, parse_systemd_unit
from .platforms import IMEX_PLATFORMS

IMEX_SERVICE = Collector(
    id="imex_service",
    argv=("systemctl", "show", "nvidia-imex", SHOW_PROPERTIES),
    parse=parse_systemd_unit,
    provides="/imex/service",
    schema=SERVICE_SCHEMA,
    family="imex",
    description="nvidia-imex unit state and restart count.",
    platforms=IMEX_PLATFORMS,
)

COLLECTORS = (IMEX_SERVICE,)
