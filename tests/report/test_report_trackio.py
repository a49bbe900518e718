"""`schemashift report trackio` on the report fixture: the Trackio project is deterministic and
idempotent, its metric groups read back as the Parquet results say, and `trackio show` serves it
offline on 127.0.0.1."""

from __future__ import annotations

import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pandas as pd
import pytest
from fixture_results import (
    CONFIG_HASH,
    EXTRA,
    RUNS,
    SAMPLES,
    SEEDS,
    STEPS,
    VLLM_RUNS,
    build_aggregated,
    scenarios_for,
)
from report_helpers import read_metrics

from schemashift.cli import main
from schemashift.report.dashboard import GROUPS
from schemashift.runs.tracking import DEFAULT_URL, SAMPLING_COLUMNS

pytest.importorskip("trackio")
pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]
QWEN_BASE = "hf:Qwen/Qwen2.5-1.5B-Instruct"
CODER_BASE = "hf:Qwen/Qwen2.5-Coder-1.5B-Instruct"
#: episode cost column -> its eval_usage name; the savings the efficiency group gives
USAGE = {"tool_calls": "tool_calls", "tokens_in": "tokens_in", "tokens_out": "tokens_out", "steps": "turns"}
USAGE_ALL = {**USAGE, "wall_s": "wall_s"}
#: columns Trackio stamps itself with the wall-clock time of the write
STAMPED = {"created_at"}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Path:
    results = build_aggregated(tmp_path_factory.mktemp("trackio"))
    assert main(["report", "figures", *inputs(results), "--out", str(results / "figures")]) == 0
    return results


def inputs(results: Path) -> list[str]:
    return [
        "--episodes",
        str(results / "episodes.parquet"),
        "--drifts",
        str(results / "drifts.parquet"),
        "--training-metrics",
        str(results / "training_metrics.parquet"),
        "--manifest",
        str(results / "manifest.json"),
        "--config",
        str(results.parent / "config.json"),
        "--bootstrap-samples",
        "100",
    ]


def export(results: Path, out: Path) -> Path:
    args = ["report", "trackio", *inputs(results), "--figures", str(results / "figures"), "--out", str(out)]
    assert main(args) == 0
    return out / "schemashift.db"


@pytest.fixture(scope="module")
def project(results: Path) -> Path:
    return export(results, results / "trackio")


def tables(db: Path) -> dict[str, list[tuple]]:
    """Every table's rows, less the columns Trackio stamps with the time of the write."""
    out = {}
    with sqlite3.connect(db) as conn:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for name in sorted(names):
            columns = [r[1] for r in conn.execute(f"PRAGMA table_info({name})") if r[1] not in STAMPED]
            if columns:
                query = f"SELECT {', '.join(columns)} FROM {name} ORDER BY {', '.join(columns)}"
                out[name] = list(conn.execute(query))
    return out


def test_two_exports_give_the_same_database_and_media(results: Path, project: Path, tmp_path: Path) -> None:
    again = export(results, tmp_path / "again")
    first, second = tables(project), tables(again)
    assert first == second and first["metrics"] and first["configs"]
    media = sorted(
        p.relative_to(project.parent) for p in (project.parent / "media").rglob("*") if p.is_file()
    )
    assert media and media == sorted(
        p.relative_to(again.parent) for p in (again.parent / "media").rglob("*") if p.is_file()
    )
    for path in media:
        assert (project.parent / path).read_bytes() == (again.parent / path).read_bytes()


def test_rerunning_replaces_never_appends(results: Path, tmp_path: Path) -> None:
    db = export(results, tmp_path / "tk")
    before = tables(db)
    (tmp_path / "tk" / "media" / "schemashift" / "stale.png").write_bytes(b"left by an older export")
    assert tables(export(results, tmp_path / "tk")) == before
    assert not (tmp_path / "tk" / "media" / "schemashift" / "stale.png").exists()
    assert not [p for p in (tmp_path / "tk").iterdir() if p.name.startswith(".")]  # no staging left


