"""What every command shares: the consoles, input-error handling (exit 2), and writing reports."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from ..errors import InputError
from ..fsutil import atomic_write_chunks, read_chunks
from ..model import ExitCode, Severity
from ..redact import assignments
from ..textsafe import for_terminal

F = TypeVar("F", bound=Callable[..., Any])

console = Console(highlight=False, soft_wrap=False)
err_console = Console(stderr=True, highlight=False)


def shown(text: object) -> str:
    """Host- or file-provided text as rich prints it literally: no markup, no terminal control sequence."""
    return escape(for_terminal(str(text)))


def input_errors(fn: F) -> F:
    """Turn InputError into one clear message per problem on stderr and exit code 2 (nothing touched)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            for problem in exc.problems:
                err_console.print(f"[bold red]error:[/] {shown(assignments(str(problem)))}", markup=True,
                                  highlight=False, soft_wrap=True)
            raise typer.Exit(ExitCode.INVALID_INPUT) from None
        except KeyboardInterrupt:
            err_console.print("interrupted")
            raise typer.Exit(ExitCode.INTERRUPTED) from None

    return wrapper  # type: ignore[return-value]


#: "critical, warning or info", for --fail-on help and errors.
SEVERITIES = ", ".join(s.value for s in list(Severity)[:-1]) + f" or {list(Severity)[-1].value}"


def check_fail_on(value: str) -> str:
    """--fail-on names a severity (exit 2 otherwise)."""
    if value not in {s.value for s in Severity}:
        raise InputError(f"--fail-on {value!r}: choose {SEVERITIES}")
    return value


def pair_outputs(formats: list[str], outputs: list[Path]) -> list[tuple[str, Path | None]]:
    """--format F --output PATH pairs in order; a format without an output goes to stdout (only one may)."""
    from ..reporters import REPORTERS

    formats = formats or ["table"]
    for f in formats:
        if f not in REPORTERS:
            raise InputError(f"--format {f!r}: unknown format; choose from {', '.join(REPORTERS)}")
    if len(outputs) > len(formats):
        raise InputError("more --output than --format: give one --format for every --output, in the same order")
    pairs: list[tuple[str, Path | None]] = [(f, outputs[i] if i < len(outputs) else None) for i, f in enumerate(formats)]
    if sum(1 for _, o in pairs if o is None) > 1:
        raise InputError("only one --format can go to stdout; give the others an --output PATH")
    return pairs


def output_mode(text: str) -> int:
    """--output-mode as a file mode: octal, like chmod's ("600", "0640"); exit 2 otherwise."""
    try:
        mode = int(text, 8)
    except ValueError:
        mode = -1
    if not 0 <= mode <= 0o777:
        raise InputError(f"--output-mode {text!r}: give an octal file mode such as 600 or 640")
    return mode


#: The option every command that writes reports or facts takes.
OUTPUT_MODE_HELP = "File mode of written reports and facts, octal (default 600: the owner's only; 640 for a group)."


def emit_report(report: Any, pairs: list[tuple[str, Path | None]], written: dict[str, Path] | None = None,
                mode: int = 0o600) -> None:
    """Write each (format, file or stdout) pair, piece by piece, files with `mode`. `written` names files already
    holding a format (format -> path), copied instead of rendered again: a 1,000-host report is made once."""
    from ..reporters import REPORTERS

    def pieces(fmt: str) -> Iterable[str]:
        if written and fmt in written:
            return read_chunks(written[fmt])
        return REPORTERS[fmt].pieces(report)

    for fmt, out in pairs:
        if out is None:
            if fmt == "table" and console.is_terminal:
                from ..reporters import table

                table.print_to(console, report)
            else:
                for piece in pieces(fmt):
                    sys.stdout.write(piece)
                sys.stdout.flush()
        else:
            atomic_write_chunks(out, pieces(fmt), mode=mode)
            err_console.print(f"wrote {fmt} report to {out}")
