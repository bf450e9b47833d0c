"""`systemctl show nvidia-imex`: the IMEX unit state and restart count (parser in collectors.systemd_unit)."""

from __future__ import annotations

from ..systemd_unit import unit_state_collector
from .platforms import IMEX_PLATFORMS

IMEX_SERVICE = unit_state_collector("imex_service", "nvidia-imex", "/imex/service", "imex", IMEX_PLATFORMS)

COLLECTORS = (IMEX_SERVICE,)
