"""tests/fabrickit.py, the synthetic fabric the scale benchmarks parse and diff: it prints what ibnetdiscover would."""

from __future__ import annotations

import fabrickit
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