def per_cell_mean(frame: pd.DataFrame, metric: str) -> float:
    """The reference dashboard's observed value (docs/report.md): scenarios with graded episodes,
    each the mean of its seeds' means of their samples, averaged with equal weight."""
    per_seed = frame.groupby(["scenario", "seed"])[metric].mean()
    return float(per_seed.groupby(level=0).mean().mean())


def test_each_metric_group_reads_back_as_the_parquet_results(results: Path, project: Path) -> None:
    logged = read_metrics(project)
    assert sorted(logged) == ["binary", "coder", "shaped"]
    episodes = pd.read_parquet(results / "episodes.parquet")
    graded = episodes[(episodes["status"] == "graded") & (episodes["ruleset"] == "legacy")]

    # step 0 of every run from Qwen is the one shared base evaluation
    base = graded[(graded["policy"] == QWEN_BASE) & graded["train_run"].isna()]
    for run in ("shaped", "binary"):
        assert logged[run][0]["eval_observed/score"] == pytest.approx(per_cell_mean(base, "score"))
        assert "eval_efficiency/matched" not in logged[run][0]  # step 0 is the reference itself

    # a checkpoint: every group, from the rows
    rows = graded[(graded["train_run"] == "shaped") & (graded["checkpoint_step"] == 100)]
    step = logged["shaped"][100]
    assert {name.partition("/")[0] for name in step} == set(GROUPS)
    assert step["eval_observed/success"] == pytest.approx(per_cell_mean(rows, "success"))
    easy = rows[rows["tier"] == "easy"]
    assert step["eval_observed/tier/easy/score"] == pytest.approx(per_cell_mean(easy, "score"))
    assert step["eval_coverage/graded"] == len(rows) and step["eval_coverage/missing"] == 0
    assert step["eval_coverage/correct"] == int((rows["success"] == 1).sum())
    assert step["eval_coverage/provisional"] == 0 and step["eval_coverage/completeness"] == 1
    assert step["eval_usage/tool_calls"] == pytest.approx(rows["tool_calls"].mean())
    assert step["eval_usage/tokens_in"] == pytest.approx(rows["tokens_in"].mean())
    assert step["eval_usage/turns"] == pytest.approx(rows["steps"].mean())
    keys = ["scenario", "seed"]
    solved = rows[rows["success"] == 1].groupby(keys)["tool_calls"].mean()
    solved_base = base[base["success"] == 1].groupby(keys)["tool_calls"].mean()
    both = solved.index.intersection(solved_base.index)
    assert step["eval_efficiency/matched"] == len(both)
    if len(both):
        saving = 1 - solved[both].sum() / solved_base[both].sum()
        assert step["eval_efficiency/tool_calls_saving"] == pytest.approx(saving)

    # a provisional checkpoint (one scenario missing): observed over what was graded, flagged,
    # the missing cells excluded, not counted as failures
    rows = graded[(graded["train_run"] == "binary") & (graded["checkpoint_step"] == 75)]
    step = logged["binary"][75]
    assert set(rows["scenario"]) and "M2_weekly_report" not in set(rows["scenario"])
    assert step["eval_observed/score"] == pytest.approx(per_cell_mean(rows, "score"))
    assert "eval_observed/scenario/M2_weekly_report/score" not in step
    assert step["eval_coverage/provisional"] == 1
    assert step["eval_coverage/missing"] == len(SEEDS) * 4 and step["eval_coverage/graded"] == len(rows)


