"""systemd unit state from `systemctl show --property=...`, `systemctl status` or `is-active` (FM and IMEX units)."""

from __future__ import annotations

import re
from typing import Any

from .. import tools
from .base import Collector, ParseError
from .fragments import boolean, integer, obj, string
from .textutil import strip_ansi

_SHOW_LINE = re.compile(r"^([A-Za-z]+)=(.*)$")
_IS_ACTIVE_STATES = {
    "active", "inactive", "failed", "activating", "deactivating", "reloading", "refreshing", "maintenance", "unknown",
}
_UNIT_HEADER = re.compile(r"^\W*([\w@.:\\-]+\.(?:service|socket|target|timer|mount))\s+-\s+")
_STATUS_FIELD = re.compile(r"^\s*(Loaded|Active|Main PID):\s*(.*)$")
_NOT_FOUND = re.compile(r"Unit\s+(\S+?)\.?\s+could not be found", re.IGNORECASE)
_SUB_STATE = re.compile(r"^[A-Za-z][\w-]*$")


def parse_systemd_unit(text: str) -> dict[str, Any]:
    """State of one systemd unit from `systemctl show --property=...`, `systemctl status` or `systemctl is-active`.

    All three forms give the same fragment; fields a form does not print are null
    (`status` prints no restart counter, `is-active` prints only the active state).
    """
    lines = [line.rstrip() for line in strip_ansi(text).replace("\r", "").split("\n") if line.strip()]
    if not lines:
        raise ParseError("empty output")
    props = {m.group(1): m.group(2).strip() for line in lines if (m := _SHOW_LINE.match(line.strip()))}
    if props.keys() & {"LoadState", "ActiveState", "SubState", "UnitFileState"}:
        return _unit_from_show(props)
    if len(lines) == 1 and lines[0].strip() in _IS_ACTIVE_STATES:
        return _unit_record(None, None, lines[0].strip(), None, None, None, None)
    fields = {m.group(1): m.group(2).strip() for line in lines if (m := _STATUS_FIELD.match(line))}
    missing = next((m for line in lines if (m := _NOT_FOUND.search(line))), None)
    if missing:
        return _unit_record(missing.group(1), "not-found", None, None, None, None, None)
    if "Loaded" in fields or "Active" in fields:
        return _unit_from_status(lines, fields)
    raise ParseError("not systemctl show/status/is-active output")


def _unit_record(
    unit: str | None,
    load: str | None,
    active: str | None,
    sub: str | None,
    file_state: str | None,
    restarts: int | None,
    main_pid: int | None,
) -> dict[str, Any]:
    return {
        "unit": unit,
        "load_state": load,
        "active_state": active,
        "sub_state": sub,
        "unit_file_state": file_state,
        "restarts": restarts,
        "main_pid": main_pid,
        "active": active == "active",
    }


def _int_or_none(value: str | None) -> int | None:
    # Not textutil.to_int: systemd prints these properties as bare decimals, so anything else (a sign, a
    # suffix, "[not set]") is not a count or PID and stays null instead of being read up to its first digit.
    return int(value) if value is not None and re.fullmatch(r"\d+", value) else None


def _unit_from_show(props: dict[str, str]) -> dict[str, Any]:
    def get(key: str) -> str | None:
        return props.get(key) or None

    pid = _int_or_none(get("MainPID"))
    return _unit_record(
        get("Id"),
        get("LoadState"),
        get("ActiveState"),
        get("SubState"),
        get("UnitFileState"),
        _int_or_none(get("NRestarts")),
        pid or None,  # MainPID=0 means no main process
    )


def _unit_from_status(lines: list[str], fields: dict[str, str]) -> dict[str, Any]:
    unit = next((m.group(1) for line in lines[:2] if (m := _UNIT_HEADER.match(line.strip()))), None)
    load = file_state = active = sub = None
    if loaded := fields.get("Loaded"):
        load = loaded.split()[0]
        # "loaded (/path/unit.service; enabled; preset: enabled)" -> unit file state is the 2nd item
        if (paren := re.search(r"\((.*)\)", loaded)) and len(parts := paren.group(1).split(";")) >= 2:
            candidate = parts[1].strip()
            file_state = candidate if candidate and ":" not in candidate else None
    if act := fields.get("Active"):
        active = act.split()[0]
        # "active (running) since ..." -> running; "failed (Result: exit-code)" has no sub state in parens
        subm = re.match(r"\S+\s+\(([^)]*)\)", act)
        if subm and _SUB_STATE.match(subm.group(1)):
            sub = subm.group(1)
        elif active == "failed":
            sub = "failed"
    pid = fields.get("Main PID")
    return _unit_record(unit, load, active, sub, file_state, None, _int_or_none(pid.split()[0]) if pid else None)


SERVICE_SCHEMA: dict[str, Any] = obj(
    "State of a systemd unit.",
    {
        "unit": string("Unit name when the output names it.", True),
        "load_state": string("LoadState: loaded, not-found, masked...", True),
        "active_state": string("ActiveState: active, inactive, failed, activating...", True),
        "sub_state": string("SubState: running, exited, dead, failed, auto-restart...", True),
        "unit_file_state": string("UnitFileState: enabled, disabled, static, masked...", True),
        "restarts": integer("NRestarts: automatic restarts since the unit was loaded (null when not printed).", True),
        "main_pid": integer("Main PID when running.", True),
        "active": boolean("ActiveState is exactly 'active'."),
    },
)


def unit_state_collector(
    collector_id: str, unit: str, provides: str, family: str, platforms: tuple[str, ...], corpus: tuple[str, ...] = ()
) -> Collector:
    """The collector of one unit's state: `systemctl show <unit>` with tools.SHOW_PROPERTIES, read by
    parse_systemd_unit."""
    return Collector(
        id=collector_id,
        argv=tools.argv(collector_id),
        parse=parse_systemd_unit,
        provides=provides,
        schema=SERVICE_SCHEMA,
        family=family,
        description=f"{unit} unit state and restart count.",
        platforms=platforms,
        corpus=corpus,
    )
