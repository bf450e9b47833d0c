"""How the fabric tools spell GUIDs, widths, speeds and their own warnings, read into the subnet model's words."""

from __future__ import annotations

import re

from ...subnet.model import SPEEDS, WIDTHS
from ..base import ParseError

#: libibmad/libibnetdisc diagnostics a tool may print before or between its lines when stderr is kept with stdout
#: ("ibwarn: [123] sim_connect: ...", "src/query_smp.c:195; umad (DR path ...) bad status 110; ...").
DIAGNOSTIC = re.compile(r"^(?:ibwarn|ibpanic|iberror|ibnetdiscover|iblinkinfo|ibqueryerrors):|^src/\S+\.c:\d+;")
#: The spellings a tool prints for "not known" (ibnetdiscover's dump_linkwidth_compat / dump_linkspeed_compat).
UNKNOWN = ("??", "???")
_LOWER_WIDTHS = {w.upper(): w for w in WIDTHS}


def guid(text: str) -> str:
    """'0c42a10300a9b026', '0x2c903006e29b0' -> '0x0c42a10300a9b026' (lower case, 16 hex digits)."""
    digits = text[2:] if text[:2] in ("0x", "0X") else text
    if not digits or len(digits) > 16:
        raise ParseError(f"not a GUID: {text!r}")
    try:
        int(digits, 16)
    except ValueError:
        raise ParseError(f"not a GUID: {text!r}") from None
    return "0x" + digits.lower().rjust(16, "0")


def width(text: str) -> str | None:
    """'4x' / '4X' -> '4x'; the tool's '??' -> None; anything else fails closed."""
    if text in UNKNOWN:
        return None
    try:
        return _LOWER_WIDTHS[text.upper()]
    except KeyError:
        raise ParseError(f"unknown link width {text!r}") from None


def speed(text: str) -> str | None:
    """'HDR' -> 'HDR'; the tool's '???' -> None; a name the model does not rank fails closed."""
    if text in UNKNOWN:
        return None
    if text not in SPEEDS:
        raise ParseError(f"unknown link speed {text!r}")
    return text


def width_speed(token: str) -> tuple[str | None, str | None]:
    """ibnetdiscover's one token for both: '4xHDR' -> ('4x', 'HDR'), '4xFDR10', '1x???', '??SDR'."""
    for w in ("12x", "1x", "2x", "4x", "8x", "??"):
        if token.startswith(w):
            return width(w), speed(token[len(w):])
    raise ParseError(f"unknown link width and speed {token!r}")


def lid(value: int) -> int | None:
    """A port's LID, or None when none is assigned: 0 and 0xffff (printed 65535 by ibnetdiscover before the SM
    assigned one) are not unicast LIDs, and a multicast LID (0xc000 and up) is never a port's."""
    return value if 0 < value < 0xC000 else None