def expected_evaluation(rows: pd.DataFrame, base: pd.DataFrame | None, cells: int) -> dict[str, float]:
    """Every eval_* metric of one evaluation, computed from its Parquet rows by the reference
    dashboard's rules: observed over the scenarios graded, coverage against the `cells` expected,
    usage per graded episode, savings against `base` (step 0 of the same ruleset and harness) over
    the cells both solved, each side's cost the mean of its samples that solved the cell."""
    out = {"eval_observed/score": per_cell_mean(rows, "score")}
    out["eval_observed/success"] = per_cell_mean(rows, "success")
    for tier, part in rows.groupby("tier"):
        for metric in ("score", "success"):
            out[f"eval_observed/tier/{tier}/{metric}"] = per_cell_mean(part, metric)
    for scenario, part in rows.groupby("scenario"):
        for metric in ("score", "success"):
            out[f"eval_observed/scenario/{scenario}/{metric}"] = per_cell_mean(part, metric)
    out |= {
        "eval_coverage/graded": len(rows),
        "eval_coverage/infra_error": 0,
        "eval_coverage/missing": cells - len(rows),
        "eval_coverage/expected": cells,
        "eval_coverage/correct": int((rows["success"] == 1).sum()),
        "eval_coverage/completeness": len(rows) / cells,
        "eval_coverage/provisional": int(len(rows) < cells),
    }
    out |= {f"eval_usage/{name}": float(rows[column].mean()) for column, name in USAGE_ALL.items()}
    if base is not None:
        keys = ["scenario", "seed"]
        cost = [f[f["success"] == 1].groupby(keys)[list(USAGE)].mean() for f in (rows, base)]
        both = cost[0].index.intersection(cost[1].index)
        graded_by_both = set(map(tuple, rows[keys].values)) & set(map(tuple, base[keys].values))
        out |= {"eval_efficiency/matched": len(both), "eval_efficiency/graded_by_both": len(graded_by_both)}
        for column, name in USAGE.items():
            if len(both):
                saving = 1 - cost[0].loc[both, column].sum() / cost[1].loc[both, column].sum()
                out[f"eval_efficiency/{name}_saving"] = saving
    return out


def test_other_harnesses_and_rulesets_read_back_as_the_parquet_results(results: Path, project: Path) -> None:
    """The coder run's base and trained checkpoint were also evaluated through the tools harness
    and on v1: each evaluation is the full metric set under `harness/<h>/` or `ruleset/<r>/` in
    every group, at its step (the base at step 0), every logged value equal to the one computed
    here from the Parquet rows; the unprefixed names keep their meaning (legacy, default harness)."""
    logged = read_metrics(project)
    episodes = pd.read_parquet(results / "episodes.parquet")
    graded = episodes[episodes["status"] == "graded"]

    def evaluation(ruleset: str, harness: str, step: int) -> pd.DataFrame:
        mine = graded[(graded["ruleset"] == ruleset) & (graded["harness"] == harness)]
        if step:
            return mine[(mine["train_run"] == "coder") & (mine["checkpoint_step"] == step)]
        return mine[(mine["policy"] == CODER_BASE) & mine["train_run"].isna()]

    dimensions = {("legacy", "default"), *((r, h) for run, r, h in EXTRA if run == "coder")}
    assert dimensions == {("legacy", "default"), ("legacy", "tools"), ("v1", "default")}
    expected: dict[int, dict[str, float]] = {}
    for ruleset, harness in sorted(dimensions):
        prefix = ("" if ruleset == "legacy" else f"ruleset/{ruleset}/") + (
            "" if harness == "default" else f"harness/{harness}/"
        )
        cells = len(scenarios_for(ruleset)) * len(SEEDS) * SAMPLES
        for step in (0, *STEPS):
            rows = evaluation(ruleset, harness, step)
            if not len(rows):
                continue
            base = evaluation(ruleset, harness, 0) if step else None
            for name, value in expected_evaluation(rows, base, cells).items():
                group, _, rest = name.partition("/")
                expected.setdefault(step, {})[f"{group}/{prefix}{rest}"] = value
    for step, values in expected.items():
        evaluated = {k: v for k, v in logged["coder"][step].items() if k.startswith("eval_")}
        assert sorted(evaluated) == sorted(values), step  # no metric left unchecked, none missing
        for name, value in values.items():
            assert evaluated[name] == pytest.approx(value), (step, name)
    assert sorted(s for s, v in expected.items() if "eval_observed/harness/tools/score" in v) == [0, 100]
    assert sorted(s for s, v in expected.items() if "eval_observed/ruleset/v1/score" in v) == [0, 100]
    # the other runs were evaluated on their ruleset through the default harness only
    for run in ("shaped", "binary"):
        names = {n for metrics in logged[run].values() for n in metrics}
        assert not [n for n in names if "/harness/" in n or "/ruleset/" in n]


