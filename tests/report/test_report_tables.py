"""`schemashift report tables` and the statistics behind it."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from report_helpers import BOOTSTRAP, error_line, report_args

from schemashift.cli import main
from schemashift.report import stats
from schemashift.report.load import episodes_frame, policy_label

E1, M1 = "E1_onboard_new_hire", "M1_customer_escalation"
#: legacy scores (every seed plays the same task): policy -> scenario -> (score, success)
LEGACY = {
    "naive_heuristic": {E1: (0.0, 0.0), M1: (0.0, 0.0)},
    "policy_aware_heuristic": {E1: (0.521875, 1.0), M1: (0.0, 0.0)},
    "oracle": {E1: (0.953125, 1.0), M1: (0.95, 1.0)},
}


def summary_rows(tables_dir: Path) -> dict[tuple[str, str, str], dict[str, str]]:
    with open(tables_dir / "legacy_summary.csv", newline="", encoding="utf-8") as f:
        return {(r["policy"], r["scenario"], r["metric"]): r for r in csv.DictReader(f)}


def reference_ci(groups: list[list[float]], samples: int, seed: int) -> tuple[float, float]:
    """The stratified percentile bootstrap, written out with numpy."""
    rng = np.random.default_rng(seed)
    means = np.zeros(samples)
    for values in groups:
        v = np.array(values, dtype=float)
        means += v[rng.integers(0, len(v), size=(samples, len(v)))].mean(axis=1)
    means /= len(groups)
    return float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))


def test_tables_hold_the_hand_computed_means(tables_dir: Path) -> None:
    rows = summary_rows(tables_dir)
    for policy, scenarios in LEGACY.items():
        for scenario, (score, success) in scenarios.items():
            for metric, value in (("score", score), ("success", success)):
                row = rows[policy, scenario, metric]
                # every legacy seed plays the same task, so the interval collapses onto the mean
                assert float(row["mean"]) == pytest.approx(value)
                assert float(row["ci_low"]) == pytest.approx(value)
                assert float(row["ci_high"]) == pytest.approx(value)
                assert row["n"] == "2"  # the oracle's infra_error episode on M1 is not counted
    pa = "policy_aware_heuristic"
    assert float(rows[pa, "tier:easy", "score"]["mean"]) == pytest.approx(0.521875)
    assert float(rows[pa, "tier:medium", "score"]["mean"]) == 0.0
    assert float(rows[pa, "overall", "score"]["mean"]) == pytest.approx(0.2609375)
    assert float(rows[pa, "overall", "success"]["mean"]) == 0.5
    assert float(rows["oracle", "overall", "score"]["mean"]) == pytest.approx((0.953125 + 0.95) / 2)
    assert rows[pa, "overall", "score"]["n"] == "4"


def test_a_policy_that_never_ran_is_empty_never_zero(tables_dir: Path) -> None:
    rows = summary_rows(tables_dir)
    for column in (E1, M1, "tier:easy", "tier:medium", "overall"):
        row = rows["hf:tiny", column, "score"]
        assert (row["mean"], row["ci_low"], row["ci_high"], row["n"]) == ("", "", "", "0")
    markdown = (tables_dir / "summary.md").read_text(encoding="utf-8")
    hf_line = next(line for line in markdown.splitlines() if line.startswith("| hf:tiny |"))
    assert hf_line == "| hf:tiny | " + " | ".join(["\u2014"] * 5) + " |"


def test_markdown_summary(tables_dir: Path) -> None:
    markdown = (tables_dir / "summary.md").read_text(encoding="utf-8")
    assert "## Ruleset `legacy`" in markdown
    assert (
        "### Mean score" in markdown and "### Success rate" in markdown and "### Drift outcomes" in markdown
    )
    assert (
        "| policy | E1_onboard_new_hire | M1_customer_escalation | easy (tier) | medium (tier) | overall |"
        in markdown
    )
    pa_line = next(
        line for line in markdown.splitlines() if line.startswith("| policy_aware_heuristic | 0.522")
    )
    assert pa_line.split(" | ")[1:3] == ["0.522 [0.522, 0.522] (n=2)", "0.000 [0.000, 0.000] (n=2)"]
    assert (
        "Coverage: 12 graded episodes in the means; 1 infra_error episode excluded; "
        "2 of 15 expected cells missing." in markdown
    )
    drifts = list(csv.DictReader(open(tables_dir / "legacy_drifts.csv", newline="", encoding="utf-8")))
    assert {r["policy"] for r in drifts} == set(LEGACY)


def test_tables_are_reproducible_with_a_seed(
    aggregated: dict[str, Path], tables_dir: Path, tmp_path: Path
) -> None:
    assert main(report_args("tables", aggregated, tmp_path, "--bootstrap-samples", BOOTSTRAP)) == 0
    for name in ("legacy_summary.csv", "legacy_drifts.csv", "summary.md"):
        assert (tmp_path / name).read_bytes() == (tables_dir / name).read_bytes()


def test_bootstrap_matches_a_numpy_reference() -> None:
    values = [0.1, 0.5, 0.9, 0.3, 0.7, 0.2]
    assert stats.bootstrap_mean_ci(values, samples=500, seed=7) == reference_ci([values], 500, 7)
    groups = [[0.0, 1.0, 1.0], [0.25, 0.5]]
    assert stats.bootstrap_stratified_ci(groups, samples=300, seed=3) == reference_ci(groups, 300, 3)
    assert stats.bootstrap_mean_ci(values, samples=500, seed=8) != reference_ci([values], 500, 7)
    assert stats.bootstrap_mean_ci([0.4], samples=10, seed=0) == (0.4, 0.4)
    with pytest.raises(ValueError):
        stats.bootstrap_mean_ci([], samples=10)


def test_bootstrap_matches_a_pure_python_reference() -> None:
    """The same draws, resampled and averaged in plain Python (index draws from numpy's generator)."""
    values = [0.0, 1.0, 0.5, 0.25]
    rng = np.random.default_rng(11)
    draws = rng.integers(0, len(values), size=(400, len(values))).tolist()
    means = sorted(sum(values[i] for i in row) / len(row) for row in draws)

    def quantile(q: float) -> float:  # numpy's default (linear) method
        position = q * (len(means) - 1)
        low = int(position)
        high = min(low + 1, len(means) - 1)
        return means[low] + (means[high] - means[low]) * (position - low)

    low, high = stats.bootstrap_mean_ci(values, samples=400, seed=11)
    assert low == pytest.approx(quantile(0.025)) and high == pytest.approx(quantile(0.975))


def frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    base = {
        "ruleset": "legacy",
        "status": "graded",
        "checkpoint_step": None,
        "tier": "easy",
        "sample_index": 0,
    }
    data = pd.DataFrame([{**base, **row} for row in rows])
    data["label"] = data["policy"]
    data["success"] = data["success"].astype("float64")
    return data


def test_summary_intervals_resample_within_each_cell() -> None:
    scores = [0.1, 0.4, 0.8, 0.6]
    rows = [
        {"policy": "p", "scenario": "A", "seed": i, "score": s, "success": float(s > 0.5)}
        for i, s in enumerate(scores)
    ] + [{"policy": "p", "scenario": "B", "seed": 0, "score": 1.0, "success": 1.0, "tier": "medium"}]
    [summary] = stats.summarize(frame(rows), samples=250, seed=5)
    a = summary.stats["score", "p", "A"]
    assert (a.mean, a.n) == (pytest.approx(np.mean(scores)), 4)
    assert (a.ci_low, a.ci_high) == reference_ci([scores], 250, 5)
    overall = summary.stats["score", "p", "overall"]
    assert overall.mean == pytest.approx((np.mean(scores) + 1.0) / 2) and overall.n == 5
    assert (overall.ci_low, overall.ci_high) == reference_ci([scores, [1.0]], 250, 5)
    assert summary.columns == ["A", "B", "tier:easy", "tier:medium", "overall"]


def test_a_missing_scenario_empties_its_tier_and_overall() -> None:
    rows = [{"policy": "p", "scenario": "A", "seed": 0, "score": 0.5, "success": 1.0}]
    manifest = {
        "cells": [
            {"ruleset": "legacy", "policy": "p", "scenario": s, "seed": 0, "sample_index": 0, "status": st}
            for s, st in (("A", "graded"), ("E2_meeting_invite_blast", "missing"))
        ]
    }
    [summary] = stats.summarize(frame(rows), manifest, samples=50)
    assert summary.tiers["E2_meeting_invite_blast"] == "easy"  # from the legacy catalogue
    assert summary.stats["score", "p", "A"].mean == 0.5
    for column in ("E2_meeting_invite_blast", "tier:easy", "overall"):
        assert summary.stats["score", "p", column].mean is None
    assert summary.coverage["missing"] == 1


def test_infra_error_episodes_are_excluded(aggregated: dict[str, Path]) -> None:
    episodes = episodes_frame(aggregated["episodes"])
    assert (episodes["status"] == "infra_error").sum() == 1
    manifest = json.loads(aggregated["manifest"].read_text(encoding="utf-8"))
    [summary] = stats.summarize(episodes, manifest, samples=20)
    assert summary.stats["score", "oracle", M1].n == 2
    assert (summary.coverage["graded"], summary.coverage["infra_error"]) == (12, 1)


def test_bad_arguments_and_inputs_are_errors(
    aggregated: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(report_args("tables", aggregated, tmp_path, "--bootstrap-samples", "0")) == 2
    assert "--bootstrap-samples" in error_line(capsys, "report")
    args = report_args("tables", aggregated, tmp_path)
    args[args.index("--episodes") + 1] = str(aggregated["drifts"])
    assert main(args) == 2
    assert "holds the 'drifts' table, expected 'episodes'" in error_line(capsys, "report")


def test_checkpoints_are_separate_policies() -> None:
    rows = [
        {"policy": "m", "checkpoint_step": step, "scenario": "A", "seed": 0, "score": score, "success": 0.0}
        for step, score in ((10, 0.2), (20, 0.6))
    ]
    data = frame(rows)
    data["label"] = [policy_label(p, c) for p, c in zip(data["policy"], data["checkpoint_step"], strict=True)]
    manifest = {
        "cells": [{"ruleset": "legacy", "policy": "m", "scenario": "A", "seed": 0, "sample_index": 0}]
    }
    [summary] = stats.summarize(data, manifest, samples=20)
    assert summary.policies == ["m@step-10", "m@step-20"]
    assert summary.stats["score", "m@step-20", "A"].mean == 0.6
