"""The Ansible transport (ansible-runner + playbooks/collect.yml) on a real lab: the same facts as SSH, per profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from fabricproof.collect import collect
from fabricproof.inventory import Inventory
from fabricproof.model import ExitCode
from fabricproof.runstore import RunStore
from fabricproof.transport import ErrorKind
from fabricproof.transport.ansible import AnsibleOptions
from fabricproof.transport.ssh import SSHOptions

from .labutil import processes_mentioning

pytestmark = pytest.mark.lab

#: A host of every profile and a second of one (two of the same kind differ in little but their names, so facts
#: delivered to the wrong host would show), none of them touched by the fault tests, and one that cannot be reached.
#: Each compared host costs ~10 s of CPU through Ansible (a task per command); two of every profile took 90 s.
COMPARED = ("a100-0001", "h100-0001", "h100-0002", "h200-0001", "gb200-0001")
BROKEN = "h200-0003"
VOLATILE = ("via", "collected_at")


def comparable(doc: dict) -> dict:
    """A facts document without what differs by transport or by clock."""
    out = {k: v for k, v in doc.items() if k not in VOLATILE}
    out["collectors"] = {cid: {k: v for k, v in run.items() if k != "duration_s"}
                         for cid, run in doc["collectors"].items()}
    return out


def broken_inventory(lab_dir: Path, tmp_path: Path) -> Path:
    """The lab inventory with BROKEN pointed at a port nothing listens on (ansible-playbook reads the file)."""
    inv = yaml.safe_load((lab_dir / "inventory.yml").read_text())
    for group in inv["all"]["children"]["lab"]["children"].values():
        hosts = group.get("hosts") or {}
        if hosts.get(BROKEN) is not None:
            hosts[BROKEN]["ansible_port"] = 9
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump(inv))
    return path


def test_ansible_yields_the_same_facts_as_ssh_on_every_profile(fleet_lab, fleet_inventory: Inventory, tmp_path):
    hosts = [fleet_inventory.hosts[n] for n in COMPARED]
    via_ssh = collect(hosts, tmp_path / "ssh", via="ssh", options=SSHOptions(default_known_hosts=()), forks=8)
    assert via_ssh.exit_code == ExitCode.OK, via_ssh.collector_errors

    run_dir = RunStore.create(tmp_path / "ansible").root
    options = AnsibleOptions(inventory_path=str(broken_inventory(fleet_lab.dir, tmp_path)))
    via_ansible = collect([*hosts, fleet_inventory.hosts[BROKEN]], run_dir, via="ansible", options=options, forks=10,
                          run_id="ansible-test-run")

    assert set(via_ansible.errors) == {BROKEN}
    err = via_ansible.errors[BROKEN]
    assert err.kind is ErrorKind.UNREACHABLE and "refused" in err.message.lower()
    assert via_ansible.collector_errors == {}
    for name in COMPARED:
        assert via_ansible.facts_by_host[name]["via"] == "ansible"
        assert comparable(via_ansible.facts_by_host[name]) == comparable(via_ssh.facts_by_host[name]), name
    # raw evidence is the same bytes whichever transport fetched it
    for name in ("h100-0001", "gb200-0001"):
        for cid in ("nvidia_smi_q", "ib_counters", "fm_journal"):
            a = (tmp_path / "ssh" / "raw" / name / f"{cid}.txt").read_bytes()
            b = (run_dir / "raw" / name / f"{cid}.txt").read_bytes()
            assert a == b, (name, cid)

    events = run_dir / "ansible" / "artifacts" / "ansible-test-run" / "job_events"
    assert events.is_dir() and any(events.iterdir())  # the runner's own evidence is kept in the run directory
    assert json.loads((run_dir / "run.json").read_text())["via"] == "ansible"
    assert processes_mentioning("fp-cp-") == []  # no ssh mux master outlived the run
