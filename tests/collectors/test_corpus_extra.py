"""Real outputs in the formats operators collect them (tests/corpus-extra, issue 25 points 1-3): every file parses
with its family's collector, or gives the ParseError declared here; and what each class of them shows is read."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fabricproof.collectors import COLLECTORS
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.subnet import FABRIC_COLLECTORS

from .contract import assert_valid

EXTRA = Path(__file__).resolve().parents[1] / "corpus-extra"
#: family folder -> the collector whose parser reads it
READERS = {"kernel-log": "kernel_log", "perftest": "ib_pair_bw", "nvbandwidth": "nvbandwidth", "ibstat": "ibstat",
           "mlxlink": "mlxlink", "dcgmi": "dcgm_diag", "nccl-tests": "nccl_all_reduce",
           "nvidia-smi-nvlink": "nvlink_status"}
#: ib-fabric files are read by the fabric-scope collector of the tool their name starts with (collectors.subnet)
FABRIC_READERS = {"ibnetdiscover": "ibnetdiscover", "iblinkinfo": "iblinkinfo", "ibqueryerrors": "ibqueryerrors",
                  "sminfo": "sminfo_fabric"}
#: "family/name" -> the ParseError a file must give (a failed run, or a layout that must never be merged)
FAILURES: dict[str, str] = {}


def _files() -> list[str]:
    return sorted(f"{p.parent.name}/{p.name}" for p in EXTRA.glob("*/*") if p.is_file())


def read(rel: str) -> str:
    return (EXTRA / rel).read_text(encoding="utf-8")


def parse(rel: str) -> dict:
    family, name = rel.split("/")
    if family == "ib-fabric":
        return FABRIC_COLLECTORS[FABRIC_READERS[name.split("-")[0]]].parse(read(rel)).to_dict()
    collector = COLLECTORS[READERS[rel.split("/")[0]]]
    fragment = collector.parse(read(rel))
    assert_valid(collector.schema, fragment)
    return fragment


def test_every_file_has_its_provenance_row_and_a_reader() -> None:
    provenance = (EXTRA / "PROVENANCE.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| ([^|\s]+/[^|\s]+) \|", provenance, re.MULTILINE))
    assert rows == set(_files())
    assert {rel.split("/")[0] for rel in _files()} <= READERS.keys() | {"ib-fabric"}


@pytest.mark.parametrize("rel", _files())
def test_every_file_parses_or_gives_its_declared_error(rel: str) -> None:
    if rel in FAILURES:
        with pytest.raises(ParseError, match=FAILURES[rel]):
            parse(rel)
    else:
        parse(rel)


# ---------------------------------------------------------------- 1. kernel logs as operators collect them

KERNEL = {
    # file -> (lines read, Xid codes, the recovery actions announced)
    "kernel-bare-prefix-xid-45-after-nvlink5-xid-149-145-open-gpu-kernel-modules-1150-excerpt.txt": (7, [45], []),
    "journal-localized-month-pl-kwi-xid-38-109-rtx-open-gpu-kernel-modules-1045-excerpt.txt": (7, [38, 109], []),
    "journalctl-b-syslog-host-fedora-xid-120-gsp-crashcat-elided-excerpt.txt": (14, [120], []),
    "talosctl-dmesg-node-kern-warning-iso-mem-info-continuation-lines-talos-rpi5-11-excerpt.txt": (11, [], []),
    "journalctl-o-json-kernel-transport-ext4-errors-yandex-walle-fixture.txt": (2, [], []),
    "talosctl-dmesg-node-ip-kern-info-notice-padded-levels-audit-talos-seccomp-guide.txt": (18, [], []),
    "talosctl-dmesg-a100-8gpu-nvidia-call-trace-node-ip-vllm-40652-excerpt.txt": (12, [], []),
    "dmesg-gb200-xid-154-drain-and-reset-to-gpu-reset-required-gpud-kmsg-test-single-line.txt": (
        1, [154], [("0019:01:00", "GPU Reset Required")]),
}


@pytest.mark.parametrize("name", sorted(KERNEL))
def test_kernel_log_formats_are_read(name: str) -> None:
    frag = parse(f"kernel-log/{name}")
    assert (frag["lines"], frag["xid_codes"], [(a["bdf"], a["action"]) for a in frag["recovery_actions"]]) == KERNEL[name]


def test_bare_kernel_prefix_lines_name_each_gpu() -> None:
    frag = parse("kernel-log/kernel-bare-prefix-xid-45-after-nvlink5-xid-149-145-open-gpu-kernel-modules-1150-excerpt.txt")
    assert sorted({x["bdf"] for x in frag["xids"]}) == ["0000:97:00", "0000:ba:00", "0000:dc:00", "0000:ed:00"]
    assert frag["notes"] == []  # a log format, not pasted driver messages


def test_a_gpu_reset_required_is_reported_in_every_collected_format() -> None:
    """The Xid 154 line, as each collection format prints it: the recovery action is read from every one."""
    msg = "NVRM: Xid (PCI:0019:01:00): 154, GPU recovery action changed from 0x4 (Drain and Reset) to 0x1 (GPU Reset Required)"
    assert read("kernel-log/dmesg-gb200-xid-154-drain-and-reset-to-gpu-reset-required-gpud-kmsg-test-single-line.txt"
                ).strip().endswith(msg)
    # the prefixes of the captures above, in front of that line (formats documented by dmesg, journalctl, talosctl)
    prefixes = ["kernel: ", "kwi 15 07:56:59 testowy kernel: ", "Aug 19 21:36:23.123456 fedora kernel: ",
                "2026-03-11T10:37:00+0100 dev kernel: ", "mc-pt1-pkp-srv-1a: kern:     err: [2025-09-13T20:46:45.253118849Z]: ",
                "kern  :err   : [171167.897562] ", "4,1234,171167897562,-;", "Wed 2026-03-11 10:37:00 CET dev kernel: ",
                "1773221820.123456 dev kernel: "]
    for prefix in prefixes:
        frag = COLLECTORS["kernel_log"].parse(prefix + msg + "\n")
        assert [(a["bdf"], a["action"]) for a in frag["recovery_actions"]] == [("0019:01:00", "GPU Reset Required")], prefix
    json_line = read("kernel-log/journalctl-o-json-kernel-transport-ext4-errors-yandex-walle-fixture.txt").splitlines()[0]
    record = json_line.replace('"MESSAGE" : "EXT4-fs error', '"MESSAGE" : "' + msg.replace('"', '\\"') + ' EXT4-fs error')
    frag = COLLECTORS["kernel_log"].parse(record + "\n")
    assert [(a["bdf"], a["action"]) for a in frag["recovery_actions"]] == [("0019:01:00", "GPU Reset Required")]


def test_journal_json_messages_stored_as_bytes_are_read() -> None:
    """journald stores a MESSAGE that is not valid text as an array of bytes (journalctl -o json)."""
    line = read("kernel-log/journalctl-o-json-kernel-transport-ext4-errors-yandex-walle-fixture.txt").splitlines()[0]
    as_bytes = re.sub(r'"MESSAGE" : "[^"]*"', '"MESSAGE" : [' + ",".join(str(b) for b in b"NVRM: Xid (PCI:0000:9b:00): 79, "
                      b"pid='<unknown>', name=<unknown>, GPU has fallen off the bus.") + "]", line)
    frag = COLLECTORS["kernel_log"].parse(as_bytes)
    assert (frag["xid_codes"], frag["fallen_off_bus"]) == ([79], ["0000:9b:00"])


@pytest.mark.parametrize("text", ['{"MESSAGE": "x"}\n', '{"__REALTIME_TIMESTAMP": "1", "MESSAGE": "x"} trailing\n',
                                  "[1, 2, 3]\n"])
def test_json_that_is_not_journal_records_is_refused(text: str) -> None:
    with pytest.raises(ParseError, match="no kernel log lines found"):
        COLLECTORS["kernel_log"].parse(text)


# ---------------------------------------------------------------- 2. tables with more columns or fewer lines

def test_perftest_cpu_util_column_is_read_by_its_header() -> None:
    (target,) = parse("perftest/ib_write_bw-cpu_util-report_gbits-roce-gb10-cx7-back-to-back-6-columns-qpn-masked.txt"
                      )["targets"].values()
    (run,) = target["runs"]
    assert run["columns"][-1] == "CPU_Util[%]" and len(run["columns"]) == 6
    assert run["rows"] == [{"size_bytes": 65536, "iterations": 1059332, "bw_peak": 0.0, "bw_average": 92.57,
                            "msg_rate_mpps": 0.176557, "cpu_util_pct": 5.07}]
    assert (target["bw_average_gbps"], target["device"]) == (92.57, "roceP2p1s0f0")


def test_perftest_a_column_it_does_not_know_is_read_past() -> None:
    text = read("perftest/ib_write_bw-cpu_util-report_gbits-roce-gb10-cx7-back-to-back-6-columns-qpn-masked.txt")
    (target,) = COLLECTORS["ib_pair_bw"].parse(text.replace("CPU_Util[%]", "Something[x]"))["targets"].values()
    assert target["runs"][0]["rows"][0]["bw_average"] == 92.57 and "cpu_util_pct" not in target["runs"][0]["rows"][0]


@pytest.mark.parametrize(("name", "test", "figure"), [
    ("ib_read_bw-a-mlx4-connectx3-ib-outstand-reads-16-out-in-addresses.txt", "RDMA_Read BW", ("bw_average_gbps", 30.754)),
    ("ib_read_lat-a-mlx4-connectx3-ib-outstand-reads-16-9-columns.txt", "RDMA_Read Latency", ("t_typical_us", 1.99)),
])
def test_perftest_read_tests_keep_their_outstanding_reads(name: str, test: str, figure: tuple[str, float]) -> None:
    (target,) = parse(f"perftest/{name}")["targets"].values()
    (run,) = target["runs"]
    assert (target["test"], run["outstanding_reads"], run["local_lid"], run["remote_lid"]) == (test, 16, "0x03", "0x0a")
    assert (len(run["rows"]), target[figure[0]]) == (23, figure[1])


def test_ibstat_separator_lines_between_devices_are_not_errors() -> None:
    frag = parse("ibstat/ibstat-loop-separator-mlx5_1-bf3-integrated-cx7-ib-edr-linkup-but-down-no-sm.txt")
    assert [h["name"] for h in frag["hcas"]] == ["mlx5_0", "mlx5_1"] and frag["errors"] == []
    assert [(p["ca"], p["state"], p["phys_state"], p["rate"]) for p in frag["ports"]] == [
        ("mlx5_0", "Down", "LinkUp", 100), ("mlx5_1", "Down", "LinkUp", 100)]
    assert frag["notes"] == ["1 separator line(s) between devices ignored"]


def test_nvbandwidth_real_paste_with_device_list_and_running_line_elided() -> None:
    """nvbandwidth#50: '...' stands for the device list and the 'Running ...' line; the SUM line names the test."""
    frag = parse("nvbandwidth/nvbandwidth-v0.8-6x-rtx-a6000-d2d-read-ce-device-list-and-running-line-elided-nvbandwidth-50.txt")
    (name, case), = frag["testcases"].items()
    assert (name, case["sum"], case["summary"]["min"], case["summary"]["min_pair"]) == (
        "device_to_device_memcpy_read_ce", 715.53, 21.8, {"row": 0, "column": 5})
    assert frag["notes"] == ["line 8: output elided in the source (...)",
                             "'Running device_to_device_memcpy_read_ce.' line elided: testcase named by its SUM line",
                             "no device list (elided in the source, or not printed): device names unknown"]