def test_train_verified_is_the_committed_lineage(results: Path, project: Path) -> None:
    """The fixture's shaped run was killed after step 60 and resumed from 50: steps 51-60 were
    logged twice. train_verified holds each step once, with the values after the resume."""
    logged = read_metrics(project)["shaped"]
    metrics = pd.read_parquet(results / "training_metrics.parquet")
    shaped = metrics[metrics["train_run"] == "shaped"]
    live = shaped[~shaped["superseded"]].set_index("step")
    assert len(shaped) == 110 and len(live) == 100
    train_steps = sorted(s for s, m in logged.items() if "train_verified/reward_mean" in m)
    assert train_steps == list(range(1, 101))
    for s in range(51, 61):
        assert logged[s]["train_verified/reward_mean"] == pytest.approx(live.loc[s, "reward_mean"])
    with sqlite3.connect(project) as conn:
        counts = conn.execute(
            "SELECT run_name, step, COUNT(*) FROM metrics GROUP BY 1, 2 HAVING COUNT(*) > 1"
        )
        assert list(counts) == []  # one row per run and step


def test_train_verified_holds_the_engine_mismatch_of_a_vllm_run(results: Path, project: Path) -> None:
    """The vLLM run's importance-sampling ratios and log-probability differences are in its
    training group at every step; a run whose stack made no correction logs none."""
    metrics = pd.read_parquet(results / "training_metrics.parquet")
    sampling = [f"train_verified/{column}" for column in SAMPLING_COLUMNS.values()]
    logged = read_metrics(project)
    for run in RUNS:
        steps = {s: m for s, m in logged[run].items() if "train_verified/reward_mean" in m}
        if run not in VLLM_RUNS:
            assert not [name for m in steps.values() for name in m if name in sampling]
            continue
        live = metrics[(metrics["train_run"] == run) & ~metrics["superseded"]].set_index("step")
        assert sorted(steps) == sorted(live.index)
        for step, metric in steps.items():
            for column in SAMPLING_COLUMNS.values():
                assert metric[f"train_verified/{column}"] == pytest.approx(live.loc[step, column])


