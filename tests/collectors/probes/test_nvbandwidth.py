"""nvbandwidth parser over every real output of ../shared/corpus/nvbandwidth: v0.2 to v0.10 matrices, the
multinode layout, per-testcase min/median/min pair, and the ASSERT as a ParseError."""

from __future__ import annotations

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.probes.nvbandwidth import SCHEMA, parse_nvbandwidth

from .probelib import assert_family, names, parsed_or_failed, read

FAMILY = "nvbandwidth"
H2D = "a100-sxm4-40gb-1gpu-v0.8-h2d-memcpy-sm-single-column.txt"
ASSERT = "a100-sxm4-80gb-8gpu-v0.7-FAIL-ASSERT-invalid-pattern-d2d-read-ce.txt"
B300 = "blackwell-b300-sxm6-7gpu-v0.10-driver610.57.04-first-8-testcases-excerpt.txt"
GB200 = "blackwell-gb200-oci-2tray-8gpu-multinode-d2d-read-ce-v0.7-mpi.txt"
H100 = "h100-8gpu-v0.10-driver595.71.05-d2d-read-ce-cov-line-no-device-list.txt"
H800 = "h800-8gpu-full-run-v0.2-driver525.105.17-all-30-testcases.txt"
READ_CE = "device_to_device_memcpy_read_ce"

FAILURES = {ASSERT: r"^nvbandwidth failed in device_to_device_memcpy_read_ce: Invalid value when checking the pattern "
                    r"at 0x70a640000000; Current offset : 11136; ASSERT in expression h_errorFlag == 0"}


def test_the_whole_family_is_walked():
    assert_family(FAMILY, 6, FAILURES, SCHEMA)


@pytest.mark.parametrize("name", names(FAMILY))
def test_every_corpus_file_parses_or_gives_its_parse_error(corpus, name):
    frag = parsed_or_failed(corpus, FAMILY, name, parse_nvbandwidth, SCHEMA, FAILURES)
    assert frag is None or (frag["testcases"] and all(t["summary"] for t in frag["testcases"].values()))


def test_h100_read_ce_min_median_and_the_minimum_pair(corpus):
    f = parse_nvbandwidth(read(corpus, FAMILY, H100))
    assert (f["version"], f["cuda_runtime"], f["cuda_driver"], f["driver_version"], f["devices"]) == (
        "v0.10.0", "13.2 (13020)", "13.2 (13020)", "595.71.05", [])
    t = f["testcases"][READ_CE]
    assert (t["title"], t["unit"], t["sum"], t["cov"]) == ("memcpy CE GPU(row) -> GPU(column) bandwidth", "GB/s",
                                                          22126.64, 0.0)
    (m,) = t["matrices"]
    assert m["rows"] == m["columns"] == list(range(8)) and m["values"][0][:2] == [None, 395.08]
    assert t["summary"] == {"min": 395.05, "median": 395.08, "max": 395.25, "min_pair": {"row": 7, "column": 0},
                            "min_over_median_pct": 99.99, "cells": 56}


def test_v02_full_run_reads_all_30_testcases(corpus):
    f = parse_nvbandwidth(read(corpus, FAMILY, H800))
    assert (f["version"], f["git_version"], f["cuda_runtime"], f["cuda_driver"]) == ("v0.2", "42e94d2", "11080", "12000")
    assert len(f["devices"]) == 8 and f["devices"][0] == {"index": 0, "name": "NVIDIA H800", "bus_id": None,
                                                          "process": None, "host": None}
    assert len(f["testcases"]) == 30
    # upstream's v0.2 mislabels read_sm as "memcpy CE": the testcase is named by its Running line
    assert f["testcases"]["device_to_device_memcpy_read_sm"]["title"].startswith("memcpy CE")
    assert f["testcases"]["device_to_device_memcpy_read_sm"]["summary"]["min"] == 167.5
    assert f["testcases"][READ_CE]["summary"]["min_pair"] == {"row": 0, "column": 4}
    assert f["testcases"]["all_to_one_write_ce"]["sum"] == 1421.43
    # a host-side test whose one slow GPU shows in the spread (not a GPU pair: the perf checks do not judge it)
    assert f["testcases"]["host_to_all_bidirectional_memcpy_ce"]["summary"]["min_over_median_pct"] == 72.78


