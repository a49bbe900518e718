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


def test_report_leads_with_the_answer_then_details_then_provenance_collapsed(report: str) -> None:
    order = ['<h2 id="results">', "<h3>Key figures</h3>", '<h2 id="details">', "<h3>What ran</h3>"]
    order += ["<h3>Tables</h3>", '<h3 id="figures">Figures</h3>', '<h2 id="provenance">']
    positions = [report.index(heading) for heading in order]
    assert positions == sorted(positions)
    provenance = report[report.index('<h2 id="provenance">') :]
    assert provenance.index("<details>") < provenance.index("git commit (aggregate)")
    assert "</details>" in provenance


def test_the_headline_shows_every_subject_that_ran_and_one_line_for_one_that_never_ran(report: str) -> None:
    results = report[report.index('<h2 id="results">') : report.index("<h3>Key figures</h3>")]
    rows = re.findall(r"<tr><td>([^<]*)</td><td class=\"nowrap\">([^<]*)</td>", results)
    assert [subject for subject, _ in rows] == ["naive_heuristic", "oracle", "policy_aware_heuristic"]
    assert dict(rows)["oracle"] == "rule baseline"
    # oracle's success over its graded cells, with the infra_error cell counted apart (provisional):
    # a rule policy on legacy replays one episode per scenario, two distinct episodes in all
    assert "1.000 (replays) n=2\u2020" in results
    assert "4/5 (80%), 1 infra_error\u2020" in results
    # naive_heuristic ran but one of its cells is missing: shown as missing coverage, never 0
    assert "4/5 (80%)\u2020" in results
    assert "hf:tiny" not in [subject for subject, _ in rows]
    assert '<p class="not-run">not run: no results: its evaluation has not run or failed' in results
    assert results.count("hf:tiny") == 1


def test_details_say_what_ran_and_list_missing_cells_of_subjects_that_ran(
    aggregated: dict[str, Path], report: str
) -> None:
    manifest = json.loads(aggregated["manifest"].read_text(encoding="utf-8"))
    what_ran = report[report.index("<h3>What ran</h3>") : report.index("<h3>Tables</h3>")]
    for text in ("naive_heuristic, oracle, policy_aware_heuristic (and 1 not run", "E1_onboard_new_hire"):
        assert text in what_ran
    assert "15 expected cells: 12 graded, 1 infra_error, 2 missing." in what_ran
    assert "legacy / naive_heuristic / E1_onboard_new_hire: seeds 2, samples 0 (1 cell)" in what_ran
    assert (
        "legacy: not run: no results: its evaluation has not run or failed (see results/logs): hf:tiny"
        in (what_ran)
    )
    provenance = report[report.index('<h2 id="provenance">') :]
    assert CONFIG_HASH in provenance
    assert f"<td>{manifest['schemashift_version']}</td>" in provenance
    assert f"pyarrow {manifest['packages']['pyarrow']}" in provenance
    if manifest["git_sha"] is not None:
        assert manifest["git_sha"] in provenance
        assert ("yes (dirty)" if manifest["git_dirty"] else "no (clean)") in provenance


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
    what_ran = report[report.index("<h3>What ran</h3>") : report.index("<h3>Tables</h3>")]
    assert "<td>0-2: naive_heuristic; 0-1: policy_aware_heuristic; 0-4: oracle; 0: hf:tiny</td>" in what_ran


def test_report_shows_the_tables(report: str, tables_dir: Path) -> None:
    index = json.loads((tables_dir / "tables.json").read_text(encoding="utf-8"))
    for table in index:
        assert f'<h5 id="{table["key"]}">' in report
    assert '<td class="num">0.522 (replays) n=1</td>' in report
    assert '<td class="num">missing</td>' in report