def test_nvbandwidth_quoted_running_lines_name_their_testcases() -> None:
    """nvbandwidth#24 pasted each 'Running ...' line behind a markdown quote mark and no SUM line."""
    frag = parse("nvbandwidth/nvbandwidth-h100-h2d-d2h-memcpy-sm-quoted-running-lines-no-header-no-sum-nvbandwidth-24.txt")
    assert {k: (v["sum"], v["summary"]["min"]) for k, v in frag["testcases"].items()} == {
        "host_to_device_memcpy_sm": (None, 35.03), "device_to_host_memcpy_sm": (None, 52.76)}


def test_nvbandwidth_paste_without_device_list_and_running_line(corpus: Path) -> None:
    """A derived input beside the real pastes above: the corpus's v0.10 H100 run cut at its matrix title (version,
    device and 'Running ...' lines gone). The SUM line names the testcase; the notes say what is missing."""
    text = (corpus / "nvbandwidth" / "h100-8gpu-v0.10-driver595.71.05-d2d-read-ce-cov-line-no-device-list.txt").read_text()
    paste = text[text.index("memcpy CE GPU(row)"):]
    frag = COLLECTORS["nvbandwidth"].parse(paste)
    assert_valid(COLLECTORS["nvbandwidth"].schema, frag)
    (name, case), = frag["testcases"].items()
    assert (name, case["sum"], case["summary"]["min"], case["cov"]) == ("device_to_device_memcpy_read_ce", 22126.64,
                                                                         395.05, 0.0)
    assert frag["notes"] == ["'Running device_to_device_memcpy_read_ce.' line elided: testcase named by its SUM line",
                             "no device list (elided in the source, or not printed): device names unknown"]
    whole = COLLECTORS["nvbandwidth"].parse(text)
    assert whole["notes"] == [] and whole["testcases"]["device_to_device_memcpy_read_ce"]["summary"] == case["summary"]


