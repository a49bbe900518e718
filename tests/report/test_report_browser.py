"""report.html in a real headless browser, opened from file://: it renders (not blank, every
interactive chart drawn, no console errors), through `schemashift screenshots`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from browser_helpers import distinct_colours, require_browser
from report_helpers import report_args

from schemashift.cli import main

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]


def test_report_renders_in_a_headless_browser(
    aggregated: dict[str, Path], tables_dir: Path, figures_dir: Path, tmp_path: Path
) -> None:
    require_browser()
    args = report_args(
        "html", aggregated, tmp_path, "--tables", str(tables_dir), "--figures", str(figures_dir)
    )
    assert main(args) == 0
    out = tmp_path / "screenshots"
    assert main(["screenshots", "--report", str(tmp_path / "report.html"), "--out", str(out)]) == 0
    summary = json.loads((out / "screenshots.json").read_text(encoding="utf-8"))["report"]
    assert summary["console_errors"] == []
    assert summary["charts"] == {"chart-scenarios": True, "chart-coverage": True, "chart-efficiency": True}
    assert distinct_colours(out / "report.png") > 50


def test_a_chart_that_fails_to_draw_is_reported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The check can fail: a page whose chart spec is broken."""
    require_browser()
    from schemashift.report.interactive import vega_script

    page = tmp_path / "broken.html"
    page.write_text(
        '<html><body><div class="vega" id="chart-broken"></div>'
        f"<script>{vega_script()}</script><script>"
        "vegaEmbed('#chart-broken', {mark: 'nonsense', data: {values: []}}).catch((error) => {"
        "document.getElementById('chart-broken').textContent = 'This chart could not be drawn: ' + error;"
        "console.error(error);});</script><figcaption>x</figcaption></body></html>",
        encoding="utf-8",
    )
    assert main(["screenshots", "--report", str(page), "--out", str(tmp_path / "out")]) == 2
    error = capsys.readouterr().err
    assert "chart chart-broken not drawn" in error and "console error" in error
