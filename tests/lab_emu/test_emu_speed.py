"""Cost of the emulation: creating nodes (a 1000-node lab must come up in well under a minute) and a
read-only tool call (about one process start). Timings are printed, not asserted: the machine is shared."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fabricproof_lab.emu import api, profiles


def _specs(n: int) -> list[dict]:
    seq = profiles.profile_sequence("mixed", n)
    return [{"address": f"127.10.{i // 250}.{i % 250 + 1}", "profile": p, "index": i,
             "rack": (i // 18 + 1) if p == "gb200-nvl72" else None, "hostname": f"{p.split('-')[1]}-{i:04d}"}
            for i, p in enumerate(seq)]


def _create(lab: Path, n: int) -> float:
    start = time.perf_counter()
    dirs = api.create_nodes(lab, _specs(n))
    took = time.perf_counter() - start
    assert len(dirs) == n and all((d / "state.json").is_file() and (d / "out" / "nvidia_smi_q").is_file() for d in dirs)
    return took


def test_node_creation_and_read_only_call_cost(lab: Path, make_node, capsys: pytest.CaptureFixture[str]) -> None:
    took = _create(lab, 40)
    node = make_node("dgx-h100")
    start = time.perf_counter()
    for _ in range(20):
        assert node.run("nvidia-smi", "-q").returncode == 0
    call = (time.perf_counter() - start) / 20
    start = time.perf_counter()
    assert node.run("systemctl", "restart", "nvidia-persistenced").returncode == 0
    mutation = time.perf_counter() - start
    with capsys.disabled():
        print(f"\n[lab-emu] create_nodes: {took / 40 * 1000:.1f} ms/node (40 nodes, projected 1000: {took * 25:.0f} s); "
              f"read-only `nvidia-smi -q`: {call * 1000:.1f} ms; mutating `systemctl restart`: {mutation * 1000:.0f} ms")


@pytest.mark.slow
def test_a_thousand_nodes(lab: Path, capsys: pytest.CaptureFixture[str]) -> None:
    took = _create(lab, 1000)
    with capsys.disabled():
        print(f"\n[lab-emu] create_nodes: 1000 mixed nodes in {took:.1f} s ({took:.1f} ms/node)")
