"""Step ids of a rollout run as a type: built, parsed and ordered here, in the one string form state.json and
decisions.jsonl have always held (w0.pre_gate, w1.apply.b0, rb1.w0.gate, rb1)."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

_FORM = re.compile(r"^(?:rb(\d+)\.)?w(\d+)\.([a-z_]+)(?:\.b(\d+))?$")
_ROLLBACK = re.compile(r"^rb(\d+)$")

# The run's own steps (gate kinds name theirs in rollout.gates).
PAUSE, PRE_VERDICT, DRAIN, APPLY, DECIDE = "pause", "pre_verdict", "drain", "apply", "decide"
FAILED_ROLLBACK, UNDRAIN, DONE = "failed_rollback", "undrain", "done"
ROLLBACK = "rollback"  # the kind of a rollback phase's own id, rb<n>
#: A wave's steps in the order a run takes them; a kind not listed sorts after these, by name.
ORDER = ("pause", "pre_gate", "pre_verdict", "drain", "pre_probes", "apply", "post_gate", "soak", "decide",
         "failed_rollback", "gate", "undrain", "done")


@functools.total_ordering
@dataclass(frozen=True, eq=True)
class StepId:
    """One step of a run: its wave (from 0), its kind, the batch of an apply, and the rollback phase it belongs to.
    A rollback phase itself is StepId(None, ROLLBACK, rollback=n)."""

    wave: int | None
    kind: str
    batch: int | None = None
    rollback: int | None = None

    def __str__(self) -> str:
        if self.wave is None:
            return f"rb{self.rollback}"
        text = f"w{self.wave}.{self.kind}" + (f".b{self.batch}" if self.batch is not None else "")
        return f"rb{self.rollback}.{text}" if self.rollback is not None else text

    @classmethod
    def parse(cls, text: str) -> StepId | None:
        """The id a string spells, or None for one no run writes."""
        m = _FORM.match(text)
        if m:
            return cls(int(m.group(2)), m.group(3), int(m.group(4)) if m.group(4) else None,
                       int(m.group(1)) if m.group(1) else None)
        m = _ROLLBACK.match(text)
        return cls(None, ROLLBACK, rollback=int(m.group(1))) if m else None

    @classmethod
    def phase(cls, rollback: int) -> StepId:
        return cls(None, ROLLBACK, rollback=rollback)

    @property
    def batch_label(self) -> str | None:
        """'b1' of w0.apply.b1, as the view and the words of a step take it."""
        return None if self.batch is None else f"b{self.batch}"

    @property
    def rollback_label(self) -> str | None:
        """'rb1' of rb1.w0.gate."""
        return None if self.rollback is None else f"rb{self.rollback}"

    def _key(self) -> tuple[int, int, int, str, int]:
        rank = ORDER.index(self.kind) if self.kind in ORDER else len(ORDER)
        return (self.rollback or 0, -1 if self.wave is None else self.wave, rank, self.kind,
                -1 if self.batch is None else self.batch)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, StepId):
            return NotImplemented
        return self._key() < other._key()
