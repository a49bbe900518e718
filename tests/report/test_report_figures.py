"""`schemashift report figures`: the files exist, are valid PNG and PDF, and render without warnings."""

from __future__ import annotations

import json
import logging
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
from report_helpers import error_line, infra_row, report_args, write_cell

from schemashift.cli import main
from schemashift.report.figures import stems
from schemashift.report.training_figure import thin, training_figure
from schemashift.rollout import io, records

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
PDF_MAGIC = b"%PDF-"


def check_figure(directory: Path, stem: str) -> None:
    png = (directory / f"{stem}.png").read_bytes()
    pdf = (directory / f"{stem}.pdf").read_bytes()
    assert png.startswith(PNG_MAGIC) and len(png) > 10_000
    assert pdf.startswith(PDF_MAGIC) and pdf.rstrip().endswith(b"%%EOF")


def test_figures_exist_and_are_valid(figures_dir: Path) -> None:
    """The same set of figures whatever the data; those without data say so."""
    index = json.loads((figures_dir / "figures.json").read_text(encoding="utf-8"))
    assert [entry["stem"] for entry in index] == stems(["legacy"])
    for entry in index:
        check_figure(figures_dir, entry["stem"])
    assert "95% intervals over the seeds" in index[0]["caption"]
    assert sorted(p.name for p in figures_dir.iterdir()) == sorted(
        ["figures.json", *(f"{stem}.{fmt}" for stem in stems(["legacy"]) for fmt in ("png", "pdf"))]
    )


def test_figures_render_without_warnings_and_with_training_metrics(
    aggregated: dict[str, Path], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [
        {"train_run": run, "step": step, "reward_mean": 0.1 * step + offset, "reward_std": 0.05}
        for run, offset in (("grpo-a", 0.0), ("grpo-b", 0.1))
        for step in range(1, 6)
    ]
    rows.append({"train_run": "grpo-a", "step": 3, "reward_mean": 9.0, "superseded": True})
    metrics = tmp_path / "metrics.parquet"
    io.write_parquet(metrics, records.to_table(rows, records.TRAINING_METRICS_COLUMNS))
    out = tmp_path / "figures"
    args = report_args(
        "figures", aggregated, out, "--bootstrap-samples", "50", "--training-metrics", str(metrics)
    )
    with caplog.at_level(logging.WARNING), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(args) == 0
    assert [str(w.message) for w in caught] == []
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")]
    check_figure(out, "training_reward")


@pytest.mark.parametrize(
    ("steps", "lines_per_run", "title"),
    [(2, 1, "too few steps"), (6, 1, "too few steps"), (40, 2, "smoothed")],
)
def test_the_training_figure_claims_smoothing_only_where_it_smooths(steps, lines_per_run, title) -> None:
    import pandas as pd

    training = pd.DataFrame(
        [
            {"train_run": run, "step": step, "reward_mean": (step * 7 % 5) / 5 + offset}
            for run, offset in (("a", 0.0), ("b", 1.0))
            for step in range(1, steps + 1)
        ]
    )
    figure = training_figure(SimpleNamespace(training=training))
    (ax,) = figure.axes
    assert len(ax.get_lines()) == 2 * lines_per_run
    assert title in figure._suptitle.get_text()
    low, high = ax.get_xlim()
    assert all(tick == int(tick) for tick in ax.get_xticks() if low <= tick <= high), "steps are whole"


def test_a_ruleset_without_graded_episodes_still_renders(tmp_path: Path) -> None:
    write_cell(tmp_path / "cell", [infra_row()])
    episodes = tmp_path / "episodes.parquet"
    assert (
        main(
            [
                "aggregate",
                "--cells",
                str(tmp_path / "cell"),
                "--out-episodes",
                str(episodes),
                "--out-drifts",
                str(tmp_path / "drifts.parquet"),
            ]
        )
        == 0
    )
    out = tmp_path / "figures"
    assert main(["report", "figures", "--episodes", str(episodes), "--out", str(out)]) == 0
    check_figure(out, "legacy_score")


def test_dense_curves_are_thinned_to_800_points() -> None:
    import pandas as pd

    frame = pd.DataFrame({"step": range(1, 2502)})
    shown = thin(frame)
    assert len(shown) <= 800 and shown["step"].iloc[0] == 1 and shown["step"].iloc[-1] == 2501
    assert len(thin(frame.iloc[:500])) == 500


def test_an_output_path_that_is_a_file_is_an_error(
    aggregated: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "file").write_text("x", encoding="utf-8")
    assert main(report_args("figures", aggregated, tmp_path / "file")) == 2
    assert "is not a directory" in error_line(capsys, "report")


V1_KINDS = (
    "endpoint_deprecation",
    "error_code_remap",
    "field_rename",
    "new_required_param",
    "rate_limit_tightening",
    "response_restructure",
    "type_change",
)


def test_drift_kind_labels_do_not_overlap(aggregated: dict[str, Path]) -> None:
    """v1's seven drift kinds have long names; side by side they overlapped at the report's size."""
    from schemashift.report import load
    from schemashift.report.analysis import Analysis
    from schemashift.report.figures import drift_figure
    from schemashift.report.plotting import pyplot

    episodes = load.episodes_frame(aggregated["episodes"])
    drifts = load.drifts_frame(aggregated["drifts"])
    drifts["kind"] = [V1_KINDS[i % len(V1_KINDS)] for i in range(len(drifts))]
    drifts["failed_step"] = 1
    a = Analysis(episodes, None, drifts=drifts, samples=20)
    figure = drift_figure(a)
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()
    [ax] = figure.axes[:1]
    boxes = [label.get_window_extent(renderer) for label in ax.get_xticklabels() if label.get_text()]
    assert len(boxes) == len(V1_KINDS)
    for left, right in zip(boxes, boxes[1:], strict=False):
        assert left.x1 < right.x0, "neighbouring drift kind labels overlap"
    pyplot().close(figure)


def test_learning_curves_without_an_evaluated_checkpoint_say_why_instead_of_empty_axes(
    aggregated: dict[str, Path],
) -> None:
    from schemashift.report import load
    from schemashift.report.analysis import Analysis
    from schemashift.report.figures import learning_figure
    from schemashift.report.plotting import pyplot

    config = {
        "models": {"q": {"policy": "hf:Q/q", "params_b": 1}},
        "train": {"enabled": "auto", "runs": {"r": {"base_model": "q", "ruleset": "legacy", "reward": "v1"}}},
        "trains_here": False,
    }
    manifest = json.loads(aggregated["manifest"].read_text(encoding="utf-8"))
    cell = {"ruleset": "legacy", "scenario": "E1_onboard_new_hire", "seed": 0, "sample_index": 0}
    manifest["cells"].append({**cell, "policy": "hf:Q/q@ckpt", "train_run": "r", "checkpoint_step": 25})
    a = Analysis(load.episodes_frame(aggregated["episodes"]), manifest, config, samples=20)
    figure = learning_figure(a, list(a.runs))
    texts = [t.get_text() for ax in figure.axes for t in ax.texts]
    assert len(figure.axes) == 1 and not figure.axes[0].axison
    assert any("training is disabled on this machine" in t for t in texts), texts
    pyplot().close(figure)
