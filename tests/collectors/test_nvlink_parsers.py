"""nvidia-smi nvlink -s / -e / -c / -info / -gt parsers against the real-output corpus."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fabricproof.collectors.nvlink import caps as nvlink_caps
from fabricproof.collectors.nvlink import errors as nvlink_errors
from fabricproof.collectors.nvlink import info as nvlink_info
from fabricproof.collectors.nvlink import status as nvlink_status
from fabricproof.collectors.nvlink import throughput as nvlink_throughput
from fabricproof.collectors.base import Collector, ParseError

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

# Same location as the `corpus` fixture (tests/conftest.py); only used to list files at collection time.
_CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
FAMILY = "nvidia-smi-nvlink"
NVLINK_COLLECTORS = (
    *nvlink_status.COLLECTORS,
    *nvlink_errors.COLLECTORS,
    *nvlink_caps.COLLECTORS,
    *nvlink_info.COLLECTORS,
)
SCHEMAS = {
    nvlink_status.parse_status: nvlink_status.STATUS_SCHEMA,
    nvlink_errors.parse_errors: nvlink_errors.ERRORS_SCHEMA,
    nvlink_caps.parse_caps: nvlink_caps.CAPS_SCHEMA,
    nvlink_info.parse_info: nvlink_info.INFO_SCHEMA,
    nvlink_throughput.parse_throughput: nvlink_throughput.THROUGHPUT_SCHEMA,
}


def _parsers_for(name: str) -> list[Callable[[str], dict[str, Any]]]:
    """Which sub-command printed a corpus file, from its name.

    Known exception (PROVENANCE.md): nvlink-status-i0-then-capabilities-i0-... holds `--status`
    followed by `--capabilities` as pasted; both parsers read it, each its own lines.
    """
    if "then-capabilities" in name:
        return [nvlink_status.parse_status, nvlink_caps.parse_caps]
    if "capabilities" in name:
        return [nvlink_caps.parse_caps]
    if name.startswith("nvlink-e-"):
        return [nvlink_errors.parse_errors]
    if name.startswith("nvlink-info-"):
        return [nvlink_info.parse_info]
    if "-gt-" in name:  # nvlink-gt-r-..., nvlink-i0-gt-d-...
        return [nvlink_throughput.parse_throughput]
    return [nvlink_status.parse_status]


def _cases() -> list[tuple[str, Callable[[str], dict[str, Any]]]]:
    folder = _CORPUS / FAMILY
    names = sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []
    return [(name, parse) for name in names for parse in _parsers_for(name)]


def _parse(parse: Callable[[str], dict[str, Any]], text: str) -> dict[str, Any]:
    fragment = parse(text)
    assert_valid(SCHEMAS[parse], fragment)
    return fragment


def _file(corpus: Path, parse: Callable[[str], dict[str, Any]], name: str) -> dict[str, Any]:
    return _parse(parse, (corpus / FAMILY / name).read_text(encoding="utf-8"))


@pytest.mark.parametrize(("name", "parse"), _cases(), ids=lambda v: getattr(v, "__name__", v))
def test_every_nvlink_file_parses(corpus: Path, name: str, parse) -> None:
    fragment = _file(corpus, parse, name)
    assert fragment["gpus"], "every file names at least one GPU (or an implicit GPU 0)"


# --- nvlink -s -------------------------------------------------------------------------------


def test_a100_eight_gpus_twelve_links_at_25(corpus: Path) -> None:
    status = _file(corpus, nvlink_status.parse_status, "nvlink-status-a100-sxm4-80gb-azure-8gpu-12links.txt")
    assert status["supported"] is True
    assert [g["index"] for g in status["gpus"]] == list(range(8))
    assert {(g["links_total"], g["links_active"], g["gbps_min"]) for g in status["gpus"]} == {(12, 12, 25.0)}
    assert len(status["links"]) == status["links_active_total"] == 96
    assert (status["links_per_gpu_min"], status["gbps_min"], status["gbps_max"]) == (12, 25.0, 25.0)
    assert status["gpus"][0]["uuid"] == "GPU-5269b708-678a-b1a8-60f0-c90406537486"
    assert status["gpus"][0]["name"] == "NVIDIA A100-SXM4-80GB"


@pytest.mark.parametrize(
    "name",
    [
        "nvlink-s-h100-80gb-hbm3-1gpu-vm-590.48.01.txt",
        "nvlink-status-h100-80gb-hbm3-gpu0-1-bottlerocket-4418-excerpt.txt",
    ],
)
def test_h100_eighteen_links_at_26_562(corpus: Path, name: str) -> None:
    status = _file(corpus, nvlink_status.parse_status, name)
    assert all(g["links_active"] == 18 and g["links_inactive"] == 0 for g in status["gpus"])
    assert status["links_per_gpu_min"] == 18
    assert status["gbps_min"] == status["gbps_max"] == 26.562


def test_gb200_eighteen_links_at_53_125_with_truncated_second_gpu(corpus: Path) -> None:
    status = _file(corpus, nvlink_status.parse_status, "nvlink-s-gb200-18links-53.125-excerpt-k8s-test-infra-371.txt")
    gpu0, gpu1 = status["gpus"]
    assert (gpu0["links_active"], gpu0["gbps_min"]) == (18, 53.125)
    # The author cut GPU 1 short with "...": its two listed links are facts, its count is unknown, not 2 (a truncated
    # paste is not a degraded GPU), and the per-GPU minimum is taken over the GPU listed in full.
    assert (gpu1["links_active"], gpu1["links_total"], gpu1["links_inactive"]) == (None, None, None)
    assert "elided" in gpu1["note"] and gpu0["note"] is None
    assert [link["link"] for link in status["links"] if link["gpu"] == 1] == [0, 1]
    assert status["links_per_gpu_min"] == 18 and status["links_active_total"] == 20
    assert status["elided"] is True
    assert any("elided" in n for n in status["notes"])


def test_tab_indented_single_gpu_keeps_its_index(corpus: Path) -> None:
    status = _file(corpus, nvlink_status.parse_status, "nvlink-status-a100-gpu7-single-gpu-tabs-azurehpc.txt")
    assert [(g["index"], g["links_active"]) for g in status["gpus"]] == [(7, 12)]
    assert {link["gpu"] for link in status["links"]} == {7}


def test_inactive_links_are_listed(corpus: Path) -> None:
    status = _file(corpus, nvlink_status.parse_status, "nvlink-status-i0-h100-pcie-some-links-inactive.txt")
    gpu = status["gpus"][0]
    assert (gpu["links_total"], gpu["links_active"], gpu["links_inactive"]) == (17, 12, 5)
    assert gpu["inactive_links"] == [4, 9, 10, 15, 16]
    assert status["links_inactive_total"] == 5
    link4 = next(link for link in status["links"] if link["link"] == 4)
    assert link4 == {"gpu": 0, "link": 4, "active": False, "gbps": None}


def test_all_links_inactive_gpu_has_zero_active_links(corpus: Path) -> None:
    status = _file(corpus, nvlink_status.parse_status, "nvlink-status-a100-gpu6-all-links-inactive-azurehpc.txt")
    gpu = status["gpus"][0]
    assert gpu["index"] == 6 and gpu["supported"] is True
    # alone in its output, the GPU does not say how many links it has: inactive ones unknown, never 0
    assert (gpu["links_total"], gpu["links_active"], gpu["links_inactive"]) == (None, 0, None)
    assert "all links are inactive" in gpu["note"] and "not printed" in gpu["note"]
    assert status["links"] == [] and status["links_active_total"] == 0
    assert status["links_per_gpu_min"] == 0  # fails a links-per-GPU check instead of skipping it


def test_a_gpu_with_all_links_inactive_counts_them_from_its_siblings(corpus: Path) -> None:
    """The Azure ND A100 v4 capture of all 8 GPUs, GPU 6's block replaced by the same fleet's `-i 6` capture that
    says "all links are inactive" (a derived input: two real outputs of one VM type joined)."""
    full = (corpus / FAMILY / "nvlink-status-a100-sxm4-80gb-azure-8gpu-12links.txt").read_text(encoding="utf-8")
    bad = (corpus / FAMILY / "nvlink-status-a100-gpu6-all-links-inactive-azurehpc.txt").read_text(encoding="utf-8")
    status = nvlink_status.parse_status(full[:full.index("GPU 6:")] + bad + full[full.index("GPU 7:"):])
    assert_valid(nvlink_status.STATUS_SCHEMA, status)
    gpu6 = status["gpus"][6]
    assert (gpu6["links_total"], gpu6["links_active"], gpu6["links_inactive"]) == (12, 0, 12)
    assert gpu6["inactive_links"] == list(range(12))
    assert (status["links_inactive_total"], status["links_active_total"], status["links_per_gpu_min"]) == (12, 84, 0)


def test_mig_mode_is_unsupported_not_an_error(corpus: Path) -> None:
    status = _file(corpus, nvlink_status.parse_status, "nvlink-s-h200-mig-1gpu-vm-590.48.01.txt")
    assert status["supported"] is False
    assert status["gpus"][0]["supported"] is False
    assert "MIG mode" in status["gpus"][0]["note"]
    assert status["links_per_gpu_min"] is None and status["gbps_min"] is None


def test_elided_status_excerpt(corpus: Path) -> None:
    status = _file(corpus, nvlink_status.parse_status, "nvlink-status-h100-excerpt-elided-mlengineering.txt")
    assert [link["link"] for link in status["links"]] == [0, 17]
    assert status["elided"] is True
    assert status["gpus"][0]["links_active"] is None and status["links_per_gpu_min"] is None


def test_status_then_capabilities_file_reads_only_status_lines(corpus: Path) -> None:
    name = "nvlink-status-i0-then-capabilities-i0-h100-80gb-hbm3-18links.txt"
    status = _file(corpus, nvlink_status.parse_status, name)
    assert len(status["gpus"]) == 1  # the repeated "GPU 0:" header is the same GPU
    assert status["gpus"][0]["links_active"] == 18 and status["gpus"][0]["note"] is None
    assert any("108 lines of another nvlink sub-command" in n for n in status["notes"])


def test_device_without_nvlink_is_unsupported() -> None:
    # Driver 595+ prints this with exit 0 on boards without NVLink (canonical/checkbox#2727).
    text = (
        "GPU 0: NVIDIA JMJWOA-Generic-GPU (UUID: GPU-483cccbe-9d80-0d7b-5c48-12e6c8696e50)\n"
        "Device does not have or support Nvlink\n"
    )
    status = _parse(nvlink_status.parse_status, text)
    assert status["supported"] is False and status["gpus"][0]["links_total"] == 0


# --- nvlink -e -------------------------------------------------------------------------------


def test_errors_excerpt_counts_listed_links(corpus: Path) -> None:
    errors = _file(corpus, nvlink_errors.parse_errors, "nvlink-e-h100-excerpt-elided-mlengineering.txt")
    assert [(link["gpu"], link["link"]) for link in errors["links"]] == [(0, 0), (0, 1), (0, 17)]
    assert all(link["replay"] == link["recovery"] == link["crc"] == 0 for link in errors["links"])
    assert errors["totals"] == {"replay": 0, "recovery": 0, "crc": 0}
    assert errors["elided"] is True


def test_errors_totals_and_header_without_uuid() -> None:
    text = (
        "GPU 0: NVIDIA GB300\n"
        "\t Link 0: Replay Errors: 3\n\t Link 0: Recovery Errors: 1\n\t Link 0: CRC Errors: 7\n\n"
        "\t Link 1: Replay Errors: 2\n\t Link 1: Recovery Errors: 0\n\t Link 1: CRC Errors: N/A\n"
    )
    errors = _parse(nvlink_errors.parse_errors, text)
    assert errors["gpus"][0]["name"] == "NVIDIA GB300" and errors["gpus"][0]["uuid"] is None
    assert errors["links"][1]["crc"] is None
    assert errors["totals"] == {"replay": 5, "recovery": 1, "crc": 7}


def test_errors_split_flit_and_data_crc_add_up() -> None:
    text = (
        "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n"
        "         Link 0: Replay Errors: 1\n         Link 0: Recovery Errors: 0\n"
        "         Link 0: CRC Flit Errors: 5\n         Link 0: CRC Data Errors: 2\n"
        "         Link 0: ECC Errors: 4\n"
    )
    link = _parse(nvlink_errors.parse_errors, text)["links"][0]
    assert (link["gpu"], link["crc_flit"], link["crc_data"], link["crc"]) == (1, 5, 2, 7)
    assert link["counters"]["ECC Errors"] == 4


# --- nvlink -c -------------------------------------------------------------------------------


def test_capabilities_of_the_combined_file(corpus: Path) -> None:
    caps = _file(corpus, nvlink_caps.parse_caps, "nvlink-status-i0-then-capabilities-i0-h100-80gb-hbm3-18links.txt")
    assert [link["link"] for link in caps["links"]] == list(range(18))
    assert caps["p2p_all"] is True
    assert all(link["link_supported"] and link["sysmem_atomics_supported"] for link in caps["links"])
    assert any("18 lines of another nvlink sub-command" in n for n in caps["notes"])


def test_capabilities_excerpt_without_gpu_header(corpus: Path) -> None:
    caps = _file(corpus, nvlink_caps.parse_caps, "nvlink-capabilities-i1-no-gpu-header-links0-3-excerpt.txt")
    assert len(caps["links"]) == 4 and {link["gpu"] for link in caps["links"]} == {0}
    assert caps["p2p_all"] is True
    assert {link["link_supported"] for link in caps["links"]} == {False}
    assert {link["sli_supported"] for link in caps["links"]} == {False}
    assert any("no 'GPU N:' header" in n for n in caps["notes"])


def test_p2p_all_false_when_one_link_lacks_p2p() -> None:
    text = "GPU 0: X (UUID: GPU-y)\n\t Link 0, P2P is supported: true\n\t Link 1, P2P is supported: false\n"
    assert _parse(nvlink_caps.parse_caps, text)["p2p_all"] is False


def test_capability_title_with_colons_and_unknown_flags() -> None:
    # The title ends at the colon before the last word (the flag), so a title may hold colons itself.
    text = (
        "GPU 0: X\n\t Link 0, P2P is supported: true\n\t Link 0, Weird: title: FALSE\n"
        "\t Link 0, SLI is supported: maybe\n\t Link 0,Link is supported:true\n"
    )
    link = _parse(nvlink_caps.parse_caps, text)["links"][0]
    assert (link["p2p_supported"], link["sli_supported"], link["link_supported"]) == (True, None, True)
    assert link["other"] == {"Weird: title": False}


# --- lines shared by the sub-commands ---------------------------------------------------------

_HUGE = "7" * 5000  # more digits than int() converts (sys.get_int_max_str_digits)


@pytest.mark.parametrize(
    ("parse", "foreign"),
    [
        (nvlink_caps.parse_caps, f"Link 1: Replay Errors: {_HUGE}"),
        (nvlink_caps.parse_caps, f"Link {_HUGE}: 26.562 GB/s"),
        (nvlink_status.parse_status, f"Link {_HUGE}, P2P is supported: true"),
        (nvlink_errors.parse_errors, f"Link {_HUGE}: <inactive>"),
    ],
    ids=["caps-counter-value", "caps-status-link", "status-cap-link", "errors-status-link"],
)
def test_lines_of_another_sub_command_are_counted_not_read(parse, foreign: str) -> None:
    own = {
        nvlink_caps.parse_caps: "Link 0, P2P is supported: true",
        nvlink_status.parse_status: "Link 0: 26.562 GB/s",
        nvlink_errors.parse_errors: "Link 0: Replay Errors: 0",
    }[parse]
    fragment = _parse(parse, f"GPU 0: X\n\t {own}\n\t {foreign}\n")
    assert len(fragment["links"]) == 1
    assert "1 lines of another nvlink sub-command ignored" in fragment["notes"][0]


def test_results_do_not_share_state_between_calls() -> None:
    # Link lines are read once and cached: every parse must still hand out its own dicts.
    text = "GPU 0: X\n\t Link 0, P2P is supported: true\n\t Link 0, Odd flag: true\n"
    first = nvlink_caps.parse_caps(text)
    first["links"][0]["other"]["Odd flag"] = False
    first["links"][0]["p2p_supported"] = None
    again = nvlink_caps.parse_caps(text)["links"][0]
    assert (again["p2p_supported"], again["other"]) == (True, {"Odd flag": True})


# --- nvlink -info ----------------------------------------------------------------------------


def test_info_firmware_versions(corpus: Path) -> None:
    info = _file(corpus, nvlink_info.parse_info, "nvlink-info-gb200-nvle-firmware-excerpt-k8s-test-infra-371.txt")
    assert [(g["index"], g["nvle"]) for g in info["gpus"]] == [(0, "disabled"), (1, "disabled")]
    assert info["gpus"][0]["firmware"]["NETIR"] == "36:2014:1862"
    assert info["firmware_versions"]["MSE"] == ["14:4:0"]
    assert len(info["firmware"]) == 10


# --- nvlink -gt d / -gt r ---------------------------------------------------------------------

GT_RAW = "nvlink-gt-r-h800-8links-raw-tx-rx-kib-gpus-3-5-elided-excerpt.txt"
GT_DATA_IDLE = "nvlink-i0-gt-d-h800-8links-data-tx-rx-kib-idle.txt"


def test_throughput_raw_counters_of_the_elided_h800_excerpt(corpus: Path) -> None:
    gt = _file(corpus, nvlink_throughput.parse_throughput, GT_RAW)
    assert gt["counter"] == "raw" and gt["supported"] is True
    # GPUs 3-5 were replaced by a "..." line: absent, and the fragment says the output was elided
    assert [g["index"] for g in gt["gpus"]] == [0, 1, 2, 6, 7]
    assert gt["elided"] is True and any("elided" in n for n in gt["notes"])
    assert {(g["name"], g["links"]) for g in gt["gpus"]} == {("NVIDIA H800", 8)}
    assert gt["gpus"][0]["uuid"] == "GPU-34bf77d1-c686-6821-79a8-32d326c5039c"
    assert len(gt["links"]) == 40
    assert gt["links"][0] == {"gpu": 0, "link": 0, "tx_kib": 25305739, "rx_kib": 25554089}
    gpu2_link1 = next(link for link in gt["links"] if (link["gpu"], link["link"]) == (2, 1))
    assert (gpu2_link1["tx_kib"], gpu2_link1["rx_kib"]) == (591684300, 625042437)
    last = gt["links"][-1]
    assert (last["gpu"], last["link"], last["tx_kib"], last["rx_kib"]) == (7, 7, 8520721, 8731188)


def test_throughput_idle_data_counters_of_one_gpu(corpus: Path) -> None:
    gt = _file(corpus, nvlink_throughput.parse_throughput, GT_DATA_IDLE)
    assert gt["counter"] == "data"
    assert [(g["index"], g["name"], g["links"]) for g in gt["gpus"]] == [(0, "NVIDIA H800", 8)]
    assert [link["link"] for link in gt["links"]] == list(range(8))
    assert gt["links"][7] == {"gpu": 0, "link": 7, "tx_kib": 5861984, "rx_kib": 5863146}
    assert gt["links"][3]["rx_kib"] == 5861984 and gt["links"][0]["tx_kib"] == 5863784
    assert gt["elided"] is False and gt["notes"] == []


def test_throughput_reads_the_native_tab_indent_like_the_pasted_spaces(corpus: Path) -> None:
    text = (corpus / FAMILY / GT_DATA_IDLE).read_text(encoding="utf-8")
    assert "\t" not in text  # TABs rendered as 9 spaces in the source (PROVENANCE.md)
    tabs = text.replace("         Link", "\t Link")
    assert nvlink_throughput.parse_throughput(tabs) == nvlink_throughput.parse_throughput(text)


def test_throughput_value_that_is_not_kib_is_null_and_noted() -> None:
    text = "GPU 0: X (UUID: GPU-y)\n\t Link 0: Data Tx: N/A\n\t Link 0: Data Rx: 12 KiB\n"
    gt = _parse(nvlink_throughput.parse_throughput, text)
    assert gt["links"] == [{"gpu": 0, "link": 0, "tx_kib": None, "rx_kib": 12}]
    assert gt["gpus"][0]["note"] == "Link 0: Data Tx: N/A"


def test_throughput_refuses_mixed_kinds_and_other_sub_commands(corpus: Path) -> None:
    mixed = "GPU 0: X\n\t Link 0: Data Tx: 1 KiB\n\t Link 0: Raw Rx: 2 KiB\n"
    with pytest.raises(ParseError, match="mixed"):
        nvlink_throughput.parse_throughput(mixed)
    for name in ("nvlink-status-a100-sxm4-80gb-azure-8gpu-12links.txt", "nvlink-e-h100-excerpt-elided-mlengineering.txt"):
        with pytest.raises(ParseError, match="-gt"):
            nvlink_throughput.parse_throughput((corpus / FAMILY / name).read_text(encoding="utf-8"))
    raw = (corpus / FAMILY / GT_RAW).read_text(encoding="utf-8")
    for parse in (nvlink_status.parse_status, nvlink_caps.parse_caps):
        with pytest.raises(ParseError):
            parse(raw)


def test_throughput_collector_matches_contract() -> None:
    assert_collector_table(
        nvlink_throughput.COLLECTORS,
        {"nvlink_throughput": (("nvidia-smi", "nvlink", "-gt", "d"), "/nvlink/throughput", False)},
    )
    (collector,) = nvlink_throughput.COLLECTORS
    assert collector.family == "nvlink" and collector.corpus == (FAMILY,)
    assert_closed_and_described(collector.schema)


# --- unreadable output -----------------------------------------------------------------------

GARBAGE = ["bash: nvidia-smi: command not found\n", "", "\x8f\x02\xffrandom\x00bytes\n\x07",
           "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.\n"]


@pytest.mark.parametrize("parse", list(SCHEMAS), ids=lambda f: f.__name__)
@pytest.mark.parametrize("text", GARBAGE, ids=["not-found", "empty", "bytes", "smi-failed"])
def test_garbage_raises_parse_error(parse, text: str) -> None:
    with pytest.raises(ParseError):
        parse(text)


def test_output_of_another_sub_command_is_refused(corpus: Path) -> None:
    text = (corpus / FAMILY / "nvlink-status-a100-sxm4-80gb-azure-8gpu-12links.txt").read_text(encoding="utf-8")
    with pytest.raises(ParseError):
        nvlink_errors.parse_errors(text)
    with pytest.raises(ParseError):
        nvlink_caps.parse_caps(text)


# --- collector table --------------------------------------------------------------------------


def test_collector_table_matches_contract() -> None:
    assert_collector_table(
        NVLINK_COLLECTORS,
        {
            "nvlink_status": (("nvidia-smi", "nvlink", "-s"), "/nvlink/status", True),
            "nvlink_errors": (("nvidia-smi", "nvlink", "-e"), "/nvlink/errors", True),
            "nvlink_caps": (("nvidia-smi", "nvlink", "-c"), "/nvlink/caps", True),
            "nvlink_info": (("nvidia-smi", "nvlink", "-info"), "/nvlink/info", False),
        },
    )


@pytest.mark.parametrize("collector", NVLINK_COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


# Blackwell `nvidia-smi nvlink -e`: the counter names a live B300 prints on driver 595.91.07 (public capture notes,
# code-index file id 71075276249); the line layout is the older counters' and the values are made up. No real
# Blackwell `nvlink -e` output is in the corpus yet: this format is documented-only.
NVLINK5_E = """GPU 0: NVIDIA B300 SXM6 AC (UUID: GPU-bce5282f-d716-d136-5759-b7181a7a55df)
\t Link 0: Malformed packet Errors: 0
\t Link 0: Buffer overrun Errors: 0
\t Link 0: Rx Errors: 0
\t Link 0: Rx remote Errors: 0
\t Link 0: Rx General Errors: 0
\t Link 0: Local link integrity Errors: 0
\t Link 0: Tx discards: 0
\t Link 0: Link recovery successful events: 1
\t Link 0: Link recovery failed events: 2
\t Link 0: Total link recovery events: 3
\t Link 0: Effective Errors: 7
\t Link 0: Effective BER: 15e-255
\t Link 0: Symbol Errors: 0
\t Link 0: Symbol BER: 15e-255
\t Link 0: FEC Errors - 0: 36140749276
\t Link 0: FEC Errors - 1: 4
\t Link 0: Raw BER Lane 0: 2061
\t Link 0: Raw Errors Lane 0: 82
"""


def test_nvlink5_error_counters_of_blackwell_drivers() -> None:
    errors = nvlink_errors.parse_errors(NVLINK5_E)
    assert_valid(nvlink_errors.ERRORS_SCHEMA, errors)
    (link,) = errors["links"]
    nvl5 = link["nvlink5"]
    assert (nvl5["link_recovery_successful"], nvl5["link_recovery_failed"], nvl5["link_recovery_total"]) == (1, 2, 3)
    assert nvl5["effective_errors"] == 7 and nvl5["effective_ber"] == nvl5["symbol_ber"] == 15e-255
    assert nvl5["fec_errors"] == {"0": 36140749276, "1": 4}
    # "Link recovery ... events" are not the Hopper "Recovery Errors": the old fields stay unknown
    assert (link["replay"], link["recovery"], link["crc"]) == (None, None, None)
    assert errors["totals"] == {"replay": 0, "recovery": 0, "crc": 0}
    assert link["counters"]["Raw Errors Lane 0"] == 82  # pre-FEC lane counters are kept as printed, not judged


def test_hopper_counters_have_no_nvlink5_block(corpus: Path) -> None:
    errors = _file(corpus, nvlink_errors.parse_errors, "nvlink-e-h100-excerpt-elided-mlengineering.txt")
    assert {link["nvlink5"] for link in errors["links"]} == {None}


def test_a_gpu_block_printed_like_another_is_read_once_and_each_gpu_gets_its_own_links() -> None:
    # A node's GPUs (and a fleet's nodes) list the same capabilities and mostly the same (zero) counters: each
    # distinct block is read once, and every GPU's link records are its own objects under its own index.
    def text(line: str) -> str:
        return "".join(f"GPU {g}: NVIDIA H100 80GB HBM3 (UUID: GPU-{g}0)\n" +
                       "".join("\t " + line.format(link=k) + "\n" for k in range(2)) for g in range(3))

    nvlink_caps._read_block.cache_clear()
    caps = nvlink_caps.parse_caps(text("Link {link}, P2P is supported: true\n\t Link {link}, Fast path: false"))
    assert nvlink_caps._read_block.cache_info().hits == 2
    assert [(x["gpu"], x["link"], x["p2p_supported"]) for x in caps["links"]] == [
        (g, k, True) for g in range(3) for k in range(2)]
    assert caps["links"][0]["other"] == {"Fast path": False} and caps["links"][0]["other"] is not caps["links"][2]["other"]
    assert [g["uuid"] for g in caps["gpus"]] == ["GPU-00", "GPU-10", "GPU-20"] and caps["p2p_all"] is True

    nvlink_errors._read_block.cache_clear()
    errors = nvlink_errors.parse_errors(text("Link {link}: Replay Errors: 0\n\t Link {link}: CRC Errors: 2"))
    assert nvlink_errors._read_block.cache_info().hits == 2
    assert [(x["gpu"], x["link"], x["crc"]) for x in errors["links"]] == [(g, k, 2) for g in range(3) for k in range(2)]
    assert errors["links"][0]["counters"] is not errors["links"][2]["counters"] and errors["totals"]["crc"] == 12
