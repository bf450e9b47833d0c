"""nccl-tests parser over every real output of ../shared/corpus/nccl-tests (and three launcher samples):
anchors the files show, old and new layouts, NCCL INFO facts, and every failure as a ParseError, never a figure."""

from __future__ import annotations

import pytest
from fabricproof.collectors.base import ParseError
from fabricproof.collectors.probes.nccl_tests import SCHEMA, parse_nccl_tests

from .probelib import assert_family, names, parsed_or_failed, read, sample

FAMILY = "nccl-tests"
H100_1NODE = "all-reduce-h100-1node-8gpu-tests2.17.8-nccl2.29.2-wrong-col-maxbytes-reduced.txt"
OLD_ALLREDUCE = "all-reduce-a100-sxm4-40gb-1proc-8gpu-old-format-error-col-na-validation0.txt"
OLD_ALLTOALL = "alltoall-a100-sxm4-40gb-1proc-8gpu-old-format-empty-redop-col.txt"
ALLTOALL_80 = "alltoall-h100-10node-80gpu-multinode-tests2.17.8-inplace-wrong-na.txt"
V100_OOB = "all-gather-v100-8gpu-nccl2.5-4GiB-out-of-bounds-2-FAILED-error-1e+00-no-hash-prefix.txt"
POLARIS_TCP = "all-reduce-a100-40gb-polaris-2node-8rank-default-env-tcp-LOW-2.97GBps.txt"
POLARIS_540 = "all-reduce-a100-40gb-polaris-540node-2160rank-scale.txt"
B200_GKE = "blackwell-b200-gke-a4-2node-16rank-all-gather-nccl2.26.6-version-line.txt"
GB200_RACK = "blackwell-gb200-nvl72-1rack-72rank-all-reduce-nccl2.26.2-excerpt.txt"
GB200_OCI = "blackwell-gb200-oci-2tray-8rank-mnnvl-all-reduce-with-nccl-info-lines-excerpt.txt"
AWS_EFA = "blackwell-rtx-pro-6000-aws-g7e-2node-efa-all-reduce-NCCL-DEBUG-INFO-GDR-disabled.txt"
SENDRECV = "sendrecv-h100-2node-8rank-DEGRADED-5.7GBps-time-in-sci-notation.txt"
NETWORK_FAIL = "alltoall-h100-2node-8rank-FAIL-remote-process-exited-network-error.txt"
HANG = "blackwell-b200-gke-2node-4rank-all-gather-HANG-header-only-no-rows.txt"
SRUN = "nccl-tests-all-reduce-h100-2node-16rank-srun-label-prefix-nccl-tests-issue-290.txt"
MPIRUN = "nccl-tests-all-reduce-eks-2node-mpirun-tag-output-prefix-socket-fallback-excerpt.txt"
MPIRUN_ROOT = "nccl-tests-mpirun-openmpi4.1.4-refuses-root-no-run.txt"

#: The corpus files that are failed runs, and what their ParseError must say.
FAILURES = {
    NETWORK_FAIL: r"^nccl-tests failed: Test NCCL failure common\.cu:401 'remote process exited or there was a network",
    HANG: r"result header but no row: the run hung",
}


def test_the_whole_family_is_walked():
    assert_family(FAMILY, 15, FAILURES, SCHEMA)


@pytest.mark.parametrize("name", names(FAMILY))
def test_every_corpus_file_parses_or_gives_its_parse_error(corpus, name):
    frag = parsed_or_failed(corpus, FAMILY, name, parse_nccl_tests, SCHEMA, FAILURES)
    assert frag is None or (frag["rows"] and frag["busbw_gbps"] > 0 and frag["avg_busbw_gbps"] is not None)


