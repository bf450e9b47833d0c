"""The fabric's vantage host and each host's rail map, from inventory hosts and their facts (pure)."""

from __future__ import annotations

from fabricproof.model import Host
from fabricproof.subnet.hosts import VANTAGE_GROUP, VANTAGE_VAR, active_ib, choose, rails


def ports(*specs: tuple[str, str, str]) -> dict:
    return {"ib": {"ibstat": {"ports": [{"ca": ca, "port": 1, "state": state, "link_layer": layer}
                                        for ca, state, layer in specs]}}}


UP = ports(("mlx5_0", "Active", "InfiniBand"))
DOWN = ports(("mlx5_0", "Down", "InfiniBand"))
ETH = ports(("mlx5_0", "Active", "Ethernet"))


def test_a_host_var_names_the_vantage_before_the_group_and_the_ports():
    hosts = [Host("a", {}, (VANTAGE_GROUP,)), Host("b", {}), Host("c", {VANTAGE_VAR: True})]
    v = choose(hosts, {"a": UP, "b": UP, "c": DOWN})
    assert v.host is not None and v.host.name == "c" and VANTAGE_VAR in v.why


def test_an_ini_inventory_true_string_counts_and_false_strings_do_not():
    assert choose([Host("a", {VANTAGE_VAR: "false"}), Host("b", {VANTAGE_VAR: "True"})], {}).host.name == "b"
    assert choose([Host("a", {VANTAGE_VAR: "no"})], {}).host is None


def test_the_group_names_the_vantage_when_no_host_var_does():
    v = choose([Host("a", {}), Host("b", {}, ("dgx", VANTAGE_GROUP))], {"a": UP})
    assert v.host.name == "b" and VANTAGE_GROUP in v.why


def test_the_fallback_is_the_first_host_by_name_with_an_active_infiniband_port():
    hosts = [Host("n3"), Host("n1"), Host("n2")]
    v = choose(hosts, {"n1": DOWN, "n2": ETH, "n3": UP})
    assert v.host.name == "n3" and "Active InfiniBand" in v.why


def test_no_vantage_says_what_would_make_one():
    v = choose([Host("n1"), Host("n2")], {"n1": DOWN, "n2": ETH})
    assert v.host is None
    assert VANTAGE_VAR in v.why and VANTAGE_GROUP in v.why and "Active InfiniBand" in v.why


def test_active_ib_reads_only_infiniband_ports_that_are_active():
    assert active_ib(UP) and not active_ib(DOWN) and not active_ib(ETH) and not active_ib(None)
    assert not active_ib({"ib": {"ibstat": None}})


def test_the_rail_map_orders_infiniband_hcas_naturally_and_skips_ethernet():
    facts = ports(("mlx5_10", "Active", "InfiniBand"), ("mlx5_2", "Down", "InfiniBand"),
                  ("mlx5_9", "Active", "InfiniBand"), ("mlx5_1", "Active", "Ethernet"), ("mlx5_0", "Active", "InfiniBand"))
    assert rails(facts) == {"mlx5_0": 0, "mlx5_2": 1, "mlx5_9": 2, "mlx5_10": 3}
    assert rails(None) == {}