def test_nvbandwidth_every_testcase_of_a_run_without_running_lines_is_named_by_its_sum(corpus: Path) -> None:
    """A derived input: the corpus's full v0.2 H800 run (30 testcases, bidirectional ones with a SUM line per
    matrix) with every 'Running ...' line cut. Each testcase is named by its SUM line and reads as in the whole run."""
    whole_text = (corpus / "nvbandwidth" / "h800-8gpu-full-run-v0.2-driver525.105.17-all-30-testcases.txt").read_text()
    whole = COLLECTORS["nvbandwidth"].parse(whole_text)
    paste = COLLECTORS["nvbandwidth"].parse(re.sub(r"(?m)^Running .*\n", "", whole_text))
    assert list(paste["testcases"]) == list(whole["testcases"]) and len(paste["testcases"]) == 30
    assert all(paste["testcases"][k]["summary"] == v["summary"] and paste["testcases"][k]["sums"] == v["sums"]
               for k, v in whole["testcases"].items())
    assert len(paste["notes"]) == 30 and whole["notes"] == []


def test_nvbandwidth_a_matrix_nothing_names_is_refused(corpus: Path) -> None:
    text = (corpus / "nvbandwidth" / "h100-8gpu-v0.10-driver595.71.05-d2d-read-ce-cov-line-no-device-list.txt").read_text()
    paste = text[text.index("memcpy CE GPU(row)"):text.index("SUM ")]
    with pytest.raises(ParseError, match="without its testcase name"):
        COLLECTORS["nvbandwidth"].parse(paste)


