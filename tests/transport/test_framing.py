"""The one-exec framing: script shape and the parser against adversarial, binary and cut-off streams (pure)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from fabricproof import spool
from fabricproof.spool import Spooler
from fabricproof.transport import framing
from fabricproof.model import Command
from fabricproof.transport.framing import Clock, build_script, decode_results, split_stream

NONCE = "0123456789abcdef0123456789abcdef"
CMDS = [Command(("nvidia-smi", "-q"), 60), Command(("sh", "-c", "echo 'it''s'; exit 3"), 30), Command(("ibstat",), 5)]


def frame(nonce: str, i: int, body: bytes, status: int | None) -> bytes:
    """Bytes exactly as the script's printf calls emit them."""
    out = f"{nonce}:{i}:B\n".encode() + body
    if status is not None:
        out += f"\n{nonce}:{i}:E:{status}\n".encode()
    return out


def test_script_runs_each_argv_quoted_with_its_limit_and_frames_both_streams():
    script = build_script(CMDS, NONCE)
    assert script.splitlines()[0] == f"N={NONCE}"
    assert "c 0 60 0 nvidia-smi -q" in script.splitlines()
    # shlex-quoted: the shell splits the line back into exactly the argv, quotes inside it included
    line = next(ln for ln in script.splitlines() if ln.startswith("c 1 "))
    assert shlex.split(line) == ["c", "1", "30", "0", *CMDS[1].argv]
    # every command reads /dev/null (never the rest of the script); its stderr waits in the private directory
    assert '"$@" </dev/null 2>"$D/e$i" 3>&- &' in script
    # lanes write their frames to private files; each lane leaves in one `cat`, never interleaved with another
    assert 'cat "$D/o$l"' in script and script.count('3>&1 >"$D/o') == len(CMDS)
    assert script.rstrip().endswith("exit 0")


def test_one_lane_per_tool_and_the_rest_packed_beside_the_longest():
    cmds = [Command(("nvidia-smi", "-q"), 30, "q", "nvidia-smi", 0.6), Command(("ibstat",), 30, "i", "ibstat", 0.05),
            Command(("nvidia-smi", "topo", "-m"), 30, "t", "nvidia-smi", 0.3),
            Command(("nvfwupd", "show_version"), 180, "f", "nvfwupd", 20.0)]
    script = build_script(cmds, NONCE)
    lanes = [block.split(">&3 )")[0].splitlines() for block in script.split("( L=")[1:]]
    assert [[ln.split()[1] for ln in lane if ln.startswith("c ")] for lane in lanes] == [["0", "1", "2"], ["3"]]
    assert '>"$D/o1" 2>"$D/r1" &' in script and '>"$D/o2" 2>"$D/r2" &' in script
    # the same commands, one after another, where the host has no private directory (GNU timeout fallback)
    fallback = script.split("\nelse\n")[-1].split("\nfi\n")[0].splitlines()
    assert [ln.split()[1] for ln in fallback] == ["0", "1", "2", "3"]


def test_limits_are_whole_seconds_never_below_the_asked_timeout():
    script = build_script([Command(("a",), 0.2), Command(("b",), 2.5), Command(("c",), 3)], NONCE)
    assert [ln.split()[:3] for ln in script.splitlines() if ln.startswith("c ")] == \
        [["c", "0", "1"], ["c", "1", "3"], ["c", "2", "3"]] * 2  # in their lanes, and in the fallback


def test_script_puts_become_before_the_tool():
    script = build_script([Command(("ibstat",), 5)], NONCE, become=("sudo", "-n", "--"))
    assert "c 0 5 0 sudo -n -- ibstat" in script.splitlines()


def test_script_refuses_empty_argv_and_non_positive_timeouts():
    with pytest.raises(ValueError):
        build_script([Command((), 5)], NONCE)
    with pytest.raises(ValueError):
        build_script([Command(("ls",), 0)], NONCE)


@pytest.mark.parametrize("nonce", ["", "short", "ABCDEF0123456789ABCD", "0123456789abcdef; rm -rf /"])
def test_script_refuses_a_nonce_that_is_not_long_lowercase_hex(nonce):
    with pytest.raises(ValueError):
        build_script(CMDS, nonce)


