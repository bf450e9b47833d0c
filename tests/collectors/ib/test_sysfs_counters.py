"""The /sys/class/infiniband reader: its fixed script and its parser against the real-output corpus."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.ib.sysfs_counters import parse_ib_counters

from .iblib import COLLECTORS, CORPUS, parse, read


def test_counters_script_reproduces_the_sysfs_corpus_from_a_host_root(corpus: Path, tmp_path: Path) -> None:
    """The fixed script, run by a real /bin/sh over a tree rebuilt from the gpud capture under
    $FABRICPROOF_HOST_ROOT, prints the capture's `path: value` lines back (the format the parser reads)."""
    import os
    import subprocess

    lines = (corpus / "sysfs-infiniband" / "gpud-h100-node-8x-cx7-ndr-plus-bond.txt").read_text().splitlines()
    for line in lines:
        path, _, value = line.partition(": ")
        target = tmp_path / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(value.replace("\\n", "\n") + "\n")
    argv = COLLECTORS["ib_counters"].argv
    env = {**os.environ, "FABRICPROOF_HOST_ROOT": str(tmp_path), "LC_ALL": "C"}
    out = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=30, check=True).stdout
    printed = out.splitlines()
    assert printed, "the script printed nothing"
    assert set(printed) <= set(lines), sorted(set(printed) - set(lines))[:5]
    fragment = parse_ib_counters(out)
    assert fragment == parse_ib_counters("\n".join(l for l in lines if l in set(printed)))
    assert fragment["totals"]["link_downed"] == 255


# --- sysfs counters --------------------------------------------------------------------------------------------------

GPUD_H100 = "gpud-h100-node-8x-cx7-ndr-plus-bond.txt"


def test_sysfs_h100_rates_and_summed_counters(corpus: Path) -> None:
    f = parse(corpus, "sysfs-infiniband", GPUD_H100, "ib_counters")
    ndr = [p for p in f["ports"] if p["device"] != "mlx5_bond_0"]
    assert [p["device"] for p in ndr] == [f"mlx5_{i}" for i in (0, 1, 4, 5, 6, 7, 8, 9)]
    assert {(p["rate"], p["rate_gbps"], p["link_layer"], p["state"], p["phys_state"]) for p in ndr} == {
        ("400 Gb/sec (4X NDR)", 400, "InfiniBand", "4: ACTIVE", "5: LinkUp")
    }
    (bond,) = [p for p in f["ports"] if p["device"] == "mlx5_bond_0"]
    assert (bond["rate"], bond["rate_gbps"], bond["link_layer"], bond["state_name"]) == (
        "200 Gb/sec (2X NDR)",
        200,
        "Ethernet",
        "ACTIVE",
    )
    cx7 = [d for d in f["devices"] if d["name"] != "mlx5_bond_0"]
    assert {(d["hca_type"], d["fw_ver"], d["board_id"]) for d in cx7} == {("MT4129", "28.41.1000", "MT_0000000838")}
    # totals over the 9 ports: 9 x 15 buffer overruns, 255 link downs all on mlx5_1
    assert f["totals"]["excessive_buffer_overrun_errors"] == 135
    assert f["totals"]["link_downed"] == 255
    assert f["totals"]["port_rcv_errors"] == 126
    assert f["totals"]["symbol_error"] == 0
    assert f["hw_totals"]["roce_adp_retrans"] == 27
    assert next(p for p in f["ports"] if p["device"] == "mlx5_1")["counters"]["link_downed"] == 255


@pytest.mark.parametrize("name", sorted(p.name for p in (CORPUS / "sysfs-infiniband").glob("*.txt")))
def test_sysfs_totals_are_the_per_port_sums(corpus: Path, name: str) -> None:
    f = parse(corpus, "sysfs-infiniband", name, "ib_counters")
    names = {k for p in f["ports"] for k in p["counters"]}
    assert f["totals"] == {k: sum(p["counters"].get(k, 0) for p in f["ports"]) for k in sorted(names)}
    text = read(corpus, "sysfs-infiniband", name)
    lines = [line for line in text.splitlines() if re.search(r"/(hw_)?counters/", line)]
    assert sum(len(p["counters"]) + len(p["hw_counters"]) for p in f["ports"]) == len(lines)


def test_sysfs_grep_h_and_relative_paths_read_the_same(corpus: Path) -> None:
    text = read(corpus, "sysfs-infiniband", "procfs-fixture-mlx4_0-connectx3-qdr-2port.txt")
    expected = parse_ib_counters(text)
    assert len(expected["ports"]) == 2 and expected["devices"][0]["hca_type"] == "MT4099"
    grep_h = re.sub(r"^([^:]+): ", r"\1:", text, flags=re.M)  # `grep -H . <files>` prints path:value
    assert grep_h != text and parse_ib_counters(grep_h) == expected
    relative = text.replace("/sys/class/infiniband/", "")  # grep run inside /sys/class/infiniband
    assert parse_ib_counters(relative) == expected


def test_sysfs_keeps_non_numeric_port_values_verbatim(corpus: Path) -> None:
    f = parse(corpus, "sysfs-infiniband", "procfs-fixture-mlx5_0-mt4118-hw_counters.txt", "ib_counters")
    (port,) = f["ports"]
    # the procfs fixture's phys_state is hand-edited to "4: ACTIVE" (see PROVENANCE): kept as printed
    assert (port["phys_state"], port["phys_state_name"], port["rate_gbps"]) == ("4: ACTIVE", "ACTIVE", 25)
    assert f["devices"][0]["node_guid"] == "0a7f:bc12:45ef:d23b"
    assert port["hw_counters"]["req_cqe_error"] == 3481


def test_sysfs_garbage() -> None:
    for text in ("", "no paths here\n", "CA 'mlx5_0'\n"):
        with pytest.raises(ParseError):
            parse_ib_counters(text)
