"""How the InfiniBand/RDMA tools print values: decimal-or-hex integers, rates, 'N: NAME' states, clean lines."""

from __future__ import annotations

import re

from ..textutil import na_to_none, strip_ansi, to_float

_INT_ANY = re.compile(r"^(0[xX][0-9a-fA-F]+|[-+]?\d+)")
_CODED = re.compile(r"^(\d+)\s*:\s*(.*)$")


def text_lines(text: str) -> list[str]:
    """Lines without ANSI escapes or CR; splitlines() already copes with CRLF."""
    return strip_ansi(text).splitlines()


def int_or_float(value: str | None) -> int | float | None:
    """'400' -> 400, '2.5 Gb/sec' -> 2.5: integral rates stay ints so facts compare equal to baseline ints."""
    f = to_float(value)
    if f is None:
        return None
    return int(f) if f.is_integer() else f


def int_any(value: str | None) -> int | None:
    """Decimal or 0x-hex integer ('0x33bf' LIDs in ibstatus, '0x00' LMC in ibv_devinfo), else None.

    Not textutil.to_int, which reads decimal only ('0x33bf' would be 0) and drops thousands commas.
    """
    v = na_to_none(value)
    if v is None:
        return None
    m = _INT_ANY.match(v)
    return int(m.group(1), 0) if m else None


def coded(value: str | None) -> tuple[int | None, str | None]:
    """'4: ACTIVE' -> (4, 'ACTIVE'); a bare 'ACTIVE' -> (None, 'ACTIVE')."""
    v = na_to_none(value)
    if v is None:
        return None, None
    m = _CODED.match(v)
    return (int(m.group(1)), m.group(2).strip() or None) if m else (None, v)
