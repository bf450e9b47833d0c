"""Benchmark: evaluate N synthetic hosts against the whole catalog; prints host-checks/s and peak RSS.

Not part of the test run. The hosts are clones of real collected facts (default: the lab facts shipped under
inventories/lab/facts, one per platform) with a few faults sprinkled in, so every code path (pass, fail,
skip, fleet majority) is exercised. Evaluation is pure and single-threaded: the figure is for one core.

    python tests/benchmarks/bench_evaluate.py --hosts 10000 [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import resource
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "cli"))

from fabricproof.judging import baseline as baseline_mod  # noqa: E402
from fabricproof import facts  # noqa: E402
from fabricproof.judging import catalog
from fabricproof.judging.evaluate import evaluate  # noqa: E402

TARGET = 50_000  # host-checks per second on one core (issue #2)


def synthesize(templates: dict[str, dict], n: int, seed: int = 7,
               distinct: bool = False) -> tuple[dict[str, dict], dict[str, list[str]]]:
    """n hosts cloned round-robin from the templates; ~2% get a downtrained IB port or an inactive NVLink."""
    rng = random.Random(seed)
    names = sorted(templates)
    hosts: dict[str, dict] = {}
    groups: dict[str, list[str]] = {}
    for i in range(n):
        src = templates[names[i % len(names)]]
        # By default clones share unchanged sections, so RSS measures evaluation rather than 10,000 copies of facts;
        # --distinct gives every host its own objects, as real collected facts are (~290 KB each in memory).
        doc = copy.deepcopy(src) if distinct else dict(src)
        host = f"{src['host'].rsplit('-', 1)[0]}-{i:05d}"
        doc["host"] = host
        grp = [g for g in src.get("groups", []) if not g.startswith("rack_")]
        if any(g.startswith("rack_") for g in src.get("groups", [])):
            grp.append(f"rack_{i // (18 * len(names)):03d}")
        groups[host] = grp
        if rng.random() < 0.01 and doc.get("ib", {}).get("ibstat", {}).get("ports"):
            doc["ib"] = copy.deepcopy(doc["ib"])
            doc["ib"]["ibstat"]["ports"][0]["rate"] = 200
        if rng.random() < 0.01 and doc.get("nvlink", {}).get("status", {}).get("gpus"):
            doc["nvlink"] = copy.deepcopy(doc["nvlink"])
            doc["nvlink"]["status"]["gpus"][0]["links_active"] -= 1
        hosts[host] = doc
    return hosts, groups


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10_000)
    ap.add_argument("--facts", type=Path, default=REPO / "inventories" / "lab" / "facts")
    ap.add_argument("--baseline", type=Path, default=REPO / "inventories" / "lab" / "baseline.yaml")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    ap.add_argument("--distinct", action="store_true", help="deep-copy every host's facts (memory like real facts)")
    args = ap.parse_args()

    templates = facts.load_dir(args.facts)
    base = baseline_mod.load(args.baseline)
    checks = catalog.load()
    hosts, groups = synthesize(templates, args.hosts, distinct=args.distinct)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    t0, c0 = time.perf_counter(), time.process_time()
    report = evaluate(hosts, base, checks, groups=groups)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0

    s = report.summary
    figures = {
        "hosts": args.hosts,
        "distinct_facts": args.distinct,
        "checks": len(checks),
        "host_checks": s.total,
        "wall_s": round(wall, 3),
        "cpu_s": round(cpu, 3),
        "host_checks_per_s": round(s.total / cpu),
        "target_per_s": TARGET,
        "ratio_to_target": round(s.total / cpu / TARGET, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "rss_before_eval_mb": round(rss_before / 1024, 1),
        "outcomes": {"pass": s.passed, "fail": s.failed, "skip": s.skipped, "unknown": s.unknown, "error": s.errors},
    }
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
