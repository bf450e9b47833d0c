"""What every command shares: the consoles, input-error handling (exit 2), and writing reports."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import typer

from ..errors import STORAGE_ERRNOS, InputError, WriteError
from ..fsutil import NotWritten, check_target, read_chunks, write_target
from ..model import ExitCode, Severity
from ..redact import assignments
from ..textsafe import for_terminal

F = TypeVar("F", bound=Callable[..., Any])


@functools.cache
def consoles() -> tuple[Any, Any]:
    """The consoles (stdout, stderr), made when a command first prints through rich: `check --local`, run by Slurm
    on every node every few minutes, prints plain lines and never imports rich (~0.04 s of CPU a run)."""
    from rich.console import Console

    # Messages soft-wrap: the terminal folds a long line, and a path or command in it is never cut by a newline.
    return Console(highlight=False, soft_wrap=False), Console(stderr=True, highlight=False, soft_wrap=True)


def __getattr__(name: str) -> Any:
    """`console` and `err_console`, as the commands import them."""
    if name == "console":
        return consoles()[0]
    if name == "err_console":
        return consoles()[1]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def shown(text: object) -> str:
    """Host- or file-provided text as rich prints it literally: no markup, no terminal control sequence."""
    from rich.markup import escape

    return escape(for_terminal(str(text)))


def plain(text: object) -> str:
    """Host- or file-provided text as a plain line shows it: what rich prints for shown(text) (tabs expanded to
    its 8-column stops), without rich; no terminal control sequence."""
    return for_terminal(str(text)).expandtabs(8)


def whole_ids(table: Any, column: int, ids: Iterable[str]) -> None:
    """Show an id column's values whole, each on one line, at any width the other columns can give up (an id is
    what the operator copies: rich cut `fabric.cluster_uuid_consistent` to `fabric.cluster_uuid_…` at 80 columns)."""
    col = table.columns[column]
    col.no_wrap, col.overflow = True, "fold"
    col.min_width = max((len(i) for i in ids), default=0)


def input_errors(fn: F) -> F:
    """Turn InputError into one clear message per problem on stderr and exit code 2 (nothing touched), and a write
    the storage failed (disk full, I/O error) into one line naming the path and exit code 6."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            for problem in exc.problems:
                consoles()[1].print(f"[bold red]error:[/] {shown(assignments(str(problem)))}", markup=True,
                                  highlight=False, soft_wrap=True)
            raise typer.Exit(ExitCode.INVALID_INPUT) from None
        except WriteError as exc:
            consoles()[1].print(f"[bold red]error:[/] {shown(exc)}", markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(ExitCode.WRITE_FAILED) from None
        except NotWritten as exc:  # a decision not appended whole (a full disk): the run waits for space, exit 6
            consoles()[1].print(f"[bold red]error:[/] {shown(f'cannot write {exc.filename}: {exc.strerror}')}",
                              markup=True, highlight=False, soft_wrap=True)
            raise typer.Exit(ExitCode.WRITE_FAILED) from None
        except OSError as exc:
            if exc.errno not in STORAGE_ERRNOS:
                raise
            # A write outside our own files' helpers (a report on stdout redirected to a full disk): the same exit.
            where = f" {exc.filename}" if exc.filename else ""
            consoles()[1].print(f"[bold red]error:[/] {shown(f'cannot write{where}: {exc.strerror}')}", markup=True,
                              highlight=False, soft_wrap=True)
            raise typer.Exit(ExitCode.WRITE_FAILED) from None
        except KeyboardInterrupt:
            consoles()[1].print("interrupted")
            raise typer.Exit(ExitCode.INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


#: -b of the commands that judge: the option's default comes from config.resolve.
BASELINE_HELP = ("Baseline YAML (kind: Baseline). Default: $FABRICPROOF_BASELINE, else `baseline:` in fabricproof.yaml "
                 "(see `fabricproof config`).")
#: -i of the commands that read an inventory.
INVENTORY_DEFAULT = " Default: $FABRICPROOF_INVENTORY, else `inventory:` in fabricproof.yaml."


#: "critical, warning or info", for --fail-on help and errors.
SEVERITIES = ", ".join(s.value for s in list(Severity)[:-1]) + f" or {list(Severity)[-1].value}"


def check_fail_on(value: str) -> str:
    """--fail-on names a severity (exit 2 otherwise)."""
    if value not in {s.value for s in Severity}:
        raise InputError(f"--fail-on {value!r}: choose {SEVERITIES}")
    return value


#: --format help: one rule binds a file to its format, so no file can get another format's output.
FORMAT_HELP = ("FORMAT or FORMAT=PATH (repeatable): {choices}. FORMAT=PATH writes that format to PATH; "
               "a bare FORMAT (or FORMAT=-) goes to stdout, at most one.")
OUTPUT_GONE = ("--output is gone: name the file with its format, -f FORMAT=PATH (e.g. -f junit=junit.xml "
               "-f sarif=fabric.sarif), so no file can get another format's output")


def report_targets(specs: list[str], choices: Iterable[str], default: str = "table",
                   outputs: list[Path] | None = None) -> list[tuple[str, Path | None]]:
    """-f FORMAT[=PATH] as (format, file or None for stdout) pairs, in the order given; exit 2 before anything runs
    on an unknown format, an empty path, two formats for stdout, two formats into one file, any --output, or a file
    that cannot be written (a directory, a missing parent: fsutil.check_target)."""
    if outputs:
        raise InputError(OUTPUT_GONE)
    known = list(choices)
    targets: list[tuple[str, Path | None]] = []
    for spec in specs or [default]:
        name, sep, path = spec.partition("=")  # a format name never holds '=', a path may
        name = name.strip()
        if name not in known:
            raise InputError(f"--format {spec!r}: unknown format {name!r}; choose from {', '.join(known)} "
                             "(FORMAT or FORMAT=PATH)")
        if sep and not path:
            raise InputError(f"--format {spec!r}: no file after '='; give FORMAT=PATH, or FORMAT alone for stdout")
        targets.append((name, None if not sep or path == "-" else Path(path)))
    to_stdout = [f for f, out in targets if out is None]
    if len(to_stdout) > 1:
        raise InputError(f"only one --format can go to stdout ({', '.join(to_stdout)}); give the others a file: "
                         f"-f {to_stdout[-1]}=PATH")
    seen: dict[Path, str] = {}
    for fmt, out in targets:
        if out is None:
            continue
        key = Path(out).expanduser().absolute()
        if key in seen:
            raise InputError(f"--format {fmt}={out}: {out} already receives the {seen[key]} report; "
                             "give every format its own file")
        seen[key] = fmt
        check_target(out, f"--format {fmt}")
    return targets


def pair_outputs(formats: list[str], outputs: list[Path]) -> list[tuple[str, Path | None]]:
    """The report formats of `validate`: -f FORMAT[=PATH] over the reporter registry."""
    from ..reporters import REPORTERS

    return report_targets(formats, REPORTERS, outputs=outputs)


def output_mode(text: str) -> int:
    """--output-mode as a file mode: octal, like chmod's ("600", "0640"); exit 2 otherwise."""
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777:
        raise InputError(f"--output-mode {text!r}: give an octal file mode such as 600 or 640")
    return mode


#: --workers of every command that collects a fleet.
WORKERS_HELP = ("Processes the hosts are shared across, each with its own connections and parsing; --forks stays the "
                "hosts collected at once in total (default: the machine's cores, up to 16, one per 50 hosts).")

#: The option every command that writes reports or facts takes.
HOST_TIMEOUT_HELP = ("Seconds one host may take, connect to last byte (a host that stops answering altogether is cut "
                     "sooner, by SSH keepalives).")
OUTPUT_MODE_HELP = "File mode of written reports and facts, octal (default 600: the owner's only; 640 for a group)."


def emit_report(report: Any, pairs: list[tuple[str, Path | None]], written: dict[str, Path] | None = None,
                mode: int = 0o600, per_host: bool | None = None) -> None:
    """Write each (format, file or stdout) pair, piece by piece, files with `mode`. `written` names files already
    holding a format (format -> path), copied instead of rendered again: a 1,000-host report is made once.
    per_host: the table lists every host (True), rolls up by check (False), or decides by fleet size (None)."""
    from ..reporters import REPORTERS, table

    def pieces(fmt: str) -> Iterable[str]:
        if written and fmt in written:
            return read_chunks(written[fmt])
        if fmt == "table":
            return (table.render(report, per_host=per_host),)
        return REPORTERS[fmt].pieces(report)

    for fmt, out in pairs:
        if out is None:
            if fmt == "table" and not (written and fmt in written):
                # The console knows the width (the terminal's, $COLUMNS, or 80 in a pipe) and colours only terminals.
                table.print_to(consoles()[0], report, per_host)
            else:
                for piece in pieces(fmt):
                    sys.stdout.write(piece)
                sys.stdout.flush()
        else:
            write_target(out, pieces(fmt), mode=mode, option=f"--format {fmt}")
            consoles()[1].print(f"wrote {fmt} report to {out}")
