"""What both HTML pages share: escaping, the style sheet, and a page shell whose policy forbids every load."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable
from html import escape

from ..textsafe import visible

CSS = """
:root{--fail:#cf222e;--warn:#d4760a;--info:#3b7dd8;--err:#8250df;--unk:#bf8700;--pass:#2da44e;--skip:#d0d7de;
--none:#f6f8fa;--ink:#1b1f24;--mute:#57606a;--line:#d0d7de}
*{box-sizing:border-box}
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:var(--ink);background:#fff}
main{padding:0 1.5rem 3rem}
h1{font-size:1.45rem;margin:0}h2{font-size:1.15rem;margin:1.75rem 0 .5rem}h3{font-size:1rem;margin:1rem 0 .35rem}
code{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.25rem 0}
th,td{border:1px solid var(--line);padding:.25rem .5rem;text-align:left;vertical-align:top}
td{overflow-wrap:anywhere}
th{background:#f6f8fa;font-weight:600}
small,.mute{color:var(--mute)}
.verdict{padding:1rem 1.5rem;color:#fff}
.verdict p{margin:.2rem 0}.verdict .meta{opacity:.85;font-size:12px}
.status-failed{background:var(--fail)}.status-incomplete,.status-not_proven{background:var(--unk)}
.status-passed{background:var(--pass)}.status-empty{background:#6e7781}
.status-done{background:var(--pass)}.status-rolled_back,.status-halted,.status-rollback_failed{background:var(--fail)}
.status-paused,.status-aborted,.status-interrupted,.status-running{background:var(--unk)}
.badge{display:inline-block;padding:0 .4rem;border-radius:3px;font-size:12px;font-weight:600;color:#fff;background:#6e7781}
.sev-critical .badge,.badge.critical,.badge.ROLLBACK,.badge.HALT,.badge.ROLLBACK_FAILED{background:var(--fail)}
.sev-warning .badge,.badge.warning{background:var(--warn)}
.sev-info .badge,.badge.info{background:var(--info)}
.badge.PROCEED,.badge.DONE,.badge.ROLLBACK_DONE{background:var(--pass)}
nav.controls{position:sticky;top:0;background:#fff;border-bottom:1px solid var(--line);padding:.5rem 0;z-index:2}
nav.controls input[type=search]{width:22rem;max-width:60vw;padding:.2rem .4rem}
:target{outline:3px solid #0969da;background:#fff8c5}
[hidden]{display:none!important}
""".strip()


def e(text: object) -> str:
    """Any value as HTML text: control characters made visible, markup escaped."""
    return escape(visible(str(text)), quote=True)


def attr(value: object) -> str:
    return f'"{e(value)}"'


def script_hash(script: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")


def page(title: str, body: Iterable[str], css: str = "", script: str = "") -> str:
    """A self-contained page. Its Content-Security-Policy forbids every fetch (no CDN, no font, no image, no frame);
    only its own style and, by hash, its own script run."""
    scripts = f"'{script_hash(script)}'" if script else "'none'"
    policy = (f"default-src 'none'; style-src 'unsafe-inline'; script-src {scripts}; img-src data:; "
              "base-uri 'none'; form-action 'none'")
    head = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{policy}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{e(title)}</title>",
        f"<style>{CSS}\n{css.strip()}</style>",
        "</head>",
        "<body>",
    ]
    tail = [f"<script>{script}</script>"] if script else []
    return "\n".join([*head, *body, *tail, "</body>", "</html>"]) + "\n"