def test_v010_bidirectional_matrices_and_their_sums(corpus):
    f = parse_nvbandwidth(read(corpus, FAMILY, B300))
    assert len(f["testcases"]) == 8
    bidir = f["testcases"]["device_to_device_bidirectional_memcpy_read_ce"]
    assert [m["label"] for m in bidir["matrices"]] == ["read1", "read2", "total"]
    assert bidir["sums"] == {"device_to_device_bidirectional_memcpy_read_ce_read1": 31945.78,
                             "device_to_device_bidirectional_memcpy_read_ce_read2": 31924.12,
                             "device_to_device_bidirectional_memcpy_read_ce_total": 63869.9}
    assert bidir["summary"]["min"] == 1517.86  # the Total matrix
    assert f["testcases"][READ_CE]["summary"]["min"] == 764.16
    assert f["testcases"]["device_to_device_bidirectional_memcpy_write_ce"]["cov"] is None  # the excerpt ends there


def test_multinode_process_devices(corpus):
    f = parse_nvbandwidth(read(corpus, FAMILY, GB200))
    assert f["mpi_version"].startswith("Open MPI v4.1.4")
    assert f["devices"][4] == {"index": 0, "name": "HGX GB200", "bus_id": "00000008:01:00", "process": 4,
                               "host": "nvbandwidth-test-worker-1"}
    t = f["testcases"]["multinode_device_to_device_memcpy_read_ce"]
    assert t["sum"] == 44685.29 and t["summary"]["min"] == 797.65 and t["summary"]["min_pair"] == {"row": 2, "column": 7}


def test_single_cell_host_matrix(corpus):
    f = parse_nvbandwidth(read(corpus, FAMILY, H2D))
    assert f["devices"] == [{"index": 0, "name": "NVIDIA A100-SXM4-40GB", "bus_id": "00000000:99:00",
                             "process": None, "host": None}]
    assert f["testcases"]["host_to_device_memcpy_sm"]["summary"]["min"] == 25.13


def test_a_zero_diagonal_is_not_the_weakest_pair():
    """nvbandwidth's README example (older builds) prints 0.00 where newer ones print N/A for a GPU with itself."""
    text = ("Running device_to_device_memcpy_read_ce.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n"
            "          0         1\n0      0.00    264.36\n1    264.60      0.00\n\n")
    assert parse_nvbandwidth(text)["testcases"][READ_CE]["summary"]["min"] == 264.36


def test_a_waived_testcase_has_no_matrix():
    f = parse_nvbandwidth("nvbandwidth Version: v0.2\n\nWaiving device_to_device_memcpy_write_ce.\n")
    assert f["testcases"]["device_to_device_memcpy_write_ce"] == {
        "waived": True, "title": None, "unit": None, "matrices": [], "sum": None, "sums": {}, "cov": None, "summary": None}


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("no such thing\n", "not nvbandwidth output"),
    ("nvbandwidth Version: v0.8\n", "ran no testcase"),
    ("nvbandwidth Version: v0.8\nRunning device_to_device_memcpy_read_ce.\n", "stopped in device_to_device"),
    ("Running x.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n 0 1\n0 N/A 3.0 4.0\n", "3 values under 2 columns"),
    ("Running x.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n 0 1\n0 N/A fast\n", "neither a number"),
    ("Running x.\nmemcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\nSUM x 3\n", "without a column header"),
])
def test_garbage_gives_a_one_line_parse_error(text, reason):
    with pytest.raises(ParseError, match=reason) as err:
        parse_nvbandwidth(text)
    assert "\n" not in str(err.value)
