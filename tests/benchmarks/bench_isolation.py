"""Benchmark: the collective search over a modelled fleet (issue 22.4); prints one JSON object.

Not part of the test run. Each run draws a fleet from its seed (N hosts in leaves, K bad hosts at a degraded
figure, optional hangs, bad pairs, slow leaf uplinks and leaf-to-leaf paths, gaussian noise) and runs
fabricproof.probes.isolation.search on it; the figures are its rounds, tests, modelled wall time (each round
lasts as long as its slowest test, a hang as long as the step's time limit), false accusations and faults missed,
beside exhaustive pairwise testing and the published 232-node figures. `--table` prints the N = 232, 1,000,
10,000 x K = 1..5 table (one object, its rows under "table").

    python tests/benchmarks/bench_isolation.py --hosts 1000 --bad 1 --runs 1000 --seed 1 [--noise 3]
    python tests/benchmarks/bench_isolation.py --table --runs 100
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "cli"))

from fabricproof.probes.isolation_sim import PUBLISHED, bench  # noqa: E402

ROW = ("hosts", "bad", "runs", "rounds_max", "rounds_median", "tests_median", "tests_max", "wall_min_median",
       "false_accusations", "missed")
GOALS = {"1 bad among 1,000": "rounds_max <= 12", "5 bad among 10,000": "rounds_max <= 40",
         "noise": "no false accusation in 1,000 seeded noisy runs"}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--bad", type=int, default=1, help="hosts with a degraded figure")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--noise", type=float, default=3.0, help="gaussian noise of every figure, percent (sigma)")
    ap.add_argument("--hangs", type=int, default=0, help="hosts that hang every collective they are in")
    ap.add_argument("--pairs", type=int, default=0, help="host pairs fine alone, slow together")
    ap.add_argument("--uplinks", type=int, default=0, help="leaves whose uplinks are slow")
    ap.add_argument("--leaf-pairs", type=int, default=0, help="leaf pairs whose path is slow")
    ap.add_argument("--no-leaves", action="store_true", help="tell the search nothing of leaves (~sqrt(N) groups)")
    ap.add_argument("--table", action="store_true", help="N = 232, 1,000, 10,000 x K = 1..5")
    args = ap.parse_args(argv)
    started = time.process_time()
    faults = {k: v for k, v in (("hangs", args.hangs), ("pairs", args.pairs), ("uplinks", args.uplinks),
                                ("leaf_pairs", args.leaf_pairs)) if v}
    if args.table:
        rows = []
        for n in (232, 1000, 10000):
            for k in range(1, 6):
                r = bench(n, k, args.runs, args.seed, args.noise / 100, not args.no_leaves, **faults)
                rows.append({key: r[key] for key in ROW} | {"exhaustive_pairs": r["exhaustive_pairs"]})
        out = {"table": rows, "leaves_known": not args.no_leaves, "noise_pct": args.noise, "seed": args.seed,
               "published_232": PUBLISHED, "model": r["model"], "goals": GOALS}
    else:
        out = bench(args.hosts, args.bad, args.runs, args.seed, args.noise / 100, not args.no_leaves,
                    **faults) | {"goals": GOALS}
    out["cpu_s"] = round(time.process_time() - started, 1)
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
