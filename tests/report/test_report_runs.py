"""Training runs in the report: built from their run index (or, never trained, from their config),
the trained step is the run's report_step, step 0 is exactly the run's base model, and the
step-20 go/no-go is the trainer's rule."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from fixture_results import run_index
from hypothesis import given, settings
from hypothesis import strategies as st

from schemashift import lineage
from schemashift.report import ReportError, aggregate
from schemashift.report.analysis import Analysis
from schemashift.report.tables.seed_document import go_no_go_table
from schemashift.report.tables.training import learning_table, untrained_vs_trained_tables
from schemashift.rollout import io, records
from schemashift.rollout.subject import Subject

pytestmark = pytest.mark.timeout(120)
QWEN, CODER = "Qwen/Qwen2.5-1.5B-Instruct", "Qwen/Qwen2.5-Coder-1.5B-Instruct"
MODELS = {"qwen": {"policy": f"hf:{QWEN}", "params_b": 1.5}, "coder": {"policy": f"hf:{CODER}"}}
SCENARIO = "E1_onboard_new_hire"


def evaluations(subjects: list[tuple[str, str | None, int, float]]) -> pd.DataFrame:
    """Episodes of (policy, train_run, checkpoint_step, score) on one scenario and two seeds."""
    rows = [
        {
            "ruleset": "legacy",
            "status": "graded",
            "policy": policy,
            "train_run": run,
            "checkpoint_step": step,
            "base_model": None,
            "scenario": SCENARIO,
            "tier": "easy",
            "seed": seed,
            "sample_index": 0,
            "split": None,
            "score": score,
            "success": float(score > 0.5),
        }
        for policy, run, step, score in subjects
        for seed in (0, 1)
    ]
    data = pd.DataFrame(rows)
    subjects = [Subject.of_record(row) for row in rows]
    data["label"] = [subject.label for subject in subjects]
    data["kind"] = [subject.kind for subject in subjects]
    return data


def config(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {"models": MODELS, "train": {"runs": runs, "defaults": {}}, "report": {}}


def test_the_trained_row_is_the_runs_report_step_not_its_last_checkpoint() -> None:
    data = evaluations(
        [(f"hf:{QWEN}", None, 0, 0.1), *((f"hf:{QWEN}@ckpt", "r", s, s / 100) for s in (25, 50, 75, 100))]
    )
    index = {**run_index("shaped"), "train_run": "r", "report_step": 50}
    configured = {"base_model": "qwen", "ruleset": "legacy", "reward": "v1", "report_step": 50}
    for manifest, cfg in (({"training": {"r": {"index": index}}}, None), (None, config({"r": configured}))):
        a = Analysis(data, manifest, cfg, samples=20)
        [table] = untrained_vs_trained_tables(a)
        # legacy: the two seeds replay one task, on which the run trained
        trained = [
            "mean score",
            "trained (step 50): r@step-50 (trained on these tasks)",
            "0.500 (replays) n=1",
        ]
        assert trained in [row[:3] for row in table.rows]
        assert not any("step-100" in str(row) for row in table.rows)


def test_step_0_is_the_evaluation_of_the_run_index_base_model() -> None:
    """The config now names another base model than the run trained on, and the checkpoint rows
    carry no base model: only the run index says which base evaluation is the run's step 0."""
    data = evaluations(
        [
            (f"hf:{QWEN}", None, 0, 0.1),
            (f"hf:{CODER}", None, 0, 0.6),
            *((f"hf:{CODER}@ckpt", "coder", s, 0.9) for s in (25, 50, 75, 100)),
        ]
    )
    index = {**run_index("coder"), "train_run": "coder"}
    cfg = config({"coder": {"base_model": "qwen", "ruleset": "legacy", "reward": "legacy_cumulative"}})
    a = Analysis(data, {"training": {"coder": {"index": index}}}, cfg, samples=20)
    curve = learning_table(a).records
    step0 = {r["subject"] for r in curve if r["step"] == 0}
    assert step0 == {f"hf:{CODER}"}
    score_diff = next(r for r in curve if r["step"] == 100 and r["metric"] == "score")["diff_vs_step0"]
    assert score_diff == pytest.approx(0.9 - 0.6)


