"""perftest parser over every real output of ../shared/corpus/perftest: both sides, MB/sec and --report_gbits,
latency percentiles, --use_cuda runs, per-target sections, and the failures as ParseErrors with their real text."""

from __future__ import annotations

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.probes.perftest import (
    SCHEMA,
    parse_perftest,
    parse_perftest_output,
)
from fabricproof.collectors.probes.text import join_targets

from ..contract import assert_valid
from .probelib import assert_family, names, parsed_or_failed, read

FAMILY = "perftest"
SEND_LAT = "ib_send_lat-server-mlx5-ib-edr-class-2B-default-run.txt"
CX6_CLIENT = "ib_write_bw-a-cx6-hdr2x-a100-client-MBsec-conflicting-cpu-frequency-warnings.txt"
CX6_SERVER = "ib_write_bw-a-cx6-hdr2x-server-side-only-last-row.txt"
LOOPBACK = "ib_write_bw-loopback-ib0-hdr-class-8MiB-client-then-server-interleaved-superbench.txt"
COMPLETION = "ib_write_bw-roce-h200-gke-a3ultra-cx7-host-mem-FAIL-completion-error-status10-syndrom0x88.txt"
OCI = "ib_write_bw-roce-oci-4qp-rdma_cm-tos41-report_gbits-98Gbps.txt"
NO_MR = "ib_write_bw-use_cuda-FAIL-couldnt-allocate-MR-error14-no-dmabuf-flag-excerpt.txt"
DMABUF = "ib_write_bw-use_cuda-dmabuf-h200-gke-roce-mlx5_3-gpudirect-140Gbps.txt"
WRITE_LAT = "ib_write_lat-a-cx6-hdr2x-server-9-column-percentiles-with-cpu-freq-warnings.txt"

FAILURES = {
    COMPLETION: r"^perftest failed: Completion with error at client; Failed status 10: wr_id 0 syndrom 0x88; "
                r"Failed to complete run_iter_bw function successfully$",
    NO_MR: r"^perftest failed: Couldn't allocate MR with error=14; Failed to create MR; Couldn't create IB resources "
           r"\(GPU memory could not be registered for RDMA: nvidia-peermem not loaded",
}


def test_the_whole_family_is_walked():
    assert_family(FAMILY, 9, FAILURES, SCHEMA)


@pytest.mark.parametrize("name", names(FAMILY))
def test_every_corpus_file_parses_or_gives_its_parse_error(corpus, name):
    frag = parsed_or_failed(corpus, FAMILY, name, parse_perftest, SCHEMA, FAILURES)
    assert frag is None or all(run["rows"] for t in frag["targets"].values() for run in t["runs"])


def test_client_in_mb_per_sec_is_converted_to_gbits(corpus):
    """MB/sec is 2^20 bytes a second (perftest's format_factor): 23317.65 MB/sec is 195.603 Gb/s."""
    t = parse_perftest(read(corpus, FAMILY, CX6_CLIENT))["targets"]["mlx5_0"]
    (run,) = t["runs"]
    assert (run["side"], run["units"], run["transport"], run["link_type"], run["mtu"], run["qps"], run["tx_depth"]) == (
        "client", "MB/sec", "IB", "IB", 4096, 1, 128)
    assert (run["local_lid"], run["remote_lid"], run["rdma_cm"], run["cuda"]) == ("0x40", "0x6e", False, None)
    assert len(run["rows"]) == 23 and run["cpu_freq_warnings"] == 23
    assert run["rows"][0] == {"size_bytes": 2, "iterations": 5000, "bw_peak": 4.96, "bw_average": 4.94,
                              "msg_rate_mpps": 2.588087}
    assert (t["size_bytes"], t["bw_average_gbps"], t["bw_peak_gbps"], t["msg_rate_mpps"], t["gpu_memory"]) == (
        8388608, 195.603, 195.68, 0.002915, False)


def test_server_side_and_a_loopback_holding_both_sides(corpus):
    server = parse_perftest(read(corpus, FAMILY, CX6_SERVER))["targets"]["mlx5_0"]
    assert [r["side"] for r in server["runs"]] == ["server"] and server["runs"][0]["tx_depth"] is None
    assert server["bw_average_gbps"] == 195.603
    both = parse_perftest(read(corpus, FAMILY, LOOPBACK))["targets"]["ib0"]
    assert [(r["side"], r["local_lid"]) for r in both["runs"]] == [("client", "0xd06"), ("server", "0xd06")]
    assert (both["bw_average_gbps"], both["runs"][0]["rows"][0]["iterations"]) == (201.802, 20000)


