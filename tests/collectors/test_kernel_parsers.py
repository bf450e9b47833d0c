"""Kernel parsers: Xid/SXid/lost-carrier extraction, lsmod corpus files, /proc/cmdline IOMMU modes."""

from __future__ import annotations

from pathlib import Path

import pytest
from fabricproof.collectors import COLLECTORS
from fabricproof.collectors.kernel import cmdline as kernel_cmdline
from fabricproof.collectors.kernel import log as kernel_log
from fabricproof.collectors.kernel import lsmod as kernel_lsmod
from fabricproof.collectors.base import Collector, ParseError, read_host_file
from fabricproof.collectors.kernel.cmdline import parse_cmdline
from fabricproof.collectors.kernel.log import parse_kernel_log
from fabricproof.collectors.kernel.lsmod import parse_lsmod

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
KERNEL_COLLECTORS = (*kernel_log.COLLECTORS, *kernel_lsmod.COLLECTORS, *kernel_cmdline.COLLECTORS)


def listing(family: str, prefix: str = "") -> list[str]:
    folder = CORPUS / family
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(prefix)) if folder.is_dir() else []


def read(corpus: Path, rel: str) -> str:
    return (corpus / rel).read_text(encoding="utf-8", errors="surrogateescape")


def test_collectors_match_contract() -> None:
    assert_collector_table(
        KERNEL_COLLECTORS,
        {
            "kernel_log": (("journalctl", "-k", "-b", "--no-pager"), "/kernel/log", True),
            "lsmod": (("lsmod",), "/kernel/modules", True),
            "cmdline": (read_host_file("/proc/cmdline"), "/kernel/cmdline", True),
        },
    )