def test_h100_single_node_new_layout(corpus):
    f = parse_nccl_tests(read(corpus, FAMILY, H100_1NODE))
    assert (f["test"], f["nccl_tests_version"], f["nccl_version"]) == ("all_reduce_perf", "2.17.8", "2.29.2")
    assert f["params"] == {"nthread": 1, "ngpus": 1, "min_bytes": 33554432, "max_bytes": 68719476736,
                           "step": "2(factor)", "warmup_iters": 5, "iters": 20, "validation": True}
    assert f["max_bytes_reduced_to"] == 26549638485
    assert (f["gpus"], f["hosts"]) == (8, ["cnode3-002"])
    assert f["devices"][7] == {"rank": 7, "group": 0, "pid": 4180135, "host": "cnode3-002", "device": 7,
                               "bus_id": "0000:df:00", "name": "NVIDIA H100 80GB HBM3"}
    first, last = f["rows"][0], f["rows"][-1]
    assert (first["size_bytes"], first["count"], first["type"], first["redop"], first["root"]) == (
        33554432, 4194304, "double", "sum", -1)
    assert first["out_of_place"] == {"time_us": 182.87, "algbw_gbps": 183.49, "busbw_gbps": 321.10, "wrong": 0,
                                     "error": None}
    assert (last["size_bytes"], last["out_of_place"]["busbw_gbps"], last["in_place"]["busbw_gbps"]) == (
        17179869184, 482.27, 482.12)
    assert (f["busbw_gbps"], f["busbw_size_bytes"], f["peak_busbw_gbps"]) == (482.12, 17179869184, 482.27)
    assert (f["busbw_out_of_place_gbps"], f["busbw_in_place_gbps"]) == (482.27, 482.12)
    assert (f["avg_busbw_gbps"], f["wrong_total"], f["out_of_bounds"], f["data_errors"]) == (437.957, 0, 0, 0)
    assert (f["net_transport"], f["gdr"]) == (None, None)


def test_old_layout_without_group_and_with_the_error_column(corpus):
    """Pre-2.11 nccl-tests: no Group column, `[0x00]` bus ids, an `error` column (N/A with validation 0), and an
    interleaved `NCCL INFO Launch mode Parallel` line before the first row."""
    f = parse_nccl_tests(read(corpus, FAMILY, OLD_ALLREDUCE))
    assert f["params"]["ngpus"] == 8 and f["params"]["validation"] is False
    assert {(d["group"], d["bus_id"], d["name"], d["host"]) for d in f["devices"]} == {
        (None, "0x00", "A100-SXM4-40GB", "localhost")}
    assert len(f["rows"]) == 34 and [r["size_bytes"] for r in f["rows"][:3]] == [0, 0, 4]
    assert f["rows"][-1]["out_of_place"] == {"time_us": 63896.0, "algbw_gbps": 134.44, "busbw_gbps": 235.26,
                                             "wrong": None, "error": None}
    assert (f["busbw_gbps"], f["avg_busbw_gbps"]) == (235.03, 68.4048)
    # validation 0 prints "Out of bounds values : 0 OK" regardless: no proof of correct results
    assert (f["out_of_bounds"], f["data_errors"]) == (0, None)


def test_old_alltoall_layout_leaves_redop_blank(corpus):
    f = parse_nccl_tests(read(corpus, FAMILY, OLD_ALLTOALL))
    assert {(r["redop"], r["root"], r["type"]) for r in f["rows"]} == {(None, None, "float")}
    assert f["rows"][-1]["in_place"]["busbw_gbps"] == 226.16 and f["busbw_gbps"] == 224.31
    assert f["avg_busbw_gbps"] == 58.6481


def test_80_rank_alltoall_in_place_wrong_is_na(corpus):
    f = parse_nccl_tests(read(corpus, FAMILY, ALLTOALL_80))
    assert (f["test"], f["gpus"], len(f["hosts"])) == ("alltoall_perf", 80, 10)
    assert {r["in_place"]["wrong"] for r in f["rows"]} == {None} and {r["out_of_place"]["wrong"] for r in f["rows"]} == {0}
    assert f["rows"][0]["size_bytes"] == 33553920 and f["rows"][0]["redop"] == "none"
    assert (f["wrong_total"], f["data_errors"], f["avg_busbw_gbps"]) == (0, 0, 47.1472)