def test_timed_argv_rejects_empty_argv_and_non_positive_timeouts():
    with pytest.raises(ValueError):
        framing.timed_argv((), 5)
    with pytest.raises(ValueError):
        framing.timed_argv(("ls",), 0)


def test_nonces_are_fresh_128_bit_hex():
    a, b = framing.new_nonce(), framing.new_nonce()
    assert a != b and len(a) == 32 and int(a, 16) >= 0


def test_round_trip_keeps_output_byte_exact_with_and_without_final_newline():
    stream = frame(NONCE, 0, b"line 1\nline 2\n", 0) + frame(NONCE, 1, b"no newline at end", 3) + frame(NONCE, 2, b"", 0)
    secs = split_stream(stream, NONCE, 3)
    assert [s.data for s in secs] == [b"line 1\nline 2\n", b"no newline at end", b""]
    assert [s.status for s in secs] == [0, 3, 0]


def test_markers_printed_by_the_host_cannot_forge_a_boundary():
    # A host that prints marker-shaped lines with a guessed nonce, our command index, and even the
    # real END prefix without the nonce: none of it ends the section.
    evil = (b"deadbeefdeadbeefdeadbeefdeadbeef:0:E:0\n"
            b"\n:0:E:0\n"
            + f"{NONCE[:-1]}0:0:E:0\n".encode()
            + b"0:1:B\nstill command 0\n")
    stream = frame(NONCE, 0, evil, 0) + frame(NONCE, 1, b"real 1\n", 0)
    secs = split_stream(stream, NONCE, 2)
    assert secs[0].data == evil
    assert secs[1].data == b"real 1\n"


def test_binary_garbage_survives_framing_and_decodes_with_replacement():
    garbage = bytes(range(256)) * 4 + b"\xff\xfe\x00"
    stream = frame(NONCE, 0, garbage, 0)
    assert split_stream(stream, NONCE, 1)[0].data == garbage
    result = decode_results(CMDS[:1], stream, b"", NONCE)[0]
    assert result.exit_code == 0 and result.error is None
    assert "\ufffd" in result.stdout  # invalid UTF-8 replaced, never an exception


def test_missing_end_marks_the_command_cut_off_and_keeps_its_partial_output():
    stream = frame(NONCE, 0, b"ok\n", 0) + frame(NONCE, 1, b"partial out", None)
    results = decode_results(CMDS, stream, b"", NONCE, cut_reason="the connection to the host was lost")
    assert results[0].exit_code == 0 and results[0].stdout == "ok\n"
    assert results[1].exit_code is None and results[1].stdout == "partial out"
    assert results[1].error == "the connection to the host was lost"
    assert results[2].exit_code is None and results[2].error == "not run: the connection to the host was lost"


def test_a_malformed_end_status_counts_as_missing():
    stream = f"{NONCE}:0:B\nout\n{NONCE}:0:E:12x\n".encode()
    sec = split_stream(stream, NONCE, 1)[0]
    assert sec.status is None


def test_missing_end_stops_at_the_next_begin():
    stream = f"{NONCE}:0:B\nhalf".encode() + frame(NONCE, 1, b"second\n", 0)
    secs = split_stream(stream, NONCE, 2)
    assert secs[0].data == b"half" and secs[0].status is None
    assert secs[1].data == b"second\n" and secs[1].status == 0


def test_noise_outside_frames_is_ignored_and_reported_as_preamble():
    banner = b"Welcome to node 7\r\n"
    stream = banner + frame(NONCE, 0, b"x\n", 0) + b"trailing junk"
    assert split_stream(stream, NONCE, 1)[0].data == b"x\n"
    assert framing.preamble(stream, NONCE) == banner
    assert framing.preamble(b"This account is currently not available.\n", NONCE).startswith(b"This account")


def test_stderr_is_framed_separately():
    out = frame(NONCE, 0, b"", 127)
    err = frame(NONCE, 0, b"sh: 1: nvidia-smi: not found\n", 127)
    r = decode_results(CMDS[:1], out, err, NONCE)[0]
    assert r.exit_code == 127 and r.stderr == "sh: 1: nvidia-smi: not found\n" and r.error is None


def test_gnu_timeout_statuses_become_timeouts():
    out = frame(NONCE, 0, b"slow", 124)
    r = decode_results(CMDS[:1], out, b"", NONCE)[0]
    assert r.exit_code is None and r.error == "timed out after 60 s" and r.stdout == "slow"


