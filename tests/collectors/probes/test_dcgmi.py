"""dcgmi diag parser over every real output of ../shared/corpus/dcgmi: DCGM 3.x and 4.x tables, per-GPU rows,
wrapped warnings, a table printed twice, and a diagnostic that could not load its plugins as a ParseError."""

from __future__ import annotations

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.probes.dcgmi import SCHEMA, parse_dcgmi_diag

from .probelib import assert_family, names, parsed_or_failed, read

FAMILY = "dcgmi"
SKIPS = "blackwell-rtx-pro-6000-2gpu-diag-r3-dcgm3.3.9-all-SKIP-duplicated-table.txt"
A100 = "diag-r2-a100-sxm4-80gb-p4de-8gpu-dcgm3.3.3-nvlinks-expected-up-12-pass.txt"
A10G = "diag-r2-i0-a10g-dcgm4.4.2-driver580.105.08-lowercase-tests-per-gpu-lines.txt"
V100 = "diag-r2-v100-dcgm4.4.1-pcie-FAIL-internal-error-wrapped-warning-trailing-spaces-excerpt.txt"
PLUGINS = "diag-r3-dcgm4-FAIL-return-30-cannot-load-plugins-cuda12-dir-missing.txt"

FAILURES = {PLUGINS: r"^dcgmi diag did not run: Unable to complete diagnostic for entities 0,1,2,3\. Return: \(-30\) "
                     r": DCGM GPU Diagnostic returned an error; Cannot load plugins\. Unable to change to the plugin dir"}


def test_the_whole_family_is_walked():
    assert_family(FAMILY, 5, FAILURES, SCHEMA)


@pytest.mark.parametrize("name", names(FAMILY))
def test_every_corpus_file_parses_or_gives_its_parse_error(corpus, name):
    frag = parsed_or_failed(corpus, FAMILY, name, parse_dcgmi_diag, SCHEMA, FAILURES)
    assert frag is None or (frag["tests"] and frag["dcgm_version"])


def test_dcgm3_table_all_pass(corpus):
    f = parse_dcgmi_diag(read(corpus, FAMILY, A100))
    assert (f["dcgm_version"], f["driver_version"], f["gpu_device_ids"]) == ("3.3.3", "535.104.12", ["20b2"] * 8)
    assert [(t["category"], t["name"], t["result"]) for t in f["tests"]][-3:] == [
        ("Deployment", "Inforom", "pass"), ("Integration", "PCIe", "pass"), ("Hardware", "GPU Memory", "pass")]
    assert f["tests"][-1]["detail"] == "All" and len(f["tests"]) == 11
    assert (f["passed"], f["failed_tests"], f["errors"]) == (True, [], [])


def test_dcgm4_lowercase_tests_with_per_gpu_rows(corpus):
    f = parse_dcgmi_diag(read(corpus, FAMILY, A10G))
    assert [(t["category"], t["name"], t["result"], t["gpus"]) for t in f["tests"]] == [
        ("Deployment", "software", "pass", {"0": "pass"}), ("Hardware", "memory", "pass", {"0": "pass"}),
        ("Integration", "pcie", "pass", {"0": "pass"})]
    assert f["dcgm_version"] == "4.4.2" and f["passed"] is True


def test_a_failed_test_with_its_wrapped_warning(corpus):
    """The warning is wrapped mid-word over five rows ("non-ze" / "ro status 1"); the trailing spaces are pasted."""
    f = parse_dcgmi_diag(read(corpus, FAMILY, V100))
    (pcie,) = f["tests"]
    assert (pcie["category"], pcie["name"], pcie["result"]) == ("Integration", "pcie", "fail")
    assert pcie["messages"] == [(
        "warning: There was an internal error during the test: 'A child process (2378806) exited with non-zero "
        "status 1' Check DCGM and system logs for errors. Reset GPU. Restart DCGM. Rerun diagnostics.")]
    assert f["gpu_device_ids"] == ["1db1"] * 4 and (f["passed"], f["failed_tests"]) == (False, ["pcie"])