def test_out_of_bounds_values_failed_is_a_data_error(corpus):
    """nccl-tests issue 37: the old layout pasted without '#', `error` 1e+00 and 'Out of bounds values : 2 FAILED'."""
    f = parse_nccl_tests(read(corpus, FAMILY, V100_OOB))
    (row,) = f["rows"]
    assert row["size_bytes"] == 4294967296 and row["out_of_place"]["error"] == 1.0 and row["in_place"]["error"] == 1.0
    assert (f["out_of_bounds"], f["wrong_total"], f["data_errors"]) == (2, None, 2)
    assert f["params"] is None and f["avg_busbw_gbps"] == 128.942


def test_a_row_with_wrong_results_counts_in_data_errors(corpus):
    """The corpus has no #wrong-layout run with wrong elements; the H100 run with one #wrong cell set (a derived
    input: the corpus file itself is untouched) shows the column is read per cell and summed."""
    text = read(corpus, FAMILY, H100_1NODE).replace(
        "  536870912      67108864    double     sum      -1  2115.28  253.81  444.16       0",
        "  536870912      67108864    double     sum      -1  2115.28  253.81  444.16       7", 1)
    f = parse_nccl_tests(text)
    assert f["rows"][4]["out_of_place"]["wrong"] == 7
    assert (f["wrong_total"], f["out_of_bounds"], f["data_errors"]) == (7, 0, 7)


def test_tcp_fallback_shows_in_the_figure_and_in_nccl_info(corpus):
    low = parse_nccl_tests(read(corpus, FAMILY, POLARIS_TCP))
    assert (low["busbw_gbps"], low["avg_busbw_gbps"], low["gpus"], len(low["hosts"])) == (9.45, 2.96746, 8, 2)
    socket = parse_nccl_tests(sample(MPIRUN))
    assert socket["net_transport"] == "Socket" and socket["busbw_gbps"] == 1.98 and socket["avg_busbw_gbps"] == 0.733914


def test_launcher_prefixes_are_stripped():
    """`srun --label` (" 0: ") and Open MPI's --tag-output ("[1,0]<stdout>:") prefix every line."""
    srun = parse_nccl_tests(sample(SRUN))
    assert (srun["gpus"], srun["hosts"], len(srun["rows"])) == (16, ["node005", "node007"], 11)
    assert srun["params"]["validation"] is False and srun["data_errors"] is None
    assert (srun["busbw_gbps"], srun["avg_busbw_gbps"]) == (155.56, 142.735)
    mpirun = parse_nccl_tests(sample(MPIRUN))
    assert len(mpirun["rows"]) == 31 and mpirun["rows"][-1]["size_bytes"] == 1073741824


def test_an_open_mpi_tag_inside_a_row_is_a_chunk_boundary_not_a_column():
    """Open MPI tags what it forwards chunk by chunk: a row its rank wrote in two pieces carries a second tag
    (seen through real mpirun in the lab: '... 411.14  [1,0]<stdout>:     0')."""
    text = sample(MPIRUN)
    row = next(line for line in text.splitlines() if line.rstrip().endswith(" 0") and "1073741824" in line)
    cut = row.rstrip()[:-1].rstrip()
    split = text.replace(row, f"{cut}  [1,0]<stdout>:     0")
    assert parse_nccl_tests(split) == parse_nccl_tests(text)



def test_mpiruns_own_untagged_warning_before_the_ranks_output_changes_nothing():
    """Open MPI's plm:rsh warns, untagged, when an agent it started has already exec'd (seen through real mpirun in
    the lab under load); the tool's tagged output after it parses as without it."""
    text = sample(MPIRUN)
    warned = ("[vm:04193] plm:rsh: Warning: setpgid(4203,4203) failed in parent with errno=Permission denied(13)\n"
              + text)
    assert parse_nccl_tests(warned) == parse_nccl_tests(text)

