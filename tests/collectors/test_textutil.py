"""Text helpers the parsers share: the indentation tree, missing-value spellings, numbers, key/value splitting."""

from __future__ import annotations

import pytest
from fabricproof.collectors.textutil import Node, indent_tree, na_to_none, split_kv, strip_ansi, to_float, to_int


def _shape(node: Node) -> list:
    """(key, value, indent, children) all the way down: what a tree says, comparable in one assert."""
    return [(c.key, c.value, c.indent, _shape(c)) for c in node.children]


def test_indent_tree_nests_by_leading_spaces_and_reads_titles_and_values() -> None:
    # A line's parent is the nearest earlier line indented less; only the first colon separates key and value.
    text = (
        "Attached GPUs : 8\n"
        "GPU Body\n"
        "    Product Name        : NVIDIA H100 80GB HBM3\n"
        "    MIG Mode\n"
        "        Current         : Disabled\n"
        "    Clocks Event Reasons\n"
        "        HW Slowdown     : Not Active\n"
        "            HW Thermal Slowdown : Active\n"
        "      Odd Indent        : 2\n"  # less than its predecessor, more than the section: a sibling of HW Slowdown
        "    Empty Value         :\n"
        "    Timestamp           : Mon Jan 06 09:00:37 2025\n"  # only the first colon separates
    )
    assert _shape(indent_tree(text)) == [
        ("Attached GPUs", "8", 0, []),
        (
            "GPU Body",
            None,
            0,
            [
                ("Product Name", "NVIDIA H100 80GB HBM3", 4, []),
                ("MIG Mode", None, 4, [("Current", "Disabled", 8, [])]),
                (
                    "Clocks Event Reasons",
                    None,
                    4,
                    [
                        ("HW Slowdown", "Not Active", 8, [("HW Thermal Slowdown", "Active", 12, [])]),
                        ("Odd Indent", "2", 6, []),
                    ],
                ),
                ("Empty Value", None, 4, []),
                ("Timestamp", "Mon Jan 06 09:00:37 2025", 4, []),
            ],
        ),
    ]


def test_indent_tree_expands_tabs_to_eight_columns_and_skips_blank_lines() -> None:
    text = "CA 'mlx5_0'\n\tPort 1:\n\t\tState: Active\n   \n\t\n\t\tRate: 400\r\n        Port 2:\n"
    assert _shape(indent_tree(text)) == [
        (
            "CA 'mlx5_0'",
            None,
            0,
            [
                ("Port 1", None, 8, [("State", "Active", 16, []), ("Rate", "400", 16, [])]),
                ("Port 2", None, 8, []),
            ],
        )
    ]


def test_indent_tree_counts_only_spaces_as_indent() -> None:
    # A no-break space is stripped from the title but is not indentation: the line is a sibling, not a child.
    tree = indent_tree("Section\n\u00a0  Key : v\n")
    assert _shape(tree) == [("Section", None, 0, []), ("Key", "v", 0, [])]


def test_indent_tree_other_separator() -> None:
    assert _shape(indent_tree("a = 1\n  b = x=y\n", sep="=")) == [("a", "1", 0, [("b", "x=y", 2, [])])]


def test_node_get_follows_exact_titles() -> None:
    tree = indent_tree("PCI\n    GPU Link Info\n        Link Width\n            Current : 16x\n")
    assert tree.get("PCI", "GPU Link Info", "Link Width", "Current") == "16x"
    assert tree.get("PCI", "gpu link info") is None
    assert tree.get("Missing", "Current") is None


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("  Key   : value ", ("Key", "value")),
        ("Key:", ("Key", "")),
        (": value", ("", "value")),
        ("Bus Id : 00000000:19:00.0", ("Bus Id", "00000000:19:00.0")),
        ("no separator", None),
        ("", None),
    ],
)
def test_split_kv(line: str, expected: tuple[str, str] | None) -> None:
    assert split_kv(line) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("", None),
        ("   ", None),
        ("N/A", None),
        (" n/a ", None),
        ("[N/A]", None),
        ("NA", None),
        ("None", None),
        ("none", None),
        ("[Not Supported]", None),
        ("[Requested functionality has been deprecated]", None),
        ("[", "["),
        ("]", "]"),
        ("[x", "[x"),
        (" 0x1f ", "0x1f"),
        ("Disabled", "Disabled"),
    ],
)
def test_na_to_none(value: str | None, expected: str | None) -> None:
    assert na_to_none(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0", 0),
        ("18", 18),
        (" 42 ", 42),
        ("1,234", 1234),
        ("-5", -5),
        ("+3", 3),
        ("700.00 W", 700),
        ("12.5", 12),
        ("0x1f", 0),  # decimal only: the 0 before the x
        ("x1", None),
        ("", None),
        ("N/A", None),
        ("[N/A]", None),
        (None, None),
        ("\u0663", 3),  # a Unicode decimal digit, as int() reads it
    ],
)
def test_to_int(value: str | None, expected: int | None) -> None:
    assert to_int(value) == expected
    assert type(to_int(value)) is (int if expected is not None else type(None))


@pytest.mark.parametrize(
    ("value", "expected"),
    [("700.00 W", 700.0), ("1,234.5", 1234.5), ("-2", -2.0), ("53.125 GB/s", 53.125), ("5.", 5.0), ("N/A", None)],
)
def test_to_float(value: str, expected: float | None) -> None:
    assert to_float(value) == expected


def test_strip_ansi_removes_escapes_and_keeps_plain_text_as_is() -> None:
    assert strip_ansi("\x1b[4mGPU0\x1b[0m\tX") == "GPU0\tX"
    plain = "GPU0\tX\n"
    assert strip_ansi(plain) == plain
