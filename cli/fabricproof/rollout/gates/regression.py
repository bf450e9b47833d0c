"""The regression gate: no worse than before. A host fails the post-gate when a probe figure drops more than the
tolerance below its own pre-change figure, or is not measured again (the probes gate measures; this compares)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import Problem
from ...probes.figures import Figure, regressions
from ..gate import summarize
from .base import Block, GateKind


class RegressionGate(GateKind):
    name = "regression"
    schema = {"regression": {
        "type": "object", "additionalProperties": False, "required": ["tolerance_pct"],
        "description": "No worse than before: a host fails the post-gate when a probe figure drops more than the "
                       "tolerance below the same host's pre-gate figure, or is not measured again.",
        "properties": {"tolerance_pct": {
            "description": "Allowed drop in percent: one number for every figure, or per 'probe.figure' (e.g. "
                           "nccl_all_reduce.busbw) with '*' as the default.",
            "oneOf": [{"type": "number", "minimum": 0, "maximum": 100},
                      {"type": "object", "minProperties": 1,
                       "additionalProperties": {"type": "number", "minimum": 0, "maximum": 100}}]}}}}

    def parse(self, block: Block, problems: list[Problem]) -> float | dict[str, float] | None:
        """The tolerance in percent, one for every figure or per 'probe.figure'; None: no regression gate."""
        tol = (block.spec["gates"].get("regression") or {}).get("tolerance_pct")
        if tol is not None and not block.parsed.get("probes"):
            problems.append(block.problem(("spec", "gates", "regression"), "a regression gate compares probe "
                                          "figures: name the probes in gates.probes"))
        return tol

    def describe(self, spec: Any) -> dict[str, Any]:
        return {"regression_tolerance_pct": spec}

    def compare(self, hosts: Sequence[str], before: Mapping[str, Sequence[Figure]],
                after: Mapping[str, Sequence[Figure]], tol: float | dict[str, float]) -> dict[str, str]:
        """Host -> why it regressed, from its figures before and after the change."""
        found = regressions([f for h in hosts for f in before[h]], [f for h in hosts for f in after.get(h, [])], tol)
        return {h: "regression gate: " + summarize(r, 2) for h, r in found.items()}


GATE = RegressionGate()
