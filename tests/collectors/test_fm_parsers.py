"""Fabric Manager parsers: every fabricmanager corpus file, the failure-mode evidence lines, unit states, cfg digest."""

from __future__ import annotations

import hashlib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from fabricproof.collectors import COLLECTORS
from fabricproof.collectors.fm import config as fm_config
from fabricproof.collectors.fm import log as fm_log
from fabricproof.collectors.fm import service as fm_service
from fabricproof.collectors.fm import version as fm_version
from fabricproof.collectors.base import Collector, ParseError, read_host_file
from fabricproof.collectors.fm.config import parse_fm_config
from fabricproof.collectors.fm.log import parse_fm_log
from fabricproof.collectors.fm.version import parse_fm_version
from fabricproof.collectors.systemd_unit import parse_systemd_unit

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

CORPUS = Path(__file__).resolve().parents[2].parent / "shared" / "corpus"
FAMILY = "fabricmanager"
FM_COLLECTORS = (*fm_version.COLLECTORS, *fm_service.COLLECTORS, *fm_config.COLLECTORS, *fm_log.COLLECTORS)

# Which collector reads each fabricmanager corpus file (first match wins). A new file that
# matches no route fails test_every_file_is_routed until it is given a parser.
ROUTES = (
    ("nv-fabricmanager-version-*", "fm_version"),
    ("systemctl-status-fm-active-running-*", "fm_service"),
    # the akash sample is the journal part of `systemctl status` only (no unit header lines)
    ("systemctl-status-fm-version-mismatch-*", "fm_journal"),
    ("*.log", "fm_log"),
    ("journal*", "fm_journal"),
    ("driver-ctr-*", "fm_journal"),
)

FILES = sorted(p.name for p in (CORPUS / FAMILY).iterdir()) if (CORPUS / FAMILY).is_dir() else []


def route(name: str) -> str | None:
    return next((cid for pattern, cid in ROUTES if fnmatch(name, pattern)), None)


def read(corpus: Path, name: str) -> str:
    return (corpus / FAMILY / name).read_text(encoding="utf-8", errors="surrogateescape")


@pytest.mark.parametrize("name", FILES)
def test_every_file_is_routed(name: str) -> None:
    assert route(name), f"no parser routed for corpus file {FAMILY}/{name}"


@pytest.mark.parametrize("name", FILES)
def test_corpus_file_parses_and_matches_schema(corpus: Path, name: str) -> None:
    collector_id = route(name)
    assert collector_id
    fragment = COLLECTORS[collector_id].parse(read(corpus, name))
    assert_valid(COLLECTORS[collector_id].schema, fragment)


def test_collectors_match_contract() -> None:
    show = "--property=LoadState,ActiveState,SubState,UnitFileState,NRestarts"
    assert_collector_table(
        FM_COLLECTORS,
        {
            "fm_version": (("nv-fabricmanager", "--version"), "/fm/build", True),
            "fm_service": (("systemctl", "show", "nvidia-fabricmanager", show), "/fm/service", True),
            "fm_config": (read_host_file("/usr/share/nvidia/nvswitch/fabricmanager.cfg"), "/fm/config", True),
            "fm_log": (read_host_file("/var/log/fabricmanager.log", "tail", "-n", "5000"), "/fm/log", True),
            "fm_journal": (("journalctl", "-u", "nvidia-fabricmanager", "-b", "--no-pager"), "/fm/journal", True),
        },
    )
    assert COLLECTORS["fm_log"].schema is COLLECTORS["fm_journal"].schema