def test_baselines_are_references_and_provenance_is_in_the_config(project: Path) -> None:
    with sqlite3.connect(project) as conn:
        configs = {run: json.loads(c) for run, c in conn.execute("SELECT run_name, config FROM configs")}
    shaped = configs["shaped"]
    assert shaped["_Group"] == "legacy/legacy_cumulative" and configs["binary"]["_Group"] == "legacy/binary"
    baselines = {"naive_heuristic", "oracle", "policy_aware_heuristic", "openai:gpt-4o-mini"}
    baselines.add("openai:gpt-4o-mini+tools")  # the API model through each harness it played
    assert set(shaped["references"]) == baselines
    assert shaped["provenance"]["config_hash"] == CONFIG_HASH
    assert shaped["provenance"]["run_index"]["train_run"] == "shaped"
    first = read_metrics(project)["shaped"][0]
    assert first["references/baselines"]["_type"] == "trackio.table"
    assert {r["subject"] for r in first["references/baselines"]["_value"]} == set(shaped["references"])
    assert not any(name.startswith("eval_observed") and "oracle" in name for name in first)  # no curves
    image = first["figures/learning_curves"]
    assert image["_type"] == "trackio.image"
    assert (project.parent / "media" / image["file_path"]).read_bytes().startswith(b"\x89PNG")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_trackio_show_serves_the_project_offline_on_loopback(project: Path) -> None:
    trackio = shutil.which("trackio", path=os.path.dirname(sys.executable)) or shutil.which("trackio")
    assert trackio, "trackio's command is not installed"
    port = free_port()
    env = {**os.environ, "TRACKIO_DIR": str(project.parent), "GRADIO_SERVER_PORT": str(port)}
    env.pop("HF_TOKEN", None)
    server = subprocess.Popen(
        [trackio, "show", "--project", "schemashift"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(base + "/", timeout=2) as response:
                    page = response.read().decode()
                break
            except OSError:
                assert server.poll() is None, server.stdout.read()
                assert time.monotonic() < deadline, "trackio show did not answer within 60 s"
                time.sleep(0.3)
        assert "Trackio" in page
        request = urllib.request.Request(
            base + "/api/get_runs_for_project",
            data=json.dumps({"project": "schemashift"}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            runs = json.loads(response.read())["data"]
        assert sorted(r["name"] for r in runs) == ["binary", "coder", "shaped"]
    finally:
        server.terminate()
        server.wait(timeout=10)


def test_publishing_without_a_token_fails_clearly_and_keeps_the_local_project(
    results: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))  # no stored login either
    out = tmp_path / "tk"
    args = ["report", "trackio", *inputs(results), "--out", str(out), "--publish", "someone/bench"]
    assert main(args) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "publishing to the Space someone/bench needs a Hugging Face token" in error
    assert read_metrics(out / "schemashift.db")  # the local export is there


def test_the_dashboard_renders_in_a_headless_browser(project: Path, tmp_path: Path) -> None:
    """`trackio show` on 127.0.0.1, the overview preset (smoothing 0), shot in headless Chromium."""
    from browser_helpers import distinct_colours, require_browser

    require_browser()
    out = tmp_path / "screenshots"
    assert main(["screenshots", "--trackio", str(project.parent), "--out", str(out)]) == 0
    summary = json.loads((out / "screenshots.json").read_text(encoding="utf-8"))["trackio"]
    assert summary["console_errors"] == []
    assert distinct_colours(out / "trackio.png") > 50


def test_every_preset_view_shows_metrics_of_the_project(results: Path, project: Path) -> None:
    """A preset view is a link: smoothing 0 and a metric filter that matches logged metrics."""
    import re
    from urllib.parse import parse_qs, urlsplit

    from schemashift.report.dashboard import preset_views

    logged = read_metrics(project)
    names = {name for steps in logged.values() for metrics in steps.values() for name in metrics}
    views = preset_views(
        DEFAULT_URL, "schemashift", {"shaped": "legacy/legacy_cumulative", "binary": "legacy/binary"}
    )
    assert {"overview", "per-harness", "per-ruleset", "difficulty", "coverage", "efficiency"} <= set(views)
    assert {"usage", "training"} <= set(views)
    shown = {}
    for view, link in views.items():
        query = parse_qs(urlsplit(link).query)
        assert query["smoothing"] == ["0"] and query["project"] == ["schemashift"]
        pattern = re.compile(query["metric_filter"][0])
        shown[view] = {name for name in names if pattern.search(name)}
        assert shown[view], view
    # each dimension's view: the overall numbers of every harness (every ruleset's), beside the main ones
    assert shown["per-harness"] == {
        n
        for n in names
        if n.startswith("eval_observed/")
        and n.endswith(("/score", "/success"))
        and "/tier/" not in n
        and "/scenario/" not in n
    }
    assert {"eval_observed/score", "eval_observed/harness/tools/score"} <= shown["per-harness"]
    assert "eval_observed/ruleset/v1/score" in shown["per-ruleset"]
    assert not [n for n in shown["per-ruleset"] if "/harness/" in n]
    assert parse_qs(urlsplit(views["group legacy/binary"]).query)["run_ids"] == ["binary"]
