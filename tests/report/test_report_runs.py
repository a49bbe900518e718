"""Training runs in the report: built from their run index (or, never trained, from their config),
the trained step is the run's report_step, step 0 is exactly the run's base model, and the
step-20 go/no-go is the trainer's rule."""

from __future__ import annotations

import json
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
from schemashift.report.load import subject_kind, subject_label
from schemashift.report.tables.seed_document import go_no_go_table
from schemashift.report.tables.training import learning_table, untrained_vs_trained_tables
from schemashift.rollout import io, records

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
    columns = (data["policy"], data["train_run"], data["checkpoint_step"])
    data["label"] = [subject_label(*key) for key in zip(*columns, strict=True)]
    data["kind"] = [subject_kind(*key, None) for key in zip(*columns, strict=True)]
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
        trained = ["mean score", "trained (step 50): r@step-50", "0.500 (no variation observed) n=2"]
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
