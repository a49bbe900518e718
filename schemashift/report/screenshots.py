"""Screenshots of what a reader sees, taken in a real headless browser (Chromium from the
distribution's packages): report.html opened from file://, and the Trackio dashboard served by
`trackio show` on 127.0.0.1. Each shot also reports whether the page rendered: its console
errors, and for the report whether every interactive chart drew.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
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
        return shoot(dashboard_url(port, project), out, 1400, 1000, browser)
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
