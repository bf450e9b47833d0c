"""Benchmark: diff a 2,000-host, three-tier rail-optimised fabric against its plan; prints seconds per stage.

Not part of the test run. The fabric is built as a Subnet (what the parsers give), so the figure is the plan's and
the diff's own: the rule plan expanded and loaded, the captured explicit plan loaded, the clean diff, and a diff with
~1% of the HCA cables unplugged, half of those cabled to a spare leaf port at 1x; then, end to end, subnet-parse's
generator (tests/fabrickit.py) printed as ibnetdiscover text, parsed, and diffed against its own capture. Pure and
single-threaded: the figures are for one core.

    python tests/benchmarks/bench_subnet_diff.py [--hosts 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO / "cli"), str(REPO / "tests")]

import fabrickit  # noqa: E402
from fabricproof.collectors.subnet import ibnetdiscover  # noqa: E402
from fabricproof.subnet.capture import plan_from  # noqa: E402
from fabricproof.subnet.diff import diff  # noqa: E402
from fabricproof.subnet.plan import load_plan  # noqa: E402
from subnet.fabrics import rail_fabric  # noqa: E402

SU, RAILS, SPINES, UPLINKS, CORES, CORE_UPLINKS = 32, 8, 64, 16, 16, 16


def timed(label: str, figures: dict, fn):
    t0 = time.process_time()
    out = fn()
    figures[label] = round(time.process_time() - t0, 3)
    print(f"{label:<28} {figures[label]:8.3f} s CPU", flush=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=2000)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    hosts = [f"node{i:04d}" for i in range(1, args.hosts + 1)]
    figures: dict = {"hosts": args.hosts}
    fab = timed("build fabric", figures, lambda: rail_fabric(hosts, SU, RAILS, SPINES, UPLINKS, CORES, CORE_UPLINKS))
    figures["links"] = len(fab.subnet.links)
    figures["nodes"] = len(fab.subnet.nodes)
    print(f"{figures['nodes']:,} nodes, {figures['links']:,} links")
    with tempfile.TemporaryDirectory() as tmp:
        rule = Path(tmp) / "rule.yaml"
        rule.write_text(yaml.safe_dump({
            "kind": "FabricPlan", "version": 1, "name": "rule", "defaults": {"width": "4x", "speed": "HDR"},
            "rails": {"hosts": {"group": "gpu"}, "su_size": SU, "count": RAILS, "leaf": "leaf-su{su}-r{rail}",
                      "spines": {"name": "spine-{n}", "count": SPINES}, "uplinks": UPLINKS}}))
        rule_plan = timed("load rule plan", figures, lambda: load_plan(rule, groups={"gpu": hosts}))
        explicit = Path(tmp) / "explicit.yaml"
        doc = timed("capture plan", figures, lambda: plan_from(fab.subnet, hosts))
        explicit.write_text(yaml.safe_dump(doc, sort_keys=False))
        figures["explicit_bytes"] = explicit.stat().st_size
        timed("load explicit plan (YAML)", figures, lambda: load_plan(explicit))
        as_json = Path(tmp) / "explicit.json"
        as_json.write_text(json.dumps(doc, indent=1))
        plan = timed("load explicit plan (JSON)", figures, lambda: load_plan(as_json))
    print(f"rule plan {len(rule_plan.links):,} cables (no core tier); explicit plan {len(plan.links):,} cables, "
          f"{figures['explicit_bytes']:,} bytes")
    clean = timed("diff clean", figures, lambda: diff(plan, fab.subnet, hosts=hosts))
    assert clean.findings == [], clean.findings[:3]
    rng = random.Random(7)
    cas = [n for n in fab.subnet.nodes.values() if n.kind == "ca"]
    for node in rng.sample(cas, len(cas) // 100):
        link = fab.subnet.link_at(fab.end(node.desc, 1))
        leaf = fab.subnet.nodes[link.other(fab.end(node.desc, 1)).guid]
        fab.unplug(node.desc, 1)
        if rng.random() < 0.5:
            fab.cable(node.desc, 1, leaf.desc.split(";")[1].split(":")[0], 64 - rng.randrange(8), width="1x")
    result = timed("diff with faults", figures, lambda: diff(plan, fab.subnet, hosts=hosts))
    figures["findings"] = len(result.findings)
    timed("host facts", figures, result.host_facts)
    print(f"{figures['findings']:,} findings")
    # end to end on subnet-parse's generator: its ibnetdiscover text parsed, then diffed against its own capture
    text = fabrickit.ibnetdiscover_text(fabrickit.rail_fabric(args.hosts))
    parsed = timed("parse ibnetdiscover text", figures, lambda: ibnetdiscover.parse(text))
    own = plan_from(parsed, hosts)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "own.json"
        path.write_text(json.dumps(own))
        own_plan = load_plan(path)
    again = timed("diff parsed fabric", figures, lambda: diff(own_plan, parsed, hosts=hosts))
    assert again.findings == [], again.findings[:3]
    figures["parse_plus_diff_s"] = round(figures["parse ibnetdiscover text"] + figures["diff parsed fabric"], 3)
    print(f"{len(parsed.links):,} parsed cables, {text.count(chr(10)):,} lines: parse + diff "
          f"{figures['parse_plus_diff_s']} s CPU")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
