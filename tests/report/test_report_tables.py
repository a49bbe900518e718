"""`schemashift report tables` on played legacy baselines, and the statistics against hand-computed values."""

from __future__ import annotations

import csv
import itertools
import json
from math import comb
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from report_helpers import BOOTSTRAP, error_line, report_args

from schemashift.cli import main
from schemashift.report import stats
from schemashift.report.analysis import Analysis
from schemashift.report.load import episodes_frame

E1, M1 = "E1_onboard_new_hire", "M1_customer_escalation"
#: legacy scores (every seed plays the same task): policy -> scenario -> (score, success)
LEGACY = {
    "naive_heuristic": {E1: (0.0, 0.0), M1: (0.0, 0.0)},
    "policy_aware_heuristic": {E1: (0.521875, 1.0), M1: (0.0, 0.0)},
    "oracle": {E1: (0.953125, 1.0), M1: (0.95, 1.0)},
}


def csv_rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def overview(tables_dir: Path, metric: str) -> dict[tuple[str, str], dict[str, str]]:
    return {(r["subject"], r["column"]): r for r in csv_rows(tables_dir / f"legacy_{metric}.csv")}


def test_tables_hold_the_hand_computed_means(tables_dir: Path) -> None:
    for metric, position in (("score", 0), ("success", 1)):
        rows = overview(tables_dir, metric)
        for policy, scenarios in LEGACY.items():
            for scenario, values in scenarios.items():
                row = rows[policy, scenario]
                assert float(row["mean"]) == pytest.approx(values[position])
                # every legacy seed plays the same task and a rule policy replays its episode: one
                # distinct episode, no interval over its copies
                assert (row["n"], row["ci_low"], row["ci_high"], row["note"]) == ("1", "", "", stats.REPLAYS)
    rows = overview(tables_dir, "score")
    pa = "policy_aware_heuristic"
    assert float(rows[pa, "tier:easy"]["mean"]) == pytest.approx(0.521875)
    assert float(rows[pa, "tier:medium"]["mean"]) == 0.0
    assert float(rows[pa, "overall"]["mean"]) == pytest.approx(0.2609375)
    assert float(rows["oracle", "overall"]["mean"]) == pytest.approx((0.953125 + 0.95) / 2)
    assert rows[pa, "overall"]["n"] == "2"


def test_incomplete_coverage_is_provisional_everywhere(tables_dir: Path) -> None:
    rows = overview(tables_dir, "score")
    # oracle on M1 has an infra_error cell, naive on E1 a missing seed: both are provisional
    assert rows["oracle", M1]["provisional"] == "True" and rows["oracle", E1]["provisional"] == "False"
    assert rows["oracle", "overall"]["provisional"] == "True"
    assert rows["naive_heuristic", E1]["provisional"] == "True"
    assert rows["policy_aware_heuristic", "overall"]["provisional"] == "False"
    coverage = {(r["subject"], r["scenario"]): r for r in csv_rows(tables_dir / "legacy_coverage.csv")}
    assert coverage["oracle", M1]["infra_error"] == "1" and coverage["oracle", M1]["graded"] == "2"
    assert (
        coverage["naive_heuristic", E1]["missing"] == "1"
        and coverage["naive_heuristic", E1]["expected"] == "3"
    )
    markdown = (tables_dir / "summary.md").read_text(encoding="utf-8")
    oracle = next(line for line in markdown.splitlines() if line.startswith("| oracle | rule |"))
    assert oracle.split(" | ")[2] == "0.952 (replays) n=2\u2020"


def test_a_policy_that_never_ran_is_missing_never_zero(tables_dir: Path) -> None:
    rows = overview(tables_dir, "score")
    for column in (E1, M1, "tier:easy", "tier:medium", "overall"):
        row = rows["hf:tiny", column]
        assert (row["mean"], row["ci_low"], row["ci_high"], row["n"]) == ("", "", "", "0")
    # shown once as a line that says why, not as a row of missing cells
    markdown = (tables_dir / "summary.md").read_text(encoding="utf-8")
    assert not [line for line in markdown.splitlines() if line.startswith("| hf:tiny |")]
    reason = "no results: its evaluation has not run or failed (see results/logs)"
    assert f"Not run: {reason}: hf:tiny." in markdown


