"""The probe options as the commands take them, read into probe ids and run settings (exit 2 on a bad one)."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import InputError
from ..timeutil import parse_duration
from . import spec
from .runner import DEFAULT_RENDEZVOUS_S, ProbeSettings


def select_probes(terms: Sequence[str]) -> tuple[str, ...]:
    """Probe ids from comma-separated or repeated terms (exit 2 on an unknown one), in registry order."""
    wanted = [t.strip() for term in terms for t in term.split(",") if t.strip()]
    unknown = [t for t in wanted if t not in spec.PROBES]
    if unknown:
        raise InputError(f"--probes: unknown probe {unknown[0]!r}; probes: {', '.join(spec.PROBES)}")
    return tuple(p for p in spec.PROBES if p in wanted)


def settings(probes: Sequence[str], budget: str | None, require_idle: bool, shuffles: int | None,
             forks: int) -> tuple[tuple[str, ...], ProbeSettings]:
    """The probe ids and settings from the options (exit 2 on a bad one, before any host is touched)."""
    ids = select_probes(probes)
    budget_s: float | None = None
    if budget is not None:
        try:
            budget_s = float(parse_duration(int(budget) if budget.isdigit() else budget))
        except ValueError as exc:
            raise InputError(f"--probe-budget: {exc}") from None
        if budget_s <= 0:
            raise InputError("--probe-budget must be positive")
    if not ids and (budget is not None or require_idle or shuffles is not None):
        raise InputError("--probe-budget, --require-idle and --pairing-shuffles go with --probes")
    if shuffles is not None and shuffles < 0:
        raise InputError("--pairing-shuffles must be 0 or more")
    return ids, ProbeSettings(budget_s=budget_s, require_idle=require_idle, shuffles=shuffles, forks=forks,
                              rendezvous_s=DEFAULT_RENDEZVOUS_S)
