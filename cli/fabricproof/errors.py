"""Input errors that name the file, the line and the JSON path; the CLI maps them to exit code 2."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Problem:
    """One thing wrong with an input document."""

    message: str
    file: str = ""
    line: int | None = None
    pointer: str = ""

    def __str__(self) -> str:
        where = self.file or "<input>"
        if self.line:
            where += f":{self.line}"
        at = f" at {self.pointer}" if self.pointer else ""
        return f"{where}:{at} {self.message}" if at else f"{where}: {self.message}"


class InputError(Exception):
    """Invalid baseline, check, plan, inventory or facts: nothing was touched."""

    def __init__(self, problems: list[Problem] | Problem | str):
        if isinstance(problems, str):
            problems = [Problem(problems)]
        elif isinstance(problems, Problem):
            problems = [problems]
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))