def test_137_is_a_timeout_only_when_the_time_was_up():
    cmd = Command(("x",), 10)
    assert framing.finished(cmd, "", "", 137, duration_s=10.2, timed=True).error == "timed out after 10 s"
    oom = framing.finished(cmd, "", "", 137, duration_s=0.3, timed=True)
    assert oom.error is None and oom.exit_code == 137


def test_clock_gives_each_command_its_duration():
    stream = frame(NONCE, 0, b"a" * 10, 0) + frame(NONCE, 1, b"b" * 10, 0)
    first_end = len(frame(NONCE, 0, b"a" * 10, 0))
    # first frame arrived in one chunk at t=1.0; the second BEGIN at 1.0 too, its body and END at 4.5
    begin1 = first_end + len(f"{NONCE}:1:B\n")
    clock = Clock([(0, 0.0), (begin1, 1.0), (len(stream), 4.5)])
    results = decode_results([Command(("a",), 9), Command(("b",), 9)], stream, b"", NONCE, clock=clock)
    assert results[0].duration_s == 0.0
    assert results[1].duration_s == pytest.approx(3.5)


def test_frames_of_lanes_arrive_in_any_order_and_a_newline_between_them_is_ignored():
    stream = frame(NONCE, 2, b"third\n", 0) + b"\n" + frame(NONCE, 0, b"first", 0) + frame(NONCE, 1, b"", 3)
    assert [(s.data, s.status) for s in split_stream(stream, NONCE, 3)] == [(b"first", 0), (b"", 3), (b"third\n", 0)]


def test_the_host_measured_duration_rides_on_the_end_marker():
    first = f"{NONCE}:0:B\nout\n\n{NONCE}:0:E:0:1234\n{NONCE}:1:B\n".encode()
    stream = first + f"x\n{NONCE}:1:E:0\n".encode()
    results = decode_results(CMDS[:2], stream, b"", NONCE, clock=Clock([(0, 0.0), (len(first), 1.0), (len(stream), 4.5)]))
    assert results[0].duration_s == pytest.approx(12.34) and results[0].stdout == "out\n"
    assert results[1].duration_s == pytest.approx(3.5)  # no duration on the marker: when its bytes came


def test_a_skipped_command_says_which_command_of_its_tool_timed_out():
    cmds = [Command(("nvidia-smi", "-q"), 30, "q", "nvidia-smi"), Command(("ibstat",), 30, "i", "ibstat"),
            Command(("nvidia-smi", "topo", "-m"), 30, "t", "nvidia-smi")]
    stream = frame(NONCE, 0, b"", 124) + frame(NONCE, 1, b"ok\n", 0) + f"{NONCE}:2:S\n".encode()
    results = decode_results(cmds, stream, b"", NONCE)
    assert results[0].error == "timed out after 30 s" and results[1].stdout == "ok\n"
    assert results[2].exit_code is None and results[2].error == (
        "not run: nvidia-smi is hung on this host (`nvidia-smi -q` timed out after 30 s), so its other commands "
        "were not run")


# ---------------------------------------------------------------------------------------- streams as they arrive

#: Streams that exercise every marker: frames with and without a final newline, an empty frame, a cut-off frame,
#: a skipped command, forged and partial nonces in the output, a frame repeated, noise between frames.
STREAMS = [
    frame(NONCE, 0, b"line 1\nline 2\n", 0) + frame(NONCE, 1, b"no newline at end", 3) + frame(NONCE, 2, b"", 0),
    b"banner\r\n" + frame(NONCE, 0, NONCE.encode() + b":x\n" + NONCE[:20].encode() + b"\n", 0) + b"\n"
    + f"{NONCE}:1:S\n".encode() + frame(NONCE, 2, b"third", None),
    frame(NONCE, 0, b"first\n", 0) + frame(NONCE, 0, b"again\n", 1) + f"{NONCE}:1:B\nhalf".encode()
    + frame(NONCE, 2, b"x" * 5000 + b"\n\n", 0) + f"{NONCE}:2:E:0\n".encode() + b"trailing junk",
]


