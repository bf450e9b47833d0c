"""Counted nouns: one host is "1 host", in the HTML report and the summary line as everywhere else (issue 24.6)."""

from __future__ import annotations

import re

from fabricproof.model import Outcome, Report, Result, Severity
from fabricproof.reporters import REPORTERS
from fabricproof.reporters._common import summary_phrase
from fabricproof.words import counted


def test_counted_takes_the_number_the_noun_needs():
    assert [counted(n, "host") for n in (0, 1, 2)] == ["0 hosts", "1 host", "2 hosts"]
    assert counted(1, "wave") == "1 wave" and counted(3, "reply", "replies") == "3 replies"


def _one_host(outcome: Outcome) -> Report:
    result = Result(check_id="gpu.count", title="GPU count", host="n1", outcome=outcome, severity=Severity.CRITICAL,
                    expected="8 GPUs", actual=8, family="gpu")
    return Report(results=(result,), hosts=("n1",), groups={"n1": ("dgx_h100",)})


def test_a_one_host_report_never_reads_1_hosts():
    for outcome in (Outcome.PASS, Outcome.FAIL):
        report = _one_host(outcome)
        page = REPORTERS["html"].render(report)
        text = re.sub(r"<[^>]+>", " ", page)
        assert not re.search(r"\b1 hosts\b", text), outcome
        assert not re.search(r"\b1 groups\b", text), outcome
        assert "1 host" in text
        assert "1 host," in summary_phrase(report.summary) and "1 hosts" not in summary_phrase(report.summary)
