"""Reports for the page tests: the lab's own facts (collected from the lab over SSH) with a few faults, and a
synthetic 1,000-host lab fleet cloned from them, named and grouped as `lab up --nodes 1000` names and groups it."""

from __future__ import annotations

import json
import dataclasses
from dataclasses import replace
from functools import cache
from pathlib import Path

from fabricproof.judging import catalog
from fabricproof.judging.baseline import load as load_baseline
from fabricproof.judging.evaluate import evaluate
from fabricproof_lab.topology import plan_hosts, profile_group, rack_group
from fabricproof.model import Report, Result

REPO = Path(__file__).resolve().parents[2]
LAB = REPO / "inventories" / "lab"
#: The lab facts file of each profile.
SOURCE = {"dgx-a100": "a100-0001", "dgx-h100": "h100-0001", "hgx-h200": "h200-0001", "gb200-nvl72": "gb200-0001"}


def _break(doc: dict, k: int) -> None:
    """A deterministic fault on some hosts: an inactive NVLink pair, a slow IB port, a stuck fabric, an old FM."""
    if k % 37 == 5:
        gpu = doc["nvlink"]["status"]["gpus"][1]
        gpu["links_active"], gpu["links_inactive"] = gpu["links_total"] - 2, 2
    if k % 53 == 7:
        doc["ib"]["ibstat"]["ports"][0]["rate"] = 200
    if k % 97 == 11 and doc["gpu"]["gpus"][2].get("fabric"):
        doc["gpu"]["gpus"][2]["fabric"]["state"] = "In Progress"
    if k % 211 == 3 and doc.get("fm", {}).get("build"):
        doc["fm"]["build"]["version"] = "535.104.05"


def fleet_facts(nodes: int, lost: int) -> tuple[dict[str, dict], dict[str, tuple[str, ...]], dict[str, str]]:
    """The facts of fleet(nodes, lost) before judging: facts per host, groups per host, and the hosts not collected."""
    texts = {profile: (LAB / "facts" / f"{name}.json").read_text() for profile, name in SOURCE.items()}
    facts: dict[str, dict] = {}
    groups: dict[str, tuple[str, ...]] = {}
    errors: dict[str, str] = {}
    for k, host in enumerate(plan_hosts(nodes, "mixed")):
        names = ("lab", profile_group(host.profile), *([rack_group(host.rack)] if host.rack else []))
        groups[host.name] = names
        if k % (nodes // max(lost, 1)) == nodes // max(lost, 1) - 1 and len(errors) < lost:
            errors[host.name] = "unreachable: connection refused (port 22)"
            continue
        doc = json.loads(texts[host.profile].replace(SOURCE[host.profile], host.name))
        doc["groups"] = list(names)
        for port in doc["ib"]["ibstat"]["ports"]:  # a clone keeps its source's port GUIDs: give each host its own
            port["port_guid"] = port["port_guid"][:-8] + f"{k:04x}" + port["port_guid"][-4:]
        _break(doc, k)
        facts[host.name] = doc
    return facts, groups, errors


@cache
def fleet(nodes: int = 1000, lost: int = 4) -> Report:
    """The lab fleet of `nodes` hosts judged with the lab baseline and the catalog; faults on some, and `lost` hosts
    that could not be collected."""
    facts, groups, errors = fleet_facts(nodes, lost)
    return evaluate(facts, load_baseline(LAB / "baseline.yaml"), catalog.load(), groups=groups,
                    collection_errors=errors, run_id="20261201T120000Z-synthetic", created_at="2026-12-01T12:00:00Z",
                    tool_version="0.1.0")


def small() -> Report:
    """A 16-host lab fleet (what `lab up` starts by default) with its faults and one host not collected."""
    return fleet(16, lost=1)


def scaled(report: Report, copies: int) -> Report:
    """`report` with every host repeated `copies` times under its own name (h100-0001 -> h100-0001-c0042): a fleet of
    copies x its hosts with the same faults and causes in the same proportion, without judging it again."""
    names = [[f"{h}-c{k:04d}" for h in report.hosts] for k in range(copies)]
    index = {h: i for i, h in enumerate(report.hosts)}
    fields = [f.name for f in dataclasses.fields(Result)]
    at = fields.index("host")

    def renamed(r: Result, host: str) -> Result:  # positional: twice as fast as dataclasses.replace on a million
        values = [getattr(r, f) for f in fields]
        values[at] = host
        return Result(*values)

    results = tuple(renamed(r, names[k][index[r.host]]) for k in range(copies) for r in report.results)
    return replace(
        report, results=results, hosts=tuple(n for copy in names for n in copy),
        collection_errors={names[k][index[h]]: why for k in range(copies) for h, why in report.collection_errors.items()},
        groups={names[k][index[h]]: g for k in range(copies) for h, g in report.groups.items()},
        not_proven={names[k][index[h]]: c for k in range(copies) for h, c in report.not_proven.items()})
