"""The reporter registry: every output format by name, each rendering one Report to a string."""

from __future__ import annotations

from . import html_report, json_report, junit, markdown, prometheus, sarif, table, tap
from .base import Reporter

REPORTERS: dict[str, Reporter] = {
    r.name: r
    for r in (
        table.REPORTER,
        json_report.REPORTER,
        junit.REPORTER,
        sarif.REPORTER,
        tap.REPORTER,
        prometheus.REPORTER,
        markdown.REPORTER,
        html_report.REPORTER,
    )
}

__all__ = ["REPORTERS", "Reporter"]
