"""One self-contained HTML page an operator scans first: the verdict, a fleet x check-family heatmap by inventory
group, the failures with what was expected, found, the evidence and the fix, what could not be judged or applied,
and a filter. Every value is escaped; nothing is loaded from anywhere; passing results are counted, not listed,
so a 1,000-host fleet stays a page of a few hundred KB."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from ..judging.catalog import FAMILIES
from ..model import Outcome, Report, Result
from ..words import counted
from ._common import (by_severity, failures, family_of, found_lines, not_proven_reason, not_verified, status, status_word,
                      summary_phrase)
from . import collective_html, fabric_html
from ._html import attr, e, page
from .base import Reporter

#: A heatmap cell's class by what is worst in it, worst first; fail is split by severity ("f3" critical).
CELL_ORDER = ("f3", "f2", "f1", "e", "u", "p", "s", "n")
CELL_WORDS = {"f3": "critical failure", "f2": "warning failure", "f1": "info failure", "e": "collector error",
              "u": "fact missing or not proven", "p": "all passed", "s": "not applicable", "n": "no check of this family"}

_CSS = """
.legend span{display:inline-block;margin-right:.9rem}
.legend i{display:inline-block;width:1rem;height:1rem;vertical-align:middle;margin-right:.25rem;border:1px solid var(--line)}
.group h3{margin:.9rem 0 .25rem;font-size:.95rem}
.tiles{display:grid;grid-template-columns:repeat(auto-fill,minmax(15.5rem,1fr));gap:1px 1.25rem}
.t{display:flex;align-items:stretch;height:1.05rem;font-size:11px;line-height:1.05rem}
.t b{font-weight:500;width:7.5rem;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;font-family:ui-monospace,monospace}
.t i{width:.95rem;margin-left:1px;font-style:normal;text-align:center}
.t i a{display:block;color:#fff;text-decoration:none}
.t.head{height:3.6rem;align-items:flex-end;width:15.5rem}
.t.head i{writing-mode:vertical-rl;transform:rotate(180deg);font-size:9.5px;color:var(--mute);line-height:.95rem}
.f3,.legend .f3{background:var(--fail)}.f2,.legend .f2{background:var(--warn)}.f1,.legend .f1{background:var(--info)}
.e,.legend .e{background:var(--err)}.u,.legend .u{background:var(--unk)}.p,.legend .p{background:var(--pass)}
.s,.legend .s{background:var(--skip)}.n,.legend .n{background:var(--none)}
article.check{border-left:4px solid var(--line);padding:.1rem 0 .4rem .8rem;margin:1rem 0}
article.sev-critical{border-color:var(--fail)}article.sev-warning{border-color:var(--warn)}
article.sev-info{border-color:var(--info)}
article.check p{margin:.25rem 0;max-width:75rem}
table.fails td:nth-child(3){min-width:18rem}
tr.failure{scroll-margin-top:4rem}
.found div+div{margin-top:.1rem}
"""

# Filters rows by text (host, its groups, the check), optionally only hosts with problems; hides a heatmap group or
# a failure block once every row in it is hidden. No library: a few hundred lines of DOM would be a dependency.
_SCRIPT = """(function(){
var q=document.getElementById('filter'),only=document.getElementById('only-problems'),out=document.getElementById('shown');
var rows=Array.prototype.slice.call(document.querySelectorAll('[data-filter]'));
var boxes=Array.prototype.slice.call(document.querySelectorAll('[data-box]'));
function apply(){
  var text=q.value.trim().toLowerCase(),hosts=0,seen=0;
  rows.forEach(function(r){
    var hit=!text||r.getAttribute('data-filter').indexOf(text)>=0;
    if(only.checked&&r.hasAttribute('data-ok'))hit=false;
    r.hidden=!hit;
    if(r.hasAttribute('data-host-row')){hosts++;if(hit)seen++;}
  });
  boxes.forEach(function(b){b.hidden=!b.querySelector('[data-filter]:not([hidden])');});
  out.textContent=seen+' of '+hosts+' hosts shown';
}
q.addEventListener('input',apply);only.addEventListener('change',apply);apply();
})();"""


def _cell(results: list[Result], unproven: frozenset[str] = frozenset()) -> str:
    """The worst outcome among one host's results of one family, as a cell class; a skip that leaves the host
    not proven (its check id in `unproven`) is a problem like a missing fact, never a grey cell."""
    best = len(CELL_ORDER) - 1
    for r in results:
        if r.outcome is Outcome.FAIL:
            code = f"f{r.severity.rank}"
        elif r.check_id in unproven:
            code = "u"
        else:
            code = {Outcome.ERROR: "e", Outcome.UNKNOWN: "u", Outcome.PASS: "p", Outcome.SKIP: "s"}[r.outcome]
        best = min(best, CELL_ORDER.index(code))
    return CELL_ORDER[best]


def row_group(report: Report) -> dict[str, str]:
    """Each host's heatmap group: its most specific inventory group (fewest members: a GB200 rack before its
    platform group), ties by name; hosts without groups are "ungrouped"."""
    size = Counter(g for groups in report.groups.values() for g in groups)
    out = {}
    for host in _hosts(report):
        groups = report.groups.get(host, ())
        out[host] = min(groups, key=lambda g: (size[g], g)) if groups else "ungrouped"
    return out


def _hosts(report: Report) -> list[str]:
    order = dict.fromkeys(report.hosts)
    for r in report.results:
        order.setdefault(r.host)
    for h in report.collection_errors:
        order.setdefault(h)
    return list(order)


def families(report: Report) -> list[str]:
    """The heatmap's columns: the catalog's families in its order, then any other family the results name."""
    present = dict.fromkeys(family_of(r) for r in report.results)
    return [f for f in FAMILIES if f in present] + sorted(f for f in present if f not in FAMILIES)


def _filter_text(*parts: Iterable[str] | str) -> str:
    """What the filter box matches a row on, lower-cased: host names, their groups, check ids."""
    words: list[str] = []
    for p in parts:
        words.extend([p] if isinstance(p, str) else p)
    return " ".join(w for w in words if w).lower()


def _header(report: Report) -> list[str]:
    s = report.summary
    word = status_word(report)
    hosts = len(_hosts(report))
    headline = (f"{s.hosts_failed} of {counted(hosts, 'host')} failed" if s.failed else
                f"{counted(hosts, 'host')}, none failed" if hosts else "no hosts")
    meta = " · ".join(f"{label} {value}" for label, value in (
        ("run", report.run_id), ("baseline", report.baseline), ("at", report.created_at),
        ("fabricproof", report.tool_version)) if value)
    out = [f'<header id="verdict" class="verdict status-{status(report)}" data-status={attr(status(report))}>',
           f'<h1><span class="word">{e(word)}</span> · {e(headline)}</h1>',
           f'<p class="counts">{e(summary_phrase(s))}</p>']
    if report.collection_errors:
        out.append(f"<p>{len(report.collection_errors)} host(s) could not be collected.</p>")
    if report.not_proven:
        out.append(f'<p><a href="#not-proven">{len(report.not_proven)} host(s) not proven</a>: checks their hardware '
                   "needs had no baseline value.</p>")
    if meta:
        out.append(f'<p class="meta">{e(meta)}</p>')
    out.append("</header>")
    return out


def _controls() -> list[str]:
    return ['<nav class="controls"><label>Filter <input id="filter" type="search" autocomplete="off" '
            'placeholder="host, group or check id"></label> <label><input id="only-problems" type="checkbox"> '
            'only hosts with problems</label> <small id="shown"></small></nav>']


def _heatmap(report: Report, anchors: dict[tuple[str, str], str]) -> list[str]:
    """Per inventory group, one tile per host: its name and one cell per check family coloured by the worst outcome
    there; a problem cell's title lists the failing checks and what they found, a click goes to the failure. Tiles
    flow into as many columns as the window has room for, so 1,000 hosts fit a few screens."""
    cols = families(report)
    hosts = _hosts(report)
    if not hosts:
        return ['<section id="heatmap"><h2>Fleet</h2><p>No hosts.</p></section>']
    by: dict[tuple[str, str], list[Result]] = {}
    for r in report.results:
        by.setdefault((r.host, family_of(r)), []).append(r)
    groups: dict[str, list[str]] = {}
    for host, group in row_group(report).items():
        groups.setdefault(group, []).append(host)
    legend = "".join(f'<span><i class="{c}"></i>{e(CELL_WORDS[c])}</span>' for c in CELL_ORDER)
    out = [f'<section id="heatmap" data-families={attr(" ".join(cols))}>',
           f"<h2>Fleet × check family ({counted(len(hosts), 'host')} in {counted(len(groups), 'group')})</h2>",
           f'<p class="legend">{legend}</p>',
           # The cells' order, once: every tile below has one cell per family, in this order.
           '<div class="t head"><b>each host:</b>' + "".join(f"<i>{e(f)}</i>" for f in cols) + "</div>"]
    for group in sorted(groups):
        members = sorted(groups[group])
        tiles = []
        bad = 0
        for host in members:
            cells = []
            problem = False
            unproven = frozenset(report.not_proven.get(host, ()))
            for fam in cols:
                rs = by.get((host, fam), [])
                code = _cell(rs, unproven)
                if code[0] not in "feu":
                    cells.append(f'<i class="{code}"></i>')
                    continue
                problem = True
                worst = by_severity([r for r in rs if r.outcome in (Outcome.FAIL, Outcome.ERROR, Outcome.UNKNOWN)
                                     or r.check_id in unproven])
                tip = f"{host} · {fam}\n" + "\n".join(
                    f"{r.check_id}: {'; '.join(found_lines(r, 3)) or r.reason}" for r in worst[:6])
                link = anchors.get((worst[0].check_id, host), "")
                mark = "✗" if code[0] == "f" else "?"
                inner = f'<a href="#{link}">{mark}</a>' if link else mark
                cells.append(f'<i class="{code}" title={attr(tip)}>{inner}</i>')
            bad += problem
            ok = "" if problem or host in report.collection_errors else " data-ok"
            tiles.append(f'<div class="t" data-host-row data-host={attr(host)}{ok} '
                         f"data-filter={attr(_filter_text(host, report.groups.get(host, ())))}>"
                         f"<b title={attr(host)}>{e(host)}</b>{''.join(cells)}</div>")
        out += [f'<div class="group" data-box data-group={attr(group)}>',
                f"<h3>{e(group)} <small>{counted(len(members), 'host')} · {bad} with problems</small></h3>",
                '<div class="tiles">', *tiles, "</div>", "</div>"]
    out.append("</section>")
    return out


def _failures(report: Report, anchors: dict[tuple[str, str], str], groups: dict[str, str]) -> list[str]:
    fails = failures(report)
    hosts = len({r.host for r in fails})
    out = ['<section id="failures">', f"<h2>Failures ({len(fails)} on {counted(hosts, 'host')})</h2>"]
    if not fails:
        return [*out, "<p>No check failed.</p>", "</section>"]
    by_check: dict[str, list[Result]] = {}
    for r in fails:
        by_check.setdefault(r.check_id, []).append(r)
    for check_id, rs in by_check.items():
        first = rs[0]
        out += [f'<article class="check sev-{first.severity.value}" data-box data-check={attr(check_id)} '
                f"id={attr('c-' + check_id)}>",
                f'<h3><span class="badge">{e(first.severity.value)}</span> <code>{e(check_id)}</code> '
                f"{e(first.title)} <small>{len(rs)} host(s)</small></h3>"]
        if first.action:
            out.append(f'<p class="action"><b>Action</b> <code data-action>{e(first.action)}</code></p>')
        if first.remediation:
            out.append(f'<p class="fix"><b>Remediation</b> {e(first.remediation)}</p>')
        by_expected: dict[str, list[Result]] = {}
        for r in rs:
            by_expected.setdefault(r.expected, []).append(r)
        for expected, group in by_expected.items():
            out += [f'<p class="expected"><b>Expected</b> {e(expected)}</p>',
                    '<table class="fails"><thead><tr><th>host</th><th>group</th><th>found</th><th>evidence</th>'
                    "</tr></thead><tbody>"]
            for r in group:
                found = "".join(f"<div>{e(line)}</div>" for line in found_lines(r)) or e(r.reason)
                evidence = "<br>".join(f"<code>{e(p)}</code>" for p in r.evidence)
                out.append(f'<tr class="failure" id={attr(anchors[(r.check_id, r.host)])} data-check={attr(r.check_id)} '
                           f"data-host={attr(r.host)} data-filter={attr(_filter_text(r.host, groups[r.host], r.check_id))}>"
                           f"<td>{e(r.host)}</td><td>{e(groups[r.host])}</td><td class=\"found\" title={attr(r.reason)}>"
                           f"{found}</td><td>{evidence}</td></tr>")
            out.append("</tbody></table>")
        out.append("</article>")
    out.append("</section>")
    return out


def _not_verified(report: Report, groups: dict[str, str]) -> list[str]:
    """What could not be judged, one row per (check, outcome, reason) with its hosts; a host not collected at all is
    one row of its own table, not one per check."""
    unjudged = [r for r in not_verified(report) if r.host not in report.collection_errors]
    if not unjudged and not report.collection_errors and not report.not_proven:
        return []
    rows: dict[tuple[str, str, str], list[Result]] = {}
    for r in unjudged:
        rows.setdefault((r.check_id, r.outcome.value, r.reason), []).append(r)
    out = ['<section id="not-verified">', f"<h2>Not verified ({len(unjudged)})</h2>"]
    if rows:
        out.append('<table class="not-verified" data-box><thead><tr><th>outcome</th><th>check</th><th>hosts</th>'
                   "<th>reason</th><th>evidence</th></tr></thead><tbody>")
        for (check_id, outcome, reason), rs in rows.items():
            hosts = [r.host for r in rs]
            evidence = "<br>".join(f"<code>{e(p)}</code>" for p in rs[0].evidence)
            more = f" (and {len(rs) - 1} more)" if len(rs) > 1 and rs[0].evidence else ""
            out.append(f'<tr class="unjudged" data-check={attr(check_id)} data-hosts={attr(" ".join(hosts))} '
                       f"data-filter={attr(_filter_text(hosts, (groups.get(h, '') for h in hosts), check_id))}>"
                       f"<td>{e(outcome)}</td><td><code>{e(check_id)}</code></td><td>{e(', '.join(hosts))}</td>"
                       f"<td>{e(reason)}</td><td>{evidence}{e(more)}</td></tr>")
        out.append("</tbody></table>")
    if report.collection_errors:
        out += [f'<h3 id="collection-errors">Hosts not collected ({len(report.collection_errors)})</h3>',
                '<table class="collection-errors" data-box><thead><tr><th>host</th><th>reason</th></tr></thead><tbody>']
        for host, why in sorted(report.collection_errors.items()):
            out.append(f'<tr class="lost" data-host={attr(host)} data-filter={attr(_filter_text(host, groups.get(host, "")))}>'
                       f"<td>{e(host)}</td><td>{e(why)}</td></tr>")
        out.append("</tbody></table>")
    if report.not_proven:
        out += [f'<h3 id="not-proven">Hosts not proven ({len(report.not_proven)})</h3>',
                '<table class="not-proven" data-box><thead><tr><th>host</th><th>reason</th></tr></thead><tbody>']
        for host, checks in report.not_proven.items():
            out.append(f'<tr class="unproven" data-host={attr(host)} data-checks={attr(" ".join(checks))} '
                       f'data-filter={attr(_filter_text(host, groups.get(host, ""), checks))}>'
                       f"<td>{e(host)}</td><td>{e(not_proven_reason(checks))}</td></tr>")
        out.append("</tbody></table>")
    out.append("</section>")
    return out


def _unapplied(report: Report) -> list[str]:
    out = ['<section id="unapplied">', f"<h2>Checks that applied to no host ({len(report.unapplied)})</h2>"]
    if not report.unapplied:
        return [*out, "<p>Every check applied to at least one host.</p>", "</section>"]
    out.append('<table class="unapplied"><thead><tr><th>check</th><th>why</th></tr></thead><tbody>')
    out += [f"<tr data-check={attr(c.check_id)}><td><code>{e(c.check_id)}</code></td><td>{e(c.reason)}</td></tr>"
            for c in report.unapplied]
    return [*out, "</tbody></table>", "</section>"]


def _checks(report: Report) -> list[str]:
    """Per check, how many hosts passed, failed, were skipped or not judged: what was proven, in 70 lines."""
    counts: dict[str, Counter[Outcome]] = {}
    meta: dict[str, Result] = {}
    for r in report.results:
        counts.setdefault(r.check_id, Counter())[r.outcome] += 1
        meta.setdefault(r.check_id, r)
    if not counts:
        return []
    cols = (Outcome.FAIL, Outcome.PASS, Outcome.SKIP, Outcome.UNKNOWN, Outcome.ERROR)
    out = ['<section id="checks">', f"<details><summary><b>Checks run ({len(counts)})</b></summary>",
           '<table class="checks"><thead><tr><th>check</th><th>severity</th><th>title</th>'
           + "".join(f"<th>{o.value}</th>" for o in cols) + "</tr></thead><tbody>"]
    order = sorted(counts, key=lambda c: (-counts[c][Outcome.FAIL], -meta[c].severity.rank, c))
    for c in order:
        out.append(f"<tr data-check={attr(c)}><td><code>{e(c)}</code></td><td>{e(meta[c].severity.value)}</td>"
                   f"<td>{e(meta[c].title)}</td>" + "".join(f"<td>{counts[c][o] or ''}</td>" for o in cols) + "</tr>")
    return [*out, "</tbody></table>", "</details>", "</section>"]


def render(report: Report) -> str:
    fails = failures(report)
    anchors = {(r.check_id, r.host): f"f{i}" for i, r in enumerate(fails)}
    groups = row_group(report)
    body = [*_header(report), "<main>", *_controls(), *_collective(report), *_heatmap(report, anchors),
            *_failures(report, anchors, groups), *_fabric(report), *_not_verified(report, groups), *_unapplied(report),
            *_checks(report), "</main>"]
    css = _CSS + fabric_html.CSS if report.fabric is not None else _CSS
    css += collective_html.CSS if report.collective is not None else ""
    return page(f"fabricproof: {status_word(report)}", body, css=css, script=_SCRIPT)


def _collective(report: Report) -> list[str]:
    """A collective run's tests and the search's path, its verdict first, when the run had collectives."""
    return [] if report.collective is None else [collective_html.render(report.collective)]


def _fabric(report: Report) -> list[str]:
    """The fabric view, when the run read the fabric: leaves and spines with the failing cables marked."""
    f = report.fabric
    if f is None:
        return []
    return [fabric_html.render(f["subnet"], f["findings"], f["roles"], plan=f.get("plan"))]


REPORTER = Reporter(
    name="html",
    extension="html",
    description="One self-contained HTML page: verdict, fleet x check-family heatmap by group, failures first, filter.",
    render=render,
)

__all__ = ["CELL_ORDER", "REPORTER", "families", "render", "row_group"]