def test_report_embeds_its_figures_and_references_nothing_outside(report: str) -> None:
    page = re.sub(r"<script>.*?</script>", "", report, flags=re.S)  # the markup, less the inlined code
    images = re.findall(r'<img [^>]*src="([^"]*)"', page)
    assert sorted(re.findall(r'<img alt="([^"]*)"', report)) == sorted(stems(["legacy"]))
    for src in images:
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]).startswith(b"\x89PNG\r\n\x1a\n")
    # links: within the page, or to the screenshots the workflow writes beside it
    links = re.findall(r'(?:src|href)="(?!data:|#)([^"]*)"', page)
    assert set(links) == {"screenshots/report.png", "screenshots/trackio.png"}
    assert "<link" not in report and re.findall(r"<script[^>]*\ssrc=", report) == []
    assert report.count("<figcaption>") == len(images) + report.count('<figure class="chart"')


def test_interactive_figures_carry_their_specs_and_the_inlined_vega(report: str) -> None:
    """Vega-Lite specs and the Vega script are in the page itself (opens from file://)."""
    specs = json.loads(re.search(r"const specs = (\{.*?\});\n", report, re.S)[1].replace("<\\/", "</"))
    assert set(specs) == {"chart-scenarios", "chart-coverage", "chart-efficiency"}
    for element, spec in specs.items():
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
        assert f'<div class="vega" id="{element}"></div>' in report
    assert "window.vegaEmbed=" in report
    # no training run in this fixture: the learning curves say why in one line, no empty axes
    assert "Learning curves: nothing to show: no training run has an evaluated checkpoint" in report


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


BIG = "Qwen/Qwen2.5-7B-Instruct"


def test_a_run_that_could_not_train_here_is_one_line_not_rows_of_missing(
    aggregated: dict[str, Path], figures_dir: Path, tmp_path: Path
) -> None:
    """The embedded default on a machine without a GPU: the configured run's step 0 and checkpoints
    are expected, never evaluated, and the report says once why instead of a row per checkpoint."""
    manifest = json.loads(aggregated["manifest"].read_text(encoding="utf-8"))
    cell = {"ruleset": "legacy", "scenario": "E1_onboard_new_hire", "seed": 0, "sample_index": 0}
    manifest["cells"] += [{**cell, "policy": f"hf:{BIG}", "checkpoint_step": 0, "status": "missing"}]
    manifest["cells"] += [
        {
            **cell,
            "policy": f"hf:{BIG}@results/train/big/checkpoint-{step}",
            "train_run": "big",
            "checkpoint_step": step,
            "status": "missing",
        }
        for step in (25, 50, 75, 100)
    ]
    config = {
        "models": {"qwen-7b": {"policy": f"hf:{BIG}", "params_b": 7}},
        "train": {
            "enabled": "auto",
            "runs": {"big": {"base_model": "qwen-7b", "ruleset": "legacy", "reward": "v1"}},
        },
        "trains_here": False,
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    grown = {**aggregated, "manifest": tmp_path / "manifest.json"}
    extra = ["--config", str(tmp_path / "config.json"), "--bootstrap-samples", "50"]
    assert main(report_args("tables", grown, tmp_path / "tables", *extra)) == 0
    assert main([*html_args(grown, tmp_path / "tables", figures_dir, tmp_path / "html"), *extra]) == 0
    report = (tmp_path / "html" / "report.html").read_text(encoding="utf-8")
    line = (
        "not run: training is disabled on this machine (train.enabled: auto and no GPU visible): "
        f"hf:{BIG}, big@step-25, 50, 75, 100"
    )
    results = report[report.index('<h2 id="results">') : report.index('<h2 id="details">')]
    assert f'<p class="not-run">{line}</p>' in results
    assert "<tr><td>big@step-" not in report and f"<tr><td>hf:{BIG}" not in report  # no row of theirs
    assert "table_a_big_legacy" not in report  # no Table A of two subjects that never ran
    index = json.loads((tmp_path / "tables" / "tables.json").read_text(encoding="utf-8"))
    score = next(table for table in index if table["key"] == "legacy_score")
    assert line.capitalize()[:40] in score["note"]
    # the CSV still holds their cells, missing (never 0)
    records = [r for r in score["records"] if r["subject"] == "big@step-25"]
    assert records and {r["mean"] for r in records} == {None} and {r["n"] for r in records} == {0}