def test_nccl_info_lines_tell_transport_and_gdr(corpus):
    efa = parse_nccl_tests(read(corpus, FAMILY, AWS_EFA))
    assert (efa["net_transport"], efa["gdr"], efa["nccl_version"], efa["test"]) == (
        "Libfabric", False, "2.29.2", "all_reduce_perf")
    assert len(efa["rows"]) == 28 and efa["avg_busbw_gbps"] == 4.26966  # the Func/Proto/Algo matrix is no row
    mnnvl = parse_nccl_tests(read(corpus, FAMILY, GB200_OCI))
    assert mnnvl["gdr"] is True and len(mnnvl["rows"]) == 33 and mnnvl["peak_busbw_gbps"] == 847.42
    lines = ("h:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB ib0:10.0.0.1<0>\n"
             "h:1:1 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA\n")
    ib = parse_nccl_tests(lines + read(corpus, FAMILY, H100_1NODE))
    assert (ib["net_transport"], ib["gdr"]) == ("IB", True)
    off = parse_nccl_tests("h:1:1 [0] NCCL INFO NET/Socket : GPU Direct RDMA Disabled for HCA 0 'eth0'\n"
                           + read(corpus, FAMILY, H100_1NODE))
    assert off["gdr"] is False


def test_versions_and_excerpts(corpus):
    gke = parse_nccl_tests(read(corpus, FAMILY, B200_GKE))
    assert (gke["nccl_version"], gke["test"], gke["avg_busbw_gbps"], gke["peak_busbw_gbps"]) == (
        "2.26.6", None, 59.3638, 268.59)  # in-place at 2 GiB
    rack = parse_nccl_tests(read(corpus, FAMILY, GB200_RACK))
    assert rack["devices"] == [{"rank": 71, "group": 0, "pid": 14840, "host": "slurm-gb200-207-171", "device": 3,
                                "bus_id": "0x01", "name": "NVIDIA Graphics Device"}]
    assert (rack["busbw_gbps"], rack["avg_busbw_gbps"]) == (834.57, 745.53)
    scale = parse_nccl_tests(read(corpus, FAMILY, POLARIS_540))
    assert (scale["gpus"], len(scale["hosts"]), scale["avg_busbw_gbps"]) == (2160, 540, 4.54332)


def test_busbw_keeps_out_of_place_and_in_place_and_judges_the_lower(corpus):
    """At its largest size the GB200 rack's out-of-place busbw is 12 GB/s below its in-place one: their mean
    (nccl-tests' own average for one size) would pass a gate the slower path does not meet."""
    rack = parse_nccl_tests(read(corpus, FAMILY, GB200_RACK))
    last = max(rack["rows"], key=lambda r: r["size_bytes"])
    oop, inp = last["out_of_place"]["busbw_gbps"], last["in_place"]["busbw_gbps"]
    assert (rack["busbw_out_of_place_gbps"], rack["busbw_in_place_gbps"]) == (oop, inp)
    assert (oop, inp) == (834.57, 846.82) and rack["busbw_gbps"] == 834.57  # the mean was 840.695


def test_scientific_notation_times_and_a_degraded_pair(corpus):
    f = parse_nccl_tests(read(corpus, FAMILY, SENDRECV))
    assert f["rows"][-1]["out_of_place"]["time_us"] == 2.0e7 and f["rows"][-1]["in_place"]["time_us"] == 1.8e7
    assert (f["test"], f["nccl_tests_version"], f["nccl_version"]) == ("sendrecv_perf", "2.17.6", "2.28.7")
    assert (f["busbw_gbps"], f["peak_busbw_gbps"], f["avg_busbw_gbps"]) == (0.88, 9.79, 5.70918)


def test_a_failure_after_rows_never_yields_a_figure(corpus):
    """nccl-tests issue 322 prints rows, then 'Test NCCL failure common.cu:1204': the figures of a failed run are
    not reported. Shown on the real failure lines appended to a real table."""
    failed = read(corpus, FAMILY, H100_1NODE).replace(
        "# Out of bounds values", "cnode3-002: Test NCCL failure common.cu:1204 'unhandled cuda error / '\n"
        " .. cnode3-002 pid 4180122: Test failure common.cu:915\n# Out of bounds values")
    with pytest.raises(ParseError, match=r"common\.cu:1204 'unhandled cuda error"):
        parse_nccl_tests(failed)


def test_a_run_cut_short_is_an_error(corpus):
    text = read(corpus, FAMILY, H100_1NODE)
    with pytest.raises(ParseError, match=r"stopped after 536870912 bytes: no '# Avg bus bandwidth' line"):
        parse_nccl_tests(text[:text.index("  1073741824")])