def test_a_use_cuda_server_is_a_server_though_its_cuda_set_up_comes_between_banner_and_title(corpus):
    # Newer perftest prints the server banner, then sets CUDA up (a dozen lines), then the title. The corpus has a
    # --use_cuda client; its server, as the server prints it, is that output with the banner first.
    client = read(corpus, FAMILY, DMABUF)
    banner = " " + "*" * 38 + "\n* Waiting for client to connect... *\n " + "*" * 38 + "\n"
    (run,) = parse_perftest(banner + client)["targets"]["mlx5_3"]["runs"]
    assert run["side"] == "server" and run["cuda"] is not None
    (as_client,) = parse_perftest(client)["targets"]["mlx5_3"]["runs"]
    assert as_client["side"] == "client"


def test_report_gbits_over_roce_with_four_qps(corpus):
    t = parse_perftest(read(corpus, FAMILY, OCI))["targets"]["mlx5_5"]
    (run,) = t["runs"]
    assert (run["units"], run["qps"], run["gid_index"], run["rdma_cm"], run["exchange"], run["tos"]) == (
        "Gb/sec", 4, 3, True, "rdma_cm", 41)
    assert run["local_gid"] == "00:00:00:00:00:00:00:00:00:00:255:255:10:224:04:233"
    assert (t["size_bytes"], t["bw_average_gbps"]) == (65536, 98.01)


def test_use_cuda_dmabuf_run(corpus):
    t = parse_perftest(read(corpus, FAMILY, DMABUF))["targets"]["mlx5_3"]
    assert t["gpu_memory"] is True
    assert t["runs"][0]["cuda"] == {"device": 0, "name": "NVIDIA H200", "dmabuf": True}
    assert (t["bw_average_gbps"], t["bw_peak_gbps"], len(t["runs"][0]["rows"])) == (140.4, 140.55, 23)


def test_latency_percentiles_and_the_smallest_size(corpus):
    t = parse_perftest(read(corpus, FAMILY, WRITE_LAT))["targets"]["mlx5_0"]
    assert (t["test"], t["kind"], t["size_bytes"]) == ("RDMA_Write Latency", "lat", 2)
    assert (t["t_min_us"], t["t_max_us"], t["t_typical_us"], t["t_avg_us"], t["t_stdev_us"], t["p99_us"], t["p99_9_us"]) == (
        1.79, 5.36, 1.87, 1.88, 0.19, 2.04, 5.36)
    assert t["runs"][0]["rows"][-1]["size_bytes"] == 8388608 and t["runs"][0]["cpu_freq_warnings"] == 46
    send = parse_perftest(read(corpus, FAMILY, SEND_LAT))["targets"]["mlx5_0"]
    assert (send["test"], send["t_typical_us"], send["runs"][0]["rx_depth"], send["runs"][0]["max_inline_bytes"]) == (
        "Send Latency", 1.0, 512, 236)


def test_targets_come_from_section_titles(corpus):
    """Phase B joins one output per target (HCA, peer) under '==> name <==' titles; one failing target fails all."""
    joined = join_targets({"mlx5_0": read(corpus, FAMILY, CX6_CLIENT), "mlx5_3": read(corpus, FAMILY, DMABUF)})
    frag = parse_perftest(joined)
    assert_valid(SCHEMA, frag)
    assert {k: v["bw_average_gbps"] for k, v in frag["targets"].items()} == {"mlx5_0": 195.603, "mlx5_3": 140.4}
    broken = join_targets({"mlx5_0": read(corpus, FAMILY, CX6_CLIENT), "mlx5_1": read(corpus, FAMILY, NO_MR)})
    with pytest.raises(ParseError, match=r"^mlx5_1: perftest failed: Couldn't allocate MR"):
        parse_perftest(broken)


def test_rows_before_a_completion_error_give_no_figure(corpus):
    """The A3 Ultra sweep reaches 381.41 Gb/s at 64 KiB and then fails: no bandwidth is reported."""
    with pytest.raises(ParseError) as err:
        parse_perftest_output(read(corpus, FAMILY, COMPLETION))
    assert "381" not in str(err.value)


BW_HEADER = ("                    RDMA_Write BW Test\n-------------------------\n"
             " #bytes #iterations BW peak[Gb/sec] BW average[Gb/sec] MsgRate[Mpps]\n")


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("random words\n", "not perftest output"),
    ("                    RDMA_Write BW Test\n Device : mlx5_0\n----------------------------------------\n",
     "printed no result row"),
    (BW_HEADER + " 65536 5000 98.0 x 0.1\n", "BW average cell 'x'"),
    (BW_HEADER + " 65536 5000 98.0\n", "3 cells under 5 columns"),
])
def test_garbage_gives_a_one_line_parse_error(text, reason):
    with pytest.raises(ParseError, match=reason) as err:
        parse_perftest(text)
    assert "\n" not in str(err.value)