def test_a_configured_run_that_never_trained_reads_missing_at_each_planned_checkpoint() -> None:
    data = evaluations([(f"hf:{QWEN}", None, 0, 0.3)])
    cfg = config({"late": {"base_model": "qwen", "ruleset": "legacy", "reward": "v1"}})
    a = Analysis(data, None, cfg, samples=20)
    curve = learning_table(a).records
    assert [r["step"] for r in curve if r["metric"] == "score"] == [0, 25, 50, 75, 100]
    assert all(r["mean"] is None and r["n"] == 0 for r in curve if r["step"])
    [table] = untrained_vs_trained_tables(a)
    assert ["mean score", "trained (step 100): late@step-100", "missing"] in [r[:3] for r in table.rows]


def metrics(steps: list[int], means: list[float], spread: float = 0.2) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "train_run": "r",
            "step": steps,
            "reward_mean": means,
            "reward_std": [spread] * len(steps),
            "reward_min": [m - spread for m in means],
            "reward_max": [m + spread for m in means],
            "superseded": False,
        }
    )


def go_no_go_record(lineage_rows: pd.DataFrame) -> dict[str, Any]:
    cfg = config({"r": {"base_model": "qwen", "ruleset": "legacy", "reward": "v1"}})
    a = Analysis(evaluations([("oracle", None, None, 1.0)]), None, cfg, training=lineage_rows, samples=20)
    [record] = go_no_go_table(a).records
    return record


def test_before_step_20_the_go_no_go_waits_as_training_does() -> None:
    steps = list(range(1, 11))
    rows = metrics(steps, [0.1 * s for s in steps])
    assert lineage.go_no_go(rows.to_dict("records")) is None
    record = go_no_go_record(rows)
    assert record["decision"] == "waiting (step 20 not logged)"
    assert record["slope"] is None and record["trending_up"] is None


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(1, 30), min_size=1, max_size=30, unique=True).flatmap(
        lambda steps: st.tuples(
            st.just(sorted(steps)),
            st.lists(st.floats(-1, 1, allow_nan=False), min_size=len(steps), max_size=len(steps)),
            st.sampled_from([0.0, 0.3]),
        )
    )
)
def test_the_reports_go_no_go_is_the_trainers(lineage_case: tuple[list[int], list[float], float]) -> None:
    steps, means, spread = lineage_case
    rows = metrics(steps, means, spread)
    expected = lineage.go_no_go(rows.to_dict("records"))
    record = go_no_go_record(rows)
    if expected is None:
        assert record["decision"] == "waiting (step 20 not logged)"
    else:
        assert record["decision"] == expected["decision"]
        assert record["trending_up"] == expected["checks"]["reward_trending_up"]
        assert record["not_stuck"] == expected["checks"]["not_stuck"]


def write_metrics(run_dir: Path, run: str) -> None:
    row = {column.name: None for column in records.TRAINING_METRICS_COLUMNS}
    row |= {"train_run": run, "step": 1, "reward_mean": 0.1, "superseded": False}
    io.write_parquet(run_dir / "metrics.parquet", records.to_table([row], records.TRAINING_METRICS_COLUMNS))


def test_the_aggregate_records_each_runs_index_in_the_manifest(tmp_path: Path) -> None:
    write_metrics(tmp_path / "shaped", "shaped")
    (tmp_path / "shaped" / lineage.RUN_INDEX).write_text(json.dumps(run_index("shaped")), encoding="utf-8")
    write_metrics(tmp_path / "binary", "binary")
    runs = aggregate.merge_training([tmp_path]).runs
    assert runs["shaped"]["index"] == run_index("shaped")
    assert runs["binary"]["index"] is None  # metrics without an index: the run never saved one
    (tmp_path / "binary" / lineage.RUN_INDEX).write_text(json.dumps(run_index("coder")), encoding="utf-8")
    with pytest.raises(ReportError, match="indexes run 'coder'"):
        aggregate.merge_training([tmp_path])


def test_a_disabled_run_is_reported_only_once_it_has_trained() -> None:
    """`enabled: false` keeps a run out of the workflow's plan, so the report does not list it as
    missing; a run index of its (it trained before, or elsewhere) brings it back."""
    data = evaluations([(f"hf:{QWEN}", None, 0, 0.1)])
    spec = {"base_model": "qwen", "ruleset": "legacy", "reward": "v1"}
    cfg = config({"on": spec, "off": {**spec, "enabled": False}})
    assert list(Analysis(data, None, cfg, samples=20).runs) == ["on"]
    index = {**run_index("shaped"), "train_run": "off"}
    trained = Analysis(data, {"training": {"off": {"index": index}}}, cfg, samples=20)
    assert list(trained.runs) == ["off", "on"] and trained.runs["off"].indexed


