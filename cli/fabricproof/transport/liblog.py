"""What libraries log (paramiko, ansible-runner) is captured, never printed: escaped, one line per host, kept aside."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict

from ..textsafe import for_terminal

#: Loggers of the libraries a collection drives. Unconfigured, Python's last-resort handler prints their warnings and
#: errors raw on stderr: paramiko's include lines a host sent before any authentication (escape sequences that set
#: the terminal's title or overwrite lines) and a traceback for every host that drops a connection.
LIBRARIES = ("paramiko", "ansible-runner", "invoke")
#: Sources (one per host: paramiko names its transport thread after it) whose line is kept; the oldest go first.
MAX_SOURCES = 1024
LINE_CHARS = 300


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    """Text a host or library provided as one line to show: its first non-empty line, escaped, cut to `limit`."""
    first = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return for_terminal(first[:limit])


class Captured(logging.Handler):
    """Keeps the first line each source (a host's SSH thread) logged at WARNING or above; prints nothing. The rest of
    a record (a traceback) and later records of the same source are dropped: the host's own error line says why."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self._lines: OrderedDict[str, str] = OrderedDict()
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a library's own bad format string must not raise in its thread
            text = str(record.msg)
        with self._guard:
            if record.threadName in self._lines:
                return
            self._lines[record.threadName] = one_line(text)
            while len(self._lines) > MAX_SOURCES:
                self._lines.popitem(last=False)

    def lines(self) -> dict[str, str]:
        with self._guard:
            return dict(self._lines)


_HANDLER = Captured()


def capture() -> Captured:
    """Route every library logger to the one capturing handler (once; later calls change nothing). Records still
    propagate, so an embedding program's own logging configuration sees them."""
    for name in LIBRARIES:
        logger = logging.getLogger(name)
        if _HANDLER not in logger.handlers:
            logger.addHandler(_HANDLER)
    return _HANDLER


def thread_name(label: str) -> str:
    """The name an SSH transport thread of host `label` goes by, and its captured line's source."""
    return f"ssh {label}"
