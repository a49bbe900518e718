"""Screenshots of what a reader sees, taken in a real headless browser (Chromium from the
distribution's packages): report.html opened from file://, and the Trackio dashboard served by
`trackio show` on 127.0.0.1. Each shot also reports whether the page rendered: its console
errors, and for the report whether every interactive chart drew.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from schemashift.report import ReportError
from schemashift.runs.tracking import TRACKIO_PROJECT

#: browsers tried in order (Debian: chromium-headless-shell, chromium)
BROWSERS = ("chromium-headless-shell", "chromium", "chromium-browser", "google-chrome")
#: milliseconds of virtual time the page gets to run its scripts before the shot
SETTLE_MS = 15000
REPORT_FILE = "report.png"
DASHBOARD_FILE = "trackio.png"
TRACE_FILE = "trace.png"
_CONSOLE = re.compile(r":CONSOLE[^\]]*\] \"(.*)\", source: (.*)$")


@dataclass
class Shot:
    path: Path
    console_errors: list[str] = field(default_factory=list)
    charts: dict[str, bool] = field(default_factory=dict)


def find_browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def _run(browser: str, url: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    with tempfile.TemporaryDirectory(prefix="schemashift-browser-") as profile:
        command = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={profile}",
            f"--virtual-time-budget={SETTLE_MS}",
            "--enable-logging=stderr",
            "--v=0",
            *args,
            url,
        ]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


def console_errors(stderr: str) -> list[str]:
    """The page's console errors from the browser's log: uncaught exceptions and messages that
    carry an error (headless Chromium logs every console message at one level, so a plain
    `console.error("text")` without the word is not told apart; the report's charts also write
    their failure into the page, which `shoot` checks)."""
    out = []
    for line in stderr.splitlines():
        match = _CONSOLE.search(line)
        if match and ("Uncaught" in match[1] or "error" in match[1].lower()):
            out.append(f"{match[1]} ({match[2]})")
    return out


def shoot(url: str, out: Path, width: int = 1280, height: int = 2400, browser: str | None = None) -> Shot:
    """A PNG of the page at `url` after its scripts ran, with its console errors and DOM."""
    browser = browser or find_browser()
    if browser is None:
        raise ReportError(f"no headless browser found (tried {', '.join(BROWSERS)}): install chromium")
    out.parent.mkdir(parents=True, exist_ok=True)
    shot = _run(browser, url, f"--window-size={width},{height}", f"--screenshot={out}")
    if not out.is_file():
        raise ReportError(f"{browser} took no screenshot of {url}: {shot.stderr.strip()[-1000:]}")
    result = Shot(out, console_errors(shot.stderr))
    dom = _run(browser, url, "--dump-dom").stdout
    for element in re.findall(r'<div class="vega[^"]*" id="(chart-[a-z]+)"', dom):
        start = dom.index(f'id="{element}"')
        chunk = dom[start : start + 200_000].split("<figcaption", 1)[0]
        result.charts[element] = "<svg" in chunk and "could not be drawn" not in chunk
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dashboard_url(port: int, project: str = TRACKIO_PROJECT) -> str:
    """The dashboard's overview preset view (`dashboard.preset_views`) on this port."""
    from schemashift.report.dashboard import preset_views

    return preset_views(f"http://127.0.0.1:{port}", project, {})["overview"]


def shoot_dashboard(
    trackio_dir: Path, out: Path, project: str = TRACKIO_PROJECT, browser: str | None = None
) -> Shot:
    """Serve the project with `trackio show` on 127.0.0.1 (a free port), shoot its overview, stop."""
    with dashboard_served(trackio_dir, project) as port:
        return shoot(dashboard_url(port, project), out, 1400, 1000, browser)


@contextlib.contextmanager
def dashboard_served(trackio_dir: Path, project: str = TRACKIO_PROJECT) -> Iterator[int]:
    """`trackio show` of the project on 127.0.0.1 (a free port) while the block runs; its port."""
    trackio = shutil.which("trackio", path=os.path.dirname(sys.executable)) or shutil.which("trackio")
    if trackio is None:
        raise ReportError("the trackio command is not installed (pip install 'schemashift[workflow]')")
    port = free_port()
    env = {**os.environ, "TRACKIO_DIR": str(trackio_dir), "GRADIO_SERVER_PORT": str(port)}
    server = subprocess.Popen(
        [trackio, "show", "--project", project],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2):
                    break
            except OSError:
                if server.poll() is not None:
                    raise ReportError(f"trackio show stopped: {server.stderr.read()[-1000:]}") from None
                if time.monotonic() > deadline:
                    raise ReportError("trackio show did not answer on 127.0.0.1 within 60 s") from None
                time.sleep(0.3)
        yield port
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def failed_trace(trackio_dir: Path, project: str = TRACKIO_PROJECT) -> dict | None:
    """The trace to show: a failed episode with a drift fired, v1's first and the shortest first,
    else any failed one (run, key, metadata); None where the project holds no failed episode's
    trace. Read from Trackio's `traces` table, as its dashboard reads it; `matches` counts the
    run's traces whose key contains this one's (what the dashboard's search leaves)."""
    import sqlite3

    from schemashift.report.dashboard import _project_dir

    db = Path(trackio_dir) / f"{_project_dir(project)}.db"
    with contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True)) as connection:
        rows = connection.execute(
            "SELECT run_name, key, metadata FROM traces ORDER BY run_name, step"
        ).fetchall()
    failed = [
        {"run": run, "key": key, "metadata": meta, "matches": sum(r == run and key in k for r, k, _ in rows)}
        for run, key, meta in ((r, k, json.loads(m)) for r, k, m in rows)
        if meta.get("success") is False
    ]
    failed.sort(
        key=lambda t: (
            t["metadata"].get("ruleset") != "v1",
            not t["metadata"].get("drifts_fired"),
            t["metadata"]["steps"],
        )
    )
    return failed[0] if failed else None


