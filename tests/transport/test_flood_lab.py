"""Hosts that print without end (the lab's tool-floods fault) against a real sshd: the client's memory stays bounded,
what they printed past the bound goes to the run directory as it arrives, and the per-host cap still cuts them off."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path

import memkit
import pytest

from fabricproof.collect import collect
from fabricproof.collectors import COLLECTORS
from fabricproof.inventory import load as load_inventory
from fabricproof_lab import manager
from fabricproof_lab.emu.store import transaction
from fabricproof_lab.layout import LabLayout
from fabricproof.model import ExitCode
from fabricproof.transport.ssh import SSHOptions

pytestmark = pytest.mark.lab

MIB = 1 << 20
#: Hosts each printing FLOOD_MIB, collected all at once (--forks = hosts), and the client's peak RSS bound. Before
#: output spilled to disk the client peaked at 1,002-1,203 MiB for 64 such hosts (1,964 MiB at 16 MiB a host); 293-330
#: MiB since. 8 MiB is the largest output still parsed (spool.PARSE_BYTES), so what parsing a flood costs is in the
#: peak too (parsing each flood as ibstat output takes most of the time). The default run floods 16 hosts: 196 MiB
#: measured, where holding the 128 MiB they print, plus a parse's ~9x an output, would pass 300 MiB. The 64-host
#: scale measurement (a minute or two on a loaded two-core machine) runs with `-m slow`.
FLOOD_MIB = 8
SCALES = [pytest.param(16, 300, id="16-hosts"), pytest.param(64, 500, id="64-hosts", marks=pytest.mark.slow)]


def flooding_lab(lab_factory, nodes: int, mib: int) -> Path:
    """A lab whose every node carries tool-floods: its ibstat prints `mib` MiB."""
    lab_dir = lab_factory.new_dir()
    status = lab_factory.up(lab_dir, nodes=nodes, profile="dgx-h100")
    assert status.running, status.as_dict()
    layout = LabLayout.at(lab_dir)
    for host in status.lab.hosts:
        manager.fault_inject(lab_dir, host.name, "tool-floods")
        with transaction(layout.node_dir(host.address)) as node:
            node["faults"]["tool-floods"]["mib"] = mib
    return lab_dir


def run_measured(argv: list[str], out: Path, limit_s: float = 900.0) -> tuple[int, int]:
    try:
        return memkit.run_measured(argv, out, limit_s)
    except memkit.TooLong as exc:
        pytest.fail(f"the collection did not end: {exc}")


@pytest.mark.parametrize(("hosts", "peak_limit_mib"), SCALES)
def test_flooding_hosts_all_at_once_keep_the_client_under_its_bound(lab_factory, tmp_path, hosts, peak_limit_mib):
    lab_dir = flooding_lab(lab_factory, hosts, FLOOD_MIB)
    run_dir = tmp_path / "run"
    code, peak = run_measured(["collect", "-i", str(lab_dir / "inventory.yml"), "-o", str(run_dir), "-c",
                               "ibstat,lsmod", "--forks", str(hosts), "--workers", "1", "-q"], tmp_path / "output")
    output = (tmp_path / "output").read_text()
    assert code == ExitCode.INCOMPLETE, output  # a flood is not ibstat output: a collector error on every host
    assert peak < peak_limit_mib * MIB, f"peak RSS {peak / MIB:.0f} MiB"
    run = json.loads((run_dir / "run.json").read_text())
    assert run["counts"]["collected"] == hosts and run["errors"] == {}
    for host in run["hosts"]:
        # Every byte is evidence, straight from the spool: nothing was lost or left behind on the way.
        assert (run_dir / "raw" / host / "ibstat.txt").stat().st_size == FLOOD_MIB * MIB
        assert json.loads((run_dir / "raw" / host / "meta.json").read_text())["ibstat"]["stdout_bytes"] == FLOOD_MIB * MIB
        assert run["collector_errors"][host]["ibstat"].startswith("cannot parse output: ")
    assert sorted(p.name for p in (run_dir / "raw").iterdir()) == sorted(run["hosts"])  # no .spill-* file left


def test_a_host_printing_past_the_cap_is_cut_off_and_its_output_never_sits_in_memory(lab_factory, tmp_path):
    lab_dir = flooding_lab(lab_factory, 1, 48)
    hosts = list(load_inventory(str(lab_dir / "inventory.yml")).hosts.values())
    options = SSHOptions(default_known_hosts=(), max_output_bytes=16 * MIB, memory_bytes=1 * MIB)
    tracemalloc.start()
    try:
        result = collect(hosts, tmp_path / "run", via="ssh", options=options, collectors=[COLLECTORS["ibstat"]])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    name = hosts[0].name
    assert result.collector_errors[name] == {"ibstat": "the host printed more than 16 MiB; stopped reading"}
    # What it printed up to the cap is its evidence, from the file it was spooled to.
    kept = (tmp_path / "run" / "raw" / name / "ibstat.txt").stat().st_size
    assert 15 * MIB < kept <= 17 * MIB
    # Python allocations of the whole collection (paramiko's window of 2 MiB, the 1 MiB bound, the reads): far
    # below the 16 MiB the host sent.
    assert peak < 8 * MIB, f"{peak / MIB:.1f} MiB traced"
    assert sorted(p.name for p in (tmp_path / "run" / "raw").iterdir()) == [name]