#: What PROVENANCE.md says each run held: (ranks, hosts, ranks per host; None where the output does not list them).
MEMBERS = {
    POLARIS_TCP: (8, 2, 4),
    POLARIS_540: (2160, 540, 4),
    "all-reduce-h100-10node-80gpu-multinode-tests2.17.8-nccl2.29.2.txt": (80, 10, 8),
    ALLTOALL_80: (80, 10, 8),
    B200_GKE: (16, 2, 8),
    GB200_OCI: (8, 2, 4),  # no rank list in the excerpt: NCCL's INFO lines name the two trays
    AWS_EFA: (2, 2, 1),
    SENDRECV: (8, 2, 4),
    H100_1NODE: (8, 1, 8),
}


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_multi_node_runs_say_which_hosts_and_gpus_took_part(corpus, name):
    ranks, hosts, per_host = MEMBERS[name]
    f = parse_nccl_tests(read(corpus, FAMILY, name))
    assert (f["ranks"], len(f["hosts"])) == (ranks, hosts)
    assert [p["host"] for p in f["participants"]] == f["hosts"]
    assert {len(p["ranks"]) for p in f["participants"]} == {per_host}
    assert {tuple(p["devices"]) for p in f["participants"]} == {tuple(range(per_host))}
    assert sorted(r for p in f["participants"] for r in p["ranks"]) == list(range(ranks))


def test_named_hosts_and_ranks_of_multi_node_runs(corpus):
    ten = parse_nccl_tests(read(corpus, FAMILY, "all-reduce-h100-10node-80gpu-multinode-tests2.17.8-nccl2.29.2.txt"))
    assert ten["hosts"] == [f"cnode3-{n:03d}" for n in range(2, 12)]
    oci = parse_nccl_tests(read(corpus, FAMILY, GB200_OCI))
    assert oci["participants"] == [{"host": "nccl-test-worker-0", "ranks": [0, 1, 2, 3], "devices": [0, 1, 2, 3]},
                                   {"host": "nccl-test-worker-1", "ranks": [4, 5, 6, 7], "devices": [0, 1, 2, 3]}]
    # the NVL72 excerpt lists rank 71 alone: the run's 72 ranks, one host of its 18 trays
    rack = parse_nccl_tests(read(corpus, FAMILY, GB200_RACK))
    assert (rack["ranks"], rack["participants"]) == (72, [{"host": "slurm-gb200-207-171", "ranks": [71],
                                                           "devices": [3]}])
    efa = parse_nccl_tests(read(corpus, FAMILY, AWS_EFA))
    assert efa["mnnvl"] is False and ten["mnnvl"] is None  # "nNodes 2 ... MNNVL 0" in NCCL's INFO lines
    srun = parse_nccl_tests(sample(SRUN))
    assert (srun["ranks"], [len(p["ranks"]) for p in srun["participants"]]) == (16, [8, 8])


def test_a_network_failure_names_the_host_that_reported_it(corpus):
    with pytest.raises(ParseError, match=r"'remote process exited or there was a network error / ' "
                                         r"\(reported by cnode2-001\)$"):
        parse_nccl_tests(read(corpus, FAMILY, NETWORK_FAIL))


def test_a_hang_says_which_rank_never_completed_nccl_init(corpus):
    """The EFA run up to its column header: rank 1 (gpu-st-ml-2) had logged Init START, not yet Init COMPLETE."""
    text = read(corpus, FAMILY, AWS_EFA)
    cut = text[:text.index("#        (B)")]
    with pytest.raises(ParseError, match=r"the run hung .*; NCCL rank\(s\) 1 began ncclCommInitRank and never "
                                         r"completed it \(on gpu-st-ml-2\)$"):
        parse_nccl_tests(cut)


