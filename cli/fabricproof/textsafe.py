"""Text from hosts and files made safe to show: control characters become visible escapes, never obeyed."""

from __future__ import annotations

import re

# Control characters (C0 other than tab/newline/CR, DEL, C1), lone surrogates and the
# non-characters U+FFFE/U+FFFF. Raw tool output carries some (ANSI colour escapes, NULs): XML
# cannot hold them, and written to a terminal they would be obeyed rather than shown.
_INVISIBLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# On a terminal a carriage return is obeyed too (it rewrites the line it ends): shown as well.
_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """Replace control characters with a visible \\xNN / \\uNNNN escape (valid XML 1.0 and
    safe on a terminal); tabs and line breaks are kept."""
    return _INVISIBLE.sub(_escape, text)


def for_terminal(text: str) -> str:
    """visible(), and carriage returns too: host names, plan descriptions and reasons printed to a terminal can
    neither set its title, colour it, move its cursor nor overwrite a line."""
    return _TERMINAL.sub(_escape, text)
