"""The whole report on the fixture results set (baselines, base models, checkpoints, an API model,
training metrics), through the CLI: every table and figure, checked against the raw episodes."""

from __future__ import annotations

import csv
import json
import logging
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from browser_helpers import require_browser
from fixture_results import (
    CONFIG_HASH,
    RUNS,
    SCENARIOS,
    SEEDS,
    STEPS,
    VLLM_RUNS,
    build_aggregated,
)

from schemashift.cli import main
from schemashift.report.figures import stems
from schemashift.runs.tracking import DEFAULT_URL, SAMPLING_COLUMNS

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
BOOTSTRAP = "300"
QWEN_BASE = "hf:Qwen/Qwen2.5-1.5B-Instruct"


def mover_reference(
    mine: pd.DataFrame, theirs: pd.DataFrame, metric: str, replays: bool
) -> tuple[float, float]:
    """Newcombe's square-and-add 95% interval of two stratified means on the cells both graded,
    each side's bounds Clopper-Pearson (scipy's beta quantiles) on its Kish effective size over its
    units: seeds, or where the seeds replay one task (legacy) a scenario's distinct episodes."""
    from scipy import stats as sp

    cells = [frame.groupby(["scenario", "seed"])[metric].mean() for frame in (mine, theirs)]
    shared = cells[0].index.intersection(cells[1].index)
    scenarios = sorted(set(shared.get_level_values(0)))

    def side(frame: pd.DataFrame, means: pd.Series) -> tuple[float, float, float]:
        means = means.loc[shared]
        units = []
        for s in scenarios:
            seeds = means[means.index.get_level_values(0) == s]
            if replays:
                played = frame[(frame["scenario"] == s) & frame["seed"].isin(seeds.index.get_level_values(1))]
                columns = [
                    "success",
                    "score",
                    "steps",
                    "tool_calls",
                    "failed_calls",
                    "tokens_out",
                    "final_action",
                ]
                units.append(min(len(seeds), len(played.drop_duplicates(columns))))
            else:
                units.append(len(seeds))
        m = float(np.mean([means[means.index.get_level_values(0) == s].mean() for s in scenarios]))
        n = len(scenarios) ** 2 / sum(1 / u for u in units)
        x = m * n
        low = 0.0 if x == 0 else sp.beta.ppf(0.025, x, n - x + 1)
        high = 1.0 if x >= n else sp.beta.ppf(0.975, x + 1, n - x)
        return m, low, high

    (a, la, ua), (b, lb, ub) = side(mine, cells[0]), side(theirs, cells[1])
    d = a - b
    return max(-1.0, d - math.hypot(a - la, ub - b)), min(1.0, d + math.hypot(ua - a, b - lb))


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fixture")
    results = build_aggregated(root, {"rulesets": ["legacy", "v1"]})
    common = [
        "--episodes",
        str(results / "episodes.parquet"),
        "--drifts",
        str(results / "drifts.parquet"),
        "--training-metrics",
        str(results / "training_metrics.parquet"),
        "--examples",
        str(results / "examples.json"),
        "--manifest",
        str(results / "manifest.json"),
        "--config",
        str(root / "config.json"),
        "--bootstrap-samples",
        BOOTSTRAP,
    ]
    assert (
        main(
            [
                "report",
                "tables",
                *common,
                "--out",
                str(results / "tables"),
                "--summary",
                str(results / "summary.md"),
            ]
        )
        == 0
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["report", "figures", *common, "--out", str(results / "figures")]) == 0
    assert [str(w.message) for w in caught] == []
    args = ["--tables", str(results / "tables"), "--figures", str(results / "figures"), "--out", str(results)]
    assert main(["report", "html", *common, *args]) == 0
    return results


