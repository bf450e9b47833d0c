"""Benchmark (issue 21.7, the parse half): ibnetdiscover text of a rail-optimised three-tier fabric parsed on one core.

Not part of the test run. Prints, for each size, the text's lines and cables, the best of three parse times in CPU
seconds of this one process and lines/s; then the 2,000/1,000-host ratio of time against the ratio of lines (linear
when they agree); the corpus's Selene dump (5,007 nodes, 12,852 cables, 55,750 lines); and merging a view that adds
a 'Could be' hint to every cable, as ibsim's iblinkinfo does (subnet.model.merge).

    python tests/benchmarks/bench_subnet_parse.py [--hosts 1000 2000] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(TESTS.parent / "cli"), str(TESTS)]

import fabrickit  # noqa: E402
from fabricproof.collectors.subnet import ibnetdiscover  # noqa: E402
from fabricproof.subnet.model import Link, Subnet, merge  # noqa: E402

SELENE = TESTS.parents[1] / "shared" / "corpus" / "ib-fabric" / \
    "ibnetdiscover-selene-dgx-a100-superpod-compute-hdr-666sw-4341ca.txt"


def best_of(n: int, fn):  # noqa: ANN001, ANN202
    times, result = [], None
    for _ in range(n):
        t0 = time.process_time()
        result = fn()
        times.append(time.process_time() - t0)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[1000, 2000])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    rows = []
    for hosts in args.hosts:
        fab = fabrickit.rail_fabric(hosts)
        text = fabrickit.ibnetdiscover_text(fab)
        lines = text.count("\n")
        secs, sub = best_of(3, lambda t=text: ibnetdiscover.parse(t))
        assert len(sub.links) == len(fab.cables) and len(sub.nodes) == len(fab.nodes)
        hinted = Subnet(links=[Link(lk.a, lk.b, lk.width, lk.speed, could_width="12x") for lk in sub.links])
        merge_s, merged = best_of(3, lambda s=sub, h=hinted: merge([s, h]))
        assert all(lk.could_width == "12x" for lk in merged.links)
        rows.append({"hosts": hosts, "nodes": len(sub.nodes), "cables": len(sub.links), "lines": lines,
                     "parse_cpu_s": round(secs, 3), "lines_per_s": round(lines / secs), "merge_hints_cpu_s":
                     round(merge_s, 3)})
        print(f"{hosts:>6} hosts  {len(sub.nodes):>6} nodes  {len(sub.links):>6} cables  {lines:>7} lines  "
              f"parse {secs:6.3f} s CPU  {lines / secs:>9,.0f} lines/s  merge with hints {merge_s:6.3f} s")
    if len(rows) >= 2:
        a, b = rows[0], rows[-1]
        print(f"ratio {b['hosts']}/{a['hosts']} hosts: time x{b['parse_cpu_s'] / a['parse_cpu_s']:.2f} for "
              f"lines x{b['lines'] / a['lines']:.2f} (linear when they agree)")
    if SELENE.is_file():
        text = SELENE.read_text(encoding="utf-8")
        secs, sub = best_of(3, lambda: ibnetdiscover.parse(text))
        print(f"Selene dump: {len(sub.nodes)} nodes, {len(sub.links)} cables, {text.count(chr(10))} lines: parse "
              f"{secs:.3f} s CPU ({text.count(chr(10)) / secs:,.0f} lines/s)")
        rows.append({"selene_parse_cpu_s": round(secs, 3)})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