# ---------------------------------------------------------------- 3. no plausible answer that hides a fault

def test_dcgm4_level_3_with_7_of_8_tests_skipped_is_not_proven() -> None:
    """The issue's case, real: DCGM 4.4.2 -r 3 in a pod, software Pass and the 7 hardware tests Skip (was passed)."""
    frag = parse("dcgmi/diag-r3-dcgm4.4.2-k8s-pod-1gpu-2e12-software-pass-7-of-8-skip-per-gpu-rows.txt")
    assert (frag["passed"], frag["proven"], frag["failed_tests"], frag["dcgm_version"]) == (False, None, [], "4.4.2")
    assert frag["skipped_tests"] == ["memory", "diagnostic", "nvbandwidth", "pcie", "memory_bandwidth",
                                     "targeted_stress", "targeted_power"]
    assert frag["notes"] == ["not proven: 7 of 7 hardware tests skipped (memory, diagnostic, nvbandwidth, pcie, "
                             "memory_bandwidth, targeted_stress, targeted_power)"]


def test_dcgm_a_failed_run_that_also_skipped_says_both() -> None:
    frag = parse("dcgmi/diag-r4-gpulist0-rtx2060s-persistence-mode-fail-wrapped-error-memtest-pass-others-skip.txt")
    assert (frag["passed"], frag["proven"], frag["failed_tests"]) == (False, None, ["Persistence Mode"])
    assert [t["name"] for t in frag["tests"] if t["result"] == "pass" and t["category"] == "Stress"] == ["Memtest"]
    assert "Memtest" not in frag["skipped_tests"] and len(frag["skipped_tests"]) == 6


