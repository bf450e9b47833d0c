"""Plain frozen data types shared across fabricproof: outcomes, severities, results, reports."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class Severity(str, enum.Enum):
    """How bad a failed check is. CRITICAL fails a node and stops a rollout."""

    CRITICAL = "critical"
    WARNING = "warning"
    INFO = "info"

    @property
    def rank(self) -> int:
        return {"critical": 3, "warning": 2, "info": 1}[self.value]


class Outcome(str, enum.Enum):
    """The outcome of one (check, host) pair."""

    PASS = "pass"
    FAIL = "fail"
    SKIP = "skip"  # not applicable, with a reason
    UNKNOWN = "unknown"  # the fact the check reads is missing
    ERROR = "error"  # the collector that provides the fact failed


class Scope(str, enum.Enum):
    HOST = "host"
    FLEET = "fleet"


class ExitCode(enum.IntEnum):
    """Process exit codes; CI branches on these (documented in README)."""

    OK = 0
    CHECK_FAILED = 1
    INVALID_INPUT = 2
    INCOMPLETE = 3
    ROLLED_BACK = 4
    HALTED = 5
    WRITE_FAILED = 6  # a file of our own could not be written (disk full, quota, I/O error): the run is not whole
    INTERRUPTED = 130


@dataclass(frozen=True)
class Host:
    """One inventory host: its name, its Ansible vars (how to reach it) and its groups."""

    name: str
    vars: Mapping[str, Any] = field(default_factory=dict)
    groups: tuple[str, ...] = ()  # every group the host is in, transitively, excluding 'all'/'ungrouped'


@dataclass(frozen=True)
class Command:
    """One fixed argv a transport runs on a host, how long it may run, and what it is called (a collector id):
    the name lets a recorded run be replayed without knowing which collector printed what."""

    argv: tuple[str, ...]
    timeout_s: float
    name: str = ""
    #: The lock it takes on the host: commands of one tool run in sequence, and once one of them timed out the
    #: others are not run. Empty: it may run alongside anything.
    tool: str = ""
    typical_s: float = 0.0  # how long it usually takes on a real node; 0 when unknown (plans which run together)


@dataclass(frozen=True)
class CommandResult:
    """What one command printed on one host; the seam every transport returns."""

    argv: tuple[str, ...]
    stdout: str
    stderr: str = ""
    exit_code: int | None = 0  # None: the command did not finish (timeout, connection lost)
    duration_s: float = 0.0
    error: str | None = None  # transport-level reason when the command could not run
    #: Output past the host's in-memory bound is in this file instead (stdout/stderr then empty): spool.py.
    stdout_path: str | None = None
    stderr_path: str | None = None
    #: The bytes the host sent, kept only when they are not valid UTF-8 (the text above then holds U+FFFD where
    #: they were): evidence is what the host printed, byte for byte; parsers read the text. None: the text is exact.
    stdout_bytes: bytes | None = None
    stderr_bytes: bytes | None = None

    @property
    def stdout_raw(self) -> bytes:
        """What the command printed on stdout, byte for byte (the evidence file's content)."""
        return self.stdout_bytes if self.stdout_bytes is not None else self.stdout.encode("utf-8", errors="replace")

    @property
    def stderr_raw(self) -> bytes:
        return self.stderr_bytes if self.stderr_bytes is not None else self.stderr.encode("utf-8", errors="replace")


def decoded(data: bytes) -> tuple[str, bytes | None]:
    """A command's output as text to parse (invalid UTF-8 as U+FFFD), and the bytes themselves when that replaced
    any: the pair CommandResult keeps as stdout and stdout_bytes."""
    try:
        return data.decode("utf-8"), None
    except UnicodeDecodeError:
        return data.decode("utf-8", errors="replace"), bytes(data)


@dataclass(frozen=True, slots=True)
class Finding:
    """One failing item of a result: where it is in the facts, what it holds, and how a person names it."""

    pointer: str  # JSON pointer into the host's facts, e.g. /nvlink/status/gpus/1/links_active
    value: Any
    item: str = ""  # the item the pointer points into, named: "GPU 1", "mlx5_0 port 1"; "" when it has no name
    text: str = ""  # what is wrong with it: "16 of 18 links active"; "<pointer> = <value>" when no item is named

    @property
    def line(self) -> str:
        """The finding as an operator reads it: "GPU 1: 16 of 18 links active"."""
        return f"{self.item}: {self.text}" if self.item else self.text


@dataclass(frozen=True, slots=True)  # slots: a 1,000-host run holds ~70,000 of these
class Result:
    """One (check, host) outcome. For fleet checks, host names the member being judged."""

    check_id: str
    title: str
    host: str
    outcome: Outcome
    severity: Severity
    expected: str  # the expectation as a sentence
    actual: Any = None
    reason: str = ""  # why: the failing items, the skip reason, the missing fact
    remediation: str = ""
    evidence: tuple[str, ...] = ()  # paths of raw outputs the verdict rests on
    family: str = ""
    references: tuple[str, ...] = ()
    findings: tuple[Finding, ...] = ()  # the failing items, each named (GPU 1, mlx5_0 port 1); the reason keeps pointers
    action: str = ""  # what the check's failure calls for, one of actions.ACTIONS (set on every result of a check)


@dataclass(frozen=True)
class Summary:
    total: int
    passed: int
    failed: int
    skipped: int
    unknown: int
    errors: int
    failed_by_severity: dict[str, int] = field(default_factory=dict)
    hosts: int = 0
    hosts_failed: int = 0
    hosts_not_proven: int = 0


@dataclass(frozen=True)
class CheckCoverage:
    """A check that applied to no host in scope (reported, never silently passed)."""

    check_id: str
    reason: str


class Tally:
    """Results counted by outcome and severity, with the hosts that failed: what a summary and an exit code need,
    kept as results are made so that neither reads a fleet's results again."""

    __slots__ = ("counts", "failed_hosts", "total")

    def __init__(self) -> None:
        self.counts: dict[tuple[Outcome, Severity], int] = {}
        self.failed_hosts: set[str] = set()
        self.total = 0

    def add(self, result: Result) -> None:
        self.add_count(result.outcome, result.severity)
        if result.outcome is Outcome.FAIL:
            self.failed_hosts.add(result.host)

    def add_count(self, outcome: Outcome, severity: Severity, n: int = 1) -> None:
        """Count n results; the first failure of each severity, in report order, orders the summary's
        failed_by_severity (a JSON report writes it in that order)."""
        key = (outcome, severity)
        self.counts[key] = self.counts.get(key, 0) + n
        self.total += n

    @classmethod
    def of(cls, results: Iterable[Result]) -> Tally:
        tally = cls()
        for r in results:
            tally.add(r)
        return tally

    def count(self, outcome: Outcome, min_rank: int = 0) -> int:
        """Results with this outcome at or above a severity rank."""
        return sum(n for (o, sev), n in self.counts.items() if o is outcome and sev.rank >= min_rank)


@dataclass(frozen=True)
class Report:
    """All results of one run; reporters render this and nothing else."""

    #: A tuple, or a fleet evaluation's re-iterable view of the results it spilled (judging.packing.Spilled), which
    #: carries their tally: reporters iterate it, in check order and host order within a check.
    results: Sequence[Result]
    hosts: tuple[str, ...]
    baseline: str = ""
    run_id: str = ""
    created_at: str = ""
    unapplied: tuple[CheckCoverage, ...] = ()
    collection_errors: dict[str, str] = field(default_factory=dict)  # host -> reason (unreachable, ...)
    tool_version: str = ""
    groups: dict[str, tuple[str, ...]] = field(default_factory=dict)  # host -> its inventory groups (heatmap rows)
    #: Every probe figure: {host, probe, target, figure, value, unit, higher_is_better}; empty when no probe ran.
    figures: tuple[dict[str, Any], ...] = ()
    #: Host -> the checks its hardware needs that were skipped for want of a baseline value: such a host is not
    #: proven (exit 3), never passed. Hosts not collected are in collection_errors instead.
    not_proven: dict[str, tuple[str, ...]] = field(default_factory=dict)
    #: The run's fabric as the HTML report draws it ({"subnet", "findings", "roles", "plan"}); None: no fabric was
    #: read (validate --fabric-plan). The other reports carry its findings through the subnet.* checks.
    fabric: Mapping[str, Any] | None = None
    #: A collective run's tests and the search's path (probes.collective_section.section); None: no collective ran.
    collective: Mapping[str, Any] | None = None

    @property
    def tally(self) -> Tally:
        kept = getattr(self.results, "tally", None)
        return kept if isinstance(kept, Tally) else Tally.of(self.results)

    @property
    def summary(self) -> Summary:
        tally = self.tally
        by_sev: dict[str, int] = {}
        for (outcome, severity), n in tally.counts.items():
            if outcome is Outcome.FAIL:
                by_sev[severity.value] = by_sev.get(severity.value, 0) + n
        return Summary(
            total=tally.total,
            passed=tally.count(Outcome.PASS),
            failed=tally.count(Outcome.FAIL),
            skipped=tally.count(Outcome.SKIP),
            unknown=tally.count(Outcome.UNKNOWN),
            errors=tally.count(Outcome.ERROR),
            failed_by_severity=by_sev,
            hosts=len(self.hosts),
            hosts_failed=len(tally.failed_hosts),
            hosts_not_proven=len(self.not_proven),
        )
