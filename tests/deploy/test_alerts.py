"""deploy/prometheus and deploy/grafana: the alert rules pass `promtool check rules` and their own `promtool test
rules` (synthetic series shaped like fabricproof's textfile as scraped), and name only the metrics and labels
fabricproof writes; the dashboard is well-formed Grafana JSON whose queries promtool parses, on those metrics, through
a templated datasource."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from fabricproof.reporters import prometheus
from reports.fleet import small

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "deploy" / "prometheus" / "fabricproof.rules.yml"
RULES_TEST = REPO / "deploy" / "prometheus" / "fabricproof.rules.test.yml"
DASHBOARD = REPO / "deploy" / "grafana" / "fabricproof.json"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(PROMTOOL is None, reason="promtool not installed: apt-get install -y prometheus")
SCRAPED = {"instance", "job"}  # what Prometheus adds when it scrapes node_exporter

_METRIC = re.compile(r"\bfabricproof[_:][A-Za-z0-9_:]*")
_SAMPLE = re.compile(r"^(\w+)(?:\{(.*)\})? ")


def exported() -> dict[str, set[str]]:
    """Metric name -> its label names, from what the prometheus reporter renders for a lab fleet's report."""
    out: dict[str, set[str]] = {}
    for line in prometheus.render(small()).splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.setdefault(m[1], set()).update(re.findall(r'(\w+)="', m[2] or ""))
    return out


def recorded() -> dict[str, set[str]]:
    """The recording rules' names (they aggregate every label away)."""
    rules = yaml.safe_load(RULES.read_text())["groups"][0]["rules"]
    return {r["record"]: set() for r in rules if "record" in r}


def labels_used(expr: str) -> set[str]:
    """Label names an expression groups by or matches on."""
    used = set()
    for group in re.findall(r"\b(?:by|without|on|ignoring)\s*\(([^)]*)\)", expr):
        used.update(x.strip() for x in group.split(",") if x.strip())
    for matchers in re.findall(r"\{([^}]*)\}", expr):
        used.update(re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers))
    return used


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    assert PROMTOOL is not None
    return subprocess.run([PROMTOOL, *args], capture_output=True, text=True, timeout=300, cwd=cwd, check=False)


@needs_promtool
def test_the_alert_rules_pass_promtool_check_rules():
    res = _promtool("check", "rules", RULES.name, cwd=RULES.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 5 rules found" in res.stdout


@needs_promtool
def test_the_alert_rules_pass_their_promtool_unit_tests():
    res = _promtool("test", "rules", RULES_TEST.name, cwd=RULES_TEST.parent)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS" in res.stdout


@needs_promtool
@pytest.mark.parametrize("broken, by", [
    ('fabricproof_check_result{severity="critical"} == 0', 'fabricproof_check_result{severity="warning"} == 0'),
    ("time() - fabricproof_last_run_timestamp_seconds > 3600", "time() - fabricproof_last_run_timestamp_seconds > 7200"),
    ("offset 30m", "offset 5m"),
])
def test_the_unit_tests_catch_a_wrong_rule(tmp_path, broken, by):
    """Each alert's test is a real one: the same tests on a rule file with that alert's condition changed fail."""
    text = RULES.read_text()
    assert text.count(broken) == 1
    (tmp_path / RULES.name).write_text(text.replace(broken, by))
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    res = _promtool("test", "rules", RULES_TEST.name, cwd=tmp_path)
    assert res.returncode != 0 and "FAILED" in res.stdout + res.stderr


def test_the_rules_name_only_metrics_and_labels_fabricproof_exports():
    metrics = exported() | recorded()
    groups = yaml.safe_load(RULES.read_text())["groups"]
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    assert {a["alert"] for a in alerts} == {"FabricproofCriticalCheckFailed", "FabricproofNodeNotChecked",
                                            "FabricproofFleetFailureSpike"}
    for rule in (r for g in groups for r in g["rules"]):
        names = set(_METRIC.findall(rule["expr"]))
        assert names and names <= set(metrics), (rule, sorted(metrics))
        known = set().union(*(metrics[n] for n in names)) | SCRAPED
        templated = set(re.findall(r"\$labels\.(\w+)", json.dumps(rule.get("annotations", {}))))
        assert labels_used(rule["expr"]) | templated <= known, rule


def test_the_unit_tests_feed_series_shaped_like_the_textfile():
    """Every synthetic series is a metric fabricproof writes, with exactly its labels (plus instance and job)."""
    metrics = exported()
    series = [s["series"] for t in yaml.safe_load(RULES_TEST.read_text())["tests"] for s in t["input_series"]]
    assert len(series) == 25
    for text in series:
        name, labels = re.match(r"^(\w+)\{(.*)\}$", text).groups()
        assert set(re.findall(r'(\w+)="', labels)) - SCRAPED == metrics[name], text


def test_the_dashboard_is_well_formed_and_queries_what_fabricproof_exports(tmp_path):
    dash = json.loads(DASHBOARD.read_text())
    assert dash["uid"] and dash["title"] and isinstance(dash["schemaVersion"], int)
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels)
    assert {p["type"] for p in panels} >= {"heatmap", "timeseries"}
    metrics = exported()
    exprs = []
    for p in panels:
        g = p["gridPos"]
        assert 0 <= g["x"] and g["x"] + g["w"] <= 24 and g["h"] > 0, p["title"]
        assert p["targets"], p["title"]
        for t in p["targets"]:
            # Templated: the dashboard imports into any Grafana whatever its Prometheus data source is called.
            assert t["datasource"] == {"type": "prometheus", "uid": "${datasource}"} == p["datasource"], p["title"]
            names = set(_METRIC.findall(t["expr"]))
            assert names and names <= set(metrics), (p["title"], t["expr"])
            known = set().union(*(metrics[n] for n in names)) | SCRAPED
            assert labels_used(t["expr"]) | set(re.findall(r"\{\{(\w+)\}\}", t["legendFormat"])) <= known, t
            exprs.append(t["expr"])
    heatmap = next(p for p in panels if p["type"] == "heatmap")
    assert "by (family)" in heatmap["targets"][0]["expr"]
    if PROMTOOL is not None:  # every query is PromQL Prometheus parses: checked as the expressions of rules
        rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"dashboard:q{i}", "expr": e}
                                                            for i, e in enumerate(exprs)]}]}
        (tmp_path / "dashboard.rules.yml").write_text(yaml.safe_dump(rules))
        res = _promtool("check", "rules", "dashboard.rules.yml", cwd=tmp_path)
        assert res.returncode == 0, res.stdout + res.stderr
