"""What --help shows an operator: flags take no value, so no `<bool>` after them (typer 0.29 prints one; the
project pins below it)."""

from __future__ import annotations

import tomllib
from importlib.metadata import version

import typer
from fabricproof.cli import app
from packaging.requirements import Requirement

from .helpers import REPO, run


def _typer_pin() -> Requirement:
    deps = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]
    (typer_req,) = [Requirement(d) for d in deps if Requirement(d).name == "typer"]
    return typer_req


def test_the_typer_pin_excludes_the_versions_that_print_bool_after_flags():
    pin = _typer_pin().specifier
    assert "0.28.0" in pin and "0.29.0" not in pin and "0.29.2" not in pin


def _commands(group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path, groups included (typer vendors its own click: a group is what has sub-commands; the root
    builds each command when asked for it)."""
    out = [prefix]
    for name in group.list_commands(None):
        cmd = group.get_command(None, name)
        out += _commands(cmd, prefix + (name,)) if hasattr(cmd, "commands") else [prefix + (name,)]
    return out


def test_no_help_page_prints_bool_after_a_flag():
    installed = version("typer")
    assert installed in _typer_pin().specifier, (
        f"typer {installed} is installed, outside the project's pin {_typer_pin()}: python -m pip install -e .")
    commands = _commands(typer.main.get_command(app))
    assert len(commands) > 40
    for command in commands:
        res = run(*command, "--help")
        assert res.exit_code == 0, (command, res.output)
        assert "<bool>" not in res.output, command
