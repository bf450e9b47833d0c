"""Many commands in one remote exec: a POSIX sh script (nonce-framed outputs, lanes, one watchdog per host) and its parser (pure)."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import math
import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from ..model import Command, CommandResult, decoded
from ..spool import Spool, Spooler
from . import lanes as lanes_mod
from .lanes import Lanes

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
    duration_s: float | None = None  # measured on the host, from the END marker; None when it did not say
    path: str | None = None  # the file holding the output when it spilled past the host's memory bound (data is b"")
    arrived_s: float | None = None  # between its BEGIN and its END arriving here, when the stream was fed with times


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


# One watchdog per host instead of GNU timeout per command: `timeout` costs the host a fork and an exec
# for every command (~1.1 ms each, 26 commands: ~29 ms of host CPU per collection, measured on the lab).
# Commands run in lanes (transport/lanes.py): a tool's commands one after another in one lane, lanes side by side.
# When a command starts, its lane writes "index pid limit start" to $D/c<lane> (start: whole seconds of
# /proc/uptime, read by the `read` builtin: no process), and empties it when the command ends. The watchdog
# sleeps until the earliest deadline of the running commands (start + limit + 1, so never early), then marks each
# command past its deadline as timed out, TERMs it and its descendants (children first, found with pgrep), and
# KILLs them KILL_AFTER_S seconds later. It writes the time it will wake to $D/w (0 while awake): a lane starting
# a command due before that wakes it with USR1, so no command outlives its limit because another one runs long.
# A collection that ends in time costs it one or two `sleep`s in all: the main shell TERMs it at the end, and its
# trap ends its own sleep. If the main shell dies (connection lost), the watchdog ends the running commands and
# the lanes at the next deadline and cleans up. The private directory goes on $TMPDIR if set, else on /dev/shm
# (tmpfs): on ext4 /tmp, creating and deleting it per host cost ~20 ms of kernel CPU (inode allocation skipping
# recently deleted inodes; measured on the lab). Without /proc/uptime or a private temporary directory the script
# falls back to GNU timeout, and runs the commands one after another.
# After a command times out, its lane remembers its tool in H and skips the tool's other commands (a hung
# GPU driver hangs every nvidia-smi call): a hung tool costs the host one timeout, not one per command.
# A session whose processes are all TERMed at once (logind's KillUserProcesses at logout, an operator's pkill) ends
# the watchdog before it can clean up: the main shell's TERM trap removes the private directory, then it dies of
# the same signal (the trap waits for a running lane pipeline to end, and that pipeline is TERMed too). A watchdog
# TERMed after its main shell died alone removes it itself (not asking whether that shell is alive: one dead of
# SIGPIPE on a closed channel stays a zombie while its sshd is frozen); TERMed by the main shell at the end, it finds
# the directory gone already.
_PRELUDE = """\
W= T=${{TMPDIR:-/dev/shm}} H= L=0
[ -d "$T" ] && [ -w "$T" ] || T=/tmp
[ -r /proc/uptime ] && D=$(mktemp -d -p "$T" 2>/dev/null) && {{
M=$$
k() {{ for q in $(pgrep -P "$1" 2>/dev/null); do k "$q" "$2"; done; kill "-$2" "$1" 2>/dev/null; }}
(
s= z= w=
trap 'z=1; kill "$s" 2>/dev/null' USR1
trap 'kill "$s" 2>/dev/null; [ -d "$D" ] && rm -rf "$D"; exit 0' TERM
while [ -d "$D" ]; do
  z=; echo 0 >"$D/w"
  if ! kill -0 "$M" 2>/dev/null; then
    for f in "$D"/c*; do read i p t b <"$f" && [ -n "$p" ] && k "$p" TERM; done
    read J <"$D/j" && for q in $J; do k "$q" TERM; done
    rm -rf "$D"; exit 0
  fi
  read u _ </proc/uptime; u=${{u%.*}} w=
  for f in "$D"/c*; do
    read i p t b <"$f" && [ -n "$b" ] || continue
    d=$((b + t + 1 - u))
    if [ "$d" -le 0 ]; then
      if [ -e "$D/k$i" ]; then k "$p" KILL; d=1; else : >"$D/k$i"; k "$p" TERM; d={kill_after}; fi
    fi
    [ -n "$w" ] && [ "$w" -le "$d" ] || w=$d
  done
  [ -n "$z" ] && continue
  echo $((u + ${{w:=1}})) >"$D/w"
  sleep "$w" & s=$!
  [ -n "$z" ] && kill "$s"
  wait "$s"
done
) </dev/null >/dev/null 2>&1 &
W=$!
trap 'rm -rf "$D"; trap - TERM; kill -TERM $$' TERM
}}
c() {{
i=$1 t=$2 g=$3; shift 3
case " $H " in *" $g "*) printf '%s:%d:S\\n' "$N" "$i"; return 0 ;; esac
printf '%s:%d:B\\n' "$N" "$i"
if [ -n "$W" ]; then
  read u _ </proc/uptime
  "$@" </dev/null 2>"$D/e$i" 3>&- & p=$!
  b=${{u%.*}}; echo "$i $p $t $b" >"$D/c$L"
  read v 2>/dev/null <"$D/w" && {{ [ "$v" -gt 0 ] && [ $((b + t + 1)) -ge "$v" ] || kill -USR1 "$W"; }}
  wait "$p"; r=$?
  : >"$D/c$L"
  read e _ </proc/uptime
  [ -e "$D/k$i" ] && {{ r=124; [ "$g" = 0 ] || H="$H $g"; }}
  if [ -s "$D/e$i" ]; then printf '%s:%d:B\\n' "$N" "$i" >&2; cat "$D/e$i" >&2; printf '\\n%s:%d:E:%d\\n' "$N" "$i" "$r" >&2; fi
  printf '\\n%s:%d:E:%d:%d\\n' "$N" "$i" "$r" $(((${{e%.*}} - ${{u%.*}}) * 100 + 1${{e#*.}} - 1${{u#*.}}))
  [ "$L" = 0 ] || echo t >&3
else
  printf '%s:%d:B\\n' "$N" "$i" >&2
  timeout -k {kill_after} "$t" "$@" </dev/null; r=$?
  printf '\\n%s:%d:E:%d\\n' "$N" "$i" "$r" >&2
  printf '\\n%s:%d:E:%d\\n' "$N" "$i" "$r"
  case $g:$r in 0:*) ;; *:124|*:137) H="$H $g" ;; esac
fi
}}
"""


def whole_seconds(timeout_s: float) -> int:
    """A command's limit as the watchdog enforces it: whole seconds, never below the asked timeout."""
    return max(1, math.ceil(timeout_s))


def _tool_numbers(commands: Sequence[Command]) -> dict[str, int]:
    """Each tool a small number for the script (1, 2, ...); 0 is "no tool" and is never skipped."""
    numbers: dict[str, int] = {}
    for cmd in commands:
        if cmd.tool and cmd.tool not in numbers:
            numbers[cmd.tool] = len(numbers) + 1
    return numbers


def build_script(commands: Sequence[Command], nonce: str, become: Sequence[str] = (),
                 lanes: Lanes | None = None) -> str:
    """The script the host's /bin/sh reads on stdin.

    Every command is framed: a BEGIN line before its output and, after it, a newline plus an END
    line carrying its exit status (124 when it ran out of time, as GNU timeout says) and, when the
    host can tell, its duration in hundredths of a second. The newline makes END start a line even
    when the output does not end with one; the parser removes exactly that byte. A command not run
    because its tool timed out before it gets a SKIP line instead. A command's stderr is kept in
    the private directory and sent, framed the same way, only when it is not empty.

    With more than one lane (lanes.plan), every lane writes its frames to files of its own in the
    private directory and tells the main shell when it is done (a pipe), which then sends that
    lane's frames in one `cat`: frames of different lanes never interleave, and each lane's output
    leaves in a few large writes (SSH packets are what both ends pay for). One lane runs in the
    main shell itself, straight onto the channel. Each command reads /dev/null, so no tool can
    read the rest of the script (and the nonce) from stdin, and printf is a shell builtin, so the
    nonce never shows up in a process list. Argvs are fixed collector commands, shlex-quoted;
    nothing from the inventory or a host is spliced in.
    """
    if not re.fullmatch(r"[0-9a-f]{16,}", nonce):
        raise ValueError("nonce must be at least 16 lowercase hex digits")
    if lanes is not None:
        return f"N={nonce}\n{_body(commands, become, lanes)}"
    try:
        body = _planned_body(tuple(commands), tuple(become))
    except TypeError:  # an argv given as a list is not hashable: planned afresh
        body = _body(commands, become, lanes_mod.plan(commands))
    return f"N={nonce}\n{body}"


@functools.lru_cache(maxsize=8)
def _planned_body(commands: tuple[Command, ...], become: tuple[str, ...]) -> str:
    """The script after its nonce line, the same for every host of a run with the same become: made once, not once a
    host (quoting 29 argvs and planning their lanes took ~0.3 ms of the client's CPU a host)."""
    return _body(commands, become, lanes_mod.plan(commands))


def _body(commands: Sequence[Command], become: Sequence[str], lanes: Lanes) -> str:
    for cmd in commands:
        _check(cmd.argv, cmd.timeout_s)
    tools = _tool_numbers(commands)

    def line(i: int) -> str:
        cmd = commands[i]
        return f"c {i} {whole_seconds(cmd.timeout_s)} {tools.get(cmd.tool, 0)} {shlex.join((*become, *cmd.argv))}"

    lines = [_PRELUDE.format(kill_after=KILL_AFTER_S).rstrip("\n")]
    in_order = [line(i) for i in range(len(commands))]
    if len(lanes) <= 1:
        lines += in_order
    else:
        lines += ['if [ -n "$W" ]; then', "{"]
        for n, lane in enumerate(lanes, start=1):
            lines += [f"( L={n}", *(line(i) for i in lane),
                      f'echo {n} >&3 ) 3>&1 >"$D/o{n}" 2>"$D/r{n}" & J="$J $!"']
        lines += ['echo "$J" >"$D/j"',
                  # A lane's number: send its frames. A tick (t, after each command): every 2 s or so, a newline
                  # between frames (the parser skips it) finds out whether the channel is still there.
                  '} | { read u _ </proc/uptime; q=$((${u%.*} + 2)); while read l; do if [ "$l" = t ]; then '
                  'read u _ </proc/uptime; [ "${u%.*}" -lt "$q" ] || { printf "\\n" || exit 1; q=$((${u%.*} + 2)); }; '
                  'else cat "$D/o$l" || exit 1; if [ -s "$D/r$l" ]; then cat "$D/r$l" >&2 || exit 1; fi; fi; done; }',
                  # The channel went away (Ctrl-C, lost connection): end the lanes now, not at their deadlines.
                  '[ $? = 0 ] || { read J <"$D/j"; for q in $J; do k "$q" TERM; done; }',
                  "else", *in_order, "fi"]
    lines += ['[ -n "$W" ] && { rm -rf "$D"; kill "$W"; }', "exit 0"]
    return "\n".join(lines) + "\n"


#: What follows the nonce in a marker (the nonce itself is found with bytes.find): one pattern for every run, not one
#: compiled for each host's nonce (~0.17 ms of the client's CPU a host).
_MARKER = re.compile(rb":(\d{1,6}):(?:(B)\n|E:(\d{1,3})(?::(\d{1,12}))?\n|(S)\n)")


@dataclass(frozen=True)
class Frames:
    """Every frame of one stream, by command index, in whatever order the lanes sent them."""

    sections: dict[int, Section]
    skipped: frozenset[int]  # commands not run because their tool had timed out before them

    def __getitem__(self, index: int) -> Section | None:
        return self.sections.get(index)


#: The longest a marker runs past its nonce: ":" index ":E:" status ":" duration "\n".
_MARKER_TAIL = 1 + 6 + 3 + 3 + 1 + 12 + 1
#: Bytes outside every frame kept for the error message of a run that never started (a login banner, a shell error).
PREAMBLE_BYTES = 4096


class Demux:
    """One framed stream split as it arrives: each command's bytes go to a spool of its own (memory up to the host's
    bound, then a file), so a stream is never held whole. Bytes outside the frames (a login banner, a shell warning)
    are dropped, but for the first PREAMBLE_BYTES before any frame. A section whose END marker is missing runs to the
    next marker or to the end of the stream (status None); of an index framed twice, the first frame counts."""

    def __init__(self, nonce: str, spooler: Spooler | None = None):
        self._nonce = nonce.encode()
        # Held back unscanned: a nonce cut by the chunk boundary, and the newline an END marker would take.
        self._hold = len(self._nonce) + 1
        self._spooler = spooler or Spooler(None)
        self._buf = bytearray()
        self._offset = 0  # stream offset of _buf[0]
        self._open: tuple[int, Spool, int, float | None] | None = None  # index, spool, start offset, arrival
        self._framed = False
        self._pieces: dict[int, Section] = {}
        self._skipped: set[int] = set()
        self.preamble = bytearray()

    def feed(self, data: bytes, now: float | None = None) -> None:
        """More of the stream; `now` (time.monotonic()) is when it arrived."""
        self._buf += data
        self._scan(now, final=False)

    def close(self, now: float | None = None) -> Frames:
        """The stream ended (or was cut off): every frame, a section still open ending where the stream did."""
        self._scan(now, final=True)
        if self._open is not None:
            self._end(self._offset, None, None, now)
        return Frames(self._pieces, frozenset(self._skipped))

    def _scan(self, now: float | None, final: bool) -> None:
        buf, pos = self._buf, 0
        while True:
            q = buf.find(self._nonce, pos)
            if q < 0:
                stop = len(buf) if final else max(pos, len(buf) - self._hold)
                self._data(buf, pos, stop)
                pos = stop
                break
            m = _MARKER.match(buf, q + len(self._nonce))
            if m is None and not final and len(buf) - q < len(self._nonce) + _MARKER_TAIL:
                stop = max(pos, q - 1)  # maybe a marker not all here yet: wait for the rest
                self._data(buf, pos, stop)
                pos = stop
                break
            if m is None:  # the nonce's bytes in a command's output: data
                self._data(buf, pos, q + 1)
                pos = q + 1
                continue
            self._data(buf, pos, q)
            self._marker(m, self._offset + q, self._offset + m.end(), now)
            pos = m.end()
        del buf[:pos]
        self._offset += pos

    def _data(self, buf: bytearray, start: int, stop: int) -> None:
        if stop <= start:
            return
        if self._open is not None:
            self._open[1].write(buf[start:stop])
        elif not self._framed and len(self.preamble) < PREAMBLE_BYTES:
            self.preamble += buf[start:min(stop, start + PREAMBLE_BYTES - len(self.preamble))]

    def _marker(self, m: re.Match[bytes], at: int, end: int, now: float | None) -> None:
        """A marker from stream offset `at` (its nonce) to `end`; `m` matched what follows the nonce."""
        self._framed = True
        index = int(m[1])
        if m[3] is not None and self._open is not None and self._open[0] == index \
                and self._open[1].size >= 1 and self._open[1].last == b"\n":
            self._open[1].drop_last()
            self._end(at - 1, int(m[3]), int(m[4]) / 100 if m[4] is not None else None, now)
            return
        if self._open is not None:  # cut off: whatever comes next ends it
            self._end(at, None, None, now)
        if m[2] is not None:
            self._open = (index, self._spooler.spool(keep=index not in self._pieces), end, now)
        elif m[5] is not None:
            self._skipped.add(index)

    def _end(self, stop: int, status: int | None, duration: float | None, now: float | None) -> None:
        assert self._open is not None
        index, spool, start, t0 = self._open
        self._open = None
        data, path = spool.finish()
        if index in self._pieces:
            return
        arrived = now - t0 if now is not None and t0 is not None else None
        self._pieces[index] = Section(index, data, status, start, stop, duration, path, arrived)


def frames(stream: bytes, nonce: str) -> Frames:
    """Parse a whole framed stream held in memory (see Demux)."""
    demux = Demux(nonce)
    demux.feed(stream)
    return demux.close()


def split_stream(stream: bytes, nonce: str, count: int) -> list[Section | None]:
    """The section of each of `count` commands in one framed stream; None for a command that never began."""
    found = frames(stream, nonce)
    return [found[i] for i in range(count)]


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
             timed: bool = False, stdout_bytes: bytes | None = None, stderr_bytes: bytes | None = None) -> CommandResult:
    """The result of a command that ran to its end under GNU timeout, which exits 124 (or 137 after
    its -k KILL) when the command ran out of time. 137 is also a plain SIGKILL (the OOM killer),
    so with a measured duration (`timed`) it counts as a timeout only when the time was up."""
    raw = {"stdout_bytes": stdout_bytes, "stderr_bytes": stderr_bytes}
    if status in TIMEOUT_STATUSES and (status == 124 or not timed or duration_s >= cmd.timeout_s - 0.5):
        return CommandResult(cmd.argv, stdout, stderr, exit_code=None, duration_s=duration_s,
                             error=f"timed out after {cmd.timeout_s:g} s", **raw)
    return CommandResult(cmd.argv, stdout, stderr, exit_code=status, duration_s=duration_s, **raw)


