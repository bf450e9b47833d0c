"""The framed script run by a real /bin/sh (dash on Debian), exactly as the SSH transport feeds it: on stdin."""

from __future__ import annotations

import subprocess
import time

from fabricproof.transport.framing import Command, build_script, decode_results, new_nonce

# Print marker-shaped lines built from everything the tool can see of its ancestors: timeout's argv
# and the shell's argv. Neither holds the nonce.
FORGE = ("g=$(cut -d' ' -f4 /proc/$PPID/stat); "
         "printf '\\n%s:0:E:0\\n' \"$(cat /proc/$PPID/cmdline /proc/$g/cmdline | tr '\\0' ' ')\"")


def run_script(commands: list[Command], nonce: str | None = None) -> tuple[list, float]:
    nonce = nonce or new_nonce()
    t0 = time.monotonic()
    proc = subprocess.run(["/bin/sh", "-s"], input=build_script(commands, nonce).encode(), capture_output=True,
                          timeout=60, check=False)
    return decode_results(commands, proc.stdout, proc.stderr, nonce), time.monotonic() - t0


def test_real_shell_round_trip_with_hostile_and_binary_output():
    commands = [
        Command(("printf", "%s", "no newline"), 5),
        Command(("sh", "-c", "printf '\\000\\001\\377\\376bin'; echo err >&2; exit 3"), 5),
        # A tool trying to read the rest of the script (and the nonce) from stdin gets /dev/null,
        # and its parent's argv shows only "/bin/sh -s".
        Command(("sh", "-c", "cat; " + FORGE), 5),
        Command(("definitely-not-a-tool-fabricproof",), 5),
        Command(("true",), 5),
    ]
    nonce = new_nonce()
    results, _ = run_script(commands, nonce)
    assert results[0].stdout == "no newline" and results[0].exit_code == 0
    assert results[1].exit_code == 3 and results[1].stderr == "err\n"
    assert results[1].stdout == "\x00\x01\ufffd\ufffdbin"
    assert results[2].exit_code == 0 and "timeout -k 2 5 sh -c" in results[2].stdout
    assert "/bin/sh -s" in results[2].stdout and nonce not in results[2].stdout
    assert results[3].exit_code == 127 and results[3].error is None and "definitely-not-a-tool" in results[3].stderr
    assert results[4].exit_code == 0 and results[4].stdout == ""


def test_a_hanging_command_times_out_alone_and_the_rest_still_run():
    commands = [Command(("sleep", "30"), 1), Command(("echo", "after"), 5)]
    results, elapsed = run_script(commands)
    assert results[0].exit_code is None and results[0].error == "timed out after 1 s"
    assert results[1].stdout == "after\n" and results[1].exit_code == 0
    assert elapsed < 10


def test_timeout_kills_the_whole_process_group_of_a_command():
    # The command's child ignores TERM and would keep the pipe open: -k KILL ends it within the grace.
    commands = [Command(("sh", "-c", "trap '' TERM; sleep 30 & wait"), 1), Command(("echo", "next"), 5)]
    results, elapsed = run_script(commands)
    assert results[0].error == "timed out after 1 s"
    assert results[1].stdout == "next\n"
    assert elapsed < 15
