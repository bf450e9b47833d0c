"""The local transport runs real processes: exit codes, missing tools, timeouts that end whole process groups."""

from __future__ import annotations

import os
import time

from fabricproof.model import Command, CommandResult, Host
from fabricproof.transport.base import commands
from fabricproof.transport.local import LocalOptions, LocalTransport

HOST = Host("this-node")


def run_one(argv: list[str], timeout: float, transport: LocalTransport | None = None) -> CommandResult:
    """One command through the transport seam, with a deadline that leaves its own timeout in charge."""
    return (transport or LocalTransport()).run_many(HOST, [Command(tuple(argv), timeout)], time.monotonic() + timeout + 5)[0]


def test_output_exit_status_and_stderr():
    r = run_one(["sh", "-c", "printf 'a\\nb'; echo oops >&2; exit 4"], 5)
    assert (r.stdout, r.stderr, r.exit_code, r.error) == ("a\nb", "oops\n", 4, None)
    assert r.argv == ("sh", "-c", "printf 'a\\nb'; echo oops >&2; exit 4")


def test_missing_tool_reads_like_a_shell_would_say_it():
    r = run_one(["nv-fabricmanager-not-here"], 5)
    assert r.exit_code == 127 and r.stderr == "nv-fabricmanager-not-here: command not found\n" and r.error is None


def test_commands_read_dev_null_not_our_stdin():
    r = run_one(["cat"], 5)
    assert r.exit_code == 0 and r.stdout == ""


def test_timeout_kills_the_tool_and_its_children(tmp_path):
    pidfile = tmp_path / "child.pid"
    t0 = time.monotonic()
    r = run_one(["sh", "-c", f"trap '' TERM; sleep 60 & echo $! > {pidfile}; echo started; wait"], 1)
    assert time.monotonic() - t0 < 8
    assert r.exit_code is None and r.error == "timed out after 1 s" and r.stdout == "started\n"
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"child {child} of the timed-out command survived")


def test_run_many_honours_the_host_deadline():
    t = LocalTransport()
    t0 = time.monotonic()
    # one tool: its commands run in sequence, so the second one starts after the deadline
    one_tool = [Command(c.argv, c.timeout_s, tool="x") for c in commands([["sleep", "5"], ["echo", "late"]], [10, 10])]
    rs = t.run_many(HOST, one_tool, time.monotonic() + 1)
    assert time.monotonic() - t0 < 6
    assert rs[0].error == "cut off: the host's collection deadline passed"
    assert rs[1].error == "not run: the host's collection deadline passed" and rs[1].stdout == ""


def test_env_is_passed_to_tools():
    env = {"PATH": os.environ["PATH"], "FABRICPROOF_HOST_ROOT": "/host"}
    r = run_one(["sh", "-c", 'echo "$FABRICPROOF_HOST_ROOT"'], 5, LocalTransport(LocalOptions(env=env)))
    assert r.stdout == "/host\n"


def test_a_tools_commands_run_in_sequence_and_the_rest_beside_them(tmp_path):
    log = tmp_path / "log"
    step = ["sh", "-c", f'echo "$0 start" >>{log}; sleep 0.5; echo "$0 end" >>{log}']
    cmds = [Command((*step[:2], step[2], "a1"), 10, "a1", "a"), Command((*step[:2], step[2], "a2"), 10, "a2", "a"),
            Command((*step[:2], step[2], "b"), 10, "b")]
    rs = LocalTransport().run_many(HOST, cmds, time.monotonic() + 30)
    assert [r.exit_code for r in rs] == [0, 0, 0]
    events = log.read_text().split()
    order = [events[k] + ":" + events[k + 1] for k in range(0, len(events), 2)]
    assert order.index("a1:end") < order.index("a2:start")  # one tool: one after the other
    assert order.index("b:start") < order.index("a1:end")  # another: alongside


def test_after_a_tool_times_out_its_other_commands_are_not_run(tmp_path):
    marker = tmp_path / "ran"
    cmds = [Command(("sleep", "30"), 1, "q", "nvidia-smi"), Command(("touch", str(marker)), 10, "t", "nvidia-smi"),
            Command(("echo", "other"), 10, "e", "ibstat")]
    t0 = time.monotonic()
    rs = LocalTransport().run_many(HOST, cmds, time.monotonic() + 60)
    assert time.monotonic() - t0 < 15
    assert rs[0].error == "timed out after 1 s"
    assert rs[1].exit_code is None and rs[1].error == ("not run: nvidia-smi is hung on this host (`sleep 30` timed out "
                                                        "after 1 s), so its other commands were not run")
    assert not marker.exists()
    assert rs[2].stdout == "other\n" and rs[2].error is None


def test_output_that_is_not_utf8_is_kept_byte_for_byte_beside_the_text_parsers_read():
    r = run_one(["sh", "-c", "printf '\\377\\376ok\\n'; printf '\\300err' >&2"], 5)
    assert r.stdout == "\ufffd\ufffdok\n" and r.stderr == "\ufffderr"  # what parsers read
    assert r.stdout_raw == b"\xff\xfeok\n" and r.stderr_raw == b"\xc0err"  # what evidence keeps
    clean = run_one(["printf", "caf\u00e9"], 5)
    assert clean.stdout == "caf\u00e9" and clean.stdout_bytes is None  # valid UTF-8: the text is exact, no copy
