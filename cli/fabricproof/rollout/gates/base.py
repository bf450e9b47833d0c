"""What every gate kind provides: its plan block parsed and validated, its part before and after a change, its
step kinds and how they read in the status and on the page."""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ... import documents
from ...errors import Problem
from ...judging.catalog import Check
from ...reporters.rollout_html import ATTEMPTS, SAMPLES  # noqa: F401 - the page sections a step form names

if TYPE_CHECKING:
    from ...inventory import Inventory
    from ...judging.baseline import Baseline
    from ..plan import Wave
    from ..steps import RunSteps

#: When a gate takes part before the change: in the pre-gate step (before the drain), or in a step of its own
#: once the wave is drained.
PRE, DRAINED = "pre", "drained"
#: When it takes part after the change: as the post-gate step, inside the post-gate step on the hosts that step
#: proved, or in a step of its own once the post-gate is done (a soak).
POST, JOIN, SETTLE = "post", "join", "settle"



#: spec.gates: what it says, and the settings every gate of a plan shares beside each kind's own block.
GATES_DESCRIPTION = ("What every wave must prove, and how many failed hosts it may have. A host fails a gate when a "
                     "selected check at or above fail_on fails on it, or cannot be judged (error, unknown, host not "
                     "collected).")
SETTINGS_SCHEMA: dict[str, Any] = {
    "fail_on": {"$ref": "#/$defs/severity", "default": "critical", "description": "Lowest severity that fails a host."},
    "retry_interval": {"$ref": "#/$defs/duration", "description": "Wait between post-gate attempts (default 10s)."},
    "timeout": {"$ref": "#/$defs/duration", "description": "Give up on the post-gate after this long (default 5m); the "
                                                           "pre-gate is one attempt."},
    "max_failed_hosts": {"type": "integer", "minimum": 0, "default": 0,
                         "description": "A wave passes when at most this many of its hosts failed (inclusive: 0 means "
                                        "none may fail)."},
    "max_failed_percent": {"type": "number", "minimum": 0, "maximum": 100,
                           "description": "Also require failed hosts * 100 / hosts in the wave <= this (inclusive). Both "
                                          "limits must hold when both are set."},
}
#: A list of names, as several blocks take one.
NAMES: dict[str, Any] = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}


@dataclass(frozen=True)
class StepForm:
    """How one step kind of a gate reads: its words (status, page, tooltips) and the page section showing its
    proofs (None: the step is drawn on the timeline only)."""

    words: str
    section: str | None = None


def catalog_matches(pattern: str, checks: Sequence[Check]) -> list[Check]:
    return [c for c in checks if fnmatch.fnmatchcase(c.id, pattern) or c.family == pattern]


@dataclass(frozen=True)
class Reach:
    """How a run reaches its hosts, for a gate kind that measures them itself: the inventory, the transport and its
    inventory path, and how many hosts at once."""

    inventory: Inventory
    via: str
    inventory_path: str
    forks: int


@dataclass(frozen=True)
class Block:
    """What a gate kind's parser reads: the plan document (for file, line and JSON path), its spec, the catalog,
    and the kinds parsed before it."""

    doc: documents.Document
    spec: Mapping[str, Any]
    catalog: Sequence[Check]
    parsed: Mapping[str, Any]

    def problem(self, path: tuple[Any, ...], message: str) -> Problem:
        return self.doc.problem(path, message)


class GateKind:
    """One kind of gate. The wave runner calls each kind of the plan, in registry order, at the stages it names;
    a kind overrides the hooks of its stages."""

    name: str = ""
    #: The JSON Schema of its plan block, by the key it takes in spec.gates (`python -m fabricproof.schemagen` writes
    #: them into schemas/rollout.schema.json); a kind whose block is spec.<name> gives it as `spec_schema` instead,
    #: written as $defs/<name>.
    schema: Mapping[str, Any] = {}
    spec_schema: Mapping[str, Any] | None = None
    #: Its step kinds (the `kind` of a StepId) and how each reads.
    steps: Mapping[str, StepForm] = {}
    before_stage: str | None = None
    before_step: str | None = None  # the step it runs as before the change (DRAINED); PRE runs in pre_gate
    after_stage: str | None = None
    after_step: str | None = None  # its own step after the change (POST, SETTLE)

    def parse(self, block: Block, problems: list[Problem]) -> Any | None:
        """Its settings from the plan, or None when the plan does not use it; each problem with file, line and
        JSON path (the schema has already checked the shape)."""
        raise NotImplementedError

    def live(self, reach: Reach, spec: Any) -> Any | None:
        """What its hooks call to measure the hosts (`run.ctx.seam(name)`), made once a run from the plan's block;
        None when it measures nothing itself. Tests give their own through `runs.Seams.gates`."""
        return None

    def applies(self, spec: Any, w: Wave) -> bool:
        """Whether it runs on this wave at all."""
        return True

    def drain_conflict(self, scheduler: str, spec: Any, baselines: Sequence[Baseline]) -> str | None:
        """Why it cannot run on waves the plan's drain takes out of service with `scheduler`; None when it can."""
        return None

    def before(self, run: RunSteps, w: Wave, spec: Any) -> None:
        """Its part before the change (PRE, DRAINED)."""

    def after(self, run: RunSteps, w: Wave, spec: Any) -> None:
        """Its part after the change (POST, SETTLE), as a step of its own."""

    def join(self, run: RunSteps, w: Wave, spec: Any, sid: Any, hosts: Sequence[str]) -> tuple[dict[str, str], str]:
        """Its part inside the post-gate step (JOIN) on the hosts it proved: (failed host -> why, its evidence)."""
        raise NotImplementedError

    def describe(self, spec: Any) -> dict[str, Any]:
        """What `rollout plan` shows of it among the gates (beyond the checks and settings)."""
        return {}
