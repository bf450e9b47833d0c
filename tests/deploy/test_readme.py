"""The README's Deploy and Slurm sections name every file of deploy/ and show the slurm.conf lines as shipped."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
README = (REPO / "README.md").read_text(encoding="utf-8")


def test_the_readme_names_every_deploy_file():
    files = sorted(p.relative_to(REPO) for p in DEPLOY.rglob("*") if p.is_file())
    assert len(files) == 13
    named = set(re.findall(r"`(deploy/[^`\s]+)`", README))
    for path in files:
        # a row names its first file in full and the next ones by name (or a directory for all of them)
        assert (str(path) in named or path.name in README or any(str(path).startswith(n.rstrip("/") + "/")
                                                                  for n in named if n.endswith("/"))), path
    assert {n for n in named if not (REPO / n.split(",")[0]).exists()} == set()


def test_the_readme_shows_the_shipped_slurm_conf_lines():
    shipped = [ln for ln in (DEPLOY / "slurm" / "slurm.conf").read_text().splitlines() if ln and ln[0] != "#"]
    assert "```\n" + "\n".join(shipped) + "\n```\n" in README
