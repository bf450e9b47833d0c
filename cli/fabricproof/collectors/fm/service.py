"""`systemctl show nvidia-fabricmanager`: the FM unit state and restart count (parser in collectors.systemd_unit)."""

from __future__ import annotations

from ..systemd_unit import unit_state_collector
from .platforms import FM_PLATFORMS

FM_SERVICE = unit_state_collector(
    "fm_service", "nvidia-fabricmanager", "/fm/service", "fm", FM_PLATFORMS, corpus=("fabricmanager",)
)

COLLECTORS = (FM_SERVICE,)