def test_a_rank_that_never_joined_gives_no_figure(corpus):
    """Given the launch's node list, a launched host absent from nccl-tests' rank list never joined: the figure is
    another set's."""
    name = "all-reduce-h100-10node-80gpu-multinode-tests2.17.8-nccl2.29.2.txt"
    text = read(corpus, FAMILY, name)
    launched = [f"cnode3-{n:03d}" for n in range(2, 12)]
    assert parse_nccl_tests(text, expected_hosts=launched)["hosts"] == launched
    with pytest.raises(ParseError, match=r"^rank\(s\) never joined: cnode3-012 not in nccl-tests' rank list "
                                         r"\(10 of 11 launched hosts listed\)$"):
        parse_nccl_tests(text, expected_hosts=[*launched, "cnode3-012"])
    with pytest.raises(ParseError, match="listed no rank"):
        parse_nccl_tests(read(corpus, FAMILY, V100_OOB), expected_hosts=["a", "b"])


@pytest.mark.parametrize("line, host", [
    # srun's task epilogue, slurmstepd's cancellation (a step's time limit stops a hang), Open MPI's notice
    ("srun: error: node007: task 9: Exited with exit code 1", "node007"),
    ("srun: error: node005: tasks 0-1: Exited with exit code 1", "node005"),
    ("slurmstepd: error: *** STEP 30399.0 ON node005 CANCELLED AT 2024-04-18T10:21:07 DUE TO TIME LIMIT ***",
     "node005"),
    ("mpirun noticed that process rank 9 with PID 541708 on node node007 exited on signal 9 (Killed).", "node007"),
])
def test_the_launcher_ending_a_task_fails_the_run_in_its_words(line, host):
    text = sample(SRUN) + line + "\n"
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(text)
    assert str(err.value) == f"the launcher ended the run: {line} (host(s): {host})"


def test_mpirun_that_runs_nothing_fails_in_open_mpis_words():
    """Debian's Open MPI 4.1.4 refusing root prints no nccl-tests line: its banner is the failure, not 'not
    nccl-tests output'."""
    with pytest.raises(ParseError) as err:
        parse_nccl_tests(sample(MPIRUN_ROOT), expected_hosts=["gb200-0001", "gb200-0002"])
    assert str(err.value) == "the launcher did not run nccl-tests: mpirun has detected an attempt to run as root."
    rule = "-" * 74
    text = f"{rule}\nA call to mkdir was unable to create the desired directory:\n\n  Directory: /tmp/x\n  Error: " \
           f"    File exists\n\nPlease check\n{rule}\n"
    with pytest.raises(ParseError, match=r": A call to mkdir was unable to create the desired directory: Directory: "
                                         r"/tmp/x Error: File exists$"):
        parse_nccl_tests(text)


HEADER = "#  size count type redop root time algbw busbw #wrong time algbw busbw #wrong\n"


@pytest.mark.parametrize("text, reason", [
    ("", "empty"),
    ("hello\nworld\n", "not nccl-tests output"),
    ("#  size  count  type  time algbw busbw #wrong time algbw busbw #wrong time\n", "3 time columns"),
    (HEADER + "  8  2  float  sum  -1  45.91  0.00  x.xx  0  45.49  0.00  0.00  0\n", "line 2: a time/algbw/busbw cell"),
    (HEADER + "  8  2  float  sum  -1  45.91  0.00  0.00  zero  45.49  0.00  0.00  0\n", "#wrong cell 'zero'"),
    (HEADER + "  8  2  float\n", "3 cells where the header has 11 to 13"),
])
def test_garbage_gives_a_one_line_parse_error(text, reason):
    with pytest.raises(ParseError, match=reason) as err:
        parse_nccl_tests(text)
    assert "\n" not in str(err.value)


def test_several_runs_pasted_into_one_output_are_refused(corpus):
    """16 single-node outputs pasted together read as one 16-host run without this; each run prints its header."""
    one = read(corpus, FAMILY, H100_1NODE)
    with pytest.raises(ParseError, match=r"^16 nccl-tests runs in one output \(a header per run, at lines \d+, \d+, "
                                         r"\d+, \d+, \d+, \.\.\.\): give one run's output$"):
        parse_nccl_tests(one * 16)
    with pytest.raises(ParseError, match="^2 nccl-tests runs in one output"):
        parse_nccl_tests(read(corpus, FAMILY, POLARIS_TCP) + read(corpus, FAMILY, OLD_ALLREDUCE))
    assert parse_nccl_tests(one)["avg_busbw_gbps"]  # one run still parses