def test_nvlink_a_gpu_saying_all_links_inactive_counts_them() -> None:
    """GPU 2 of three RTX A6000 prints no link; GPUs 0 and 1 of the same model list 4: its 4 links are inactive (the
    count was 0, so the fault showed only in links_active 0 and a note)."""
    frag = parse("nvidia-smi-nvlink/nvlink-s-3x-rtx-a6000-4links-gpu2-all-links-inactive.txt")
    assert [(g["links_total"], g["links_active"], g["links_inactive"]) for g in frag["gpus"]] == [
        (4, 4, 0), (4, 4, 0), (4, 0, 4)]
    assert frag["gpus"][2]["inactive_links"] == [0, 1, 2, 3]
    assert (frag["links_inactive_total"], frag["links_active_total"], frag["links_per_gpu_min"]) == (4, 8, 0)


def test_nvlink_all_gpus_saying_all_links_inactive_leave_the_count_unknown_not_zero() -> None:
    """Two A100 PCIe without a bridge: no GPU lists its links, so how many are inactive is not printed."""
    frag = parse("nvidia-smi-nvlink/nvlink-s-2x-a100-pcie-40gb-no-bridge-both-all-links-inactive-indented-driver555.txt")
    assert [(g["links_total"], g["links_active"], g["links_inactive"]) for g in frag["gpus"]] == [(None, 0, None)] * 2
    assert all("not printed" in g["note"] for g in frag["gpus"]) and frag["links_per_gpu_min"] == 0


def test_mlxlink_one_record_per_heading_and_the_worst_raw_ber_stays() -> None:
    frag = parse("mlxlink/mlxlink-show_counters-grep-loop-8x-cx6-fec-counters-headings-mlx5_3-raw-ber-1E-7-brev-a100.txt")
    assert [d["device"] for d in frag["devices"]] == [f"mlx5_{i}" for i in range(8)]
    assert [d["raw_ber"] for d in frag["devices"]] == [1e-8, 9e-9, 3e-8, 1e-7, 2e-8, 6e-8, 4e-9, 2e-8]
    assert max(frag["devices"], key=lambda d: d["raw_ber"])["device"] == "mlx5_3"
    assert {d["effective_ber"] for d in frag["devices"]} == {15e-255} and {d["effective_errors"] for d in frag["devices"]} == {0}


def test_mlxlink_full_outputs_under_operator_headings() -> None:
    frag = parse("mlxlink/mlxlink-show_ber_monitor-loop-8x-cx6-mt4123_pciconf0-7-headings-brev-a100.txt")
    assert [(d["device"], d["state"], d["width"]) for d in frag["devices"]] == [
        (f"mt4123_pciconf{i}", "Active", "2x") for i in range(8)]
    assert len(frag["notes"]) == 8 and all(len(d["errors"]) == 1 for d in frag["devices"])


def test_mlxlink_several_devices_without_headings_are_refused_never_merged() -> None:
    text = read("mlxlink/mlxlink-show_counters-grep-loop-8x-cx6-fec-counters-headings-mlx5_3-raw-ber-1E-7-brev-a100.txt")
    headless = re.sub(r"(?m)^=+ .* =+\n", "", text)
    with pytest.raises(ParseError, match="several devices without a device heading"):
        COLLECTORS["mlxlink"].parse(headless)
    # two devices' outputs under one heading are no more one device than under none
    first = text.split("========== mlx5_1")[0]
    with pytest.raises(ParseError, match="under the heading 'mlx5_0'"):
        COLLECTORS["mlxlink"].parse(first + headless)
    # a loop that separates devices with dashes, as the ibstat capture does ("---- mlx5_1 ----"), names them too
    dashed = COLLECTORS["mlxlink"].parse(re.sub(r"(?m)^=+ (\S+) .* =+$", r"---- \1 ----", text))
    assert [(d["device"], d["raw_ber"]) for d in dashed["devices"]][3] == ("mlx5_3", 1e-7)
    # a shell prompt and the loop before the first heading belong to no device
    prompt = 'user@host:~$ for i in $(seq 0 7); do\n  echo "========== mlx5_$i FEC Counters =========="\ndone\n'
    assert [d["device"] for d in COLLECTORS["mlxlink"].parse(prompt + text)["devices"]] == [f"mlx5_{i}" for i in range(8)]
