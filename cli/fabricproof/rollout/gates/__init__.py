"""The gate registry: every gate kind a rollout plan may use, in the order a wave runs them. A kind parses its plan
block, runs before and after the change, and names its steps and how they read (gates.base.GateKind)."""

from __future__ import annotations

from typing import Any

from .base import GATES_DESCRIPTION, SETTINGS_SCHEMA, GateKind, StepForm
from .checks import GATE as CHECKS
from .fabric import GATE as FABRIC
from .collective import GATE as COLLECTIVE
from .probes import GATE as PROBES
from .regression import GATE as REGRESSION
from .soak import GATE as SOAK

GATES: dict[str, GateKind] = {g.name: g for g in (CHECKS, PROBES, REGRESSION, FABRIC, SOAK, COLLECTIVE)}


def step_form(kind: str) -> StepForm | None:
    """How a gate's step kind reads, or None for a step of the run's own (drain, apply, decide, ...)."""
    for gate in GATES.values():
        if kind in gate.steps:
            return gate.steps[kind]
    return None


def plan_schemas() -> dict[str, dict[str, Any]]:
    """The rollout schema's $defs the registry writes (schemagen): spec.gates, every kind's block in it beside the
    shared settings, and the blocks kinds keep in spec (soak)."""
    blocks = {key: block for gate in GATES.values() for key, block in gate.schema.items()}
    out: dict[str, dict[str, Any]] = {"gates": {"type": "object", "additionalProperties": False,
                                                "description": GATES_DESCRIPTION,
                                                "properties": {**blocks, **SETTINGS_SCHEMA}}}
    out.update({gate.name: dict(gate.spec_schema) for gate in GATES.values() if gate.spec_schema is not None})
    return out
