"""Many commands in one remote exec: a POSIX sh script (nonce-framed outputs, one watchdog per host) and its parser (pure)."""

from __future__ import annotations

import bisect
import math
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Command, CommandResult

#: SIGKILL follows SIGTERM this long after, when the command ignores the TERM (GNU timeout -k, the watchdog).
KILL_AFTER_S = 2
#: Exit statuses of GNU timeout when the command ran out of time (TERM, then KILL after -k).
TIMEOUT_STATUSES = (124, 128 + 9)


@dataclass(frozen=True)
class Section:
    """What one framed command printed on one stream, and where in the stream it lies."""

    index: int
    data: bytes
    status: int | None  # exit status from the END marker; None when the END marker never came
    start: int  # offset of the first byte of output
    end: int  # offset just past the last byte of output


def new_nonce() -> str:
    """128 random bits: unguessable by anything running on the host, fresh for every run."""
    return secrets.token_hex(16)


def _check(argv: Sequence[str], timeout_s: float) -> None:
    if not argv:
        raise ValueError("empty argv")
    if not timeout_s > 0:
        raise ValueError(f"timeout must be positive, got {timeout_s!r}")


def timed_argv(argv: Sequence[str], timeout_s: float, become: Sequence[str] = ()) -> tuple[str, ...]:
    """argv under GNU timeout (kills the command's whole process group), optionally through sudo."""
    _check(argv, timeout_s)
    return ("timeout", "-k", str(KILL_AFTER_S), f"{timeout_s:g}", *become, *argv)


def _begin(nonce: str, index: int) -> bytes:
    return f"{nonce}:{index}:B\n".encode()


def _end(nonce: str, index: int) -> bytes:
    return f"\n{nonce}:{index}:E:".encode()



# One watchdog per host instead of GNU timeout per command: `timeout` costs the host a fork and an exec
# for every command (~1.1 ms each, 26 commands: ~29 ms of host CPU per collection, measured on the lab).
# When a command starts, the main shell writes "index pid limit start" to $D/c (start: whole seconds of
# /proc/uptime, read by the `read` builtin: no process). The watchdog sleeps until the current command's
# deadline (start + limit + 1, so never early), then, if that command is still the current one, marks it
# as timed out, TERMs it and its descendants (children first, found with pgrep), and KILLs them
# KILL_AFTER_S seconds later. A collection that ends in time costs it one or two `sleep`s in all: the main
# shell TERMs it at the end, and its trap ends its own sleep. If the main shell dies (connection lost),
# the watchdog ends the running command at its deadline and cleans up. The private directory goes on
# $TMPDIR if set, else on /dev/shm (tmpfs): on ext4 /tmp, creating and deleting it per host cost ~20 ms
# of kernel CPU (inode allocation skipping recently deleted inodes; measured on the lab). Without
# /proc/uptime or a private temporary directory the script falls back to GNU timeout.
_PRELUDE = """\
W= T=${{TMPDIR:-/dev/shm}}
[ -d "$T" ] && [ -w "$T" ] || T=/tmp
[ -r /proc/uptime ] && D=$(mktemp -d -p "$T" 2>/dev/null) && {{
M=$$
k() {{ for q in $(pgrep -P "$1" 2>/dev/null); do k "$q" "$2"; done; kill "-$2" "$1" 2>/dev/null; }}
(
s= x= p=
trap 'kill "$s" 2>/dev/null; exit 0' TERM
while [ -d "$D" ]; do
  if ! kill -0 "$M" 2>/dev/null; then [ -n "$p" ] && k "$p" TERM; rm -rf "$D"; exit 0; fi
  w=1
  if read i p t b <"$D/c" && [ -n "$b" ]; then
    read u _ </proc/uptime; w=$((b + t + 1 - ${{u%.*}}))
    if [ "$w" -le 0 ]; then
      if [ "$x" != "$i" ]; then x=$i; : >"$D/k$i"; k "$p" TERM; w={kill_after}; else k "$p" KILL; w=1; fi
    fi
  fi
  sleep "$w" & s=$!; wait "$s"
done
) </dev/null >/dev/null 2>&1 &
W=$!
}}
c() {{
i=$1 t=$2; shift 2
if [ -n "$W" ]; then
  "$@" </dev/null 2>"$D/e" & p=$!
  read u _ </proc/uptime; echo "$i $p $t ${{u%.*}}" >"$D/c"
  wait "$p"; r=$?
  [ -e "$D/k$i" ] && r=124
  if [ -s "$D/e" ]; then printf '%s:%d:B\\n' "$N" "$i" >&2; cat "$D/e" >&2; printf '\\n%s:%d:E:%d\\n' "$N" "$i" "$r" >&2; fi
else
  printf '%s:%d:B\\n' "$N" "$i" >&2
  timeout -k {kill_after} "$t" "$@" </dev/null; r=$?
  printf '\\n%s:%d:E:%d\\n' "$N" "$i" "$r" >&2
fi
printf '\\n%s:%d:E:%d\\n%s:%d:B\\n' "$N" "$i" "$r" "$N" $((i+1))
}}
"""


def whole_seconds(timeout_s: float) -> int:
    """A command's limit as the watchdog enforces it: whole seconds, never below the asked timeout."""
    return max(1, math.ceil(timeout_s))


