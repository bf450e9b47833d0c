"""Host patterns in Ansible's semantics over an inventory read from `ansible-inventory --list` JSON."""

from __future__ import annotations

import pytest
from fabricproof.errors import InputError
from fabricproof.inventory import from_list_json, limit

LISTED = {
    "_meta": {"hostvars": {"h1": {"ansible_host": "127.10.0.1"}, "h2": {}, "h3": {}, "a1": {}}},
    "all": {"children": ["ungrouped", "gpu"]},
    "gpu": {"children": ["dgx_h100", "dgx_a100"]},
    "dgx_h100": {"hosts": ["h1", "h2", "h3"]},
    "dgx_a100": {"hosts": ["a1"]},
    "rack_01": {"hosts": ["h1", "a1"]},
}
INV = from_list_json(LISTED, "inv")


def test_groups_are_transitive():
    assert INV.hosts["h1"].groups == ("dgx_h100", "gpu", "rack_01")
    assert INV.groups["gpu"] == ("a1", "h1", "h2", "h3")
    assert INV.hosts["h1"].vars["ansible_host"] == "127.10.0.1"


@pytest.mark.parametrize(
    ("pattern", "hosts"),
    [
        (None, ["a1", "h1", "h2", "h3"]),
        ("all", ["a1", "h1", "h2", "h3"]),
        ("dgx_h100", ["h1", "h2", "h3"]),
        ("dgx_h100:dgx_a100", ["a1", "h1", "h2", "h3"]),
        ("dgx_h100,!h2", ["h1", "h3"]),
        ("dgx_h100:!h2", ["h1", "h3"]),
        ("gpu:&rack_01", ["a1", "h1"]),
        ("h*", ["h1", "h2", "h3"]),
        ("~h[12]", ["h1", "h2"]),
        ("!dgx_a100", ["h1", "h2", "h3"]),
    ],
)
def test_limit(pattern, hosts):
    assert limit(INV, pattern) == hosts


def test_limit_errors():
    with pytest.raises(InputError, match="no host or group named nosuch"):
        limit(INV, "nosuch")
    with pytest.raises(InputError, match="matches no host"):
        limit(INV, "dgx_a100:&dgx_h100")