@pytest.mark.parametrize("collector", KERNEL_COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


# ---------------------------------------------------------------- kernel log


@pytest.mark.parametrize("name", listing("nvswitch", "dmesg-"))
def test_dmesg_corpus_files_parse(corpus: Path, name: str) -> None:
    assert_valid(COLLECTORS["kernel_log"].schema, parse_kernel_log(read(corpus, f"nvswitch/{name}")))


@pytest.mark.parametrize("name", listing("kernel-log"))
def test_kernel_log_corpus_files_parse(corpus: Path, name: str) -> None:
    frag = parse_kernel_log(read(corpus, f"kernel-log/{name}"))
    assert_valid(COLLECTORS["kernel_log"].schema, frag)
    # what each file shows (its name says so too); a new file is read and schema-checked until it gets its line here
    shown = KERNEL_LOG_FILES.get(name)
    if shown is not None:
        assert (frag["xid_codes"], frag["fallen_off_bus"]) == shown


KERNEL_LOG_FILES = {
    "blackwell-gb200-xid-149-netir-fatal-link-minus-1-single-line.txt": ([149], []),
    "blackwell-gb200-xid-154-gpu-recovery-action-none-to-drain-and-reset-single-line.txt": ([154], []),
    "dmesg-T-xid-119-gsp-rpc-timeout-h100-dell-xe9680-call-trace.txt": ([119], []),
    "dmesg-decode-iso-kern-warn-prefix-xid-13-43-app-faults-636-lines.txt": ([13, 43], []),
    "dmesg-fallen-off-the-bus-multiline-no-xid-line-probe-failed-open-570.158.01.txt": ([], ["0000:b3:00.0"]),
    "dmesg-iso-xid-48-dbe-63-row-remap-94-contained-plus-nvidia-peermem-errors.txt": ([48, 63, 94], []),
}


def test_nvlink5_xid_149_netir_fatal_pasted_without_a_timestamp(corpus: Path) -> None:
    frag = parse_kernel_log(read(corpus, "kernel-log/blackwell-gb200-xid-149-netir-fatal-link-minus-1-single-line.txt"))
    (xid,) = frag["xids"]
    assert (xid["bdf"], xid["code"], xid["name"], xid["fatal"], xid["link"]) == (
        "0019:01:00", 149, "NVLINK_NETIR_ERROR", True, -1)
    assert any("without timestamps" in n for n in frag["notes"])


def test_xid_154_gives_the_recovery_action_the_driver_asks_for(corpus: Path) -> None:
    frag = parse_kernel_log(read(corpus, "kernel-log/blackwell-gb200-xid-154-gpu-recovery-action-none-to-drain-and-reset-single-line.txt"))
    assert frag["xids"][0]["recovery_action"] == "Drain and Reset"
    assert [(a["bdf"], a["action"]) for a in frag["recovery_actions"]] == [("0009:01:00", "Drain and Reset")]
    # the latest Xid 154 of a GPU wins: an action done and reported back as None clears it
    back = "[171299.000001] NVRM: Xid (PCI:0009:01:00): 154, GPU recovery action changed from 0x4 (Drain and Reset) to 0x0 (None)"
    later = parse_kernel_log(read(corpus, "kernel-log/blackwell-gb200-xid-154-gpu-recovery-action-none-to-drain-and-reset-single-line.txt") + back + "\n")
    assert [(a["bdf"], a["action"]) for a in later["recovery_actions"]] == [("0009:01:00", "None")]


def test_fallen_off_the_bus_without_an_xid_line(corpus: Path) -> None:
    frag = parse_kernel_log(read(corpus, "kernel-log/dmesg-fallen-off-the-bus-multiline-no-xid-line-probe-failed-open-570.158.01.txt"))
    assert frag["fallen_off_bus"] == ["0000:b3:00.0"] and frag["xids"] == []
    # and with one: the Xid 79 line names the GPU itself
    xid79 = "[ 77.1] NVRM: Xid (PCI:0000:9b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.\n"
    assert parse_kernel_log(xid79)["fallen_off_bus"] == ["0000:9b:00"]


def test_sxid_22013_events_counted_once_per_event(corpus: Path) -> None:
    frag = parse_kernel_log(read(corpus, "nvswitch/dmesg-sxid-22013-nonfatal-minion-dlreq-h100-ppcie-nvtrust-124-excerpt.txt"))
    # 8 SXid lines = 3 events (Data / Non-fatal / Severity); the excerpt ends after the third Non-fatal line
    assert [(s["device"], s["bdf"], s["code"], s["link"], s["fatal"]) for s in frag["sxids"]] == [
        ("nvidia-nvswitch3", "0000:04:00.0", 22013, 44, False),
        ("nvidia-nvswitch3", "0000:04:00.0", 22013, 45, False),
        ("nvidia-nvswitch3", "0000:04:00.0", 22013, 46, False),
    ]
    assert (frag["sxid_fatal_count"], frag["sxid_nonfatal_count"]) == (0, 3)
    assert frag["xids"] == [] and frag["xid_codes"] == []


def test_sxid_data_line_without_severity_counts_as_nonfatal(corpus: Path) -> None:
    frag = parse_kernel_log(read(corpus, "nvswitch/dmesg-iso-sxid-12028-nvswitch1-gpud-338.txt"))
    assert [(s["device"], s["bdf"], s["code"], s["severity"]) for s in frag["sxids"]] == [
        ("nvidia-nvswitch1", "0000:84:00.0", 12028, None)
    ]
    assert (frag["sxid_fatal_count"], frag["sxid_nonfatal_count"]) == (0, 1)


# journalctl -k lines carrying the domain.md B.7/B.12/B.14 evidence
JOURNAL = """-- Logs begin at Mon 2025-03-03 07:58:10 UTC, end at Mon 2025-03-03 09:00:00 UTC. --
Mar 03 08:00:01 gpu-node-17 kernel: NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC 2024
Mar 03 08:10:11 gpu-node-17 kernel: nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Non-fatal, Link 46 MC TS crumbstore MCTO (First)
Mar 03 08:10:11 gpu-node-17 kernel: nvidia-nvswitch3: SXid (PCI:0000:c1:00.0): 28006, Severity 0 Engine instance 46 Sub-engine instance 00
Mar 03 08:10:12 gpu-node-17 kernel: nvidia-nvswitch0: SXid (PCI:0000:c4:00.0): 24007, Fatal, Link 30 sourcetrack TCEN0 crumbstore ECC DBE Error
Mar 03 08:10:13 gpu-node-17 kernel: NVRM: Xid (PCI:0000:34:00): 45, pid=2311, name=python, Ch 00000008
Mar 03 08:10:14 gpu-node-17 kernel: NVRM: Xid (PCI:0000:34:00): 74, pid='<unknown>', name=<unknown>, NVLink: fatal error detected on link 6
Mar 03 08:10:15 gpu-node-17 kernel: NVRM: Xid (PCI:0000:9b:00): 45, pid=2312, name=python, Ch 00000010
Mar 03 08:20:00 gpu-node-17 kernel: mlx5_core 0000:1a:00.0 ib0: lost carrier
Mar 03 08:20:09 gpu-node-17 kernel: mlx5_core 0000:1a:00.0 ib0: lost carrier
Mar 03 08:21:00 gpu-node-17 kernel: ibp26s0: lost carrier
"""


def test_kernel_log_evidence() -> None:
    frag = parse_kernel_log(JOURNAL)
    assert_valid(COLLECTORS["kernel_log"].schema, frag)
    assert [(x["bdf"], x["code"]) for x in frag["xids"]] == [("0000:34:00", 45), ("0000:34:00", 74), ("0000:9b:00", 45)]
    assert frag["xid_codes"] == [45, 74]
    assert [(s["code"], s["fatal"], s["link"]) for s in frag["sxids"]] == [(28006, False, 46), (24007, True, 30)]
    assert (frag["sxid_fatal_count"], frag["sxid_nonfatal_count"]) == (1, 1)
    assert frag["sxid_codes"] == [24007, 28006]
    assert frag["ib_lost_carrier"] == 3
    assert frag["ib_lost_carrier_by_netdev"] == {"ib0": 2, "ibp26s0": 1}


def test_clean_kernel_log() -> None:
    frag = parse_kernel_log("[    0.000000] Linux version 6.8.0-52-generic (buildd@lcy02-amd64-046)\n")
    assert frag["xids"] == [] and frag["sxids"] == [] and frag["ib_lost_carrier"] == 0


@pytest.mark.parametrize("text", ["", "\n\n", "hello world\n", '{"MESSAGE": "x"}'])
def test_kernel_log_rejects_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_kernel_log(text)


# ---------------------------------------------------------------- lsmod


@pytest.mark.parametrize("name", listing("lsmod"))
def test_lsmod_corpus_files_parse(corpus: Path, name: str) -> None:
    assert_valid(COLLECTORS["lsmod"].schema, parse_lsmod(read(corpus, f"lsmod/{name}")))


@pytest.mark.parametrize(
    ("name", "peermem"),
    [
        ("lsmod-grep-gdrdrv-nvidia-ucx-issue9908-excerpt.txt", False),
        ("lsmod-grep-nvid-peermem-uvm-drm-driver550-dell-excerpt.txt", True),
        ("lsmod-grep-nvidia_peermem-ib_core-cx6-k8s-node-excerpt.txt", True),
    ],
)
def test_lsmod_peermem(corpus: Path, name: str, peermem: bool) -> None:
    frag = parse_lsmod(read(corpus, f"lsmod/{name}"))
    assert frag["nvidia_peermem"] is peermem
    assert frag["nv_peer_mem"] is False
    assert "nvidia" in frag["loaded"]


def test_lsmod_rows(corpus: Path) -> None:
    frag = parse_lsmod(read(corpus, "lsmod/lsmod-grep-gdrdrv-nvidia-ucx-issue9908-excerpt.txt"))
    assert frag["modules"] == [
        {"name": "gdrdrv", "size": 24576, "refcount": 0, "used_by": []},
        {"name": "nvidia", "size": 54001664, "refcount": 1361, "used_by": ["nvidia_uvm", "gdrdrv", "nvidia_modeset"]},
    ]


def test_lsmod_with_header_and_legacy_module() -> None:
    text = "Module                  Size  Used by\nnv_peer_mem            16384  0\nib_core               348160  1 nv_peer_mem\n"
    frag = parse_lsmod(text)
    assert frag["loaded"] == ["nv_peer_mem", "ib_core"]
    assert (frag["nv_peer_mem"], frag["nvidia_peermem"]) == (True, False)
    assert parse_lsmod("Module                  Size  Used by\n")["loaded"] == []


@pytest.mark.parametrize("text", ["", "lsmod: command not found\n", "a b c\n"])
def test_lsmod_rejects_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_lsmod(text)


# ---------------------------------------------------------------- /proc/cmdline


@pytest.mark.parametrize(
    ("cmdline", "mode"),
    [
        ("BOOT_IMAGE=/vmlinuz-6.8.0-52-generic root=UUID=1b2c ro quiet splash", "default"),
        ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro iommu=pt", "pt"),
        ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on iommu=pt", "pt"),
        ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on", "on"),
        ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=on,sm_on", "on"),
        ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro amd_iommu=off", "off"),
        ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro intel_iommu=off", "off"),
        ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 ro iommu=off", "off"),
        ("BOOT_IMAGE=/Image root=/dev/nvme0n1p2 ro iommu.passthrough=1", "pt"),
    ],
)
def test_cmdline_iommu_mode(cmdline: str, mode: str) -> None:
    frag = parse_cmdline(cmdline + "\n")
    assert_valid(COLLECTORS["cmdline"].schema, frag)
    assert frag["iommu"] == mode
    assert frag["raw"] == cmdline


def test_cmdline_params() -> None:
    frag = parse_cmdline('BOOT_IMAGE=/vmlinuz ro quiet pci=realloc=off dyndbg="file mlx5 +p" hugepages=16 hugepages=32\n')
    assert frag["params"] == {
        "BOOT_IMAGE": "/vmlinuz",
        "ro": "",
        "quiet": "",
        "pci": "realloc=off",
        "dyndbg": "file mlx5 +p",
        "hugepages": "32",
    }


@pytest.mark.parametrize(
    ("cmdline", "params"),
    [
        ("ro\tquiet  iommu=pt", {"ro": "", "quiet": "", "iommu": "pt"}),  # TABs and runs of spaces separate
        ("a=1\x0bb=2 c=3", {"a": "1\x0bb=2", "c": "3"}),  # the kernel (and shlex) split at space and TAB only
        ("a=1\u00a0b=2", {"a": "1\u00a0b=2"}),
        ("opt='x y' z=\\1", {"opt": "x y", "z": "1"}),  # quotes and escapes as the shell reads them
        ('dyndbg="unbalanced iommu=pt', {"dyndbg": '"unbalanced', "iommu": "pt"}),  # shlex gives up: plain split
    ],
)
def test_cmdline_tokens(cmdline: str, params: dict[str, str]) -> None:
    assert parse_cmdline(cmdline + "\n")["params"] == params


@pytest.mark.parametrize("text", ["", "  \n", "line one\nline two\n"])
def test_cmdline_rejects_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_cmdline(text)
