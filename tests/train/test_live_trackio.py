"""Training's live Trackio logging: the benchmark's project, one row per step, and a resume that
rewrites the run to the committed lineage instead of appending its steps a second time."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trackio")
pytestmark = pytest.mark.timeout(120)

# One attempt of a run: rows logged live and to the metric log as training does (the Recorder),
# with a kill after `stop` and a resume from checkpoint `resume` when given.
ATTEMPT = """
import sys
from schemashift.train.live_trackio import LiveTrackio
from schemashift.train.metrics import MetricsLog
run_dir, first, stop, offset, resume = sys.argv[1:]
first, stop, offset = int(first), int(stop), float(offset)
metrics = MetricsLog(run_dir, "run1")
if resume != "none":
    metrics.resume_from(int(resume))
live = LiveTrackio("run1", "v1/v1", metrics.lineage(), {"base_model": "tiny"})
for step in range(first, stop + 1):
    row = {"step": step, "reward_mean": offset + step / 10, "loss": 0.5, "gpu_type": None}
    metrics.append(row)
    live.log(row)
"""


def attempt(tmp_path: Path, first: int, stop: int, offset: float, resume: str = "none") -> None:
    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio"), "PYTHONPATH": os.getcwd()}
    command = [
        sys.executable,
        "-c",
        ATTEMPT,
        str(tmp_path / "run"),
        str(first),
        str(stop),
        str(offset),
        resume,
    ]
    subprocess.run(command, env=env, check=True, capture_output=True, text=True)


def logged(tmp_path: Path) -> list[tuple[str, int, dict]]:
    with sqlite3.connect(tmp_path / "trackio" / "schemashift.db") as conn:
        rows = conn.execute("SELECT run_name, step, metrics FROM metrics ORDER BY step, id")
        return [(run, step, json.loads(metrics)) for run, step, metrics in rows]


def test_a_resumed_run_logs_each_step_once_with_its_committed_value(tmp_path: Path) -> None:
    attempt(tmp_path, 1, 6, 0.0)  # killed after step 6; its last checkpoint is step 4
    attempt(tmp_path, 5, 8, 1.0, resume="4")  # steps 5 and 6 again, with other values
    rows = logged(tmp_path)
    assert [step for _, step, _ in rows] == list(range(1, 9))
    assert {run for run, _, _ in rows} == {"run1"}
    rewards = {step: metrics["train_verified/reward_mean"] for _, step, metrics in rows}
    assert rewards[4] == pytest.approx(0.4) and rewards[5] == pytest.approx(1.5)
    assert "train_verified/gpu_type" not in rows[0][2]
    with sqlite3.connect(tmp_path / "trackio" / "schemashift.db") as conn:
        [(config,)] = conn.execute("SELECT config FROM configs WHERE run_name = 'run1'")
    assert json.loads(config)["_Group"] == "v1/v1"
