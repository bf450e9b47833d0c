"""Run a playbook on some hosts through ansible-runner's Python API and say, per host, whether it finished."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..collect import DEFAULT_FORKS
from ..toolpath import path_with_python_bin

# Settings for every rollout play: no colour or cows in the evidence, fast SSH (pipelining, a shared
# connection per host while the play runs), no retry files next to the playbooks.
ANSIBLE_ENV = {
    "ANSIBLE_NOCOLOR": "1",
    "ANSIBLE_NOCOWS": "1",
    "ANSIBLE_RETRY_FILES_ENABLED": "False",
    "ANSIBLE_PIPELINING": "True",
    "ANSIBLE_SSH_ARGS": "-o ControlMaster=auto -o ControlPersist=60s",
    "ANSIBLE_DEPRECATION_WARNINGS": "False",
    "ANSIBLE_SYSTEM_WARNINGS": "False",
    "ANSIBLE_GATHERING": "explicit",
}


@dataclass(frozen=True)
class PlaybookResult:
    """How one ansible-playbook run ended, per host. `ok` hosts finished every task without failing."""

    ident: str
    rc: int | None
    status: str  # successful | failed | canceled | timeout | error
    ok: tuple[str, ...]
    failed: dict[str, str] = field(default_factory=dict)  # host -> task and message
    artifacts: str = ""
    changed: tuple[str, ...] = ()  # ok hosts on which a task reported a change (drain: this run holds the drain)

    @property
    def finished(self) -> bool:
        """The playbook ran to its end (hosts not in ok/failed were never reached only if it did not)."""
        return self.status in ("successful", "failed")


#: All a failed command/shell task says in its msg: what the command printed is the error an operator needs.
_COMMAND_FAILED = "non-zero return code"


def _message(event_data: Mapping[str, Any]) -> str:
    res = event_data.get("res") or {}
    said = res.get("stderr") or res.get("stdout") or ""
    text = res.get("msg") or said
    if text == _COMMAND_FAILED and said:
        text = f"{said} (rc {res.get('rc')})"
    if isinstance(text, list):
        text = " ".join(map(str, text))
    text = " ".join(str(text).split())
    task = event_data.get("task", "")
    return f"{task}: {text[:300]}" if task else text[:300]


class _Events:
    """Keeps the last failure per host from the runner's event stream (the rest stays in the artifacts)."""

    def __init__(self) -> None:
        self.failed: dict[str, str] = {}
        self.stats: dict[str, Any] | None = None

    def __call__(self, event: Mapping[str, Any]) -> bool:
        kind = event.get("event", "")
        data = event.get("event_data") or {}
        host = data.get("host")
        if kind == "runner_on_failed" and host and not data.get("ignore_errors"):
            self.failed[host] = _message(data)
        elif kind == "runner_on_unreachable" and host:
            self.failed[host] = "unreachable: " + _message(data)
        elif kind == "playbook_on_stats":
            self.stats = data
        return True  # keep the event in the artifacts


def runner_env() -> dict[str, str]:
    """ansible-runner starts `ansible-playbook` from PATH: put this interpreter's bin directory first."""
    return {**ANSIBLE_ENV, "PATH": path_with_python_bin()}


def run_playbook(playbook: Path, *, inventory: str, hosts: Sequence[str], extravars: Mapping[str, Any],
                 private_dir: Path, ident: str, check: bool = False,
                 should_stop: Callable[[], bool] = lambda: False, forks: int = DEFAULT_FORKS) -> PlaybookResult:
    """Run `playbook` limited to exactly `hosts`. Every host is either ok or failed in the result; a host the play
    never reached because it was cancelled or crashed is failed with that reason."""
    import ansible_runner  # imported here: 0.1 s and only rollouts need it

    private_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    events = _Events()
    cmdline = "--check --diff" if check else None
    runner = ansible_runner.run(
        # Absolute paths: ansible-runner runs ansible-playbook from private_data_dir, where a relative -i names nothing.
        private_data_dir=str(private_dir), playbook=str(Path(playbook).resolve()),
        inventory=str(Path(inventory).resolve()),
        limit=",".join(hosts), extravars=dict(extravars), ident=ident, quiet=True, forks=forks,
        envvars=runner_env(), settings={"suppress_ansible_output": True}, suppress_env_files=True,
        event_handler=events, cancel_callback=should_stop, cmdline=cmdline, rotate_artifacts=0,
    )
    stats = events.stats or {}
    failed = dict(events.failed)
    for kind in ("failures", "dark"):
        for host in (stats.get(kind) or {}):
            failed.setdefault(host, "failed" if kind == "failures" else "unreachable")
    status = runner.status
    ok = []
    for host in hosts:
        if host in failed:
            continue
        if events.stats is None:
            failed[host] = f"playbook did not finish ({status}, rc {runner.rc})"
        elif host not in (stats.get("processed") or {}):
            failed[host] = "not matched by the play (check the inventory and the playbook's hosts:)"
        else:
            ok.append(host)
    changed = stats.get("changed") or {}
    return PlaybookResult(ident=ident, rc=runner.rc, status=status, ok=tuple(ok),
                          failed={h: failed[h] for h in hosts if h in failed},
                          artifacts=str(private_dir / "artifacts" / ident),
                          changed=tuple(h for h in ok if changed.get(h)))