def test_markdown_summary_holds_every_part(tables_dir: Path) -> None:
    markdown = (tables_dir / "summary.md").read_text(encoding="utf-8")
    for heading in (
        "## Headline",
        "### Ruleset legacy: overall score and success rate of every subject that ran",
        "## Table B: baselines vs the trained model",
        "## Table C: reward ablation",
        "## What cannot be concluded",
        "## Every table",
    ):
        assert heading in markdown
    # the rest is linked as CSV, not shown
    for key, title in (
        ("legacy_score", "Mean score per subject and scenario"),
        (
            "table_e",
            "Steps, wall-clock, GPU, cost, peak reward and engine/trainer agreement per training run",
        ),
        ("legacy_pass_k", "pass^k: all of k attempts succeed"),
        ("legacy_drifts", "Drift outcomes per subject and drift kind"),
    ):
        assert f"[{title}](./{key}.csv)" in markdown and f"### {title}" not in markdown
        assert (tables_dir / f"{key}.csv").is_file()
    assert (
        "naive_heuristic, oracle, policy_aware_heuristic" in markdown.split("## What cannot be concluded")[1]
    )
    assert (
        "Coverage: 12 graded episodes in the means; 1 infra_error episode excluded; "
        "2 of 15 expected cells missing." in markdown
    )
    assert "| gpt-oss:120b (published) | published, not rerun | 120B |" in markdown
    index = json.loads((tables_dir / "tables.json").read_text(encoding="utf-8"))
    assert {t["key"] for t in index} >= {"legacy_score", "legacy_coverage", "table_b_legacy", "legacy_pass_k"}
    drifts = csv_rows(tables_dir / "legacy_drifts.csv")
    assert {r["subject"] for r in drifts} == set(LEGACY)


def test_per_seed_table_aggregates_by_tier(tables_dir: Path) -> None:
    rows = csv_rows(tables_dir / "legacy_per_seed_policy_aware_heuristic.csv")
    assert [(r["scenario"], r["seed"]) for r in rows] == [(s, str(i)) for s in (E1, M1) for i in (0, 1)]
    assert {r["score"] for r in rows if r["scenario"] == E1} == {"0.521875"}
    index = {t["key"]: t for t in json.loads((tables_dir / "tables.json").read_text(encoding="utf-8"))}
    labels = [row[0] for row in index["legacy_per_seed_policy_aware_heuristic"]["rows"]]
    assert "overall mean" in labels and "easy (tier) mean" in labels


def test_tables_are_reproducible_with_a_seed(
    aggregated: dict[str, Path], tables_dir: Path, tmp_path: Path
) -> None:
    assert main(report_args("tables", aggregated, tmp_path, "--bootstrap-samples", BOOTSTRAP)) == 0
    for name in ("legacy_score.csv", "legacy_drifts.csv", "summary.md", "tables.json"):
        assert (tmp_path / name).read_bytes() == (tables_dir / name).read_bytes()


# -- the statistics on result rows ------------------------------------------------------------------


def episodes(rows: list[dict[str, Any]]) -> pd.DataFrame:
    base = {
        "ruleset": "v1",
        "status": "graded",
        "policy": "p",
        "train_run": None,
        "checkpoint_step": None,
        "base_model": None,
        "tier": "easy",
        "sample_index": 0,
        "split": None,
    }
    data = pd.DataFrame([{**base, **row} for row in rows])
    data["label"] = data["policy"]
    data["kind"] = "rule"
    data["success"] = data["success"].astype("float64")
    return data


def test_samples_of_a_seed_are_averaged_before_the_seeds() -> None:
    rows = [
        {"scenario": "A", "seed": 0, "sample_index": i, "score": s, "success": s}
        for i, s in enumerate((1.0, 1.0, 1.0, 0.0))
    ]
    rows.append({"scenario": "A", "seed": 1, "score": 0.0, "success": 0.0})
    stat = stats.metric_stat(episodes(rows), "score", ["A"])
    assert stat.mean == pytest.approx((0.75 + 0.0) / 2)  # not the episode mean 0.6
    assert stat.n == 3  # seed 0's three identical successes are one distinct episode
    # bounded: Clopper-Pearson on 0.375 of the two seeds, not on the five episodes
    assert stat.method == "bounded"
    assert (stat.ci_low, stat.ci_high) == pytest.approx(stats.clopper_pearson(0.75, 2))
    assert stats.metric_stat(episodes(rows), "success", ["A"]).method == "bounded"