@pytest.mark.parametrize("collector", FM_COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


# ---------------------------------------------------------------- version


def test_fm_version_450(corpus: Path) -> None:
    # The R450 binary prints the version line only: no branch is invented for it.
    build = parse_fm_version(read(corpus, "nv-fabricmanager-version-450.102.04.txt"))
    assert build == {"version": "450.102.04", "branch": None, "changelist": None}


# The layout of newer builds (R610, an HGX B300 capture: public notes, code-index file id 63125688786, not yet in
# the corpus): a Build Info line follows the version, and the output ends without a newline, so a shell prompt can
# follow the changelist on the same line. The values below are made up; the layout is the capture's.
_BUILD_INFO = ("Fabric Manager version is : 610.10.02\n"
               "Build Info - Branch: rel/gpu_drv/r610/r610_00-17, Changelist: 0")


@pytest.mark.parametrize("tail", ["", "\n", "user@host:~$ "])
def test_fm_version_keeps_the_build_branch(tail: str) -> None:
    build = parse_fm_version(_BUILD_INFO + tail)
    assert build == {"version": "610.10.02", "branch": "rel/gpu_drv/r610/r610_00-17", "changelist": "0"}
    assert_valid(COLLECTORS["fm_version"].schema, build)


@pytest.mark.parametrize("text", ["", "Python 3.11.4\n", "nv-fabricmanager: command not found\n"])
def test_fm_version_rejects_other_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_fm_version(text)


# ---------------------------------------------------------------- log / journal evidence


def test_version_mismatch_530(corpus: Path) -> None:
    frag = parse_fm_log(read(corpus, "journal-fm-version-mismatch-530.30.02-vs-530.41.03-gpu-operator-544.txt"))
    assert frag["version_mismatch"] == {"fm_version": "530.30.02", "driver_version": "530.41.03"}


def test_version_mismatch_550_in_systemctl_status(corpus: Path) -> None:
    frag = parse_fm_log(read(corpus, "systemctl-status-fm-version-mismatch-550.127.05-vs-550.120-akash-excerpt.txt"))
    # the driver version is followed by a sentence full stop: "550.120. Please update ..."
    assert frag["version_mismatch"] == {"fm_version": "550.127.05", "driver_version": "550.120"}
    assert frag["startups"] == 1


def test_version_mismatch_newer_wording() -> None:
    # domain.md B.1: newer builds say "doesn't match"
    line = (
        "Jun 02 10:11:12 node7 nv-fabricmanager[2211]: fabric manager NVIDIA GPU driver interface version "
        "570.133.20 doesn't match with driver version 570.124.06. Please update with matching NVIDIA driver package.\n"
    )
    assert parse_fm_log(line)["version_mismatch"] == {"fm_version": "570.133.20", "driver_version": "570.124.06"}


def test_hgx_h100_log_nonfatal_12028_and_restarts(corpus: Path) -> None:
    frag = parse_fm_log(read(corpus, "fabricmanager-log-hgx-h100-fm535.161.08-restarts-nvswitch-nonfatal-12028.log"))
    assert frag["nvswitch_nonfatal_count"] == 18
    assert frag["nvswitch_fatal_count"] == 0
    assert {e["code"] for e in frag["nvswitch_errors"]} == {12028}
    assert frag["nvswitch_errors"][0]["bdf"] == "00000000:83:00.0"
    assert frag["nvswitch_errors"][0]["port"] == 34
    assert frag["startups"] == 2
    assert frag["running_version"] == "535.161.08"
    assert frag["version_mismatch"] is None
    assert frag["switches_configured"] is True
    assert [s["bdf"] for s in frag["nvswitches"]] == [f"00000000:{b}:00.0" for b in ("83", "84", "85", "86")]


def test_multicast_log_single_nonfatal(corpus: Path) -> None:
    frag = parse_fm_log(read(corpus, "fabricmanager-log-multicast-team-setup-inband.log"))
    assert [(e["fatal"], e["code"], e["port"]) for e in frag["nvswitch_errors"]] == [(False, 12028, 61)]
    assert frag["startups"] == 0


def test_fatal_nvswitch_error_is_counted_as_fatal() -> None:
    # domain.md B.7 (gpud log matcher evidence)
    log = (
        "[Mar 03 2025 08:00:01] [ERROR] [tid 1374] detected NVSwitch fatal error 20034 on fid 0 on NVSwitch "
        "pci bus id 00000000:86:00.0 physical id 3 port 33\n"
        "[Mar 03 2025 08:00:01] [ERROR] [tid 1374] detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch "
        "pci bus id 00000000:85:00.0 physical id 2 port 1\n"
    )
    frag = parse_fm_log(log)
    assert (frag["nvswitch_fatal_count"], frag["nvswitch_nonfatal_count"]) == (1, 1)
    assert frag["nvswitch_errors"][0] == {
        "fatal": True,
        "code": 20034,
        "bdf": "00000000:86:00.0",
        "port": 33,
        "line": log.splitlines()[0],
    }


def test_nothing_to_do(corpus: Path) -> None:
    frag = parse_fm_log(read(corpus, "journal-fm-nv-warn-nothing-to-do-2x-rtx4090-pre-nvl5-cube-studio-29.txt"))
    assert frag["nothing_to_do"] is True
    assert frag["unknown_option"] is False


def test_unknown_option_after_start_script_change(corpus: Path) -> None:
    frag = parse_fm_log(read(corpus, "driver-ctr-fm-start-nvlink5-unknown-option-gpu-operator-1595-excerpt.txt"))
    assert frag["unknown_option"] is True
    assert frag["unknown_option_value"] == "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
    assert frag["nothing_to_do"] is False


@pytest.mark.parametrize(
    "banner",
    [
        "Fabric Manager version 535.161.08 is running with the following configuration options",
        "FABRIC MANAGER VERSION 535.161.08 IS RUNNING",
        # IGNORECASE equates the dotless \u0131 with i: non-ASCII lines skip the lower-case word test
        "Fabric Manager version 535.161.08 is runn\u0131ng",
    ],
)
def test_running_banner_in_any_case(banner: str) -> None:
    frag = parse_fm_log(f"[Jan 05 2025 09:01:17] [INFO] [tid 1507] {banner}\n")
    assert (frag["startups"], frag["running_version"]) == (1, "535.161.08")


def test_invalid_config_item() -> None:
    journal = (
        "Feb 11 09:12:40 talos nv-fabricmanager[1801]: fabric manager config file item: FABRIC_NODE_CONFIG_FILE "
        "has an invalid value\n"
        "Feb 11 09:12:41 talos nv-fabricmanager[1805]: fabric manager config file item: FABRIC_NODE_CONFIG_FILE "
        "has an invalid value\n"
    )
    assert parse_fm_log(journal)["invalid_config_items"] == ["FABRIC_NODE_CONFIG_FILE"]


def test_healthy_start_stop_journal(corpus: Path) -> None:
    frag = parse_fm_log(read(corpus, "journalctl-xeu-fm-8x-h20-ppcie-start-stop-nvtrust-128-excerpt.txt"))
    assert frag["switches_configured"] is True
    assert frag["startups"] == 1
    assert frag["version_mismatch"] is None
    assert frag["nvswitch_errors"] == []


def test_empty_journal_marker_is_valid() -> None:
    frag = parse_fm_log("-- No entries --\n")
    assert frag["lines"] == 0 and frag["startups"] == 0


@pytest.mark.parametrize("text", ["", "   \n", "lorem ipsum dolor\nsit amet\n", '{"not": "a log"}'])
def test_fm_log_rejects_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_fm_log(text)


# ---------------------------------------------------------------- unit state


def test_systemctl_status_active_running(corpus: Path) -> None:
    frag = parse_systemd_unit(read(corpus, "systemctl-status-fm-active-running-p4d-a100-bottlerocket-3873.txt"))
    assert frag == {
        "unit": "nvidia-fabricmanager.service",
        "load_state": "loaded",
        "active_state": "active",
        "sub_state": "running",
        "unit_file_state": "enabled",
        "restarts": None,
        "main_pid": 128549,
        "active": True,
    }


def test_systemctl_show() -> None:
    text = "LoadState=loaded\nActiveState=failed\nSubState=failed\nUnitFileState=enabled\nNRestarts=3\n"
    frag = parse_systemd_unit(text)
    assert (frag["active_state"], frag["sub_state"], frag["restarts"], frag["active"]) == ("failed", "failed", 3, False)
    assert_valid(COLLECTORS["fm_service"].schema, frag)


def test_systemctl_status_failed() -> None:
    text = (
        "\u25cf nvidia-fabricmanager.service - NVIDIA fabric manager service\n"
        "     Loaded: loaded (/lib/systemd/system/nvidia-fabricmanager.service; enabled; vendor preset: enabled)\n"
        "     Active: failed (Result: exit-code) since Tue 2024-11-05 13:55:26 UTC; 4s ago\n"
    )
    frag = parse_systemd_unit(text)
    assert (frag["active_state"], frag["sub_state"], frag["unit_file_state"], frag["active"]) == (
        "failed",
        "failed",
        "enabled",
        False,
    )


@pytest.mark.parametrize(("text", "active"), [("active\n", True), ("inactive\n", False), ("failed", False)])
def test_systemctl_is_active(text: str, active: bool) -> None:
    frag = parse_systemd_unit(text)
    assert frag["active"] is active and frag["active_state"] == text.strip()
    assert frag["load_state"] is None


def test_unit_not_found() -> None:
    frag = parse_systemd_unit("Unit nvidia-fabricmanager.service could not be found.\n")
    assert (frag["unit"], frag["load_state"], frag["active"]) == ("nvidia-fabricmanager.service", "not-found", False)


@pytest.mark.parametrize("text", ["", "hello world\nthis is not systemd\n", "Segmentation fault\n"])
def test_unit_rejects_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_systemd_unit(text)


# ---------------------------------------------------------------- fabricmanager.cfg

# Layout and keys as in the shipped default config described in the Fabric Manager User Guide,
# "Fabric Manager Config Options": https://docs.nvidia.com/datacenter/tesla/fabric-manager-user-guide/index.html
FM_CFG = """# NVIDIA Fabric Manager configuration file.
# Note: This configuration file is read during Fabric Manager service startup.

# Description: Fabric Manager logging levels
LOG_LEVEL=4
LOG_FILE_NAME=/var/log/fabricmanager.log
LOG_APPEND_TO_LOG=1
LOG_FILE_MAX_SIZE=1024
LOG_USE_SYSLOG=0
DAEMONIZE=1
BIND_INTERFACE_IP=127.0.0.1
STARTING_TCP_PORT=16000
FABRIC_MODE=0
FABRIC_MODE_RESTART=0
STATE_FILE_NAME=/tmp/fabricmanager.state
FM_CMD_BIND_INTERFACE=127.0.0.1
FM_CMD_PORT_NUMBER=6666
FM_STAY_RESIDENT_ON_FAILURES=0
ACCESS_LINK_FAILURE_MODE=0
TRUNK_LINK_FAILURE_MODE=0
NVSWITCH_FAILURE_MODE=0
ABORT_CUDA_JOBS_ON_FM_EXIT=1
TOPOLOGY_FILE_PATH=/usr/share/nvidia/nvswitch
"""


def test_fm_config_settings_and_digest() -> None:
    frag = parse_fm_config(FM_CFG)
    assert frag["sha256"] == hashlib.sha256(FM_CFG.encode()).hexdigest()
    assert frag["settings"]["FABRIC_MODE"] == "0"
    assert frag["settings"]["LOG_FILE_NAME"] == "/var/log/fabricmanager.log"
    assert frag["settings"]["ABORT_CUDA_JOBS_ON_FM_EXIT"] == "1"
    assert len(frag["settings"]) == 19
    assert frag["ignored_lines"] == []
    assert_valid(COLLECTORS["fm_config"].schema, frag)


def test_fm_config_digest_tracks_raw_bytes() -> None:
    # a comment-only edit leaves settings alone but must change the digest (drift evidence)
    edited = FM_CFG.replace("# Description", "#  Description")
    assert parse_fm_config(edited)["settings"] == parse_fm_config(FM_CFG)["settings"]
    assert parse_fm_config(edited)["sha256"] != parse_fm_config(FM_CFG)["sha256"]


def test_fm_config_tolerates_crlf_and_spaces() -> None:
    frag = parse_fm_config("FABRIC_MODE = 1\r\nLOG_LEVEL=4   \r\nnot a setting\r\n")
    assert frag["settings"] == {"FABRIC_MODE": "1", "LOG_LEVEL": "4"}
    assert frag["ignored_lines"] == ["not a setting"]


@pytest.mark.parametrize(
    "text", ["", "# only comments\n# here\n", "cat: /usr/share/nvidia/nvswitch/fabricmanager.cfg: No such file\n"]
)
def test_fm_config_rejects_garbage(text: str) -> None:
    with pytest.raises(ParseError):
        parse_fm_config(text)


def test_a_later_successful_start_clears_the_version_mismatch() -> None:
    broken = (
        "Nov 30 10:00:01 n1 nv-fabricmanager[811]: fabric manager NVIDIA GPU driver interface version 530.30.02 "
        "don't match with driver version 530.41.03. Please update with matching NVIDIA driver package.\n"
        "Nov 30 10:00:01 n1 systemd[1]: nvidia-fabricmanager.service: Control process exited, code=exited, status=1/FAILURE\n"
    )
    assert parse_fm_log(broken)["version_mismatch"] == {"fm_version": "530.30.02", "driver_version": "530.41.03"}
    fixed = broken + "Nov 30 10:20:11 n1 systemd[1]: Started NVIDIA fabric manager service.\n"
    assert parse_fm_log(fixed)["version_mismatch"] is None