def build_script(commands: Sequence[Command], nonce: str, become: Sequence[str] = ()) -> str:
    """The script the host's /bin/sh reads on stdin.

    Every command is framed: a BEGIN line before its output and, after it, a newline plus an END
    line carrying its exit status (124 when it ran out of time, as GNU timeout says). The newline
    makes END start a line even when the output does not end with one; the parser removes exactly
    that byte. One printf writes END and the next BEGIN together, and a command's stderr is kept
    in the private directory and sent, framed the same way, only when it is not empty: each write
    becomes an SSH packet, and packets are what both ends pay for (~72 a host instead of ~110).
    Each command reads /dev/null, so no tool can read the rest of the script (and the nonce) from
    stdin, and printf is a shell builtin, so the nonce never shows up in a process list. Argvs are
    fixed collector commands, shlex-quoted; nothing from the inventory or a host is spliced in.
    """
    if not re.fullmatch(r"[0-9a-f]{16,}", nonce):
        raise ValueError("nonce must be at least 16 lowercase hex digits")
    lines = [f"N={nonce}", _PRELUDE.format(kill_after=KILL_AFTER_S).rstrip("\n"), "printf '%s:0:B\\n' \"$N\""]
    for i, cmd in enumerate(commands):
        _check(cmd.argv, cmd.timeout_s)
        lines.append(f"c {i} {whole_seconds(cmd.timeout_s)} {shlex.join((*become, *cmd.argv))}")
    lines += ['[ -n "$W" ] && { rm -rf "$D"; kill "$W"; }', "exit 0"]
    return "\n".join(lines) + "\n"


def split_stream(stream: bytes, nonce: str, count: int) -> list[Section | None]:
    """The section of each of `count` commands in one framed stream; None for a command that never began.

    Bytes outside the frames (a login banner, a shell warning) are ignored. A section whose END
    marker is missing runs to the next command's BEGIN or to the end of the stream.
    """
    out: list[Section | None] = []
    pos = 0
    for i in range(count):
        begin = _begin(nonce, i)
        b = stream.find(begin, pos)
        if b < 0:
            out.append(None)
            continue
        start = b + len(begin)
        e = stream.find(_end(nonce, i), start)
        status: int | None = None
        if e >= 0:
            tail = e + len(_end(nonce, i))
            nl = stream.find(b"\n", tail)
            digits = stream[tail:nl] if nl >= 0 else b""
            if digits.isdigit() and len(digits) <= 3:
                status = int(digits)
                out.append(Section(i, stream[start:e], status, start, e))
                pos = nl + 1
                continue
        # No (valid) END: the command was cut off. Stop at the next BEGIN if one exists.
        nxt = stream.find(_begin(nonce, i + 1), start)
        stop = nxt if nxt >= 0 else len(stream)
        out.append(Section(i, stream[start:stop], None, start, stop))
        pos = stop
    return out


def first_line(data: bytes, limit: int = 200) -> str:
    """The first non-empty line of some output, for one-line error messages."""
    for line in data.decode("utf-8", errors="replace").splitlines():
        if line.strip():
            return line.strip()[:limit]
    return ""


class Clock:
    """When each byte offset of a stream arrived, from (end offset of a chunk, arrival time) pairs."""

    def __init__(self, chunks: Sequence[tuple[int, float]] = ()):
        self._ends = [c[0] for c in chunks]
        self._times = [c[1] for c in chunks]

    def at(self, offset: int) -> float | None:
        k = bisect.bisect_right(self._ends, offset)
        if k >= len(self._times):
            return self._times[-1] if self._times else None
        return self._times[k]


def finished(cmd: Command, stdout: str, stderr: str, status: int, duration_s: float = 0.0,
             timed: bool = False) -> CommandResult:
    """The result of a command that ran to its end under GNU timeout, which exits 124 (or 137 after
    its -k KILL) when the command ran out of time. 137 is also a plain SIGKILL (the OOM killer),
    so with a measured duration (`timed`) it counts as a timeout only when the time was up."""
    if status in TIMEOUT_STATUSES and (status == 124 or not timed or duration_s >= cmd.timeout_s - 0.5):
        return CommandResult(cmd.argv, stdout, stderr, exit_code=None, duration_s=duration_s,
                             error=f"timed out after {cmd.timeout_s:g} s")
    return CommandResult(cmd.argv, stdout, stderr, exit_code=status, duration_s=duration_s)


def decode_results(commands: Sequence[Command], stdout: bytes, stderr: bytes, nonce: str, *,
                   cut_reason: str = "the connection closed before the command finished",
                   clock: Clock | None = None) -> list[CommandResult]:
    """CommandResults of a framed run; `cut_reason` explains commands that did not finish."""
    outs = split_stream(stdout, nonce, len(commands))
    errs = split_stream(stderr, nonce, len(commands))
    results: list[CommandResult] = []
    for cmd, out, err in zip(commands, outs, errs, strict=True):
        err_text = err.data.decode("utf-8", errors="replace") if err else ""
        if out is None:
            results.append(CommandResult(argv=cmd.argv, stdout="", stderr=err_text, exit_code=None,
                                         error=f"not run: {cut_reason}"))
            continue
        text = out.data.decode("utf-8", errors="replace")
        duration = 0.0
        if clock is not None:
            t0, t1 = clock.at(out.start - 1), clock.at(out.end)
            if t0 is not None and t1 is not None:
                duration = max(0.0, t1 - t0)
        if out.status is None:
            results.append(CommandResult(argv=cmd.argv, stdout=text, stderr=err_text, exit_code=None,
                                         duration_s=duration, error=cut_reason))
        else:
            results.append(finished(cmd, text, err_text, out.status, duration, timed=clock is not None))
    return results


def preamble(stream: bytes, nonce: str) -> bytes:
    """What a stream held before the first frame: a login banner, or the reason the script never ran."""
    b = stream.find(_begin(nonce, 0))
    return stream if b < 0 else stream[:b]
