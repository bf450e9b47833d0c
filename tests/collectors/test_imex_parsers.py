"""IMEX parsers: `nvidia-imex-ctl -N -j` JSON and `-N` text, node readiness, unit state."""

from __future__ import annotations

import json

import pytest
from fabricproof.collectors import COLLECTORS
from fabricproof.collectors.imex import channels as imex_channels
from fabricproof.collectors.imex import nodes as imex_nodes
from fabricproof.collectors.imex import service as imex_service
from fabricproof.collectors.base import Collector, ParseError
from fabricproof.collectors.imex.nodes import parse_imex_nodes
from fabricproof.collectors.systemd_unit import SERVICE_SCHEMA, parse_systemd_unit

from .contract import assert_closed_and_described, assert_collector_table, assert_valid

IMEX_COLLECTORS = (*imex_service.COLLECTORS, *imex_nodes.COLLECTORS, *imex_channels.COLLECTORS)


def test_collectors_match_contract() -> None:
    show = "--property=LoadState,ActiveState,SubState,UnitFileState,NRestarts"
    assert_collector_table(
        IMEX_COLLECTORS,
        {
            "imex_service": (("systemctl", "show", "nvidia-imex", show), "/imex/service", True),
            "imex_nodes": (("nvidia-imex-ctl", "-N", "-j"), "/imex/nodes", True),
            "imex_channels": (("sh", "-c", 'export LC_ALL=C; cd "${FABRICPROOF_HOST_ROOT:-}/dev" && exec ls -l -- '
                                           "nvidia-caps-imex-channels 2>&1"), "/imex/channels", True),
        },
    )
    service = COLLECTORS["imex_service"]
    assert service.parse is parse_systemd_unit and service.schema is SERVICE_SCHEMA


@pytest.mark.parametrize("collector", IMEX_COLLECTORS, ids=lambda c: c.id)
def test_schema_is_closed_and_described(collector: Collector) -> None:
    assert_closed_and_described(collector.schema)


def test_imex_service_show() -> None:
    show = "LoadState=loaded\nActiveState=active\nSubState=running\nUnitFileState=enabled\nNRestarts=0\n"
    frag = COLLECTORS["imex_service"].parse(show)
    assert_valid(COLLECTORS["imex_service"].schema, frag)
    assert (frag["active"], frag["restarts"]) == (True, 0)


# `nvidia-imex-ctl -N -j` (-j: "Output of the -n/-N command will be in JSON", -H adds hostnames), per
# https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/cmdservice.html: a domain "status"
# (UP/DOWN/DEGRADED), a "timestamp", and "nodes" keyed by index with host, status, version and
# per-peer "connections".
def imex_json(statuses: list[str], domain: str, peer_state: str = "CONNECTED") -> str:
    hosts = [f"10.0.0.{i + 1}" for i in range(len(statuses))]
    nodes = {
        str(i): {
            "status": status,
            "host": hosts[i],
            "hostName": f"gb200-tray-{i + 1:02d}",
            "connections": {
                str(j): {
                    "host": hosts[j],
                    "status": "CONNECTED" if status == "READY" and statuses[j] == "READY" else peer_state,
                    "changed": True,
                }
                for j in range(len(statuses))
            },
            "changed": True,
            "version": "580.95.05",
        }
        for i, status in enumerate(statuses)
    }
    return json.dumps({"nodes": nodes, "timestamp": "9/4/2025 00:37:39.905", "status": domain}, indent=2)


def test_json_domain_up_all_ready() -> None:
    frag = parse_imex_nodes(imex_json(["READY", "READY"], "UP"))
    assert_valid(COLLECTORS["imex_nodes"].schema, frag)
    assert (frag["total"], frag["ready"], frag["all_ready"], frag["domain_state"]) == (2, 2, True, "UP")
    assert frag["nodes"][1] == {
        "index": 1,
        "address": "10.0.0.2",
        "hostname": "gb200-tray-02",
        "status": "READY",
        "version": "580.95.05",
    }
    assert len(frag["connections"]) == 4 and frag["connections_not_connected"] == 0
    assert frag["timestamp"] == "9/4/2025 00:37:39.905"


def test_json_node_unavailable_is_not_ready() -> None:
    frag = parse_imex_nodes(imex_json(["READY", "UNAVAILABLE", "WAITING_FOR_PEERS"], "DOWN", peer_state="INVALID"))
    assert_valid(COLLECTORS["imex_nodes"].schema, frag)
    assert (frag["total"], frag["ready"], frag["all_ready"], frag["domain_state"]) == (3, 1, False, "DOWN")
    assert [n["status"] for n in frag["nodes"]] == ["READY", "UNAVAILABLE", "WAITING_FOR_PEERS"]
    assert frag["connections_not_connected"] == 8  # only 0->0 is CONNECTED


