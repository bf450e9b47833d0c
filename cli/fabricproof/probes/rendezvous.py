"""A pair client's bounded rendezvous: a fixed sh script that retries the client while its server is not yet
listening, for at most N seconds, so servers and clients of a round need no exact start times."""

from __future__ import annotations

from collections.abc import Sequence

# perftest's own words when nobody listens at the server's port yet (perftest_communication.c): anything else is
# the measurement's own failure and is returned as it is. The client's argv arrives as "$@" after the bound.
_SCRIPT = """\
n=$1; shift
read u _ </proc/uptime; e=$((${u%.*} + n))
while :; do
  o=$("$@" 2>&1); r=$?
  case $o in *"Couldn't connect to"*|*"Unable to init the socket connection"*|*"Connection refused"*) ;; *) break ;; esac
  read u _ </proc/uptime
  [ "${u%.*}" -lt "$e" ] || break
  sleep 1
done
printf '%s\\n' "$o"
exit "$r"
"""

NAME = "fabricproof-rendezvous"


def client(argv: Sequence[str], within_s: int) -> tuple[str, ...]:
    """The client argv, retried until its server answers or `within_s` seconds have passed."""
    if not argv:
        raise ValueError("empty client argv")
    if within_s < 1:
        raise ValueError(f"rendezvous must be at least 1 s, got {within_s}")
    return ("sh", "-c", _SCRIPT, NAME, str(int(within_s)), *argv)
