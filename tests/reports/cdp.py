"""Debian's headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe): no port, no
extra library. Pages are opened from files; console messages, exceptions, log entries and every request are kept
for the test to assert on; screenshots are PNG files. The browser is stopped by its PID."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: Flags for a closed network and a root user in a container (the machine's own notes): nothing phones home.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--no-default-browser-check",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
         "--disable-default-apps", "--mute-audio", "--hide-scrollbars", "--disable-features=Translate,MediaRouter")
TIMEOUT_S = 120.0  # one protocol reply, generous for a loaded 2-core machine


def skip_reason() -> str | None:
    if not Path(CHROMIUM).is_file():
        return "Debian's chromium is not installed: apt-get install -y chromium"
    return None


class ProtocolError(RuntimeError):
    pass


class Browser:
    """One headless Chromium; `open(path)` gives a Page (one tab)."""

    def __init__(self) -> None:
        self.profile = Path(tempfile.mkdtemp(prefix="fabricproof-chromium-"))
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()
        # The protocol pipe is the child's fds 3 (commands in) and 4 (replies out); bash, as dash takes one-digit fds only.
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$0" "$@" 3<&{to_chrome_r} 4>&{from_chrome_w}', CHROMIUM, *FLAGS,
             "--remote-debugging-pipe", f"--user-data-dir={self.profile}", "about:blank"],
            pass_fds=(to_chrome_r, from_chrome_w), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=(self.profile / "stderr.log").open("w"))
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._next = 0
        self._replies: dict[int, dict[str, Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        buf = b""
        with os.fdopen(self._from_chrome, "rb", buffering=0) as pipe:
            while chunk := pipe.read(1 << 16):
                buf += chunk
                *messages, buf = buf.split(b"\0")
                with self._cond:
                    for raw in messages:
                        msg = json.loads(raw)
                        if "id" in msg:
                            self._replies[msg["id"]] = msg
                        else:
                            self.events.append(msg)
                    self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        with self._cond:
            self._next += 1
            mid = self._next
        msg: dict[str, Any] = {"id": mid, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        end = time.monotonic() + TIMEOUT_S
        with self._cond:
            while mid not in self._replies:
                if self.proc.poll() is not None:
                    raise ProtocolError(f"chromium exited ({self.proc.returncode}) during {method}")
                if not self._cond.wait(timeout=max(0.0, end - time.monotonic())) and time.monotonic() >= end:
                    raise ProtocolError(f"no reply to {method} in {TIMEOUT_S} s")
            reply = self._replies.pop(mid)
        if "error" in reply:
            raise ProtocolError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, method: str, session: str, since: int = 0) -> dict[str, Any]:
        end = time.monotonic() + TIMEOUT_S
        with self._cond:
            while True:
                for ev in self.events[since:]:
                    if ev.get("method") == method and ev.get("sessionId") == session:
                        return ev
                if time.monotonic() >= end or self.proc.poll() is not None:
                    raise ProtocolError(f"no {method} event in {TIMEOUT_S} s")
                self._cond.wait(timeout=1.0)

    def open(self, path: Path, width: int = 1280, height: int = 900) -> Page:
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable", session=session)
        self.send("Emulation.setDeviceMetricsOverride",
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session)
        mark = len(self.events)
        self.send("Page.navigate", {"url": Path(path).resolve().as_uri()}, session)
        self.wait_event("Page.loadEventFired", session, since=mark)
        return Page(self, session, mark)

    def close(self) -> None:
        """Stop the browser by its PID: politely over the protocol, then TERM, then KILL."""
        try:
            if self.proc.poll() is None:
                try:
                    self.send("Browser.close")
                except (ProtocolError, OSError):
                    pass
                try:
                    self.proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    self.proc.terminate()
                    try:
                        self.proc.wait(timeout=15)
                    except subprocess.TimeoutExpired:
                        self.proc.kill()
                        self.proc.wait(timeout=15)
        finally:
            try:
                os.close(self._to_chrome)
            except OSError:
                pass
            shutil.rmtree(self.profile, ignore_errors=True)


class Page:
    def __init__(self, browser: Browser, session: str, since: int):
        self.browser, self.session, self.since = browser, session, since

    def _events(self, method: str) -> list[dict[str, Any]]:
        return [ev["params"] for ev in self.browser.events[self.since:]
                if ev.get("sessionId") == self.session and ev.get("method") == method]

    def problems(self) -> list[str]:
        """Console errors and warnings, uncaught exceptions and error log entries (a CSP violation is one)."""
        out = [f"console.{p['type']}: {' '.join(str(a.get('value', a.get('description', ''))) for a in p['args'])}"
               for p in self._events("Runtime.consoleAPICalled") if p["type"] in ("error", "warning", "assert")]
        out += [f"exception: {p['exceptionDetails'].get('text')} {p['exceptionDetails'].get('exception', {}).get('description', '')}"
                for p in self._events("Runtime.exceptionThrown")]
        out += [f"log.{p['entry']['level']}: {p['entry']['text']}" for p in self._events("Log.entryAdded")
                if p["entry"]["level"] in ("error", "warning")]
        return out

    def requests(self) -> list[str]:
        return [p["request"]["url"] for p in self._events("Network.requestWillBeSent")]

    def js(self, expression: str) -> Any:
        res = self.browser.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                     "awaitPromise": True}, self.session)
        if "exceptionDetails" in res:
            raise ProtocolError(f"{expression[:80]}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def click(self, selector: str) -> None:
        """A real mouse click at the element's centre, after scrolling it into view."""
        box = self.js(f"(function(){{var el=document.querySelector({json.dumps(selector)});el.scrollIntoView({{block:'center'}});"
                      "var r=el.getBoundingClientRect();return [r.x+r.width/2,r.y+r.height/2];})()")
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.browser.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                           "clickCount": 1}, self.session)

    def type_into(self, selector: str, text: str) -> None:
        self.js(f"document.querySelector({json.dumps(selector)}).focus()")
        self.browser.send("Input.insertText", {"text": text}, self.session)

    def screenshot(self, path: Path, full_page: bool = True) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.js("[document.documentElement.scrollWidth, Math.min(document.documentElement.scrollHeight, 8000)]")
            params["clip"] = {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1}
            params["captureBeyondViewport"] = True
        data = self.browser.send("Page.captureScreenshot", params, self.session)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path