def test_skips_and_a_table_printed_twice(corpus):
    f = parse_dcgmi_diag(read(corpus, FAMILY, SKIPS))
    assert len(f["tests"]) == 15  # 9 deployment + PCIe + GPU Memory + 4 stress, once each
    assert {t["result"] for t in f["tests"] if t["category"] != "Deployment"} == {"skip"}


def test_a_diag_whose_hardware_tests_all_skipped_is_not_proven(corpus):
    """DCGM 3.3.9 predates the RTX PRO 6000 Blackwell: every Deployment test passes and every hardware test says
    Skip. No test failed, yet nothing but the installation was tested: never passed, the skipped tests named."""
    f = parse_dcgmi_diag(read(corpus, FAMILY, SKIPS))
    assert (f["passed"], f["proven"], f["failed_tests"]) == (False, None, [])
    assert f["skipped_tests"] == ["PCIe", "GPU Memory", "Targeted Stress", "Targeted Power", "Memory Bandwidth"]
    assert f["notes"] == ["not proven: 5 of 5 hardware tests skipped (PCIe, GPU Memory, Targeted Stress, "
                          "Targeted Power, Memory Bandwidth)"]


def test_the_eud_test_alone_skipped_leaves_the_run_proven(corpus):
    """EUD is a separately installed package DCGM skips where it is absent: derived from the Blackwell table with
    every other test set to Pass."""
    text = read(corpus, FAMILY, SKIPS).replace("Skip - All ", "Pass - All ").replace(
        "| EUD Test                  | Pass - All ", "| EUD Test                  | Skip - All ")
    f = parse_dcgmi_diag(text)
    assert [t["result"] for t in f["tests"] if t["name"] == "EUD Test"] == ["skip"]
    assert (f["passed"], f["proven"], f["skipped_tests"], f["notes"]) == (True, True, [], [])


def test_a_test_skipped_on_one_gpu_is_not_proven_on_it(corpus):
    """DCGM 4 prints per-GPU rows; one GPU's Skip under an overall Pass (derived from the A10G table)."""
    text = read(corpus, FAMILY, A10G).replace(
        "| pcie                      | Pass                                           |\n"
        "|                           | GPU0: Pass ",
        "| pcie                      | Pass                                           |\n"
        "|                           | GPU0: Skip ")
    f = parse_dcgmi_diag(text)
    assert (f["passed"], f["proven"], f["skipped_tests"]) == (False, None, ["pcie (GPU0)"])


def test_every_real_run_that_ran_its_tests_is_proven(corpus):
    for name in (A100, A10G, V100):
        f = parse_dcgmi_diag(read(corpus, FAMILY, name))
        assert (f["proven"], f["skipped_tests"], f["notes"]) == (True, [], [])


def test_a_repeated_table_keeps_the_worse_result(corpus):
    text = read(corpus, FAMILY, A100)
    worse = text + text.replace("| GPU Memory                | Pass - All ", "| GPU Memory                | Fail - All ")
    f = parse_dcgmi_diag(worse)
    assert [t["result"] for t in f["tests"] if t["name"] == "GPU Memory"] == ["fail"] and f["passed"] is False


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("nothing here\n", "not dcgmi diag output"),
    ("+---+---+\n| Diagnostic | Result |\n|-----  Deployment  ----+----|\n| Denylist | Maybe |\n", "is not Pass/Fail"),
])
def test_garbage_gives_a_one_line_parse_error(text, reason):
    with pytest.raises(ParseError, match=reason) as err:
        parse_dcgmi_diag(text)
    assert "\n" not in str(err.value)


def test_a_warning_result_fails_the_diagnostic(corpus):
    """No corpus table shows Warn; the A100 table with one result set to Warn (a derived input) shows it counts."""
    text = read(corpus, FAMILY, A100).replace("| PCIe                      | Pass - All ", "| PCIe                      | Warn - All ")
    f = parse_dcgmi_diag(text)
    assert [(t["name"], t["result"], t["detail"]) for t in f["tests"] if t["category"] == "Integration"] == [
        ("PCIe", "warn", "All")]
    assert (f["passed"], f["failed_tests"]) == (False, ["PCIe"])
