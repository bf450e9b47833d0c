"""The collector type: a fixed argv plus a pure parser from raw text to a facts fragment."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..platforms import PLATFORMS

#: Prefix for every host file a collector reads: empty on the node itself, /host in a DaemonSet that mounts the
#: host's root there (like node_exporter --path.rootfs), the node's tree in the lab.
HOST_ROOT_ENV = "FABRICPROOF_HOST_ROOT"


def read_host_file(path: str, *reader: str) -> tuple[str, ...]:
    """A fixed argv that reads one host file under $FABRICPROOF_HOST_ROOT (reader defaults to cat)."""
    cmd = " ".join(reader or ("cat",))
    return ("sh", "-c", f'exec {cmd} -- "${{{HOST_ROOT_ENV}:-}}{path}"')


#: The lock every probe takes (Collector.lock).
FABRIC_LOAD = "fabric-load"

#: The exit status of a guard that found a prerequisite absent and ran nothing (EX_TEMPFAIL of sysexits.h: no tool
#: failed). Shared by the collectors' `requires` and any other guard (the probes' idle guard) that declines to run.
NOT_RUN_EXIT = 75
#: The one line a declining guard prints on stdout, followed by its reason.
NOT_RUN_MARKER = "fabricproof: not run: "


def not_run_reason(exit_code: int | None, stdout: str) -> str | None:
    """The reason a guard gave for running nothing (exit NOT_RUN_EXIT and a marker line), else None.

    Both are needed: a real tool may exit 75 or print anything, but not both with the marker as a whole line."""
    if exit_code != NOT_RUN_EXIT:
        return None
    for line in stdout.splitlines():
        if line.startswith(NOT_RUN_MARKER):
            return line[len(NOT_RUN_MARKER):].strip() or "prerequisite absent"
    return None


def not_run_line(reason: str) -> str:
    """The marker line a guard prints (newline-terminated): what not_run_reason reads back."""
    return f"{NOT_RUN_MARKER}{' '.join(reason.split())}\n"


@dataclass(frozen=True)
class Requires:
    """A prerequisite whose absence is normal (unconfigured, not broken): a host file or a command on PATH.

    `missing` says what is then not checked; the reason reads "no /etc/x.yaml: NVSwitch firmware not checked"."""

    kind: str  # "file" (under $FABRICPROOF_HOST_ROOT) | "command"
    what: str
    missing: str

    @property
    def reason(self) -> str:
        absent = f"no {self.what}" if self.kind == "file" else f"{self.what} not installed"
        return f"{absent}: {self.missing}"


# Fixed scripts: the path/command and the reason come in as "$1"/"$2", the tool's argv as the rest, never spliced
# into the script. The real tool then replaces the shell (exec), so its exit status and output are its own.
_GUARDS = {
    "file": f'[ -e "${{{HOST_ROOT_ENV}:-}}$1" ] || {{ printf \'{NOT_RUN_MARKER}%s\\n\' "$2"; exit {NOT_RUN_EXIT}; }}; '
            'shift 2; exec "$@"',
    "command": f'command -v "$1" >/dev/null 2>&1 || {{ printf \'{NOT_RUN_MARKER}%s\\n\' "$2"; exit {NOT_RUN_EXIT}; }}; '
               'shift 2; exec "$@"',
}
_GUARD_NAME = "fabricproof-requires"
_GUARD_ARGS = 6  # sh -c SCRIPT NAME WHAT REASON, then the tool's argv


def guarded(requires: Requires, *argv: str) -> tuple[str, ...]:
    """The fixed argv that runs `argv` only when `requires` holds, else prints the not-run marker and exits 75."""
    if requires.kind not in _GUARDS:
        raise ValueError(f"unknown prerequisite kind {requires.kind!r}")
    return ("sh", "-c", _GUARDS[requires.kind], _GUARD_NAME, requires.what, requires.reason, *argv)


def unguarded(argv: tuple[str, ...]) -> tuple[str, ...]:
    """The tool's own argv inside a guarded() one (what a host's locks are keyed by)."""
    if len(argv) > _GUARD_ARGS and argv[:2] == ("sh", "-c") and argv[3] == _GUARD_NAME and argv[2] in _GUARDS.values():
        return argv[_GUARD_ARGS:]
    return argv


class ParseError(ValueError):
    """Raised by a parser for output it cannot read; the message is a one-line reason."""


@dataclass(frozen=True)
class Collector:
    """A named reading of a host (a probe is one that loads the fabric: see loads_fabric).

    argv is fixed: it never contains inventory or host data, so no shell string is ever built
    from data. parse is pure (text in, JSON-able fragment out) and raises ParseError with a
    one-line reason for output it cannot read. The fragment lands in the facts document at the
    JSON pointer `provides`; `schema` is the JSON Schema of that fragment, and the facts schema
    (schemas/facts.schema.json) is assembled from these.
    """

    id: str
    argv: tuple[str, ...]
    parse: Callable[[str], Any]
    provides: str
    schema: Mapping[str, Any]
    family: str
    description: str
    platforms: tuple[str, ...] = PLATFORMS
    default: bool = True  # part of the standard collection set
    loads_fabric: bool = False  # a probe: it loads GPUs and links (NCCL, nvbandwidth, perftest), so never by default
    #: Its facts come from the fabric's diff against its plan on the vantage host (`/subnet`), never from a command on
    #: this host: it is not collected, and its checks apply only where a plan was diffed.
    fabric_scope: bool = False
    ok_exit_codes: tuple[int, ...] = (0,)
    timeout_s: float = 30.0  # the registry sets it from its tool's duration (tools.TOOLS), when it runs one
    corpus: tuple[str, ...] = field(default=())  # ../shared/corpus families this parser reads
    typical_s: float = 0.0  # how long it takes on a real node (tools.TOOLS); 0 when unknown
    #: The lock it takes on the host: commands of one tool run one after another, and after one of them times out
    #: the others are not run. Empty: its argv[0], or nothing for an `sh -c` wrapper (it runs alongside anything).
    tool: str = ""
    #: A prerequisite whose absence is normal (a config file most nodes lack, an optional package): argv is then
    #: guarded(requires, ...) and the collector is recorded as skipped with requires.reason, not as an error.
    requires: Requires | None = None

    @property
    def tool_argv(self) -> tuple[str, ...]:
        """The argv of the tool itself, without the prerequisite guard around it."""
        return unguarded(self.argv)

    @property
    def lock(self) -> str:
        """The tool whose commands this one runs in sequence with on a host; "" when it runs alongside any. Probes
        share one: they load the same GPUs and links, and two at once would measure each other."""
        if self.tool:
            return self.tool
        if self.loads_fabric:
            return FABRIC_LOAD
        argv = self.tool_argv
        return "" if argv[0] == "sh" else argv[0]

    @property
    def command(self) -> str:
        """The argv for display only (never executed through a shell)."""
        import shlex

        return shlex.join(self.argv)