def rows(results: Path, key: str) -> list[dict[str, str]]:
    with open(results / "tables" / f"{key}.csv", newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def graded(results: Path) -> pd.DataFrame:
    frame = pd.read_parquet(results / "episodes.parquet")
    return frame[frame["status"] == "graded"]


def labels(frame: pd.DataFrame) -> pd.Series:
    """Each row's subject label (a harness other than the default one marks it: `+tools`)."""
    from schemashift.rollout.subject import Subject

    columns = ["policy", "train_run", "checkpoint_step", "harness"]
    return pd.Series(
        [Subject.of_record(row).label for row in frame[columns].to_dict("records")], index=frame.index
    )


def hand_mean(frame: pd.DataFrame, metric: str) -> float:
    """Mean over scenarios of the mean over seeds of the mean over samples."""
    per_seed = frame.groupby(["scenario", "seed"])[metric].mean()
    return float(per_seed.groupby(level=0).mean().mean())


def test_missing_and_infra_error_cells_are_provisional_never_zero(report_dir: Path) -> None:
    score = {(r["subject"], r["column"]): r for r in rows(report_dir, "legacy_score")}
    gap = score["binary@step-75", "M2_weekly_report"]
    assert (gap["mean"], gap["n"], gap["provisional"]) == ("", "0", "True")
    for column in ("tier:medium", "overall"):
        assert score["binary@step-75", column]["mean"] == ""
    assert score["binary@step-75", "tier:easy"]["provisional"] == "False"
    api = score["openai:gpt-4o-mini", "M1_customer_escalation"]
    assert api["provisional"] == "True" and api["n"] == str(len(SEEDS) * 4 - 4)
    assert score["openai:gpt-4o-mini", "overall"]["provisional"] == "True"
    coverage = {(r["subject"], r["scenario"]): r for r in rows(report_dir, "legacy_coverage")}
    assert coverage["binary@step-75", "M2_weekly_report"]["missing"] == "12"
    assert coverage["openai:gpt-4o-mini", "M1_customer_escalation"]["infra_error"] == "4"
    assert coverage["openai:gpt-4o-mini", "M1_customer_escalation"]["expected"] == ""  # not expected
    learning = [r for r in rows(report_dir, "learning_curves") if r["run"] == "binary" and r["step"] == "75"]
    assert {r["mean"] for r in learning} == {""}
    summary = (report_dir / "summary.md").read_text(encoding="utf-8")
    assert "| binary@step-75 (trained on these tasks) | checkpoint | missing | missing |" in summary


def test_table_a_paired_difference_matches_the_raw_episodes(report_dir: Path) -> None:
    data = graded(report_dir)
    trained = data[(data["train_run"] == "shaped") & (data["checkpoint_step"] == 100)]
    base = data[(data["policy"] == QWEN_BASE) & (data["checkpoint_step"] == 0)]
    diffs = (
        trained.groupby(["scenario", "seed"])["score"].mean()
        - base.groupby(["scenario", "seed"])["score"].mean()
    )
    expected = float(diffs.groupby(level=0).mean().mean())
    table = {(r["metric"], r["row"], r["column"]): r for r in rows(report_dir, "table_a_shaped_legacy")}
    diff = table["score", "paired difference", "overall"]
    assert float(diff["mean"]) == pytest.approx(expected)
    assert diff["n"] == str(len(SCENARIOS) * len(SEEDS))
    assert float(diff["ci_low"]) <= expected <= float(diff["ci_high"])
    untrained = table["score", "untrained (step 0)", "overall"]
    assert untrained["subject"] == QWEN_BASE and float(untrained["mean"]) == pytest.approx(
        hand_mean(base, "score")
    )
    assert table["score", "trained (step 100)", "overall"]["subject"] == "shaped@step-100"


def test_learning_curves_start_at_the_untrained_base(report_dir: Path) -> None:
    curve = [
        r
        for r in rows(report_dir, "learning_curves")
        if r["run"] == "coder" and r["metric"] == "success" and r["ruleset"] == "legacy"
    ]
    assert [int(r["step"]) for r in curve] == [0, *STEPS]
    assert curve[0]["subject"] == "hf:Qwen/Qwen2.5-Coder-1.5B-Instruct"
    data = graded(report_dir)
    data = data[(data["ruleset"] == "legacy") & (data["harness"] == "default")]  # coder played more
    for r in curve[1:]:
        mine = data[(data["train_run"] == "coder") & (data["checkpoint_step"] == int(r["step"]))]
        assert float(r["mean"]) == pytest.approx(hand_mean(mine, "success"))


def test_ablation_tables_group_the_right_runs(report_dir: Path) -> None:
    reward = rows(report_dir, "table_c")
    assert {(r["run"], r["reward"]) for r in reward} == {
        ("shaped", "legacy_cumulative"),
        ("binary", "binary"),
    }
    model = rows(report_dir, "table_d")
    # the base model each run trained, as its run index names it
    assert {(r["run"], r["base_model"]) for r in model} == {
        ("shaped", "Qwen/Qwen2.5-1.5B-Instruct"),
        ("coder", "Qwen/Qwen2.5-Coder-1.5B-Instruct"),
    }
    assert all(r["convergence_step"] for r in reward + model)


def test_table_e_uses_the_saved_lineage(report_dir: Path) -> None:
    metrics = pd.read_parquet(report_dir / "training_metrics.parquet")
    assert metrics["superseded"].sum() == 10  # the resumed run's replaced steps are kept, marked
    live = metrics[(metrics["train_run"] == "shaped") & ~metrics["superseded"]]
    [row] = [r for r in rows(report_dir, "table_e") if r["run"] == "shaped"]
    hours = live["seconds_per_step"].sum() / 3600
    assert row["steps"] == "100"
    assert float(row["gpu_hours"]) == pytest.approx(hours * 2)
    assert float(row["cost_usd"]) == pytest.approx(hours * 2 * 2.5)
    assert float(row["peak_reward"]) == pytest.approx(live["reward_mean"].max())
    assert row["gpu_type"] == "Tesla T4"


def test_table_e_shows_the_engine_mismatch_at_the_last_step(report_dir: Path) -> None:
    """The vLLM run's importance-sampling ratio range and largest log-probability difference at
    its last step; a dash for the runs whose stack made no correction."""
    metrics = pd.read_parquet(report_dir / "training_metrics.parquet")
    table = {r["run"]: r for r in rows(report_dir, "table_e")}
    shown = json.loads((report_dir / "tables" / "tables.json").read_text())
    [cells] = [t for t in shown if t["key"] == "table_e"]
    header = cells["header"]
    text = {row[0]: dict(zip(header, row, strict=True)) for row in cells["rows"]}
    for run in RUNS:
        live = metrics[(metrics["train_run"] == run) & ~metrics["superseded"]].sort_values("step")
        last = live.iloc[-1]
        if run in VLLM_RUNS:
            for column in SAMPLING_COLUMNS.values():
                assert float(table[run][column]) == pytest.approx(last[column])
            low, high = last["is_ratio_min"], last["is_ratio_max"]
            assert text[run]["IS ratio (last step)"] == f"[{low:.3f}, {high:.3f}]"
            assert text[run]["max logp diff (last step)"] == f"{last['logp_diff_max']:.4f}"
        else:
            assert live["is_ratio_mean"].isna().all()
            assert table[run]["is_ratio_mean"] == ""
            assert text[run]["IS ratio (last step)"] == text[run]["max logp diff (last step)"] == "\u2014"


def test_verdicts_follow_the_seed_tiers_and_the_intervals(report_dir: Path) -> None:
    data = graded(report_dir)
    verdicts = {r["run"]: r for r in rows(report_dir, "verdicts") if r["ruleset"] == "legacy"}
    for run in RUNS:
        mine = data[(data["train_run"] == run) & (data["checkpoint_step"] == 100)]
        mine = mine[(mine["ruleset"] == "legacy") & (mine["harness"] == "default")]
        shaped = hand_mean(mine, "shaped_total")
        assert float(verdicts[run]["shaped"]) == pytest.approx(shaped)
        assert (verdicts[run]["tier1"] == "True") == (
            shaped > 0.1
            and (mine.groupby("scenario")["binary"].mean() > 0).sum() >= 2
            and all(hand_mean(part, "shaped_total") > 0.1 for _, part in mine.groupby("seed"))
        )
    assert verdicts["shaped"]["tier3"] == "True" and verdicts["binary"]["tier2"] == "False"
    paired = [r for r in rows(report_dir, "versus_baselines") if not r["baseline"].endswith("(published)")]
    # every interval from the raw rows (scipy's beta quantiles, the square-and-add formula), the
    # test agreeing with it, Holm within each family, the verdict from the adjusted p-value
    for r in paired:
        trained = data[(labels(data) == f"{r['run']}@step-100") & (data["ruleset"] == r["ruleset"])]
        base = data[(labels(data) == r["baseline"]) & (data["ruleset"] == r["ruleset"])]
        low, high = mover_reference(trained, base, r["metric"], replays=r["ruleset"] == "legacy")
        assert (float(r["ci_low"]), float(r["ci_high"])) == pytest.approx((low, high), abs=1e-7)
        assert (float(r["p_value"]) < 0.05) == (not low <= 0.0 <= high) or abs(
            float(r["p_value"]) - 0.05
        ) < 1e-3
    curve = [r for r in rows(report_dir, "learning_curves") if r["diff_p_value"]]
    for family, found in (
        (
            "versus baselines",
            [(r["p_value"], r["p_adjusted"]) for r in paired if r["family"] == "versus baselines"],
        ),
        ("training", [(r["diff_p_value"], r["diff_p_holm"]) for r in curve]),
    ):
        raw = [float(p) for p, _ in found]
        order = sorted(range(len(raw)), key=lambda i: raw[i])
        for rank, i in enumerate(order):
            adjusted = min(1.0, max((len(raw) - j) * raw[order[j]] for j in range(rank + 1)))
            assert float(found[i][1]) == pytest.approx(adjusted, abs=1e-9), family
    # one comparison, one adjusted p-value: a run against its own step 0 reads the same in the
    # baselines table, the learning curves and Table A
    for r in (r for r in paired if r["family"] == "training"):
        same = [
            c
            for c in curve
            if (c["run"], c["ruleset"], c["step"], c["metric"])
            == (r["run"], r["ruleset"], "100", r["metric"])
        ]
        table_a = {
            (t["metric"], t["row"], t["column"]): t
            for t in rows(report_dir, f"table_a_{r['run']}_{r['ruleset']}")
        }
        assert [c["diff_p_holm"] for c in same] == [r["p_adjusted"]]
        assert table_a[r["metric"], "paired difference", "overall"]["p_adjusted"] == r["p_adjusted"]
    for r in paired:
        mean, adjusted = float(r["mean"]), float(r["p_adjusted"])
        if adjusted < 0.05 and mean != 0:
            assert r["verdict"] == ("beats" if mean > 0 else "loses")
        else:
            assert r["verdict"] == f"not separable at this size (detectable >= {float(r['detectable']):.2f})"
    published = [
        r for r in rows(report_dir, "versus_baselines") if r["baseline"] == "gpt-oss:120b (published)"
    ]
    assert len(published) == len(RUNS) and all(r["published"] == "0.0" for r in published)
    assert all("point value without interval" in r["verdict"] for r in published)


def test_go_no_go_is_computed_and_the_record_shown(report_dir: Path) -> None:
    go = {r["run"]: r for r in rows(report_dir, "go_no_go")}
    assert set(go) == set(RUNS)
    assert go["shaped"]["decision"] == "PROCEED" and '"decision": "PROCEED"' in go["shaped"]["recorded"]


def test_pass_k_efficiency_and_parse_rates(report_dir: Path) -> None:
    data = graded(report_dir)
    passk = {(r["subject"], r["k"]): r for r in rows(report_dir, "legacy_pass_k")}
    final = data[(data["train_run"] == "shaped") & (data["checkpoint_step"] == 100)]
    cells = final.groupby(["scenario", "seed"])["success"].agg(["count", "sum"])
    from math import comb

    per_cell = [comb(int(c), 2) / comb(int(n), 2) for n, c in zip(cells["count"], cells["sum"], strict=True)]
    expected = pd.Series(per_cell, index=cells.index).groupby(level=0).mean().mean()
    assert float(passk["shaped@step-100", "2"]["mean"]) == pytest.approx(expected)
    assert float(passk["shaped@step-100", "4"]["mean"]) <= float(passk["shaped@step-100", "1"]["mean"])
    efficiency = {r["subject"]: r for r in rows(report_dir, "legacy_efficiency")}
    api = efficiency["openai:gpt-4o-mini"]
    mine = data[labels(data) == "openai:gpt-4o-mini"]
    ref = data[(data["policy"] == "policy_aware_heuristic") & (data["ruleset"] == "legacy")]
    # paired by cell: each side's mean cost over the samples that solved the cell
    keys = ["scenario", "seed"]
    solved = [frame[frame["success"]].groupby(keys)["tool_calls"].mean() for frame in (mine, ref)]
    both = pd.concat(solved, axis=1, keys=["mine", "ref"]).dropna()
    graded_both = set(map(tuple, mine[keys].values)) & set(map(tuple, ref[keys].values))
    assert api["reference"] == "policy_aware_heuristic" and api["saving_solved_by_both"] == str(len(both))
    assert api["saving_graded_by_both"] == str(len(graded_both))
    assert float(api["saving_tool_calls"]) == pytest.approx(1 - both["mine"].sum() / both["ref"].sum())
    if api["saving_tool_calls_ci_low"]:
        assert float(api["saving_tool_calls_ci_low"]) <= float(api["saving_tool_calls"])
        assert float(api["saving_tool_calls"]) <= float(api["saving_tool_calls_ci_high"])
    assert efficiency["shaped@step-100"]["reference"] == QWEN_BASE
    # a checkpoint through the tools harness against its base through the same harness
    assert efficiency["coder@step-100+tools"]["reference"] == "hf:Qwen/Qwen2.5-Coder-1.5B-Instruct+tools"
    assert efficiency["shaped@step-100"]["saving_solved_by_both"] == "0"  # the base solves nothing
    parse = {r["subject"]: r for r in rows(report_dir, "legacy_parse")}
    assert "oracle" not in parse
    api_rows = data[labels(data) == "openai:gpt-4o-mini"]
    rate = 1 - api_rows["parse_failures"].sum() / api_rows["steps"].sum()
    assert float(parse["openai:gpt-4o-mini"]["action_parse_rate"]) == pytest.approx(rate)


def test_efficiency_costs_at_the_configured_prices(report_dir: Path) -> None:
    data = graded(report_dir)
    efficiency = {r["subject"]: r for r in rows(report_dir, "legacy_efficiency")}
    api = efficiency["openai:gpt-4o-mini"]
    api_rows = data[(labels(data) == "openai:gpt-4o-mini") & (data["ruleset"] == "legacy")]
    costs = (api_rows["tokens_in"] * 0.15 + api_rows["tokens_out"] * 0.6) / 1e6
    assert api["cost_basis"] == "tokens"
    assert float(api["cost_per_episode_usd"]) == pytest.approx(costs.mean())
    assert float(api["cost_per_success_usd"]) == pytest.approx(costs.sum() / api_rows["success"].sum())
    # a checkpoint costs what its run's base model does: GPU hours of its wall-clock seconds
    final = efficiency["shaped@step-100"]
    final_rows = data[(labels(data) == "shaped@step-100") & (data["ruleset"] == "legacy")]
    assert final["cost_basis"] == "gpu_hour"
    assert float(final["cost_per_episode_usd"]) == pytest.approx((final_rows["wall_s"] / 3600 * 2.0).mean())
    # no price, no cost: the rule baselines, and a model whose entry names none
    assert efficiency["oracle"]["cost_per_episode_usd"] == ""
    assert efficiency["coder@step-100"]["cost_basis"] == ""


def test_three_failed_episodes_per_subject_from_the_trajectories(report_dir: Path) -> None:
    examples = json.loads((report_dir / "examples.json").read_text(encoding="utf-8"))
    by_subject: dict[tuple[str, str], list[dict]] = {}
    for example in examples:
        by_subject.setdefault((example["ruleset"], example["subject"]), []).append(example)
    naive = by_subject["legacy", "naive_heuristic"]
    # one failure per scenario in scenario order, the lowest seed and sample first
    assert [(e["scenario"], e["seed"], e["sample_index"]) for e in naive] == [
        (s, 0, 0) for s in sorted(SCENARIOS)[:3]
    ]
    assert ("legacy", "oracle") not in by_subject  # it never fails
    for example in examples:
        assert 1 <= len(example["key_steps"]) <= 6
        assert example["key_steps"][-1]["step"] == example["steps"]
        assert all(set(s) >= {"step", "action", "response", "drifts"} for s in example["key_steps"])
    assert len(by_subject["legacy", "shaped@step-25"]) == 3
    table = rows(report_dir, "failed_examples")
    assert len(table) == len(examples)


def test_every_figure_is_written_and_the_html_embeds_them(report_dir: Path) -> None:
    index = json.loads((report_dir / "figures" / "figures.json").read_text(encoding="utf-8"))
    assert [e["stem"] for e in index] == stems(["legacy", "v1"])
    for entry in index:
        png = (report_dir / "figures" / f"{entry['stem']}.png").read_bytes()
        assert png.startswith(b"\x89PNG") and len(png) > 20_000, entry["stem"]
        assert (report_dir / "figures" / f"{entry['stem']}.pdf").read_bytes().startswith(b"%PDF-")
    html = (report_dir / "report.html").read_text(encoding="utf-8")
    results = html[html.index('<h2 id="results">') : html.index('<h2 id="details">')]
    for text in ("shaped@step-100", "binary@step-75", "trained: run shaped, step 100", "Key figures"):
        assert text in results
    details = html[html.index("<h3>What ran</h3>") : html.index("<h3>Tables</h3>")]
    for text in ("Training runs", "Coverage", "legacy / binary@step-75 / M2_weekly_report: seeds 0-2"):
        assert text in details
    assert "fixture run shaped" in details, "the run index's description is shown beside the run"
    assert CONFIG_HASH in html[html.index('<h2 id="provenance">') :]
    assert html.count('<figure id="') == len(index) and html.count('<figure class="chart"') == 4
    for key in ("table_a_shaped_legacy", "table_b_legacy", "table_c", "table_d", "table_e", "legacy_vs_v1"):
        assert f'id="{key}"' in html
    markup = re.sub(r"<script>.*?</script>", "", html, flags=re.S)  # less the inlined Vega code
    # Nothing is loaded from a network; the only addresses are links to the local Trackio
    # dashboard's traces, which a reader opens after starting it (`trackio show`).
    local = re.escape(f'<a href="{DEFAULT_URL}/traces?')
    markup, links = re.subn(local + r'[^"]*"', "", markup)
    assert links > 0, "the failed examples link to their traces"
    assert "http://" not in markup and "https://" not in markup


def test_figures_log_no_warnings(report_dir: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING):
        args = [
            "report",
            "figures",
            "--episodes",
            str(report_dir / "episodes.parquet"),
            "--training-metrics",
            str(report_dir / "training_metrics.parquet"),
            "--bootstrap-samples",
            "100",
            "--out",
            str(tmp_path),
        ]
        assert main(args) == 0
    assert not [r for r in caplog.records if r.name.startswith("matplotlib")]


def test_sizes_are_marked_as_estimates_where_the_config_says_so(report_dir: Path) -> None:
    estimated = {r["subject"]: r["params_estimated"] for r in rows(report_dir, "table_b_legacy")}
    assert estimated["openai:gpt-4o-mini"] == "True", "params_estimated: true in the config"
    assert estimated[QWEN_BASE] == "False"
    summary = (report_dir / "summary.md").read_text(encoding="utf-8")
    assert "~8B (estimate)" in summary and "~1.5B" not in summary


def test_each_harness_is_its_own_subject_and_the_harness_table_sets_them_side_by_side(
    report_dir: Path,
) -> None:
    """The API model played through both harnesses: two subjects everywhere (the tools one marked
    `+tools`), and one row of the harness table with both harnesses' scores and their paired
    difference, each equal to the raw episodes' figure."""
    data = graded(report_dir)
    legacy = data[(data["ruleset"] == "legacy") & (data["policy"] == "openai:gpt-4o-mini")]
    by_harness = {h: legacy[legacy["harness"] == h] for h in ("default", "tools")}
    assert all(len(frame) for frame in by_harness.values())
    overview = {r["subject"] for r in rows(report_dir, "legacy_score")}
    assert {"openai:gpt-4o-mini", "openai:gpt-4o-mini+tools"} <= overview
    table = {(r["subject"], r["harness"], r["metric"]): r for r in rows(report_dir, "legacy_harnesses")}
    for harness, frame in by_harness.items():
        for metric in ("score", "success"):
            cell = table["openai:gpt-4o-mini", harness, metric]
            assert float(cell["mean"]) == pytest.approx(hand_mean(frame.astype({metric: float}), metric))
    cell_means = {h: f.groupby(["scenario", "seed"])["score"].mean() for h, f in by_harness.items()}
    paired = (cell_means["tools"] - cell_means["default"]).dropna()
    difference = table["openai:gpt-4o-mini", "tools - default", "score"]
    assert float(difference["mean"]) == pytest.approx(float(paired.groupby(level=0).mean().mean()))
    # a checkpoint played through both (the coder run's trained one) has both harnesses' numbers;
    # models played through one harness show the other as not played; rule baselines are not listed
    coder = data[(data["ruleset"] == "legacy") & (labels(data) == "coder@step-100+tools")]
    assert len(coder) and float(table["coder@step-100", "tools", "score"]["mean"]) == pytest.approx(
        hand_mean(coder, "score")
    )
    assert table["shaped@step-100", "tools", "score"]["mean"] == ""
    assert not any(subject == "oracle" for subject, _, _ in table)
    summary = (report_dir / "summary.md").read_text()
    assert "Models per harness" in summary


#: measures, once the page has loaded, how far each headline table overflows its box (pixels)
OVERFLOW_PROBE = """<script>window.addEventListener('load', () => {
  const boxes = [];  // the tables of the Results section (headlines, what drift costs)
  let results = false;
  for (const element of document.body.children) {
    if (element.id === 'results' || element.id === 'details') results = element.id === 'results';
    else if (results && element.matches('div.scroll')) boxes.push(element);
  }
  const overflow = boxes.map((b) => b.scrollWidth - b.clientWidth);
  document.body.setAttribute('data-overflow', JSON.stringify(overflow));
});</script>"""


def test_the_headline_tables_fit_the_page_without_scrolling(report_dir: Path, tmp_path: Path) -> None:
    """What a reader sees first must be whole at the screenshot's width (1280 px): the fixture's
    long coverage notes (infra errors, expected unknown) once pushed the coverage column off it."""
    from schemashift.report.screenshots import _run

    browser = require_browser()
    page = tmp_path / "probed.html"
    text = (report_dir / "report.html").read_text(encoding="utf-8")
    page.write_text(text.replace("</body>", OVERFLOW_PROBE + "</body>"), encoding="utf-8")
    dom = _run(browser, page.as_uri(), "--window-size=1280,2400", "--dump-dom").stdout
    found = re.search(r'data-overflow="([^"]*)"', dom)
    assert found, "the probe did not run"
    overflow = json.loads(found.group(1).replace("&quot;", '"'))
    assert len(overflow) == 2 and all(px <= 0 for px in overflow), overflow


def test_summary_md_is_a_summary_and_links_the_rest(report_dir: Path) -> None:
    """The headline, the verdicts and what cannot be concluded, within 60 KB (the report of this
    fixture ran to 300 KB when every table was in it); every other table linked as its CSV."""
    summary = (report_dir / "summary.md").read_text(encoding="utf-8")
    assert len(summary.encode("utf-8")) < 60_000
    assert (
        summary.index("## Headline")
        < summary.index("## What cannot be concluded")
        < summary.index("## Every table")
    )
    assert (
        "### Run shaped on legacy" not in summary
        and "Per-seed raw tables" not in summary.split("## Every")[0]
    )
    for key in ("table_a_shaped_legacy", "legacy_per_seed_oracle", "failed_examples", "legacy_efficiency"):
        assert f"](tables/{key}.csv)" in summary and (report_dir / "tables" / f"{key}.csv").is_file()
    limits = summary.split("## What cannot be concluded")[1].split("## Every table")[0]
    assert "trained on these tasks" in limits and "not separable at this size" in limits
