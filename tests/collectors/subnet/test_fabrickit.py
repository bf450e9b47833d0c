"""tests/fabrickit.py, the synthetic fabric the scale benchmarks parse and diff: it prints what ibnetdiscover would."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import fabrickit
import pytest
from fabricproof.collectors.subnet import ibnetdiscover
from fabricproof.subnet.model import End

from .sublib import kinds


def test_a_small_rail_fabric_parses_to_its_own_cables() -> None:
    fab = fabrickit.rail_fabric(40, rails=4, su_hosts=16, leaf_uplinks=2, spine_uplinks=2, cores=2)
    sub = ibnetdiscover.parse(fabrickit.ibnetdiscover_text(fab))
    # 3 SUs x 4 rails = 12 leaves, 4 x 2 spines, 2 cores; 40 hosts x 4 HCAs
    assert (*kinds(sub), len(fab.hosts)) == (12 + 8 + 2, 160, 0, 40)
    assert len(sub.links) == len(fab.cables) == 160 + 12 * 2 + 8 * 2
    assert {tuple(sorted(c)) for c in fab.cables} == {((lk.a.guid, lk.a.port), (lk.b.guid, lk.b.port))
                                                     for lk in sub.links}
    by_desc = {n.desc: n for n in sub.nodes.values()}
    hca = by_desc["node0018 mlx5_3"]  # SU 2, second host: rail 3's leaf, port 2
    leaf = sub.link_at(End(hca.guid, 1)).other(End(hca.guid, 1))
    assert (sub.nodes[leaf.guid].desc, leaf.port) == ("MF0;leaf-su02-r3:MQM8700/U1", 2)
    assert {(lk.width, lk.speed) for lk in sub.links} == {("4x", "HDR")}


UMAD2SIM = Path("/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so")


@pytest.mark.skipif(not (shutil.which("ibsim") and shutil.which("ibnetdiscover") and UMAD2SIM.is_file()),
                    reason="ibsim-utils and infiniband-diags are not installed")
def test_the_real_ibnetdiscover_prints_a_generated_fabric_back_as_it_was(tmp_path: Path) -> None:
    """ibsim takes the generated text as a fabric, and the real tool discovers the same nodes and cables in it."""
    fab = fabrickit.rail_fabric(64)
    net = tmp_path / "net"
    net.write_text(fabrickit.ibnetdiscover_text(fab), encoding="utf-8")
    env = {**os.environ, "IBSIM_SOCKNAME": f"fabricproof-test-{os.getpid()}"}
    log = tmp_path / "ibsim.log"
    with open(log, "wb") as out:
        sim = subprocess.Popen(["ibsim", "-s", "-n", str(net)], stdin=subprocess.DEVNULL, stdout=out,
                               stderr=subprocess.STDOUT, env=env)
    try:
        for _ in range(300):  # ready in well under a second here; bounded for a loaded machine
            if b"simulator ready" in log.read_bytes() or sim.poll() is not None:
                break
            time.sleep(0.1)
        assert b"simulator ready" in log.read_bytes(), log.read_text(errors="replace")[-2000:]
        found = subprocess.run(["ibnetdiscover"], env={**env, "LD_PRELOAD": str(UMAD2SIM)}, capture_output=True,
                               text=True, timeout=120, check=True).stdout
    finally:
        sim.terminate()
        sim.wait(timeout=60)
    generated, discovered = ibnetdiscover.parse(net.read_text(encoding="utf-8")), ibnetdiscover.parse(found)
    assert {g: (n.kind, n.desc, n.ports) for g, n in discovered.nodes.items()} == {
        g: (n.kind, n.desc, n.ports) for g, n in generated.nodes.items()}
    assert {(lk.a, lk.b, lk.width, lk.speed) for lk in discovered.links} == {
        (lk.a, lk.b, lk.width, lk.speed) for lk in generated.links}
