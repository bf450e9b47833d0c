"""How the plan diff names switches, ports and hosts (pure)."""

from __future__ import annotations

import pytest
from fabricproof.subnet.model import End, Node, Subnet
from fabricproof.subnet.names import end_name, host_of, switch_name


@pytest.mark.parametrize("desc, name", [
    ("MF0;leaf-su1-r0:MQM9700/U1", "leaf-su1-r0"),
    ("MF0;sat11-0101-0927-20ib0:MQM8700/U1", "sat11-0101-0927-20ib0"),
    # a director's ASICs share the chassis name: the blade and ASIC tell them apart (NDT's "Blade 16_Port 2/20")
    ("MF0;sat11-0101-0903-01ib1-A:MCS8500/L16/U2", "sat11-0101-0903-01ib1-A/L16/U2"),
    ("MF0;sat11-0101-0903-01ib1-A:MCS8500/S03/U1", "sat11-0101-0903-01ib1-A/S03/U1"),
    ("Quantum Mellanox Technologies", "Quantum Mellanox Technologies"),
    ("SwitchX -  Mellanox Technologies", "SwitchX -  Mellanox Technologies"),
])
def test_switch_name_is_the_name_an_operator_uses(desc, name):
    assert switch_name(desc) == name


@pytest.mark.parametrize("desc, expected", [
    ("node0007 mlx5_3", ("node0007", "mlx5_3")),
    ("SAT111092710053 ibp11s0f0", ("SAT111092710053", "ibp11s0f0")),
    ("HCA-1", None),
    ("MT4123 ConnectX6   Mellanox Technologies", None),
    ("", None),
])
def test_host_of_reads_host_and_hca_from_a_ca_description(desc, expected):
    assert host_of(desc) == expected


def test_end_name_names_ports_as_an_operator_does():
    sub = Subnet(nodes={"0x0000000000000001": Node("0x0000000000000001", "ca", "node0007 mlx5_3", 1),
                        "0x0000000000000002": Node("0x0000000000000002", "switch", "MF0;leaf-r2-03:MQM9700/U1", 64)})
    assert end_name(sub, End("0x0000000000000001", 1)) == "node0007 mlx5_3 port 1"
    assert end_name(sub, End("0x0000000000000002", 17)) == "leaf-r2-03 port 17"
    assert end_name(sub, End("0x0000000000000003", 2)) == "0x0000000000000003 port 2"


def test_chassis_names_a_directors_box_and_nothing_else():
    from fabricproof.subnet.names import chassis

    assert chassis("MF0;sat11-0101-0903-01ib1-A:MCS8500/L16/U2") == "sat11-0101-0903-01ib1-A"
    assert chassis("MF0;sat11-0101-0903-01ib1-A:MCS8500/S03/U1") == "sat11-0101-0903-01ib1-A"
    assert chassis("MF0;leaf-su1-r0:MQM9700/U1") is None
    assert chassis("node01 mlx5_0") is None
