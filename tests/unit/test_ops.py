"""The operator vocabulary: each predicate on the values operators meet in real output."""

from __future__ import annotations

import pytest
from fabricproof.judging.ops import OPERATORS, render_value, version_key


@pytest.mark.parametrize(
    ("op", "actual", "expected", "result"),
    [
        ("eq", 26.562, "26.562", True),
        ("eq", 400, 400.0, True),
        ("eq", "Completed", "Completed ", True),
        ("eq", "In Progress", "Completed", False),
        ("eq", None, None, True),
        ("ne", "00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000", False),
        ("ne", 2, 0, True),
        ("lt", 3, 4, True),
        ("le", 4, 4, True),
        ("gt", "401", 400, True),
        ("ge", "n/a", 1, False),
        ("in", "PXB", ["PIX", "PXB"], True),
        ("in", "NODE", ["PIX", "PXB"], False),
        ("not_in", 79, [48, 79], False),
        ("not_in", 31, [48, 79], True),
        ("regex", "NVIDIA H100 80GB HBM3", "^NVIDIA H100", True),
        ("regex", None, ".*", False),
        ("version", "535.161.08", ">=535.104, <536", True),
        ("version", "550.90.07", ">=535.104, <536", False),
        ("version", "28.41.1000", "~=28.41", True),
        ("version", "28.39.1002", "~=28.41", False),
        ("version", "MLNX_OFED_LINUX-23.10-1.1.9.0", ">=23.10", True),
        ("version", "535.161.08", "==535.161.8", True),
        ("version", "1.2", "bogus clause here", False),
    ],
)
def test_operator(op, actual, expected, result):
    assert OPERATORS[op].test(actual, expected) is result


def test_version_key_reads_vendor_strings():
    assert version_key("535.161.08") == (535, 161, 8)
    assert version_key("MLNX_OFED_LINUX-23.10-1.1.9.0") == (23, 10, 1, 1, 9, 0)


def test_render_value():
    assert render_value([400, "PIX", None, True, 25.0]) == "[400, PIX, null, true, 25]"


@pytest.mark.parametrize(
    ("actual", "expected", "result"),
    [(["0xffff", "0x8001"], "0x8001", True), (["0xffff"], "0x8001", False), ("0x8001", "0x8001", False),
     (None, "0x8001", False), ([400, 200], 400.0, True)],
)
def test_contains_needs_a_list_holding_the_value(actual, expected, result):
    assert OPERATORS["contains"].test(actual, expected) is result


def test_fleet_operators_are_exactly_same_and_unique():
    from fabricproof.judging.ops import fleet_names

    assert fleet_names() == ("same", "unique")