def _repeat_rows(scores: dict[str, tuple[float, float]]) -> pd.DataFrame:
    """Each repeat's trained checkpoint (step 100) scoring the given values on seeds 0 and 1."""
    frames = [
        evaluations([(f"hf:{QWEN}", run, 100, score)]).iloc[[seed]]
        for run, by_seed in scores.items()
        for seed, score in enumerate(by_seed)
    ]
    return pd.concat(frames, ignore_index=True)


def test_repeats_pool_into_one_estimate_with_training_variance_told_apart() -> None:
    from scipy import stats as sp

    from schemashift.report.tables.training import repeats_table, reward_ablation_table

    scores = {"r": (0.2, 0.4), "r.rep2": (0.5, 0.7), "r.rep3": (0.8, 0.6), "other": (0.1, 0.3)}
    runs = {"r": {"base_model": "qwen", "ruleset": "legacy", "reward": "v1", "repeats": 3}}
    runs["other"] = {"base_model": "qwen", "ruleset": "legacy", "reward": "binary"}
    a = Analysis(_repeat_rows(scores), None, config(runs), samples=20)
    assert sorted(a.runs) == ["other", "r", "r.rep2", "r.rep3"]
    (row,) = [r for r in repeats_table(a).records if r["run"] == "r" and r["metric"] == "score"]
    means = [0.3, 0.6, 0.7]
    half = sp.t.ppf(0.975, 2) * sp.tstd(means) / math.sqrt(3)
    assert row["mean"] == pytest.approx(sum(means) / 3)
    assert (row["ci_low"], row["ci_high"]) == pytest.approx((row["mean"] - half, row["mean"] + half))
    assert row["between_sd"] == pytest.approx(sp.tstd(means))
    assert row["evaluation_se"] == pytest.approx(sp.tstd([0.2, 0.4]) / math.sqrt(2))  # each repeat's
    assert row["training_sd"] == pytest.approx(math.sqrt(sp.tstd(means) ** 2 - row["evaluation_se"] ** 2))
    assert (row["repeats"], row["repeats_evaluated"], row["provisional"]) == (3, 3, False)
    # the ablation compares configured runs, not repeats of one run against each other
    assert {r["run"] for r in reward_ablation_table(a).records} == {"r", "other"}
    (single,) = [r for r in repeats_table(a).records if r["run"] == "other" and r["metric"] == "score"]
    assert single["mean"] == pytest.approx(0.2) and single["ci_low"] is None
    assert "one training run" in single["note"]


def test_a_repeat_that_was_not_evaluated_makes_the_pool_provisional() -> None:
    from schemashift.report.tables.training import repeats_table

    runs = {"r": {"base_model": "qwen", "ruleset": "legacy", "reward": "v1", "repeats": 3}}
    a = Analysis(_repeat_rows({"r": (0.2, 0.4), "r.rep2": (0.5, 0.7)}), None, config(runs), samples=20)
    (row,) = [r for r in repeats_table(a).records if r["metric"] == "score"]
    assert (row["repeats"], row["repeats_evaluated"], row["provisional"]) == (3, 2, True)
    assert row["mean"] == pytest.approx(0.45)


def test_coinciding_learning_curves_stay_visible_and_are_named() -> None:
    """Runs whose checkpoints play alike draw the same points: each run keeps its own line style
    and marker, and the panel says which runs coincide (and only those)."""
    from schemashift.report.figures import learning_figure
    from schemashift.report.plotting import pyplot

    steps = (25, 50)
    curves = {"a": (0.4, 0.6), "b": (0.4, 0.6), "c": (0.4, 0.45)}  # c differs in score and success
    data = evaluations(
        [(f"hf:{QWEN}", None, 0, 0.2)]
        + [
            (f"hf:{QWEN}@{run}", run, step, score)
            for run, scores in curves.items()
            for step, score in zip(steps, scores, strict=True)
        ]
    )
    runs = {
        run: {"base_model": "qwen", "ruleset": "legacy", "reward": "v1", "report_step": 50} for run in curves
    }
    a = Analysis(data, None, config(runs), samples=20)
    figure = learning_figure(a, ["a", "b", "c"])
    labels = [ax.get_xlabel() for ax in figure.axes]
    assert labels and all(
        "same points: a, b" in label and "c" not in label.split("\n", 1)[1] for label in labels
    )
    legend = {h.get_label(): (h.get_linestyle(), h.get_marker()) for h in figure.legends[0].legend_handles}
    assert len({legend[run] for run in curves}) == 3
    pyplot().close(figure)


