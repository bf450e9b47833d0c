"""The rollout report: one self-contained page per run (rollout.view's document in, HTML out): the verdict, the
waves on a timeline, every gate with its attempts and what failed, the soak's counter deltas, each decision with
its evidence, and the rollback."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from ._html import attr, e, page

#: What each kind of the run's own steps is called where an operator reads it: the state's step ids (w0.pre_verdict,
#: w0.apply.b0) are the run's own bookkeeping. A gate's steps are named by its gate kind (the view's `words`).
STEP_WORDS = {"drain": "drain", "apply": "apply", "decide": "decision", "undrain": "undrain",
              "failed_rollback": "rollback of failed", "pause": "pause", "pre_verdict": "pre-gate verdict",
              "done": "done"}

MIN_TIME_SCALE_S = 60
#: The page's sections for a gate step's proofs (the view's `section`, from the step's gate kind): every attempt
#: with what its failed hosts found, or the counter deltas of every soak sample.
ATTEMPTS, SAMPLES = "attempts", "samples"

#: Steps that record a boundary, not work: not drawn on the timeline, nor listed as work done.
BOOKKEEPING = frozenset({"pre_verdict", "done"})


def step_words(kind: str, batch: str | None = None) -> str:
    """A step as an operator reads it: 'apply (batch 2)' for w0.apply.b1."""
    word = STEP_WORDS.get(kind, kind.replace("_", " "))
    return f"{word} (batch {int(batch[1:]) + 1})" if batch else word

_CSS = """
.timeline{position:relative;border:1px solid var(--line);padding:.4rem .5rem .2rem 9rem;margin:.5rem 0}
.lane{position:relative;height:1.5rem;margin:.2rem 0}
.lane>b{position:absolute;left:-8.5rem;width:8rem;font-size:12px;font-weight:600;white-space:nowrap;overflow:hidden;
text-overflow:ellipsis}
.bar{position:absolute;top:.15rem;height:1.2rem;min-width:.6rem;border-radius:2px;font-size:10px;line-height:1.2rem;
color:#fff;overflow:hidden;white-space:nowrap;padding:0 .15rem}
.k-pre_gate,.k-post_gate,.k-gate{background:#0969da}.k-drain,.k-undrain{background:#6e7781}.k-apply{background:#8250df}
.k-soak{background:#1b7c83}.k-decide{background:#1b1f24}.k-pause{background:var(--unk)}.k-failed_rollback{background:var(--fail)}
.bar.failed{outline:2px solid var(--fail)}.rb .bar{opacity:.85;background-image:repeating-linear-gradient(45deg,
transparent 0 4px,rgba(255,255,255,.25) 4px 8px)}
.axis{display:flex;justify-content:space-between;font-size:11px;color:var(--mute);margin-left:0}
tr.verdict-PROCEED td:first-child{border-left:4px solid var(--pass)}
tr.verdict-ROLLBACK td:first-child,tr.verdict-HALT td:first-child{border-left:4px solid var(--fail)}
td.delta-grew{background:#ffebe9;font-weight:600}
.badge{white-space:nowrap}table.decisions td:first-child{white-space:nowrap}
"""


def _epoch(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _header(view: Mapping[str, Any]) -> list[str]:
    run = view["run"]
    meta = " · ".join(f"{k} {v}" for k, v in (("run", run["run_id"]), ("started", run["created_at"]),
                                               ("by", run["created_by"]), ("updated", run["updated_at"]),
                                               ("on failure", view["on_failure"])) if v)
    verdicts = [d for d in view["decisions"] if d.get("what") in view["verdicts"]]
    last = f" · last decision {verdicts[-1]['what']}" if verdicts else ""
    return [f'<header id="verdict" class="verdict status-{e(run["status"])}" data-status={attr(run["status"])}>',
            f'<h1><span class="word">{e(str(run["status"]).upper().replace("_", " "))}</span> · rollout '
            f"{e(run['plan'])}</h1>",
            f"<p>exit code {e(run['exit_code'])} · {len(view['waves'])} wave(s), {len(view['hosts'])} host(s){e(last)}</p>",
            f'<p class="meta">{e(meta)}</p>', "</header>"]


def _lanes(view: Mapping[str, Any]) -> list[tuple[str, str, list[dict[str, Any]]]]:
    """(label, css class, steps) per lane: one per wave, then one per rollback phase."""
    names = {w["index"]: w["name"] for w in view["waves"]}
    lanes: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for s in view["steps"]:
        if s["wave"] is None or s["kind"] in BOOKKEEPING:
            continue
        lanes.setdefault((s["rollback"] or "", s["wave"]), []).append(s)
    out = []
    for (rb, wave), steps in sorted(lanes.items(), key=lambda kv: (kv[0][0] != "", kv[0][0], kv[0][1])):
        label = f"{wave + 1}. {names.get(wave, wave)}" + (f" ({rb} rollback)" if rb else "")
        out.append((label, "rb" if rb else "", steps))
    return out


def _timeline(view: Mapping[str, Any]) -> list[str]:
    lanes = _lanes(view)
    times = [t for s in view["steps"] for t in (_epoch(s["started_at"]), _epoch(s["ended_at"])) if t is not None]
    t0 = min(times, default=0.0)
    span = max(times, default=0.0) - t0
    # state.json keeps steps in the order they began: the tie-break within one second of the clock.
    began = {s["id"]: i for i, s in enumerate(view["steps"])}
    order = sorted((s for _, _, steps in lanes for s in steps), key=lambda s: (s.get("started_at") or "", began[s["id"]]))
    rank = {s["id"]: i for i, s in enumerate(order)}
    out = ['<section id="timeline">', "<h2>Waves on a timeline</h2>"]
    if not lanes:
        return [*out, "<p>No step ran yet.</p>", "</section>"]
    # The run's clock counts whole seconds: a run of under a minute (a rehearsal) is laid out in step order, where
    # time would stack its steps on one another.
    scale = "time" if span >= MIN_TIME_SCALE_S else "order"
    out.append(f'<div class="timeline" data-scale="{scale}">')
    for label, cls, steps in lanes:
        out.append(f'<div class="lane {cls}" data-lane={attr(label)}><b title={attr(label)}>{e(label)}</b>')
        for s in steps:
            if scale == "time":
                start = ((_epoch(s["started_at"]) or t0) - t0) / span
                end = ((_epoch(s["ended_at"]) or _epoch(s["started_at"]) or t0) - t0) / span
            else:
                start, end = rank[s["id"]] / len(order), (rank[s["id"]] + 0.9) / len(order)
            kind = s["words"]
            tip = (f"{kind} {s['status']}; {s['started_at']} → {s['ended_at'] or '…'}"
                   + (f"; {s['attempts']} attempt(s)" if s.get("attempts") and s.get("section") == ATTEMPTS else "")
                   + (f"; {s['decision']}: {s['why']}" if s.get("decision") else "")
                   + (f"; failed: {', '.join(s['failed'])}" if s.get("failed") else ""))
            failed = " failed" if s.get("status") == "failed" or s.get("failed") else ""
            text = s.get("decision") or kind
            out.append(f'<span class="bar k-{e(s["kind"])}{failed}" data-step={attr(s["id"])} title={attr(tip)} '
                       f'style="left:{start * 100:.2f}%;width:{max(end - start, 0) * 100:.2f}%">{e(text)}</span>')
        out.append("</div>")
    first = order[0].get("started_at") or ""
    last = max((s.get("ended_at") or s.get("started_at") or "" for s in order), default="")
    out += ["</div>", f'<div class="axis"><span>{e(first)}</span><span>{e(scale)} scale</span><span>{e(last)}</span></div>',
            "</section>"]
    return out


def _waves(view: Mapping[str, Any]) -> list[str]:
    decided = {s["wave"]: s for s in view["steps"] if s["kind"] == "decide" and not s["rollback"]}
    out = ['<section id="waves">', "<h2>Waves</h2>", '<table class="waves"><thead><tr><th>wave</th><th>hosts</th>'
           "<th>may fail</th><th>soak</th><th>host states</th><th>decision</th></tr></thead><tbody>"]
    for w in view["waves"]:
        states = Counter(view["hosts"][h]["state"] for h in w["hosts"] if h in view["hosts"])
        budget = (f"{w['max_failed_hosts']} host(s)" if w.get("max_failed_hosts") is not None else "") + (
            f", {w['max_failed_percent']}%" if w.get("max_failed_percent") is not None else "")
        d = decided.get(w["index"])
        verdict = (f'<span class="badge {e(d["decision"])}">{e(d["decision"])}</span> {e(d["why"])}'
                   if d and d.get("decision") else "")
        out.append(f'<tr data-wave="{w["index"]}"><td>{w["index"] + 1}. {e(w["name"])}</td>'
                   f"<td>{len(w['hosts'])}: {e(', '.join(w['hosts'][:8]))}{' …' if len(w['hosts']) > 8 else ''}</td>"
                   f"<td>{e(budget)}</td><td>{e(w['soak_s'] if w.get('soak_s') is not None else '-')}</td>"
                   f"<td>{e(', '.join(f'{n} {k}' for k, n in sorted(states.items())))}</td><td>{verdict}</td></tr>")
    return [*out, "</tbody></table>", "</section>"]


def _wave_name(view: Mapping[str, Any], s: Mapping[str, Any]) -> str:
    names = {w["index"]: w["name"] for w in view["waves"]}
    return f"{s['wave'] + 1}. {names.get(s['wave'], s['wave'])}" if s["wave"] is not None else ""


def _gates(view: Mapping[str, Any]) -> list[str]:
    gates = [s for s in view["steps"] if s.get("section") == ATTEMPTS]
    out = ['<section id="gates">', f"<h2>Gates ({len(gates)})</h2>"]
    if not gates:
        return [*out, "<p>No gate ran yet.</p>", "</section>"]
    for s in gates:
        proofs = s.get("proofs", [])
        kind = s["words"]
        failed = s.get("failed") or {}
        out += [f'<article class="gate" data-step={attr(s["id"])} data-attempts="{len(proofs)}" '
                f'data-failed={attr(",".join(sorted(failed)))}>',
                f"<h3>{e(_wave_name(view, s))} {e(kind)}{' (rollback ' + e(s['rollback']) + ')' if s['rollback'] else ''}"
                f" <small>{e(s['status'])} · {len(proofs)} attempt(s) · {len(failed)} host(s) failed</small></h3>"]
        if proofs:
            out.append('<table class="attempts"><thead><tr><th>attempt</th><th>hosts</th><th>proven</th>'
                       "<th>failed, and what they found</th><th>report</th></tr></thead><tbody>")
            for p in proofs:
                if "error" in p:
                    out.append(f'<tr data-attempt={attr(str(p["n"]))}><td>{e(p["n"])}</td><td colspan="3">{e(p["error"])}</td>'
                               f"<td><code>{e(p['report'])}</code></td></tr>")
                    continue
                fails = "".join(f"<div><b>{e(h)}</b> {e('; '.join(lines))}</div>" for h, lines in p["failed"].items())
                fails += "".join(f"<div><b>{e(h)}</b> not collected: {e(why)}</div>"
                                 for h, why in p["not_collected"].items())
                n_failed = len(p["failed"]) + len(p["not_collected"])
                out.append(f'<tr data-attempt={attr(str(p["n"]))} data-failed="{n_failed}">'
                           f"<td>{e(p['n'])}</td><td>{len(p['hosts'])}</td><td>{len(p['passed'])}</td><td>{fails}</td>"
                           f"<td><code>{e(p['report'])}</code></td></tr>")
            out.append("</tbody></table>")
        out.append("</article>")
    return [*out, "</section>"]


def _soaks(view: Mapping[str, Any]) -> list[str]:
    soaks = [s for s in view["steps"] if s.get("section") == SAMPLES]
    if not soaks:
        return ['<section id="soak"><h2>Soak</h2><p>No soak ran.</p></section>']
    out = ['<section id="soak">', "<h2>Soak: counter deltas</h2>"]
    for s in soaks:
        samples = s.get("proofs", [])
        checks = sorted({c for p in samples for per in p.get("figures", {}).values() for c in per})
        hosts = sorted({h for p in samples for h in p.get("figures", {})})
        grew = s.get("failed") or {}
        out += [f'<article class="soak" data-step={attr(s["id"])}>',
                f"<h3>{e(_wave_name(view, s))} <small>{e(s.get('duration_s'))} s · {len(samples)} sample(s) · "
                f"{len(grew)} host(s) grew</small></h3>"]
        if checks:
            out.append('<table class="deltas"><thead><tr><th>host</th>' + "".join(f"<th><code>{e(c)}</code></th>"
                                                                                for c in checks) + "</tr></thead><tbody>")
            for h in hosts:
                cells = []
                for c in checks:
                    seq = [p["figures"].get(h, {}).get(c) for p in samples]
                    shown = " → ".join("-" if v is None else f"{v:g}" for v in seq)
                    hot = " delta-grew" if any(isinstance(v, int | float) and v > 0 for v in seq) else ""
                    cells.append(f'<td class="delta{hot}" data-check={attr(c)}>{e(shown)}</td>')
                out.append(f"<tr data-host={attr(h)}><td>{e(h)}</td>{''.join(cells)}</tr>")
            out.append("</tbody></table>")
        for h, why in grew.items():
            out.append(f"<p><b>{e(h)}</b> {e(why)}</p>")
        out.append("</article>")
    return [*out, "</section>"]


def _rollback(view: Mapping[str, Any]) -> list[str]:
    rb = view.get("rollback")
    steps = [s for s in view["steps"] if s["rollback"]]
    out = ['<section id="rollback">', "<h2>Rollback</h2>"]
    if not rb and not steps:
        return [*out, "<p>Nothing was rolled back.</p>", "</section>"]
    if rb:
        waves = ", ".join(f"wave {w['wave'] + 1}: {', '.join(w['hosts'])}" for w in rb.get("waves", []))
        out.append(f"<p>rollback {e(rb.get('id'))}: {e(rb.get('reason'))} · then {e(rb.get('then'))} · "
                   f"{e(rb.get('started_at'))} → {e(rb.get('ended_at') or '…')} · {e(waves)}</p>")
    out.append('<ol class="rollback-steps">')
    for s in steps:  # in the order they began
        failed = f" · failed: {', '.join(s['failed'])}" if s.get("failed") else ""
        out.append(f"<li data-step={attr(s['id'])}>{e(s['words'])} "
                   f"{e(_wave_name(view, s))} · {e(s['status'])}{e(failed)}</li>")
    return [*out, "</ol>", "</section>"]


def _decisions(view: Mapping[str, Any]) -> list[str]:
    decs = view["decisions"]
    out = ['<section id="decisions">', f"<h2>Decisions ({len(decs)})</h2>",
           '<table class="decisions"><thead><tr><th>when</th><th>what</th><th>wave</th><th>hosts</th><th>why</th>'
           "<th>evidence</th></tr></thead><tbody>"]
    for i, d in enumerate(decs):
        what = str(d.get("what", ""))
        cls = f" verdict-{what}" if what in view["verdicts"] else ""
        actions = d.get("actions") or {}  # a gate's or wave decision's failed host -> what its checks call for
        hosts = [f"{h} ({actions[h]})" if h in actions else h for h in d.get("hosts") or []]
        out.append(f'<tr class="decision{cls}" data-index="{i}" data-what={attr(what)}><td>{e(d.get("when", ""))}<br>'
                   f"<small>{e(d.get('who', ''))}</small></td><td><span class=\"badge {e(what)}\">{e(what)}</span></td>"
                   f"<td>{e(d.get('wave', ''))}</td><td>{e(', '.join(hosts[:10]))}{' …' if len(hosts) > 10 else ''}</td>"
                   f"<td>{e(d.get('why', ''))}</td><td>"
                   + "<br>".join(f"<code>{e(p)}</code>" for p in d.get("evidence") or []) + "</td></tr>")
    out.append("</tbody></table>")
    log = view.get("decision_log") or {}
    if log.get("unreadable"):  # lines of the file that hold no decision: kept there, listed so none goes unseen
        out.append(f'<p class="unreadable">{len(log["unreadable"])} unreadable line(s) in decisions.jsonl:</p>'
                   '<ul class="unreadable">' + "".join(f"<li data-line=\"{u['line']}\">line {u['line']}: "
                                                       f"{e(u['reason'])}: <code>{e(u['text'])}</code></li>"
                                                       for u in log["unreadable"]) + "</ul>")
    if log.get("set_aside"):
        out.append(f'<p class="set-aside">torn last line(s) set aside beside decisions.jsonl, kept as they were: '
                   f'{e(", ".join(log["set_aside"]))}</p>')
    return [*out, "</section>"]


def _hosts(view: Mapping[str, Any]) -> list[str]:
    names = {w["index"]: w["name"] for w in view["waves"]}
    out = ['<section id="hosts">', f"<h2>Hosts ({len(view['hosts'])})</h2>",
           '<table class="hosts"><thead><tr><th>host</th><th>wave</th><th>state</th><th>reason</th></tr></thead><tbody>']
    for h, d in sorted(view["hosts"].items(), key=lambda kv: (kv[1]["wave"], kv[0])):
        out.append(f"<tr data-host={attr(h)} data-state={attr(d['state'])}><td>{e(h)}</td>"
                   f"<td>{e(names.get(d['wave'], d['wave']))}</td><td>{e(d['state'])}</td><td>{e(d.get('reason', ''))}</td></tr>")
    return [*out, "</tbody></table>", "</section>"]


def render(view: Mapping[str, Any]) -> str:
    body = [*_header(view), "<main>", *_timeline(view), *_waves(view), *_gates(view), *_soaks(view), *_rollback(view),
            *_decisions(view), *_hosts(view), "</main>"]
    return page(f"rollout {view['run']['plan']}: {view['run']['status']}", body, css=_CSS)
