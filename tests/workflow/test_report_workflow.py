"""The report built by the real workflow rules from the fixture results set (tests/report/fixture_results.py):
checkpoints, base models, an API model and training runs found under results/eval and results/train,
every table (results/tables, the headline ones in results/summary.md), every figure and the HTML
report."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml
from workflow_support import REPO, copy_repo, job_counts, snakemake, tool

sys.path.insert(0, str(REPO / "tests" / "report"))
import fixture_results  # noqa: E402
from report_helpers import read_metrics  # noqa: E402

from schemashift.report.figures import stems  # noqa: E402

pytestmark = [
    pytest.mark.skipif(tool("snakemake") is None, reason="snakemake is not installed"),
    pytest.mark.slow,
]
# The cells exist already (the fixture played them); only the report's rules may run.
REPORT_RULES = (
    "--allowed-rules",
    "expected_cells",
    "report_config",
    "aggregate",
    "tables",
    "figures",
    "report_html",
    "trackio",
    "screenshots",
    "all",
)


@pytest.fixture(scope="module")
def fixture_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    copy = copy_repo(tmp_path_factory.mktemp("report-workflow") / "repo")
    cfg = fixture_results.config()
    cfg["train"]["enabled"] = "auto"  # configured, not disabled: its checkpoints are expected
    (copy / "fixture.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")
    fixture_results.build(copy / "results", rulesets=tuple(cfg["rulesets"]))
    snakemake(copy, *REPORT_RULES, configfile="fixture.yaml", timeout=900)
    return copy


@pytest.mark.timeout(900)
def test_the_report_rules_build_every_table_and_figure(fixture_run: Path) -> None:
    results = fixture_run / "results"
    cfg = yaml.safe_load((fixture_run / "fixture.yaml").read_text(encoding="utf-8"))
    summary = (results / "summary.md").read_text(encoding="utf-8")
    # summary.md shows the headline tables and links every table's CSV, which the rules wrote
    for heading in (
        "## Headline",
        "## Table B: baselines vs the trained model",
        "## Table C: reward ablation",
        "## Table D: model ablation",
        "## Learning curves",
        "## Seed-document verdicts",
        "## What cannot be concluded",
        "## Every table",
    ):
        assert heading in summary
    keys = ["table_e", "legacy_vs_v1", "go_no_go", "failed_examples"]
    keys += [f"table_a_{run}_legacy" for run in fixture_results.RUNS]
    for key in keys:
        assert f"](tables/{key}.csv)" in summary and (results / "tables" / f"{key}.csv").is_file()
    assert len(summary.encode("utf-8")) < 60_000
    index = json.loads((results / "figures" / "figures.json").read_text(encoding="utf-8"))
    assert [e["stem"] for e in index] == stems(cfg["rulesets"])
    for stem in stems(cfg["rulesets"]):
        assert (results / "figures" / f"{stem}.png").stat().st_size > 20_000
        assert (results / "figures" / f"{stem}.pdf").is_file()
    html = (results / "report.html").read_text(encoding="utf-8")
    headings = ('<h2 id="results">', '<h2 id="details">', "<h3>Tables</h3>", '<h3 id="figures">Figures</h3>')
    order = [html.index(h) for h in (*headings, '<h2 id="provenance">')]
    assert order == sorted(order)
    assert html.count('<figure id="') == len(index) and html.count('<figure class="chart"') == 4
    # the models are expected on v1 too but were evaluated on legacy only: one line, no rows
    assert '<p class="not-run">not run: no results' in html
    # the dashboard project beside the report: one Trackio run per training run, and the traces
    # of the evaluated episodes in runs of their own (`report/traces.py`)
    runs = read_metrics(results / "trackio" / "schemashift.db")
    assert sorted(r for r in runs if not r.startswith("episodes.")) == sorted(fixture_results.RUNS)
    assert any(r.startswith("episodes.legacy.") for r in runs)
    assert (results / "screenshots" / "trace.png").is_file() or not (results / "screenshots").exists()


@pytest.mark.timeout(900)
def test_the_manifest_expects_the_checkpoint_evaluations(fixture_run: Path) -> None:
    manifest = json.loads((fixture_run / "results" / "manifest.json").read_text(encoding="utf-8"))
    checkpoints = [c for c in manifest["cells"] if c["train_run"] is not None]
    steps = {(c["train_run"], c["checkpoint_step"]) for c in checkpoints}
    assert steps == {(run, step) for run in fixture_results.RUNS for step in fixture_results.STEPS}
    bases = {c["policy"] for c in manifest["cells"] if c["checkpoint_step"] == 0}
    assert bases == {m["policy"] for m in fixture_results.MODELS.values() if m["policy"].startswith("hf:")}
    everything_missing = [c for c in manifest["cells"] if c["status"] == "missing"]
    # Checkpoints and base models are expected through both harnesses; the fixture evaluated
    # them through the default one only (and the API model, not expected here, through both).
    through_tools = [c for c in everything_missing if c["harness"] == "tools"]
    assert {(c["train_run"], c["checkpoint_step"]) for c in through_tools} == steps | {(None, 0)}
    assert {c["harness"] for c in manifest["cells"] if c["policy"] in bases} == {"default", "tools"}
    missing = [c for c in everything_missing if c["harness"] != "tools"]
    # Models are expected on every ruleset; the fixture evaluated them on legacy only.
    on_legacy = [c for c in missing if c["ruleset"] == "legacy"]
    assert {
        (c["train_run"], c["checkpoint_step"], c["scenario"]) for c in on_legacy
    } == fixture_results.MISSING
    assert len(on_legacy) == len(fixture_results.SEEDS) * fixture_results.SAMPLES
    assert all(c["checkpoint_step"] is not None for c in missing if c["ruleset"] != "legacy")
    assert manifest["counts"]["missing"] == len(everything_missing)
    assert set(manifest["training"]) == set(fixture_results.RUNS)
    assert manifest["training"]["shaped"]["superseded_rows"] == 10
    assert manifest["training"]["shaped"]["go_no_go"]["decision"] == "PROCEED"


@pytest.mark.timeout(900)
def test_a_finished_report_has_nothing_to_do(fixture_run: Path) -> None:
    proc = snakemake(fixture_run, *REPORT_RULES, "--dry-run", configfile="fixture.yaml")
    assert job_counts(proc.stdout) == {}


@pytest.mark.timeout(900)
def test_snakemakes_report_explains_each_output(fixture_run: Path) -> None:
    """`snakemake --report` on the finished results: the workflow's description and a caption
    (workflow/report/) for the tables, every figure and the HTML report."""
    snakemake(fixture_run, "--report", "snakemake-report.html", *REPORT_RULES, configfile="fixture.yaml")
    html = (fixture_run / "snakemake-report.html").read_text(encoding="utf-8")
    assert "measures how tool-using LLM agents cope with" in html
    for caption, phrase in {
        "summary.rst": "Every table of the report as Markdown",
        "report_html.rst": "one self-contained HTML file",
        "figures/coverage.rst": "evaluation cells per subject and scenario",
        "figures/score.rst": "Overview of one ruleset",
    }.items():
        assert phrase in (REPO / "workflow" / "report" / caption).read_text(encoding="utf-8")
        assert phrase in html, caption