@settings(max_examples=12, deadline=None)
@given(scores=st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=5, max_size=5))
def test_every_point_and_bar_of_a_score_lies_inside_its_axes(scores: list[float]) -> None:
    """Legacy's shaped score can be negative: the learning curves, the reward ablation, the
    per-scenario bars and their labels keep every value, below 0 included, inside the axes."""
    from schemashift.report.figures import ablation_figure, bar_figure, learning_figure
    from schemashift.report.plotting import pyplot

    base, *steps = scores
    checkpoints = [("r", 25), ("r", 50), ("s", 25), ("s", 50)]
    data = evaluations(
        [(f"hf:{QWEN}", None, 0, base)]
        + [(f"hf:{QWEN}@{run}", run, step, v) for (run, step), v in zip(checkpoints, steps, strict=True)]
    )
    runs = {
        run: {"base_model": "qwen", "ruleset": "legacy", "reward": reward, "report_step": 50}
        for run, reward in (("r", "v1"), ("s", "legacy_cumulative"))
    }
    a = Analysis(data, None, config(runs), samples=20)
    curves, ablation = learning_figure(a, ["r", "s"]), ablation_figure(a, "reward")
    score_axes = [ax for f in (curves, ablation) for ax in f.axes if ax.get_ylabel().startswith("mean score")]
    assert len(score_axes) == 2
    for ax in score_axes:
        low, high = ax.get_ylim()
        margin = 0.015 * (high - low)  # a marker drawn on the axis' edge would be cut in half
        ys = [y for line in ax.get_lines() for y in line.get_ydata()]
        assert ys and all(low + margin < y < high - margin for y in ys), (ys, low, high)
    bars = bar_figure(a, "legacy", "score")
    (ax,) = bars.axes
    low, high = ax.get_ylim()
    for patch in ax.patches:
        assert low <= min(patch.get_y(), patch.get_y() + patch.get_height()) <= high
    assert all(low < text.get_position()[1] < high for text in ax.texts)
    for figure in (curves, ablation, bars):
        pyplot().close(figure)


def test_a_model_warm_started_on_the_evaluated_tasks_is_marked_so(tmp_path: Path) -> None:
    """The tiny model's warm start lists the tasks it saw in its sft.json; the report reads them
    beside the model and marks its evaluations on those tasks (every legacy seed is the one task of
    its scenario), not those on tasks it never saw."""
    from schemashift.report.tables.summary import headline_table
    from schemashift.train.sft import seen_tasks
    from schemashift.train.tiny import CURRICULUM, training_seeds

    model = tmp_path / "tiny"
    model.mkdir()
    tasks = seen_tasks(list(CURRICULUM), training_seeds(CURRICULUM), CURRICULUM)
    (model / "sft.json").write_text(json.dumps({"tasks": tasks}), encoding="utf-8")
    assert {"ruleset": "legacy", "scenario": SCENARIO, "seed": None} in tasks
    data = evaluations([(f"hf:{model}", None, 0, 0.9), ("oracle", None, 0, 1.0)])
    unseen = data.assign(ruleset="v1", scenario="customer_lookup", seed=data["seed"] + 20000)
    data = pd.concat([data, unseen], ignore_index=True)
    a = Analysis(data, None, {"models": {"tiny": {"policy": f"hf:{model}"}}, "train": {"runs": {}}})
    assert a.trained_on("legacy", f"hf:{model}") and not a.trained_on("legacy", "oracle")
    assert not a.trained_on("v1", f"hf:{model}")  # v1 seeds 20000-20001 are other tasks
    [row] = [r for r in headline_table(a, "legacy").rows if r[0].startswith("hf:")]
    assert row[0] == f"hf:{model} (trained on these tasks)"
    # one task replayed on both seeds: the mean of one episode, without an interval over copies
    assert row[2] == "0.900 (replays) n=1"
