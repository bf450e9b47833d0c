"""The figures a probe's facts carry, each with its unit and whether higher is better (pure): what the figures
table ranks, the JSON report lists and a regression gate compares."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Figure:
    """One measured figure of one host: probe, target (an HCA, a peer host, a testcase; "" for the node), name."""

    host: str
    probe: str
    target: str
    name: str
    value: float
    unit: str
    higher_is_better: bool = True

    @property
    def key(self) -> tuple[str, str, str]:
        return self.probe, self.target, self.name

    def to_dict(self) -> dict[str, Any]:
        """The figure as rollout state and decision records keep it, under its host (which the row omits)."""
        return {"probe": self.probe, "target": self.target, "figure": self.name, "value": self.value,
                "unit": self.unit, "higher_is_better": self.higher_is_better}

    @classmethod
    def from_dict(cls, host: str, row: Mapping[str, Any]) -> Figure:
        """The figure of `host` that to_dict() wrote."""
        return cls(host, row["probe"], row["target"], row["figure"], row["value"], row["unit"],
                   row["higher_is_better"])


# Per probe: (fact path under its fragment, figure name, unit, higher is better). Bandwidths are the gated ones.
_NODE = {
    "nccl_all_reduce": [("busbw_gbps", "busbw", "GB/s"), ("avg_busbw_gbps", "avg_busbw", "GB/s")],
    "nccl_all_gather": [("busbw_gbps", "busbw", "GB/s")],
    "nccl_alltoall": [("busbw_gbps", "busbw", "GB/s")],
}
_PERFTEST = {"ib_gdr_bw", "ib_pair_bw", "ib_pair_lat"}


def of_host(host: str, doc: Mapping[str, Any]) -> Iterator[Figure]:
    """Every figure in one host's facts, in probe order."""
    perf = doc.get("perf") or {}
    for probe, fragment in perf.items():
        if not isinstance(fragment, Mapping):
            continue
        for key, name, unit in _NODE.get(probe, []):
            if isinstance(fragment.get(key), (int, float)):
                yield Figure(host, probe, "", name, float(fragment[key]), unit)
        if probe in _PERFTEST:
            for target, t in sorted((fragment.get("targets") or {}).items()):
                if isinstance(t.get("bw_average_gbps"), (int, float)):
                    yield Figure(host, probe, target, "bw_average", float(t["bw_average_gbps"]), "Gb/s")
                if isinstance(t.get("t_typical_us"), (int, float)):
                    yield Figure(host, probe, target, "t_typical", float(t["t_typical_us"]), "us", False)
        if probe == "nvbandwidth":
            for name, tc in sorted((fragment.get("testcases") or {}).items()):
                summary = tc.get("summary") if isinstance(tc, Mapping) else None
                if isinstance(summary, Mapping) and isinstance(summary.get("min"), (int, float)):
                    yield Figure(host, probe, name, "min", float(summary["min"]), str(tc.get("unit") or "GB/s"))


def ratio(before: Figure, after: Figure) -> float:
    """after as a fraction of before, oriented so that below 1 is worse (latency: before / after)."""
    if before.higher_is_better:
        return after.value / before.value if before.value else 1.0
    return before.value / after.value if after.value else 0.0


def worst_first(figures: list[Figure]) -> list[Figure]:
    """Figures ranked worst first within each (probe, figure name): the lowest bandwidth, the highest latency."""
    return sorted(figures, key=lambda f: (f.probe, f.name, f.value if f.higher_is_better else -f.value, f.host,
                                          f.target))


def by_host_rows(figures: Mapping[str, Sequence[Figure]]) -> dict[str, list[dict[str, Any]]]:
    """Host -> its figures as to_dict() rows: the form a JSON record holds them in."""
    return {host: [f.to_dict() for f in figs] for host, figs in figures.items()}


def report_rows(figures: Sequence[Figure]) -> tuple[dict[str, Any], ...]:
    """The report's `figures`: every figure with its host and unit, worst first."""
    return tuple({"host": f.host, **f.to_dict()} for f in worst_first(list(figures)))


@dataclass(frozen=True)
class Regression:
    """One figure of one host that dropped beyond the tolerance between two probe runs (a regression gate)."""

    before: Figure
    after: Figure
    tolerance_pct: float

    @property
    def text(self) -> str:
        f = self.before
        where = f"{f.probe}{f' {f.target}' if f.target else ''} {f.name}"
        return (f"{where} {self.after.value:g} {f.unit} is {100 * ratio(self.before, self.after):.1f}% of "
                f"{f.value:g} {f.unit} before the change (at least {100 - self.tolerance_pct:g}%)")


def regressions(before: list[Figure], after: list[Figure], tolerance_pct: float | Mapping[str, float],
                missing_fails: bool = True) -> dict[str, list[str]]:
    """Per host, what is worse after the change than the same host's own figure before it, beyond the tolerance
    (percent; one for all, or per "probe.figure" with "*" as the default). A figure measured before but not after
    fails too (the probe did not run or measured nothing), unless missing_fails is False."""

    def tol(f: Figure) -> float:
        if isinstance(tolerance_pct, Mapping):
            return float(tolerance_pct.get(f"{f.probe}.{f.name}", tolerance_pct.get("*", 0.0)))
        return float(tolerance_pct)

    now = {(f.host, *f.key): f for f in after}
    out: dict[str, list[str]] = {}
    for b in before:
        a = now.get((b.host, *b.key))
        if a is None:
            if missing_fails:
                out.setdefault(b.host, []).append(f"{b.probe} {b.name} measured {b.value:g} {b.unit} before the "
                                                  "change and nothing after it")
            continue
        t = tol(b)
        if ratio(b, a) < 1 - t / 100:
            out.setdefault(b.host, []).append(Regression(b, a, t).text)
    return out
