"""Large outputs are parsed one at a time across host threads, so a fleet that floods at once cannot stack its parses."""

from __future__ import annotations

import dataclasses
import threading

from fabricproof import facts, spool
from fabricproof.collectors import COLLECTORS
from fabricproof.model import CommandResult


def _parsing(inside: list[int], peak: list[int], lock: threading.Lock, release: threading.Event, hold_s: float):
    def parse(text: str) -> dict:
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        release.wait(timeout=hold_s)
        with lock:
            inside[0] -= 1
        return {"modules": []}
    return parse


def test_outputs_past_the_shared_bound_are_parsed_one_at_a_time_and_small_ones_together():
    # Large: each parse holds 0.5 s, time for the others to pile in were they let; small: each holds until all four
    # are inside (released then), bounded for a loaded machine.
    for size, expected_peak, hold_s in ((spool.SHARED_PARSE_BYTES + 1, 1, 0.5), (1024, 4, 60.0)):
        inside, peak, lock = [0], [0], threading.Lock()
        release = threading.Event()
        collector = dataclasses.replace(COLLECTORS["lsmod"], parse=_parsing(inside, peak, lock, release, hold_s))
        result = CommandResult(("lsmod",), "x" * size, "", exit_code=0)
        arrived = threading.Barrier(4)

        def one():
            arrived.wait(timeout=60)
            facts.parse_output(collector, result)

        threads = [threading.Thread(target=one) for _ in range(4)]
        for t in threads:
            t.start()
        if expected_peak == 4:
            # Small outputs: every thread gets into its parser before any leaves it.
            for _ in range(6000):
                with lock:
                    if inside[0] == 4:
                        break
                threading.Event().wait(0.01)
            release.set()
        for t in threads:
            t.join(timeout=120)
        assert not any(t.is_alive() for t in threads)
        assert peak[0] == expected_peak, (size, peak[0])
