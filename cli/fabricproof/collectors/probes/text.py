"""Text helpers the probe parsers share: launcher prefixes, per-target sections, numbers and medians."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from ..textutil import strip_ansi

# `srun --label` prints "0: " (right-aligned rank, so " 0: " from 10 tasks on); Open MPI's --tag-output prints
# "[1,0]<stdout>:" (job, rank, stream). Both wrap every line of every rank, headers and NCCL INFO lines alike.
_LAUNCHER = re.compile(r"^(?:\s*\d+: ?|\[\d+,\d+\]<(?:stdout|stderr)>: ?)")
# Open MPI tags each chunk it forwards, not each line: a rank that wrote a table row in two writes (nccl-tests
# prints out-of-place, in-place and the newline apart) can arrive with a second tag inside the row.
_OMPI_TAG = re.compile(r"\[\d+,\d+\]<(?:stdout|stderr)>:")
# One target's output inside a probe's raw evidence, as `head`/`tail` title several files: "==> mlx5_0 <==".
_SECTION = re.compile(r"^==> (?P<name>\S(?:.*\S)?) <==$")
_NUMBER = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")


def lines_of(text: str, launcher: bool = False) -> list[str]:
    """The output's lines without ANSI escapes or CRs; with launcher, also without srun's or mpirun's per-line
    prefix (only for tools started by a launcher: a perftest or dcgmi line may begin with "2: ")."""
    lines = strip_ansi(text).splitlines()
    return [_OMPI_TAG.sub("", _LAUNCHER.sub("", line, count=1)) for line in lines] if launcher else lines


def number(token: str) -> float | None:
    """'395.08' -> 395.08, '2.0e+07' -> 2e7; None for N/A and anything that is not a plain number."""
    return float(token) if _NUMBER.match(token) else None


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def pct(part: float, whole: float) -> float | None:
    """part as a percentage of whole, two decimals; None when whole is zero."""
    return round(100.0 * part / whole, 2) if whole else None


def join_targets(outputs: Mapping[str, str]) -> str:
    """One raw evidence text from the outputs of a probe run once per target (an HCA, a peer host): each output
    under a "==> <target> <==" title line, as `tail` titles several files. split_targets() reads it back."""
    return "".join(f"==> {name} <==\n{text if text.endswith(chr(10)) or not text else text + chr(10)}"
                   for name, text in outputs.items())


def split_targets(text: str) -> dict[str, str]:
    """{target: output} from join_targets() text; text without title lines is one output under the key ""."""
    sections: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines(keepends=True):
        m = _SECTION.match(line.rstrip("\r\n"))
        if m:
            current = sections.setdefault(m.group("name"), [])
            continue
        if current is None:
            current = sections.setdefault("", [])
        current.append(line)
    if "" in sections and not "".join(sections[""]).strip():
        del sections[""]  # blank lines before the first title
    return {name: "".join(body) for name, body in sections.items()}
