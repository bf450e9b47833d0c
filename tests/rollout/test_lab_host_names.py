"""A rollout over hosts whose inventory names no file system takes as they are (issue 19.8): `zz/bad` in wave 2 and
a 250-character FQDN passed `rollout plan`, then `rollout run` changed wave 1 and exited 2 "nothing touched" when
wave 2's gate refused the name. Now every wave is checked first, and such names are collected like any other."""

from __future__ import annotations

import pytest
import yaml
from fabricproof.rollout import state as st
from fabricproof.runstore import file_name

from .rehearsal import cli, derived_plan, the_run, whats

pytestmark = pytest.mark.lab

LONG = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 58])


@pytest.mark.parametrize("h100_lab", [2], indirect=True)
def test_hosts_named_zz_slash_bad_and_a_250_character_fqdn_roll_out_like_any_other(h100_lab, tmp_path):
    doc = yaml.safe_load(h100_lab.inventory.read_text())
    group = next(g for g in doc["all"]["children"]["lab"]["children"].values() if "h100-0002" in (g.get("hosts") or {}))
    # the same nodes under names a file system does not take as they are: the pilot a legal 250-character FQDN
    group["hosts"][LONG] = group["hosts"].pop("h100-0001")
    group["hosts"]["zz/bad"] = group["hosts"].pop("h100-0002")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    plan = derived_plan(tmp_path, "hca-firmware.yml", drain=None, soak=None,
                        waves=[{"name": "pilot", "size": 1}, {"name": "rest", "size": "rest"}])
    runs_dir = tmp_path / "runs"
    shown = cli("rollout", "plan", plan, "-i", inventory, "-f", "json")
    assert shown.exit_code == 0, shown.output
    assert '"zz/bad"' in shown.output
    result = cli("rollout", "run", plan, "-i", inventory, "--runs-dir", runs_dir)
    run = the_run(runs_dir)
    assert result.exit_code == 0 and run.status == st.DONE, result.output
    assert run.hosts[LONG]["wave"] == 0 and run.hosts["zz/bad"]["wave"] == 1
    assert run.hosts[LONG]["state"] == run.hosts["zz/bad"]["state"] == st.PASSED
    assert [h100_lab.node(n)["hcas"][0]["fw"] for n in ("h100-0001", "h100-0002")] == ["28.42.1000"] * 2
    for wave, host in (("1-pilot", LONG), ("2-rest", "zz/bad")):
        assert list((run.dir / "waves").glob(f"{wave}/post-gate/attempt-*/raw/{file_name(host)}")), host
    assert "ERROR" not in whats(run.dir)