def test_paired_differences_use_the_cells_both_graded() -> None:
    mine = {("A", 0): 0.9, ("A", 1): 0.5, ("B", 0): 1.0, ("B", 1): 0.2, ("B", 2): 0.7}
    base = {("A", 0): 0.4, ("A", 1): 0.5, ("B", 0): 0.0, ("B", 1): 0.6}  # no (B, 2): not paired
    rows = [
        {"policy": "new", "scenario": s, "seed": d, "score": v, "success": 0.0} for (s, d), v in mine.items()
    ]
    rows += [
        {"policy": "old", "scenario": s, "seed": d, "score": v, "success": 0.0} for (s, d), v in base.items()
    ]
    data = episodes(rows)
    a = Analysis(data, samples=400, seed=2)
    diff = a.paired("v1", "new", "old", "score", "overall")
    # A: (0.5 + 0.0) / 2 = 0.25; B: (1.0 - 0.4) / 2 = 0.3; overall: their mean
    assert diff.mean == pytest.approx(0.275) and diff.n == 4
    # scores lie in [0, 1]: the square-and-add interval of the two sides on the paired cells
    mine_cells = [np.array([0.9, 0.5]), np.array([1.0, 0.2])]
    expected = stats.mover_stat(mine_cells, [np.array([0.4, 0.5]), np.array([0.0, 0.6])], 4)
    assert (diff.ci_low, diff.ci_high, diff.p_value) == pytest.approx(
        (expected.ci_low, expected.ci_high, expected.p_value)
    )
    assert a.paired("v1", "new", "old", "score", "A").mean == pytest.approx(0.25)
    assert stats.verdict(diff) == stats.NOT_SEPARABLE  # p well above 0.05 on four pairs
    assert stats.verdict(stats.Stat(0.3, 0.1, 0.5, 4, p_value=0.01)) == "beats"
    assert stats.verdict(stats.Stat(-0.3, -0.5, -0.1, 4, p_value=0.01)) == "loses"
    # the family's adjustment decides where it is made
    assert stats.verdict(stats.Stat(0.3, 0.1, 0.5, 4, p_value=0.01, p_adjusted=0.06)) == stats.NOT_SEPARABLE


def test_pass_k_is_the_closed_form_and_matches_enumeration() -> None:
    for n, c in ((4, 2), (5, 3), (4, 4), (6, 0)):
        outcomes = [1] * c + [0] * (n - c)
        for k in range(1, n + 1):
            subsets = list(itertools.combinations(outcomes, k))
            enumerated = sum(all(s) for s in subsets) / len(subsets)
            assert stats.pass_hat_k(n, c, k) == pytest.approx(enumerated)
            assert stats.pass_hat_k(n, c, k) == comb(c, k) / comb(n, k)
    assert stats.pass_hat_k(4, 2, 2) == pytest.approx(1 / 6)
    with pytest.raises(ValueError):
        stats.pass_hat_k(2, 1, 3)
    rows = [
        {"scenario": "A", "seed": 0, "sample_index": i, "score": 0.0, "success": float(i < 2)}
        for i in range(4)
    ]
    rows += [{"scenario": "A", "seed": 1, "sample_index": i, "score": 0.0, "success": 1.0} for i in range(3)]
    data = episodes(rows)
    assert stats.pass_k_stat(data, 2, ["A"]).mean == pytest.approx((1 / 6 + 1.0) / 2)
    assert stats.pass_k_stat(data, 3, ["A"]).mean == pytest.approx((0.0 + 1.0) / 2)
    assert stats.pass_k_stat(data, 4, ["A"]).mean is None  # seed 1 has only 3 samples


