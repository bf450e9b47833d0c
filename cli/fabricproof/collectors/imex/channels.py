"""`ls -l /dev/nvidia-caps-imex-channels`: the IMEX channel devices CUDA needs to share memory across trays."""

from __future__ import annotations

import re
from typing import Any

from ..base import HOST_ROOT_ENV, Collector, ParseError
from ..fragments import array, boolean, obj, string
from ..textutil import first_line, strip_ansi
from .platforms import IMEX_PLATFORMS

CHANNEL_DIR = "/dev/nvidia-caps-imex-channels"
# A fixed script: list the directory under $FABRICPROOF_HOST_ROOT; `ls` says so itself when it does not exist (the
# channels are created by the driver at load, or by hand with mknod, and are gone after a reboot unless the module
# option NVreg_CreateImexChannel0=1 creates channel0 again), so exit 2 is an answer, not a failure.
_SCRIPT = f'export LC_ALL=C; cd "${{{HOST_ROOT_ENV}:-}}/dev" && exec ls -l -- {CHANNEL_DIR.rsplit("/", 1)[1]} 2>&1'

_ABSENT = re.compile(r"^ls: cannot access .*: No such file or directory$")
_TOTAL = re.compile(r"^total \d+$")
# "crw-rw-rw- 1 root root 234, 0 Jan  6 09:00 channel0" (device) or "-rw-r--r-- 1 u g 0 Jan  6 09:00 channel0"
_ENTRY = re.compile(r"^([bcdlps-])[rwxsStT-]{9}[.+@]?\s+\d+\s+.*\s(\S+)$")


def parse_imex_channels(text: str) -> dict[str, Any]:
    """Whether the channel directory exists and which channels it holds."""
    lines = [line.strip() for line in strip_ansi(text).splitlines() if line.strip()]
    if not lines:
        raise ParseError("empty output")
    if len(lines) == 1 and _ABSENT.match(lines[0]):
        return {"directory": False, "channels": [], "channel0": False}
    channels: list[dict[str, Any]] = []
    for line in lines:
        if _TOTAL.match(line):
            continue
        m = _ENTRY.match(line)
        if not m:
            raise ParseError(f"not `ls -l {CHANNEL_DIR}` output: {first_line(line)!r}")
        channels.append({"name": m.group(2), "char_device": m.group(1) == "c"})
    if not channels and not any(_TOTAL.match(line) for line in lines):
        raise ParseError(f"not `ls -l {CHANNEL_DIR}` output: {first_line(text)!r}")
    return {"directory": True, "channels": channels, "channel0": any(c["name"] == "channel0" for c in channels)}


IMEX_CHANNELS_SCHEMA = obj(
    f"IMEX channel devices under {CHANNEL_DIR}.",
    {
        "directory": boolean(f"{CHANNEL_DIR} exists."),
        "channels": array("Entries of the directory.", obj("One entry.", {
            "name": string("File name, e.g. channel0."),
            "char_device": boolean("A character device (c in ls -l), as the driver creates it."),
        })),
        "channel0": boolean("channel0 is there: the channel CUDA uses by default for IMEX memory sharing."),
    },
)

IMEX_CHANNELS = Collector(
    id="imex_channels",
    argv=("sh", "-c", _SCRIPT),
    parse=parse_imex_channels,
    provides="/imex/channels",
    schema=IMEX_CHANNELS_SCHEMA,
    family="imex",
    description=f"IMEX channel devices ({CHANNEL_DIR}/channel0 is lost on reboot unless the driver recreates it).",
    platforms=IMEX_PLATFORMS,
    ok_exit_codes=(0, 2),
)

COLLECTORS = (IMEX_CHANNELS,)