def _skip_reason(cmd: Command, commands: Sequence[Command], results: Sequence[CommandResult | None]) -> str:
    """Why a command was not run: the command of its tool that timed out before it on this host."""
    for other, result in zip(commands, results, strict=True):
        if other.tool == cmd.tool and result is not None and result.error and result.error.startswith("timed out"):
            return lanes_mod.skip_reason(cmd.tool, other.argv, result.error)
    return f"not run: an earlier {cmd.tool or 'command'} command timed out on this host"


def decode_results(commands: Sequence[Command], stdout: bytes | Frames, stderr: bytes | Frames, nonce: str, *,
                   cut_reason: str = "the connection closed before the command finished",
                   clock: Clock | None = None) -> list[CommandResult]:
    """CommandResults of a framed run (whole streams, or the Frames a Demux made of them as they arrived);
    `cut_reason` explains commands that did not finish. Durations come from the host when its END marker says, else
    from when the bytes arrived (the Demux's times, or `clock`)."""
    outs = stdout if isinstance(stdout, Frames) else frames(stdout, nonce)
    errs = stderr if isinstance(stderr, Frames) else frames(stderr, nonce)
    results: list[CommandResult | None] = []
    for i, cmd in enumerate(commands):
        out, err = outs[i], errs[i]
        err_text, err_bytes = decoded(err.data) if err else ("", None)
        spilled = {"stderr_path": err.path} if err is not None and err.path else {}
        if i in outs.skipped and out is None:
            results.append(None)  # below, once the timed-out command it follows is known
            continue
        if out is None:
            results.append(CommandResult(argv=cmd.argv, stdout="", stderr=err_text, exit_code=None,
                                         error=f"not run: {cut_reason}", stderr_bytes=err_bytes, **spilled))
            continue
        text, out_bytes = decoded(out.data)  # the text is for parsing; evidence keeps the bytes
        if out.path:
            spilled["stdout_path"] = out.path
        duration = out.duration_s if out.duration_s is not None else out.arrived_s
        if duration is None and clock is not None:
            t0, t1 = clock.at(out.start - 1), clock.at(out.end)
            if t0 is not None and t1 is not None:
                duration = max(0.0, t1 - t0)
        timed = duration is not None
        if out.status is None:
            result = CommandResult(argv=cmd.argv, stdout=text, stderr=err_text, exit_code=None,
                                   duration_s=duration or 0.0, error=cut_reason, stdout_bytes=out_bytes,
                                   stderr_bytes=err_bytes)
        else:
            result = finished(cmd, text, err_text, out.status, duration or 0.0, timed=timed,
                              stdout_bytes=out_bytes, stderr_bytes=err_bytes)
        results.append(dataclasses.replace(result, **spilled) if spilled else result)
    return [r if r is not None else CommandResult(argv=c.argv, stdout="", exit_code=None,
                                                  error=_skip_reason(c, commands, results))
            for c, r in zip(commands, results, strict=True)]


def preamble(stream: bytes, nonce: str) -> bytes:
    """What a stream held before the first frame: a login banner, or the reason the script never ran."""
    b = stream.find(nonce.encode())
    return stream if b < 0 else stream[:b]
