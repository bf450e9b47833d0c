"""Every class of bad input exits 2 with one clear message naming file:line or the JSON path."""

from __future__ import annotations

from pathlib import Path

import pytest

from .helpers import H100_BASELINE, run, write_facts


@pytest.fixture
def facts_dir(tmp_path: Path) -> Path:
    write_facts(tmp_path / "facts")
    return tmp_path / "facts"


def _validate(facts: Path, baseline: Path, *extra: str):
    return run("validate", "--facts", facts, "--baseline", baseline, *extra)


def test_yaml_syntax_error_names_file_and_line(tmp_path, facts_dir):
    bad = tmp_path / "b.yaml"
    bad.write_text("apiVersion: fabricproof/v1\nkind: Baseline\nmetadata: {name: x\nspec: {}\n")
    res = _validate(facts_dir, bad)
    assert res.exit_code == 2
    assert f"{bad}:" in res.stderr and "YAML syntax error" in res.stderr
    line = int(res.stderr.split(f"{bad}:")[1].split(":")[0])
    assert line in (3, 4)


def test_schema_violation_names_line_and_json_path(tmp_path, facts_dir):
    bad = tmp_path / "b.yaml"
    bad.write_text(
        "apiVersion: fabricproof/v1\nkind: Baseline\nmetadata:\n  name: x\nspec:\n  defaults:\n    nvlink:\n"
        "      links_per_gpu: eighteen\n"
    )
    res = _validate(facts_dir, bad)
    assert res.exit_code == 2
    assert f"{bad}:8: at /spec/defaults/nvlink/links_per_gpu" in res.stderr
    assert "not of type 'integer'" in res.stderr


def test_unknown_key_is_an_error_with_a_suggestion(tmp_path, facts_dir):
    bad = tmp_path / "b.yaml"
    bad.write_text(
        "apiVersion: fabricproof/v1\nkind: Baseline\nmetadata:\n  name: x\nspec:\n  defaults:\n    nvlink:\n"
        "      link_per_gpu: 18\n"
    )
    res = run("baseline", "lint", bad)
    assert res.exit_code == 2
    assert f"{bad}:8: at /spec/defaults/nvlink/link_per_gpu unknown key 'link_per_gpu'; did you mean 'links_per_gpu'?" in res.stderr


def test_duplicate_key_is_an_error(tmp_path):
    bad = tmp_path / "b.yaml"
    bad.write_text("apiVersion: fabricproof/v1\nkind: Baseline\nmetadata:\n  name: x\n  name: y\nspec: {defaults: {}}\n")
    res = run("baseline", "lint", bad)
    assert res.exit_code == 2 and f"{bad}:5: at /metadata/name duplicate key 'name'" in res.stderr


def test_missing_baseline_file(tmp_path, facts_dir):
    res = _validate(facts_dir, tmp_path / "nope.yaml")
    assert res.exit_code == 2 and "nope.yaml: file not found" in res.stderr


def test_unknown_check_glob(facts_dir):
    res = _validate(facts_dir, H100_BASELINE, "--checks", "nvlnk.*")
    assert res.exit_code == 2 and "--checks 'nvlnk.*' matches no check id" in res.stderr


def test_unknown_check_id_in_show():
    res = run("checks", "show", "nvlink.links_activ")
    assert res.exit_code == 2 and "did you mean nvlink.links_active" in res.stderr


def test_empty_facts_dir(tmp_path):
    (tmp_path / "empty").mkdir()
    res = _validate(tmp_path / "empty", H100_BASELINE)
    assert res.exit_code == 2 and "no facts (*.json) in this directory" in res.stderr


def test_missing_facts_dir(tmp_path):
    res = _validate(tmp_path / "absent", H100_BASELINE)
    assert res.exit_code == 2 and "facts directory not found" in res.stderr


def test_facts_failing_the_schema_name_file_line_and_path(tmp_path):
    d = tmp_path / "facts"
    write_facts(d, nvlink={"status": {"supported": "yes"}})
    res = _validate(d, H100_BASELINE)
    assert res.exit_code == 2
    assert f"{d / 'node1.json'}:" in res.stderr and "at /nvlink/status/supported" in res.stderr


def test_facts_with_json_syntax_error(tmp_path):
    d = tmp_path / "facts"
    d.mkdir()
    (d / "n.json").write_text('{"host": "n",\n "kind": }\n')
    res = _validate(d, H100_BASELINE)
    assert res.exit_code == 2 and f"{d / 'n.json'}:2: JSON syntax error" in res.stderr


def test_bad_check_file_in_a_catalog_is_reported_with_its_line(tmp_path):
    from fabricproof.judging.catalog import load
    from fabricproof.errors import InputError

    (tmp_path / "nvlink").mkdir()
    (tmp_path / "nvlink" / "nvlink.x.yaml").write_text(
        "id: nvlink.x\ntitle: A title here\nfamily: nvlink\nseverity: critical\naction: monitor\nscope: host\nsubject: s s s\n"
        "collector: nvlink_status\nfact: /nvlink/status/links_active_total\nassert: {op: equals, expected: 1}\n"
        "rationale: because it matters\nremediation: do the thing now\nreferences: [x]\n"
    )
    with pytest.raises(InputError) as exc:
        load(tmp_path)
    assert "nvlink.x.yaml:10: at /assert/op" in str(exc.value)


