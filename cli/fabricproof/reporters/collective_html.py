"""The HTML report's Collectives section: the verdict's sentence first, what is at fault with its evidence chain, the
suspects confirmed and with whom, then every test by round with its figures and outcome. Every value is escaped."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from ..words import counted
from ._html import attr, e

#: A group of more hosts is shown by its count and its ends (report.json lists every host).
MAX_NAMED = 8

CSS = """
#collective .coll-verdict{font-size:1.05rem;border-left:4px solid var(--line);padding:.35rem .8rem;max-width:75rem}
#collective .coll-verdict.at-fault{border-color:var(--fail)}#collective .coll-verdict.clear{border-color:var(--pass)}
#collective .coll-verdict.unresolved,#collective .coll-verdict.stopped{border-color:var(--unk)}
td.o-pass{color:var(--pass)}td.o-slow,td.o-fail,td.o-hang{color:var(--fail);font-weight:600}
td.o-borderline,td.o-unjudged{color:var(--unk)}
tr.chain td:first-child{box-shadow:inset 4px 0 var(--fail)}
tr.round-start td{border-top:2px solid var(--mute)}
.ref{color:var(--mute)}
"""


def render(section: Mapping[str, Any]) -> str:
    """The section of one collective run (probes.collective_section.section's shape, as report.json holds it)."""
    search = section.get("search")
    tests = section.get("tests") or []
    state = search["state"] if search else ("stopped" if section.get("stopped") else "measured")
    chain = {i for f in (search or {}).get("findings", ()) for i in f["evidence"]}
    rounds = len({t["round"] for t in tests})
    head = (f"{e(section['scale'])}, {e(section['launcher'])}: {counted(len(tests), 'test')} in "
            f"{counted(rounds, 'round')}")
    klass = "stopped" if section.get("stopped") else state.replace(" ", "-")
    out = [f"<section id=\"collective\" data-scale={attr(section['scale'])} data-state={attr(state)}>",
           f"<h2>Collectives <small>{head}</small></h2>",
           f'<p class="coll-verdict {e(klass)}"><b>Verdict</b> {e(section["sentence"])}</p>']
    if search:
        out += _findings(search["findings"])
        out += _confirmations(search["confirmations"], tests)
    out += _tests(tests, chain)
    out.append("</section>")
    return "\n".join(out)


def _links(indexes: Sequence[int]) -> str:
    return " ".join(f'<a href="#ct-{int(i)}">#{int(i)}</a>' for i in indexes)


def _findings(findings: Sequence[Mapping[str, Any]]) -> list[str]:
    if not findings:
        return []
    out = ['<table class="coll-findings"><thead><tr><th>at fault</th><th>kind</th><th>what it means</th>'
           "<th>evidence (tests)</th></tr></thead><tbody>"]
    for f in findings:
        members = " ".join(f["members"])
        out.append(f"<tr class=\"coll-finding\" data-kind={attr(f['kind'])} data-members={attr(members)} "
                   f"data-evidence={attr(' '.join(str(i) for i in f['evidence']))}>"
                   f"<td><b>{e(', '.join(f['members']))}</b></td><td>{e(f['kind'])}</td><td>{e(f['sentence'])}</td>"
                   f"<td>{_links(f['evidence'])}</td></tr>")
    return [*out, "</tbody></table>"]


def _figure(value: float | None) -> str:
    return "" if value is None else f"{value:g}"


def _confirmations(confirmations: Sequence[Mapping[str, Any]], tests: Sequence[Mapping[str, Any]]) -> list[str]:
    if not confirmations:
        return []
    by = {t["index"]: t for t in tests}
    out = [f"<h3>Suspects tested beside hosts that passed ({len(confirmations)})</h3>",
           '<table class="coll-confirm"><thead><tr><th>suspect</th><th>with (passed before)</th><th>round</th>'
           "<th>busbw GB/s</th><th>outcome</th><th>test</th></tr></thead><tbody>"]
    for c in confirmations:
        t = by.get(c["test"], {})
        out.append(f"<tr class=\"coll-confirmation\" data-test={attr(c['test'])} "
                   f"data-suspects={attr(' '.join(c['suspects']))} data-partners={attr(' '.join(c['partners']))} "
                   f"data-outcome={attr(c['outcome'])}><td>{e(', '.join(c['suspects']))}</td>"
                   f"<td>{e(', '.join(c['partners']))}</td><td>{e(c['round'])}</td>"
                   f"<td>{e(_figure(t.get('busbw_gbps')))}</td><td class=\"o-{e(c['outcome'])}\">{e(c['outcome'])}</td>"
                   f"<td>{_links([c['test']])}</td></tr>")
    return [*out, "</tbody></table>"]


def _group(hosts: Sequence[str], refs: Sequence[str]) -> str:
    """The group as read: its hosts, references (hosts that passed before) marked; a large one by its ends."""
    if len(hosts) > MAX_NAMED:
        return e(f"{len(hosts)} hosts: {hosts[0]} … {hosts[-1]}")
    return ", ".join(f'<span class="ref" title="passed before">{e(h)}</span>' if h in refs else e(h) for h in hosts)


def _tests(tests: Sequence[Mapping[str, Any]], chain: set[int]) -> list[str]:
    if not tests:
        return ["<p>No collective ran.</p>"]
    out = ["<h3>Tests by round</h3>",
           '<table class="coll-tests"><thead><tr><th>round</th><th>test</th><th>group</th><th>busbw GB/s</th>'
           "<th>algbw GB/s</th><th>threshold</th><th>outcome</th><th>why, or the tool's words</th><th>evidence</th>"
           "</tr></thead><tbody>"]
    last = None
    for t in tests:
        classes = " ".join(c for c in ("coll-test", "chain" if t["index"] in chain else "",
                                       "round-start" if t["round"] != last else "") if c)
        last = t["round"]
        words = t["failure"] or t["why"] or ""
        out.append(f"<tr class={attr(classes)} id={attr('ct-' + str(t['index']))} data-index={attr(t['index'])} "
                   f"data-round={attr(t['round'])} data-outcome={attr(t['outcome'])} "
                   f"data-size={attr(len(t['hosts']))}>"
                   f"<td>{e(t['round'])}</td><td>#{e(t['index'])}</td><td class=\"group\">"
                   f"{_group(t['hosts'], t['references'])}</td><td>{e(_figure(t['busbw_gbps']))}</td>"
                   f"<td>{e(_figure(t['algbw_gbps']))}</td><td>{e(_figure(t['threshold_gbps']))}</td>"
                   f"<td class=\"o-{e(t['outcome'])}\">{e(t['outcome'])}</td><td>{e(words)}</td>"
                   f"<td title={attr(t['evidence'])}><code>{e(PurePath(t['evidence']).name)}</code></td></tr>")
    return [*out, "</tbody></table>"]


__all__ = ["CSS", "MAX_NAMED", "render"]
