"""Defaults for -b and -i (issue 24.3): an option wins over $FABRICPROOF_BASELINE/$FABRICPROOF_INVENTORY, which win
over fabricproof.yaml (the working directory's, or $FABRICPROOF_CONFIG's); `fabricproof config` shows each value and
where it came from; a bad config file is exit 2 with its file, line and key; `baseline show` prints what a host gets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fabricproof.judging.baseline import Baseline

from .helpers import H100_BASELINE, REPO, run, write_facts

LAB_BASELINE = REPO / "inventories" / "lab" / "baseline.yaml"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    for name in ("FABRICPROOF_CONFIG", "FABRICPROOF_BASELINE", "FABRICPROOF_INVENTORY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)


def _settings() -> dict:
    res = run("config", "-f", "json")
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["settings"]


def test_precedence_is_option_then_environment_then_config_file(tmp_path, monkeypatch):
    assert _settings() == {"baseline": {"value": None, "source": "not set"},
                           "inventory": {"value": None, "source": "not set"}}
    (tmp_path / "fabricproof.yaml").write_text("# defaults\nbaseline: fleet/baseline.yaml\ninventory: /etc/ansible/hosts\n")
    assert _settings() == {"baseline": {"value": "fleet/baseline.yaml", "source": "fabricproof.yaml:2"},
                           "inventory": {"value": "/etc/ansible/hosts", "source": "fabricproof.yaml:3"}}
    monkeypatch.setenv("FABRICPROOF_BASELINE", "/srv/other.yaml")
    assert _settings()["baseline"] == {"value": "/srv/other.yaml", "source": "$FABRICPROOF_BASELINE"}
    assert _settings()["inventory"]["source"] == "fabricproof.yaml:3"
    text = run("config").stdout
    assert "config file: fabricproof.yaml" in text and "from $FABRICPROOF_BASELINE" in text


def test_a_config_file_named_by_the_environment_resolves_its_paths_from_its_own_directory(tmp_path, monkeypatch):
    site = tmp_path / "site"
    site.mkdir()
    (site / "baseline.yaml").write_text(H100_BASELINE.read_text())
    (site / "fp.yaml").write_text("baseline: baseline.yaml\n")
    monkeypatch.setenv("FABRICPROOF_CONFIG", str(site / "fp.yaml"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert _settings()["baseline"] == {"value": str(site / "baseline.yaml"), "source": f"{site / 'fp.yaml'}:1"}
    # validate with no -b judges against that baseline
    write_facts(tmp_path / "facts", "n1")
    res = run("validate", "--facts", tmp_path / "facts", "-f", "json", "-c", "driver.version")
    assert res.exit_code != 2, res.output
    assert json.loads(res.stdout)["metadata"]["baseline"] == "dgx-h100"


@pytest.mark.parametrize("text,message", [
    ("baseline: b.yaml\ninventry: hosts\n", "fabricproof.yaml:2: at /inventry unknown key 'inventry'; did you mean 'inventory'?"),
    ("baseline: [a, b]\n", "fabricproof.yaml:1: at /baseline baseline must be a path, got ['a', 'b']"),
    ("- baseline\n", "fabricproof.yaml:1: at / expected a mapping of settings (baseline, inventory)"),
    ("baseline: 'x\n", "fabricproof.yaml:1: YAML syntax error"),
])
def test_a_bad_config_file_is_exit_2_with_file_line_and_key(tmp_path, text, message):
    (tmp_path / "fabricproof.yaml").write_text(text)
    for args in (("config",), ("validate", "--facts", tmp_path)):
        res = run(*args)
        assert res.exit_code == 2, res.output
        assert message in res.output and res.output.count("\n") == 1 and "Traceback" not in res.output


def test_a_missing_config_file_named_by_the_environment_is_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("FABRICPROOF_CONFIG", str(tmp_path / "nope.yaml"))
    res = run("config")
    assert res.exit_code == 2 and f"{tmp_path / 'nope.yaml'}: file not found" in res.output


def test_no_baseline_anywhere_says_how_to_give_one(tmp_path):
    write_facts(tmp_path / "facts", "n1")
    res = run("validate", "--facts", tmp_path / "facts")
    assert res.exit_code == 2
    assert "no baseline: give --baseline/-b FILE, set $FABRICPROOF_BASELINE, or name it in fabricproof.yaml" in res.output


def test_merged_baseline_sources_name_the_layer_that_set_each_value():
    base = Baseline("b", defaults={"gpu": {"count": 8, "ecc": "Enabled"}, "iommu": {"modes": ["pt"]}},
                    groups={"a": {"gpu": {"count": 4}}, "b": {"gpu": {"count": 2}, "iommu": {"modes": []}}, "z": {}})
    assert base.sources(["a"]) == {"gpu.count": "groups.a", "gpu.ecc": "defaults", "iommu.modes": "defaults"}
    # groups merge in name order: the later group's value is the one the host gets, and named as its source
    assert base.sources(["b", "a", "z"]) == {"gpu.count": "groups.b", "gpu.ecc": "defaults", "iommu.modes": "groups.b"}
    assert base.sources([]) == {"gpu.count": "defaults", "gpu.ecc": "defaults", "iommu.modes": "defaults"}


def test_baseline_show_prints_each_value_with_its_group(tmp_path):
    (tmp_path / "fabricproof.yaml").write_text(f"baseline: {LAB_BASELINE}\n")
    res = run("baseline", "show", "--host", "h100-0001", "-g", "dgx_h100")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"# {LAB_BASELINE} for h100-0001: defaults, then groups.dgx_h100")
    assert any(line.startswith("gpu.count: 8 ") and line.endswith("# groups.dgx_h100") for line in lines)
    doc = json.loads(run("baseline", "show", "--host", "h100-0001", "-g", "dgx_h100", "-f", "json").stdout)
    assert doc["applied_groups"] == ["dgx_h100"] and doc["values"]["gpu"]["count"] == 8
    res = run("baseline", "show", "--host", "h100-0001")
    assert res.exit_code == 2 and "give --inventory/-i" in res.output