def test_a_missing_scenario_empties_its_tier_and_overall() -> None:
    rows = [{"ruleset": "legacy", "scenario": "A", "seed": 0, "score": 0.5, "success": 1.0}]
    manifest = {
        "cells": [
            {"ruleset": "legacy", "policy": "p", "scenario": s, "seed": 0, "sample_index": 0, "status": st}
            for s, st in (("A", "graded"), ("E2_meeting_invite_blast", "missing"))
        ]
    }
    a = Analysis(episodes(rows), manifest, samples=50)
    assert a.tiers["legacy"]["E2_meeting_invite_blast"] == "easy"  # from the legacy catalogue
    assert a.stat("legacy", "p", "score", "A").mean == 0.5
    for column in ("E2_meeting_invite_blast", "tier:easy", "overall"):
        assert a.stat("legacy", "p", "score", column).mean is None
    assert a.cover("legacy", "p", "E2_meeting_invite_blast").missing == 1


def test_infra_error_episodes_are_excluded(aggregated: dict[str, Path]) -> None:
    data = episodes_frame(aggregated["episodes"])
    assert (data["status"] == "infra_error").sum() == 1
    manifest = json.loads(aggregated["manifest"].read_text(encoding="utf-8"))
    a = Analysis(data, manifest, samples=20)
    stat = a.stat("legacy", "oracle", "score", M1)
    # two graded seeds replaying one episode; the infra_error one is in neither
    assert stat.n == 1 and stat.provisional and a.cover("legacy", "oracle", M1).graded == 2


def test_bad_arguments_and_inputs_are_errors(
    aggregated: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(report_args("tables", aggregated, tmp_path, "--bootstrap-samples", "0")) == 2
    assert "--bootstrap-samples" in error_line(capsys, "report")
    args = report_args("tables", aggregated, tmp_path)
    args[args.index("--episodes") + 1] = str(aggregated["drifts"])
    assert main(args) == 2
    assert "holds the 'drifts' table, expected 'episodes'" in error_line(capsys, "report")
    (tmp_path / "config.json").write_text("[1, 2]", encoding="utf-8")
    assert main(report_args("tables", aggregated, tmp_path, "--config", str(tmp_path / "config.json"))) == 2
    assert "not a mapping" in error_line(capsys, "report")


def test_configured_runs_without_results_read_missing(aggregated: dict[str, Path], tmp_path: Path) -> None:
    config = {
        "models": {"qwen": {"policy": "hf:Qwen/Qwen2.5-1.5B-Instruct", "params_b": 1.5}},
        "train": {"runs": {"shaped": {"base_model": "qwen", "ruleset": "legacy", "reward": "v1"}}},
    }
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    args = report_args("tables", aggregated, tmp_path / "out", "--config", str(tmp_path / "config.json"))
    assert main([*args, "--bootstrap-samples", "50"]) == 0
    table = csv_rows(tmp_path / "out" / "table_a_shaped_legacy.csv")
    assert table and {r["mean"] for r in table} == {""} and {r["n"] for r in table} == {"0"}
    index = {t["key"]: t for t in json.loads((tmp_path / "out" / "tables.json").read_text(encoding="utf-8"))}
    # the run's report step (default: the last of its planned checkpoints), read missing
    assert ["mean score", "trained (step 100): shaped@step-100", "missing"] == index["table_a_shaped_legacy"][
        "rows"
    ][1][:3]
    assert index["table_e"]["rows"][0][:2] == ["shaped", "missing"]  # no training metrics


def test_a_baseline_played_on_one_ruleset_is_not_played_on_the_other_never_missing() -> None:
    """A ruleset's own baselines (v1's scripted) are 'not played' on the other ruleset: nothing was
    expected there, so nothing is missing."""
    from schemashift.report.tables.benchmark import legacy_vs_v1
    from schemashift.report.tables.format import MISSING, NOT_PLAYED

    rows = [
        {"ruleset": "legacy", "policy": "oracle", "scenario": "A", "seed": 0, "score": 1.0, "success": 1.0}
    ]
    rows += [{**row, "ruleset": "v1"} for row in rows]
    rows.append(
        {"ruleset": "v1", "policy": "scripted", "scenario": "A", "seed": 0, "score": 0.9, "success": 1.0}
    )
    table = legacy_vs_v1(Analysis(episodes(rows), samples=50, seed=0))
    by_subject = {row[0]: row[1:] for row in table.rows}
    assert by_subject["scripted"][:2] == [NOT_PLAYED, NOT_PLAYED]
    assert MISSING not in by_subject["scripted"] and NOT_PLAYED not in by_subject["oracle"]
