"""`schemashift report html`: one self-contained page with provenance, tables and figures."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from report_helpers import CONFIG_HASH, error_line, report_args

from schemashift.cli import main
from schemashift.report.figures import stems


def html_args(aggregated: dict[str, Path], tables: Path, figures: Path, out: Path) -> list[str]:
    return report_args("html", aggregated, out, "--tables", str(tables), "--figures", str(figures))


@pytest.fixture(scope="module")
def report(aggregated: dict[str, Path], tables_dir: Path, figures_dir: Path) -> str:
    out = aggregated["dir"] / "html"
    assert main(html_args(aggregated, tables_dir, figures_dir, out)) == 0
    return (out / "report.html").read_text(encoding="utf-8")


def test_report_opens_with_what_ran_and_its_provenance(aggregated: dict[str, Path], report: str) -> None:
    manifest = json.loads(aggregated["manifest"].read_text(encoding="utf-8"))
    what_ran = report[report.index("<h2>What ran</h2>") : report.index("<h2>Tables</h2>")]
    assert (
        report.index("<h2>What ran</h2>") < report.index("<h2>Tables</h2>") < report.index("<h2>Figures</h2>")
    )
    for text in ("naive_heuristic, oracle, policy_aware_heuristic, hf:tiny", "E1_onboard_new_hire", "0-2"):
        assert text in what_ran
    assert "15 expected cells: 12 graded, 1 infra_error, 2 missing." in what_ran
    assert "legacy / hf:tiny / E1_onboard_new_hire / seed 0 / sample 0" in what_ran
    assert CONFIG_HASH in what_ran
    assert f"<td>{manifest['schemashift_version']}</td>" in what_ran
    assert f"pyarrow {manifest['packages']['pyarrow']}" in what_ran
    if manifest["git_sha"] is not None:
        assert manifest["git_sha"] in what_ran
        assert ("yes (dirty)" if manifest["git_dirty"] else "no (clean)") in what_ran


def test_what_ran_names_the_seeds_of_each_set_where_subjects_differ(
    aggregated: dict[str, Path], tables_dir: Path, figures_dir: Path, tmp_path: Path
) -> None:
    """Rule baselines expected on more seeds than the models (baseline_seeds): each subject's
    expected seeds show, not their union (here also the fixture's missing and infra cells)."""
    manifest = json.loads(aggregated["manifest"].read_text(encoding="utf-8"))
    oracle = next(cell for cell in manifest["cells"] if cell["policy"] == "oracle")
    manifest["cells"] += [{**oracle, "seed": seed, "status": "missing"} for seed in (3, 4)]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    grown = {**aggregated, "manifest": tmp_path / "manifest.json"}
    assert main(html_args(grown, tables_dir, figures_dir, tmp_path / "html")) == 0
    report = (tmp_path / "html" / "report.html").read_text(encoding="utf-8")
    what_ran = report[report.index("<h2>What ran</h2>") : report.index("<h2>Tables</h2>")]
    assert "<td>0-2: naive_heuristic; 0-1: policy_aware_heuristic; 0-4: oracle; 0: hf:tiny</td>" in what_ran


def test_report_shows_the_tables(report: str, tables_dir: Path) -> None:
    index = json.loads((tables_dir / "tables.json").read_text(encoding="utf-8"))
    for table in index:
        assert f'<h4 id="{table["key"]}">' in report
    assert '<td class="num">0.522 (no variation observed) n=2</td>' in report
    assert '<td class="num">missing</td>' in report


def test_report_embeds_its_figures_and_references_nothing_outside(report: str) -> None:
    images = re.findall(r'<img [^>]*src="([^"]*)"', report)
    assert len(images) == len(stems(["legacy"]))
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    assert re.findall(r'(?:src|href)="(?!data:)', report) == []
    for needle in ("http://", "https://", 'src="file', "<link", "<script"):
        assert needle not in report
    assert report.count("<figcaption>") == len(images)


def test_report_without_a_manifest_says_so(
    aggregated: dict[str, Path], tables_dir: Path, figures_dir: Path, tmp_path: Path
) -> None:
    args = html_args(aggregated, tables_dir, figures_dir, tmp_path)
    del args[args.index("--manifest") : args.index("--manifest") + 2]
    assert main(args) == 0
    report = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "No manifest was given" in report
    assert CONFIG_HASH in report  # from the rows


def test_report_needs_the_tables_and_figures(
    aggregated: dict[str, Path], figures_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "empty").mkdir()
    assert main(html_args(aggregated, tmp_path / "empty", figures_dir, tmp_path / "out")) == 2
    assert "tables.json: no table index" in error_line(capsys, "report")
    assert not (tmp_path / "out" / "report.html").exists()


def test_report_parts_are_listed_in_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "schemashift.cli", "report", "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    for part in ("tables", "figures", "html"):
        assert part in result.stdout