def test_several_formats_to_stdout_is_a_usage_error(facts_dir):
    res = _validate(facts_dir, H100_BASELINE, "-f", "json", "-f", "tap")
    assert res.exit_code == 2 and "only one --format can go to stdout" in res.stderr


def test_a_rejected_inventory_gives_ansibles_own_reason_and_line(tmp_path, facts_dir):
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    a: {ansible_host: 10.0.0.1\n")
    res = _validate(facts_dir, H100_BASELINE, "-i", inv)
    assert res.exit_code == 2
    assert f"{inv}:4: Ansible cannot parse it (auto plugin): YAML parsing failed" in res.stderr
    assert "Completely failed" not in res.stderr


def test_an_unreadable_inventory_says_permission_denied(tmp_path, facts_dir):
    """Run as root without the capabilities that let root read any file, so the denial is the kernel's own."""
    import shutil
    import subprocess
    import sys

    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    inv = tmp_path / "inv.yml"
    inv.write_text("all:\n  hosts:\n    a: {}\n")
    inv.chmod(0)
    caps = "-dac_override,-dac_read_search"
    proc = subprocess.run(["setpriv", f"--bounding-set={caps}", f"--inh-caps={caps}", sys.executable, "-m",
                           "fabricproof", "validate", "--facts", str(facts_dir), "-b", str(H100_BASELINE), "-i",
                           str(inv)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert f"{inv}: cannot read the inventory: permission denied" in proc.stderr


ALIAS_BOMB = ('apiVersion: fabricproof/v1\nkind: {kind}\nmetadata: {{name: bomb}}\n'
              'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
              + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join(["*" + chr(97 + i)] * 9) + "]\n"
                        for i in range(8)))


@pytest.mark.parametrize(("command", "kind"), [(["baseline", "lint"], "Baseline"), (["rollout", "plan"], "RolloutPlan"),
                                               (["runbook", "run", "--yes"], "Runbook"), (["runbook", "lint"], "Runbook")])
def test_a_yaml_alias_bomb_is_refused_with_the_file_before_it_expands(tmp_path, command, kind):
    bomb = tmp_path / "bomb.yml"
    bomb.write_text(ALIAS_BOMB.format(kind=kind))
    res = run(*command, bomb)
    assert res.exit_code == 2, res.output
    assert f"{bomb}: the document expands to 490,329,072 values" in res.stderr


def test_yaml_nested_past_the_bound_is_refused_before_libyaml_parses_it(tmp_path):
    deep = tmp_path / "deep.yaml"
    deep.write_text("apiVersion: fabricproof/v1\nkind: Baseline\nmetadata: {name: x}\nspec: " + "[" * 200_000
                    + "]" * 200_000 + "\n")  # libyaml's C parser segfaults the process on this
    res = run("baseline", "lint", deep)
    assert res.exit_code == 2 and f"{deep}: collections nest deeper than 64 levels" in res.stderr


def test_facts_json_nested_200k_deep_is_an_input_error(tmp_path):
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "node1.json").write_text("[" * 200_000 + "]" * 200_000)
    res = _validate(facts, H100_BASELINE)
    assert res.exit_code == 2 and f"{facts / 'node1.json'}: JSON nested too deeply to read" in res.stderr


def test_duplicate_keys_in_facts_json_are_errors_naming_line_and_path(tmp_path):
    facts = tmp_path / "facts"
    facts.mkdir()
    (facts / "node1.json").write_text('{"apiVersion": "fabricproof/v1",\n "kind": "Facts",\n "host": "node1",\n'
                                      ' "collectors": {},\n "host": "node2"}\n')
    res = _validate(facts, H100_BASELINE)
    assert res.exit_code == 2 and f"{facts / 'node1.json'}:5: at /host duplicate key 'host'" in res.stderr


def test_a_construct_left_open_at_the_end_is_reported_inside_the_file(tmp_path):
    """An unclosed `[` on the last line: libyaml gives up on line 7 of a 6-line file; the message names the end of
    the file and where the sequence opened, at a line that exists."""
    bad = tmp_path / "b.yaml"
    bad.write_text("apiVersion: fabricproof/v1\nkind: Baseline\nmetadata: {name: x}\nspec:\n  defaults:\n"
                   "    nvlink: [1, 2\n")
    res = run("baseline", "lint", bad)
    assert res.exit_code == 2
    assert (f"{bad}:6: YAML syntax error: did not find expected ',' or ']' at the end of the file, while parsing a "
            f"flow sequence opened at line 6, column 13") in res.stderr
