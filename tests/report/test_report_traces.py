"""Episodes as Trackio traces: `report trackio --cells` logs the episodes of real runs as
`trackio.Trace`s (read back with Trackio's own reader), with the task, every action and response
and the drift events marked; the report's failed examples link to their trace run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from schemashift.cli import main
from schemashift.report import screenshots, traces
from schemashift.rollout import io

pytest.importorskip("trackio")
sys.path.insert(0, str(Path(__file__).parent))
from browser_helpers import distinct_colours, require_browser  # noqa: E402

#: v1's policy_aware_heuristic fails these with drifts fired; the oracle solves them
SCENARIOS = "customer_escalation,weekly_report"


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("traces")
    for policy in ("oracle", "policy_aware_heuristic"):
        args = ["run", "--ruleset", "v1", "--policy", policy, "--scenarios", SCENARIOS, "--seeds", "0-2"]
        assert main([*args, "--out", str(root / "cells" / policy)]) == 0
    merged = ["--out-episodes", str(root / "episodes.parquet"), "--out-drifts", str(root / "drifts.parquet")]
    examples = ["--out-examples", str(root / "examples.json")]
    assert main(["aggregate", "--cells", str(root / "cells"), *merged, *examples]) == 0
    report = ["report", "trackio", "--episodes", str(root / "episodes.parquet"), "--examples"]
    assert (
        main(
            [*report, str(root / "examples.json"), "--cells", str(root / "cells"), "--out", str(root / "tk")]
        )
        == 0
    )
    return root


def stored_traces(trackio_dir: Path) -> list[dict]:
    """Every trace of the project, as Trackio's own reader returns them (in a child process:
    Trackio fixes its folder at import)."""
    code = (
        "import json, sys\n"
        "from trackio.sqlite_storage import SQLiteStorage\n"
        "runs = SQLiteStorage.get_runs('schemashift')\n"
        "out = [t for run in runs for t in SQLiteStorage.get_traces('schemashift', run=run)]\n"
        "json.dump(out, sys.stdout, default=str)\n"
    )
    env = {**os.environ, "TRACKIO_DIR": str(trackio_dir)}
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_every_episode_of_a_small_run_is_a_trace_with_its_steps_and_drifts(results):
    stored = {(t["run"], t["key"]): t for t in stored_traces(results / "tk")}
    trajectories = [
        t
        for d in ("oracle", "policy_aware_heuristic")
        for t in io.read_jsonl(results / "cells" / d / "trajectories.jsonl.gz")
    ]
    assert len(stored) == len(trajectories) == 12
    drifted_failures = 0
    for trajectory in trajectories:
        run = traces.trace_run("v1", trajectory["policy"])
        trace = stored[(run, traces.trace_key(trajectory["scenario"], trajectory["seed"], 0))]
        steps = trajectory["steps"]
        success = trajectory["final"]["success"]
        assert trace["metadata"]["success"] is success and trace["metadata"]["status"] == (
            "success" if success else "error"
        )
        messages = trace["messages"]
        assert messages[0]["role"] == "system" and "Success criteria" in messages[0]["content"]
        verdict = "SOLVED" if success else "FAILED"
        assert messages[1]["role"] == "user" and messages[1]["content"].startswith(f"[{verdict} score ")
        assert len(messages) == 2 + 2 * len(steps)
        for step, call, answer in zip(steps, messages[2::2], messages[3::2], strict=True):
            assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == traces._arguments(
                step["action"]
            )
            assert answer["tool_call_id"] == call["tool_calls"][0]["id"]
            assert answer["content"].startswith("DRIFT FIRED") is bool(step["drift_events"])
        drift_spans = [s for s in trace["spans"] if s["name"].startswith("DRIFT ")]
        fired = [(s["step"], e["kind"]) for s in steps for e in s["drift_events"]]
        assert [
            (int(s["parent_id"].removeprefix("step-")), s["metadata"]["kind"]) for s in drift_spans
        ] == fired
        assert all(s["status"] == "error" for s in drift_spans)
        drifted_failures += bool(fired) and not success
    assert drifted_failures > 0  # a failed episode with its drift marked is there to look at


def test_failed_examples_link_to_their_trace_run(results):
    examples = json.loads((results / "examples.json").read_text())
    assert examples
    stored = {(t["run"], t["key"]) for t in stored_traces(results / "tk")}
    from schemashift.report.analysis import Analysis
    from schemashift.report.load import episodes_frame
    from schemashift.report.tables.benchmark import examples_table

    table = examples_table(Analysis(episodes_frame(results / "episodes.parquet"), examples=examples))
    assert table.header[-1] == "trace"
    for example, record in zip(examples, table.records, strict=True):
        run = traces.trace_run(example["ruleset"], example["subject"])
        assert record["trace"].endswith(f"/traces?project=schemashift&run_ids={run}")
        assert (run, record["trace_key"]) in stored


def test_a_large_run_traces_every_failure_and_a_few_successes(results, monkeypatch):
    monkeypatch.setattr(traces, "ALL_BELOW", 4)
    trajectories = [
        t
        for d in ("oracle", "policy_aware_heuristic")
        for t in io.read_jsonl(results / "cells" / d / "trajectories.jsonl.gz")
    ]
    kept = traces.selected(trajectories)
    failed = [t for t in trajectories if not t["final"]["success"]]
    solved = [t for t in kept if t["final"]["success"]]
    assert all(t in kept for t in failed)
    assert len(solved) == traces.SUCCESSES_PER_SCENARIO * len(SCENARIOS.split(","))
    assert [t["seed"] for t in solved] == [0, 1, 0, 1]


@pytest.mark.timeout(300)
def test_a_failed_v1_episode_is_shot_with_its_drift_marked(results, tmp_path):
    require_browser()
    shot = screenshots.failed_trace(results / "tk")
    assert shot["metadata"]["ruleset"] == "v1" and shot["metadata"]["success"] is False
    assert shot["metadata"]["drifts_fired"] > 0
    out = tmp_path / "shots"
    assert main(["screenshots", "--trackio", str(results / "tk"), "--trace", "--out", str(out)]) == 0
    summary = json.loads((out / "screenshots.json").read_text())
    assert summary["trace"] == {"png": "trace.png", "console_errors": [], "charts": {}}
    assert distinct_colours(out / "trace.png") > 50