def shoot_trace(
    trackio_dir: Path, out: Path, project: str = TRACKIO_PROJECT, browser: str | None = None
) -> Shot:
    """The dashboard's Traces tab with one failed episode's trace opened (`failed_trace`): the
    page is driven over the DevTools protocol, since opening a trace takes a click."""
    from schemashift.report.traces import trace_link

    trace = failed_trace(trackio_dir, project)
    if trace is None:
        raise ReportError(f"{trackio_dir}: no failed episode's trace (run `report trackio --cells`)")
    meta = trace["metadata"]
    with dashboard_served(trackio_dir, project) as port:
        url = trace_link(f"http://127.0.0.1:{port}", project, meta["ruleset"], meta["subject"])
        # the Traces tab searches keys too, and a click on a row opens its trace
        search = (
            "(() => { const box = document.querySelector('.search-wrap input'); if (!box) return false;"
            f" box.value = {json.dumps(trace['key'])}; box.dispatchEvent(new Event('input'));"
            " return true; })()"
        )
        # the search leaves every trace whose key contains this one (its control-arm twin's,
        # `<key>/control`, too); of those rows, the arm named in the episode line picks it
        arm = meta.get("arm")
        marker = json.dumps(f" ({arm} arm)" if arm else " arm)")
        click = (
            "(() => { const rows = [...document.querySelectorAll('tr.trace-row')];"
            f" if (rows.length !== {trace['matches']}) return false;"
            f" const row = rows.find(r => r.textContent.includes({marker}) === {json.dumps(bool(arm))});"
            " if (!row) return false; row.click(); return true; })()"
        )
        with DevTools(browser or find_browser(), 1400, 2000) as page:
            page.call("Page.navigate", url=url)
            page.wait_for(search)
            page.wait_for(click)
            page.wait_for("!!document.querySelector('.trace-detail')")
            # inspect the first drift and open the conversation: the drift marked in both
            page.wait_for(
                "(() => { const drift = [...document.querySelectorAll('.span-select')]"
                ".find(b => b.textContent.includes('DRIFT '));"
                f" if (!drift && {json.dumps(bool(meta.get('drifts_fired')))}) return false;"
                " if (drift) drift.click(); const talk = document.querySelector('.conversation-section');"
                " if (talk) talk.open = true; return !!talk; })()"
            )
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(page.screenshot())
            return Shot(out, page.errors)


class DevTools:
    """A headless Chromium page driven over the DevTools protocol (a WebSocket): navigate,
    evaluate, screenshot; uncaught exceptions and console errors are kept in `errors`."""

    def __init__(self, browser: str | None, width: int, height: int) -> None:
        if browser is None:
            raise ReportError(f"no headless browser found (tried {', '.join(BROWSERS)}): install chromium")
        self.browser, self.width, self.height = browser, width, height
        self.errors: list[str] = []
        self._id = 0

    def __enter__(self) -> DevTools:
        from websockets.sync.client import connect

        self._profile = tempfile.TemporaryDirectory(prefix="schemashift-browser-")
        command = [
            self.browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={self._profile.name}",
            "--remote-debugging-port=0",
            f"--window-size={self.width},{self.height}",
            "about:blank",
        ]
        self._process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        deadline = time.monotonic() + 30
        for line in self._process.stderr:
            if "DevTools listening on " in line:
                port = int(line.split("ws://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
                break
            if time.monotonic() > deadline:
                break
        else:
            port = None
        if port is None:
            self.__exit__()
            raise ReportError(f"{self.browser} opened no DevTools endpoint")
        # keep reading the browser's log, so that a full pipe never stalls it
        threading.Thread(target=self._process.stderr.read, daemon=True).start()
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as answer:
            target = next(t for t in json.loads(answer.read()) if t.get("type") == "page")
        self._ws = connect(target["webSocketDebuggerUrl"], max_size=None, proxy=None).__enter__()
        self.call("Runtime.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=self.width,
            height=self.height,
            deviceScaleFactor=1,
            mobile=False,
        )
        return self

    def call(self, method: str, **params: object) -> dict:
        self._id += 1
        self._ws.send(json.dumps({"id": self._id, "method": method, "params": params}))
        while True:
            message = json.loads(self._ws.recv(timeout=60))
            if message.get("id") == self._id:
                if "error" in message:
                    raise ReportError(f"DevTools {method}: {message['error']}")
                return message.get("result", {})
            self._note(message)

    def _note(self, message: dict) -> None:
        params = message.get("params") or {}
        if message.get("method") == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails") or {}
            self.errors.append(
                str((details.get("exception") or {}).get("description") or details.get("text"))
            )
        elif message.get("method") == "Runtime.consoleAPICalled" and params.get("type") == "error":
            self.errors.append(
                " ".join(str(a.get("value", a.get("description"))) for a in params.get("args", []))
            )

    def wait_for(self, expression: str, timeout_s: float = 60) -> None:
        """Evaluate `expression` until it is true, or a ReportError after `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            result = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
            if (result.get("result") or {}).get("value") is True:
                return
            time.sleep(0.3)
        raise ReportError(f"the page never satisfied: {expression[:200]}")

    def screenshot(self) -> bytes:
        import base64

        return base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])

    def __exit__(self, *exc: object) -> None:
        ws = getattr(self, "_ws", None)
        if ws is not None:
            ws.close()
        self._process.terminate()
        try:
            self._process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._profile.cleanup()
