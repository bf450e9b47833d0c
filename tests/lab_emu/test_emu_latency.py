"""The lab's realistic latency: every emulated answer a collector reads waits what the real tool takes (slept, so it
costs no CPU), and nothing waits when the latency is off."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from fabricproof import tools
from fabricproof.collectors import default_collectors
from fabricproof_lab import latency
from fabricproof_lab.emu import api
from fabricproof_lab.emu.outputs import COMMANDS, key_for
from fabricproof_lab.errors import LabError


def test_every_collector_command_the_lab_answers_has_a_realistic_delay_with_a_source():
    delays = latency.delays("realistic")
    for c in default_collectors():
        key = key_for(c.tool_argv[0], list(c.tool_argv[1:]))  # inside its prerequisite guard, if any
        if key is None:
            continue  # an `sh -c` file read: the lab's real cat/grep answer it
        assert key == c.id, f"{c.id}: the lab answers {c.command} under {key}"
        d = tools.TOOLS[c.id].duration
        assert d.source, f"{c.id}: {c.command} has no duration in fabricproof/tools.py"
        assert delays[key] == d.typical_s == c.typical_s
    # every value says where it comes from: a measurement (issue or document) or an estimate saying so
    assert all(t.duration.source and (t.duration.slow_s is None or t.duration.slow_source)
               for t in tools.TOOLS.values())


def test_off_delays_nothing_and_an_unknown_profile_is_refused():
    assert latency.delays("off") == {}
    with pytest.raises(LabError, match="--latency 'slow': choose off or realistic"):
        latency.delays("slow")


def test_spellings_of_one_command_share_its_delay(tmp_path: Path):
    script = api.tool_script(tmp_path, "nvidia-smi", latency.delays("realistic"))
    assert "'nvlink -s') k=nvlink_status s=0.3 ;;" in script and "'nvlink --status') k=nvlink_status s=0.3 ;;" in script
    assert "'-L') k=nvsmi_list ;;" in script  # no collector reads it: answered at once
    assert "sleep" not in api.tool_script(tmp_path, "nvidia-smi", {})
    assert {k for _t, _a, k in COMMANDS} >= set(latency.delays("realistic"))


def test_a_delayed_answer_is_slept_not_burned(lab: Path, make_node) -> None:
    api.install(lab, latency.delays("realistic"))
    node = make_node("dgx-h100")
    before, t0 = os.times(), time.monotonic()
    result = node.run("nvidia-smi", "-q")
    wall, after = time.monotonic() - t0, os.times()
    cpu = (after.children_user - before.children_user) + (after.children_system - before.children_system)
    assert result.returncode == 0 and "Attached GPUs" in result.stdout  # the same answer, later
    assert wall >= tools.TOOLS["nvidia_smi_q"].duration.typical_s
    assert cpu < wall / 2  # a sleep: the wait costs no CPU