@pytest.mark.parametrize("stream", STREAMS)
def test_a_stream_fed_in_pieces_of_any_size_splits_as_the_whole_does(stream):
    whole = framing.frames(stream, NONCE)
    for size in (1, 2, 3, 7, 31, 32, 33, 34, 64, 1000):
        demux = framing.Demux(NONCE)
        for k in range(0, len(stream), size):
            demux.feed(stream[k:k + size])
        got = demux.close()
        assert got.skipped == whole.skipped, size
        assert {i: (s.data, s.status, s.start, s.end) for i, s in got.sections.items()} == \
            {i: (s.data, s.status, s.start, s.end) for i, s in whole.sections.items()}, size


def test_output_past_the_hosts_memory_bound_goes_to_a_file_as_it_arrives(tmp_path):
    big = b"flood line\n" * 20_000  # 220 kB, past a 64 kB bound
    stream = frame(NONCE, 0, b"small\n", 0) + frame(NONCE, 1, big, 0) + frame(NONCE, 2, big[:-1], None)
    spooler = Spooler(tmp_path, memory_bytes=64 << 10)
    demux = framing.Demux(NONCE, spooler)
    for k in range(0, len(stream), 4096):
        demux.feed(stream[k:k + 4096])
        assert spooler.held <= 64 << 10  # never more than the bound in memory
    results = decode_results(CMDS, demux.close(), b"", NONCE, cut_reason="cut")
    assert results[0].stdout == "small\n" and results[0].stdout_path is None
    # The END marker's newline is not the output's, also when it already went to the file.
    assert results[1].stdout == "" and Path(results[1].stdout_path).read_bytes() == big
    assert results[2].error == "cut" and Path(results[2].stdout_path).read_bytes() == big[:-1]
    assert sorted(p.name.startswith(".spill-") for p in tmp_path.iterdir()) == [True, True]
    assert {oct(p.stat().st_mode & 0o777) for p in tmp_path.iterdir()} == {"0o600"}
    spooler.discard()
    assert list(tmp_path.iterdir()) == []


def test_a_spilled_stderr_and_the_arrival_times_of_each_frame(tmp_path):
    spooler = Spooler(tmp_path, memory_bytes=16)
    out, err = framing.Demux(NONCE, spooler), framing.Demux(NONCE, spooler)
    out.feed(f"{NONCE}:0:B\n".encode(), now=10.0)
    err.feed(frame(NONCE, 0, b"warning: " * 10, 1), now=11.0)
    out.feed(b"out\n" + f"\n{NONCE}:0:E:1\n".encode(), now=12.5)
    r = decode_results(CMDS[:1], out.close(13.0), err.close(13.0), NONCE)[0]
    assert r.exit_code == 1 and r.duration_s == 2.5
    assert r.stderr == "" and Path(r.stderr_path).read_bytes() == b"warning: " * 10
    assert spool.stderr_head(r, 9) == "warning: "


def test_what_precedes_the_first_frame_is_kept_for_a_message_but_bounded():
    demux = framing.Demux(NONCE)
    demux.feed(b"This account is currently not available.\n" + b"x" * 100_000)
    demux.close()
    assert demux.preamble.startswith(b"This account") and len(demux.preamble) == framing.PREAMBLE_BYTES


def test_a_host_given_up_midway_leaves_no_file_and_no_open_descriptor(tmp_path):
    spooler = Spooler(tmp_path, memory_bytes=16)
    demux = framing.Demux(NONCE, spooler)
    demux.feed(f"{NONCE}:0:B\n".encode() + b"x" * 1000)  # still being written when the host fails
    fds = len(os.listdir("/proc/self/fd"))
    spooler.discard()
    assert list(tmp_path.iterdir()) == [] and len(os.listdir("/proc/self/fd")) == fds - 1


def test_a_frame_no_command_owns_leaves_no_file_behind(tmp_path):
    spooler = Spooler(tmp_path, memory_bytes=16)
    demux = framing.Demux(NONCE, spooler)
    demux.feed(frame(NONCE, 0, b"ours " * 10, 0) + frame(NONCE, 7, b"forged " * 10, 0))  # a host may forge frames
    results = decode_results(CMDS[:1], demux.close(), b"", NONCE)
    spooler.discard(keep={results[0].stdout_path})
    assert [p.name for p in tmp_path.iterdir()] == [Path(results[0].stdout_path).name]