def test_json_nodes_sorted_numerically() -> None:
    doc = json.loads(imex_json(["READY"] * 11, "UP"))
    doc["nodes"] = dict(sorted(doc["nodes"].items()))  # "0", "1", "10", "2", ... as a string sort gives
    frag = parse_imex_nodes(json.dumps(doc))
    assert [n["index"] for n in frag["nodes"]] == list(range(11))


# Formatted `nvidia-imex-ctl -N` output (legend + node list + From\To matrix + Domain State),
# format per https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/cmdservice.html
IMEX_TEXT = """Connectivity Table Legend:
I - Invalid - Node wasn't reachable, no connection status available
N - Never Connected
R - Recovering - Connection was lost, but clean up has not yet been triggered.
D - Disconnected - Connection was lost, and clean up has been triggreed.
A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.
C - Connected - Ready for operation

3/25/2025 10:39:43.659
Nodes:
Node #0   - 10.136.206.48   - READY
Node #1   - 10.136.206.49   - READY
Node #2   - 10.136.206.50   - UNAVAILABLE

 Nodes From\\To  0   1   2
       0        C   C   I
       1        C   C   I
       2        I   I   I
Domain State: DEGRADED
"""


def test_text_output() -> None:
    frag = parse_imex_nodes(IMEX_TEXT)
    assert_valid(COLLECTORS["imex_nodes"].schema, frag)
    assert [(n["index"], n["address"], n["status"]) for n in frag["nodes"]] == [
        (0, "10.136.206.48", "READY"),
        (1, "10.136.206.49", "READY"),
        (2, "10.136.206.50", "UNAVAILABLE"),
    ]
    assert (frag["ready"], frag["all_ready"], frag["domain_state"]) == (2, False, "DEGRADED")
    assert frag["timestamp"] == "3/25/2025 10:39:43.659"
    assert len(frag["connections"]) == 9 and frag["connections_not_connected"] == 5
    assert frag["connections"][2] == {"from_index": 0, "to_index": 2, "to_address": "10.136.206.50", "status": "INVALID"}


@pytest.mark.parametrize(
    "text",
    [
        "",
        "not imex output\n",
        "{broken json",
        '{"status": "UP"}',
        "Failed to read node configuration file /etc/nvidia-imex/nodes_config.cfg\n",
    ],
)
def test_rejects_unreadable_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_imex_nodes(text)


# `ls -l /dev/nvidia-caps-imex-channels` as GNU ls prints it; the device line follows the IMEX guide's layout
# (https://docs.nvidia.com/multi-node-nvlink-systems/imex-guide/imexchannels.html, major number as an example).
# No capture of this directory is in the corpus: the layout is coreutils', not NVIDIA's.
@pytest.mark.parametrize(
    ("text", "directory", "channel0", "names"),
    [
        ("total 0\ncr--r--r-- 1 root root 234, 0 Jan  6 09:00 channel0\n", True, True, ["channel0"]),
        ("total 0\ncrw-rw-rw- 1 root root 234, 1 Jan  6 09:00 channel1\n", True, False, ["channel1"]),
        ("total 0\n", True, False, []),
        ("ls: cannot access 'nvidia-caps-imex-channels': No such file or directory\n", False, False, []),
    ],
)
def test_imex_channels(text: str, directory: bool, channel0: bool, names: list[str]) -> None:
    frag = imex_channels.parse_imex_channels(text)
    assert_valid(imex_channels.IMEX_CHANNELS_SCHEMA, frag)
    assert (frag["directory"], frag["channel0"], [c["name"] for c in frag["channels"]]) == (directory, channel0, names)
    assert all(c["char_device"] for c in frag["channels"])


def test_imex_channels_lists_the_real_directory(tmp_path) -> None:
    import subprocess

    (tmp_path / "dev" / "nvidia-caps-imex-channels").mkdir(parents=True)
    (tmp_path / "dev" / "nvidia-caps-imex-channels" / "channel0").touch()
    argv = COLLECTORS["imex_channels"].argv
    run = lambda: subprocess.run(argv, capture_output=True, text=True, env={"FABRICPROOF_HOST_ROOT": str(tmp_path),
                                                                          "PATH": "/usr/bin:/bin"}, check=False)
    listed = run()
    assert listed.returncode == 0 and imex_channels.parse_imex_channels(listed.stdout)["channel0"] is True
    (tmp_path / "dev" / "nvidia-caps-imex-channels" / "channel0").unlink()
    (tmp_path / "dev" / "nvidia-caps-imex-channels").rmdir()
    gone = run()  # after a reboot without NVreg_CreateImexChannel0=1: no directory at all
    assert gone.returncode in COLLECTORS["imex_channels"].ok_exit_codes
    assert imex_channels.parse_imex_channels(gone.stdout) == {"directory": False, "channels": [], "channel0": False}


@pytest.mark.parametrize("text", ["", "total\n", "hello world\n", "channel0\n"])
def test_imex_channels_rejects_other_output(text: str) -> None:
    with pytest.raises(ParseError):
        imex_channels.parse_imex_channels(text)
