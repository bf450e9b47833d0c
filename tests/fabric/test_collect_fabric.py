"""The fabric collection on its vantage host through a real transport: here the local one, running Debian's real
infiniband-diags on this machine, which has no InfiniBand (no umad): each tool's failure is recorded with its own
words, the evidence is kept, no fabric is made up, and nothing is raised (the run goes on). The lab's ibsim fabric
proves the reading itself (tests/lab/test_fabric_lab.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from fabricproof.collect.fabric import collect_fabric
from fabricproof.collectors.subnet import FABRIC_COLLECTORS, FabricCollector
from fabricproof.model import Host
from fabricproof.runstore import RunStore
from fabricproof.subnet.model import Subnet

pytestmark = pytest.mark.skipif(shutil.which("ibnetdiscover") is None, reason="infiniband-diags is not installed")


def test_no_umad_here_is_an_error_per_tool_with_its_own_words_and_the_evidence_kept(tmp_path):
    run = collect_fabric(Host("here"), tmp_path / "run", via="local", window_s=0)
    assert run.subnet is None and run.counters_before is None and run.error == ""
    assert {"ibnetdiscover", "iblinkinfo", "ibqueryerrors"} <= set(run.errors)  # sminfo_fabric's 255 is an answer
    assert "ibnetdiscover on here: exit 255" in run.errors["ibnetdiscover"]
    assert "can't open MAD port" in run.errors["ibnetdiscover"]  # the tool's own last line on stderr
    store = RunStore(RunStore(tmp_path / "run").fabric_root)
    assert sorted(p.name for p in store.raw_dir("here").iterdir()) == sorted(
        ["meta.json", *(f"{cid}.txt" for cid in FABRIC_COLLECTORS), *(f"{cid}.stderr" for cid in FABRIC_COLLECTORS
                                                                     if run.results[cid].stderr)])
    assert run.evidence["ibnetdiscover"] == "fabric/raw/here/ibnetdiscover.txt"
    doc = json.loads(store.fabric_path.read_text())
    assert doc["vantage"] == "here" and doc["subnet"] is None and doc["errors"] == run.errors
    # a tool that printed nothing was run once more before its failure counted; one that said why was not
    assert run.retried == {"iblinkinfo": "exit 1: Failed to open (null) port 0; run once more 2 s later"}
    assert doc["retried"] == run.retried


def test_a_tool_that_failed_with_no_output_is_run_once_more_and_its_second_answer_counts(tmp_path):
    """As while the SM sweeps: the first run fails and prints nothing, the second answers. A real process on the
    local transport, failing on its first run only."""
    marker = tmp_path / "ran-once"
    script = tmp_path / "topology"
    script.write_text(f"#!/bin/sh\nif [ -e {marker} ]; then echo answered; exit 0; fi\n: > {marker}\nexit 245\n")
    script.chmod(0o755)
    seen: list[str] = []
    views = {"ibnetdiscover": FabricCollector("ibnetdiscover", (str(script),), lambda text: text, 0.1, 30.0)}

    def merge(texts):
        seen.append(texts["ibnetdiscover"])
        return Subnet()

    run = collect_fabric(Host("here"), tmp_path / "run", via="local", window_s=0, registry=(views, merge))
    assert run.errors == {} and seen == ["answered\n"] and run.subnet == Subnet()
    assert run.retried == {"ibnetdiscover": "exit 245; run once more 2 s later"}



def test_the_counters_second_reading_that_failed_with_no_output_is_run_once_more_too(tmp_path):
    """The reading after the window fails alike (seen in the lab: the real ibqueryerrors died with no output right
    after the simulator changed): run once more, its second answer is the reading after the window."""
    runs = tmp_path / "runs"
    script = tmp_path / "counters"
    # 1st run: the reading before the window; 2nd: dies with nothing printed; 3rd: the reading after
    script.write_text(f"#!/bin/sh\necho x >> {runs}\nn=$(wc -l < {runs})\n"
                      "[ \"$n\" -eq 2 ] && exit 245\necho \"reading $n\"\n")
    script.chmod(0o755)
    seen: list[dict[str, str]] = []
    views = {"ibnetdiscover": FabricCollector("ibnetdiscover", ("true",), lambda text: text, 0.1, 30.0),
             "ibqueryerrors": FabricCollector("ibqueryerrors", (str(script),), lambda text: Subnet(), 0.1, 30.0)}

    def merge(texts):
        seen.append(dict(texts))
        return Subnet()

    run = collect_fabric(Host("here"), tmp_path / "run", via="local", window_s=0.1, registry=(views, merge))
    assert run.errors == {} and run.counters_before == Subnet()
    assert seen == [{"ibnetdiscover": "", "ibqueryerrors": "reading 3\n"}]
    assert run.retried == {"ibqueryerrors_after": "exit 245; run once more 2 s later"}
    assert runs.read_text().count("x") == 3

def test_an_unreachable_vantage_is_one_error_for_every_tool(tmp_path):
    hosts = tmp_path / "inv.yml"
    hosts.write_text("all:\n  hosts:\n    gone: {ansible_host: 127.0.0.1, ansible_port: 1}\n")
    from fabricproof import transport

    options = transport.configure("ssh", inventory_path=str(hosts))
    run = collect_fabric(Host("gone", {"ansible_host": "127.0.0.1", "ansible_port": 1}), tmp_path / "run", via="ssh",
                         options=options, window_s=0)
    assert run.subnet is None and run.error.startswith("gone: ")
    assert set(run.errors.values()) == {run.error}
