"""A fake fleet for executor tests: hosts whose facts a fake playbook changes, collected by a fake collector.

Facts follow the real facts shape for two tiny checks built here: t.version (eq the baseline's driver.version)
and t.errors (delta_le 0 on a counter), so the real evaluate(), gates and soak run on them.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fabricproof.judging.baseline import Baseline
from fabricproof.judging.catalog import Check
from fabricproof.model import Scope, Severity
from fabricproof.rollout.gate import Collected
from fabricproof.rollout.playbook import PlaybookResult

VERSION_CHECK = Check(id="t.version", title="version", family="t", severity=Severity.CRITICAL, scope=Scope.HOST,
                      subject="the driver version", collector="fake", fact="/driver/version", op="eq",
                      expected={"baseline": "driver.version"}, action="update_software")
ERRORS_CHECK = Check(id="t.errors", title="errors", family="t", severity=Severity.CRITICAL, scope=Scope.HOST,
                     subject="the error counter", collector="fake", fact="/errors/count", op="delta_le", expected=0,
                     action="drain_and_inspect")
BEFORE = Baseline("before", {"driver": {"version": "1.0"}})
AFTER = Baseline("after", {"driver": {"version": "2.0"}})


class Killed(BaseException):
    """Stands for SIGKILL in-process: nothing after it runs, nothing is cleaned up."""


@dataclass
class Fleet:
    hosts: list[str]
    version: dict[str, str] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    breaks: set[str] = field(default_factory=set)  # apply leaves these on a bad version
    rollback_breaks: set[str] = field(default_factory=set)
    apply_fails: set[str] = field(default_factory=set)  # the playbook itself fails on these
    growing: set[str] = field(default_factory=set)  # error counters grow on every read
    unreachable: set[str] = field(default_factory=set)
    applies: dict[str, int] = field(default_factory=dict)  # times the apply playbook changed a host
    rollbacks: dict[str, int] = field(default_factory=dict)
    plays: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)  # (playbook name, hosts) in order
    drained: dict[str, bool] = field(default_factory=dict)
    kill_after: tuple[str, int] | None = None  # (playbook name, hosts changed before Killed is raised)

    def __post_init__(self) -> None:
        for h in self.hosts:
            self.version.setdefault(h, "1.0")
            self.errors.setdefault(h, 0)

    def collect(self, hosts, evidence_dir: Path) -> Collected:
        evidence_dir.mkdir(parents=True, exist_ok=True)
        facts, errors = {}, {}
        for h in hosts:
            if h in self.unreachable:
                errors[h] = "unreachable: connection refused"
                continue
            if h in self.growing:
                self.errors[h] += 5
            facts[h] = {"apiVersion": "fabricproof/v1", "kind": "Facts", "host": h,
                        "collectors": {"fake": {"status": "ok"}},
                        "driver": {"version": self.version[h]}, "errors": {"count": self.errors[h]}}
        return Collected(copy.deepcopy(facts), errors)

    def collect_factory(self, *_args: Any) -> Any:
        return self.collect

    def run_playbook(self, path: Path, *, inventory: str, hosts, extravars, private_dir: Path, ident: str,
                     **_kw: Any) -> PlaybookResult:
        name = Path(path).name
        self.plays.append((name, tuple(hosts)))
        ok, failed = [], {}
        for n, h in enumerate(hosts):
            if self.kill_after and self.kill_after[0] == name and n == self.kill_after[1]:
                self.kill_after = None
                raise Killed()
            if name == "apply.yml":
                if h in self.apply_fails:
                    failed[h] = "Start Fabric Manager: Job for nvidia-fabricmanager.service failed"
                    continue
                if self.version[h] != "2.0" and self.version[h] != "bad":
                    self.applies[h] = self.applies.get(h, 0) + 1
                    self.version[h] = "bad" if h in self.breaks else "2.0"
            elif name == "rollback.yml":
                if self.version[h] != "1.0":
                    self.rollbacks[h] = self.rollbacks.get(h, 0) + 1
                    self.version[h] = "bad" if h in self.rollback_breaks else "1.0"
            elif name == "drain.yml":
                self.drained[h] = True
            elif name == "undrain.yml":
                self.drained[h] = False
            ok.append(h)
        return PlaybookResult(ident=ident, rc=0 if not failed else 2, status="successful" if not failed else "failed",
                              ok=tuple(ok), failed=failed, artifacts=str(private_dir / "artifacts" / ident),
                              changed=tuple(ok))  # the fake fleet's scheduler has no other drainer
