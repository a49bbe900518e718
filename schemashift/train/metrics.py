"""Training metrics: one row per optimizer step, kept across kills and resumes.

While a run trains, each step's row is appended to `metrics.jsonl` and flushed, so a SIGKILL
loses at most the step in flight. A run resumed from checkpoint S marks the rows of steps after
S `superseded` (they belong to the lost continuation) and logs those steps again; readers keep
the rows that are not superseded, so the lineage holds every step once. `metrics.parquet` is
the same rows in the declared `training_metrics` schema, rewritten atomically from the log.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from schemashift.rollout.io import atomic_write, write_json

LOG_NAME = "metrics.jsonl"
PARQUET_NAME = "metrics.parquet"
GO_NO_GO_NAME = "go_no_go.json"


class MetricsLog:
    """Append-only per-step metrics of one training run, with resume lineage."""

    def __init__(self, run_dir: str | Path, train_run: str) -> None:
        self.run_dir = Path(run_dir)
        self.path = self.run_dir / LOG_NAME
        self.train_run = train_run

    def rows(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        rows = []
        for line in self.path.read_text().splitlines():
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    # A torn last line from a kill mid-write: that step is logged again on resume.
                    continue
        return rows

    def lineage(self) -> list[dict[str, Any]]:
        """The live rows, one per step, in step order."""
        return sorted((row for row in self.rows() if not row.get("superseded")), key=lambda row: row["step"])

    def resume_from(self, step: int) -> int:
        """Mark rows after checkpoint `step` superseded; returns how many were marked."""
        rows = self.rows()
        marked = 0
        for row in rows:
            if row["step"] > step and not row.get("superseded"):
                row["superseded"] = True
                marked += 1
        self._rewrite(rows)
        return marked

    def append(self, row: Mapping[str, Any]) -> None:
        record = {"train_run": self.train_run, "superseded": False, **row}
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def _rewrite(self, rows: Iterable[Mapping[str, Any]]) -> None:
        text = "".join(json.dumps(dict(row), sort_keys=True) + "\n" for row in rows)
        atomic_write(self.path, lambda handle: handle.write(text.encode()))

    def write_parquet(self) -> Path:
        """Write every row (superseded ones included, flagged) as `metrics.parquet`."""
        from schemashift.rollout.io import write_parquet
        from schemashift.rollout.records import TRAINING_METRICS_COLUMNS, to_table

        names = {column.name for column in TRAINING_METRICS_COLUMNS}
        rows = [{key: value for key, value in row.items() if key in names} for row in self.rows()]
        path = self.run_dir / PARQUET_NAME
        write_parquet(path, to_table(rows, TRAINING_METRICS_COLUMNS))
        return path


def go_no_go(rows: Iterable[Mapping[str, Any]], at_step: int = 20) -> dict[str, Any] | None:
    """The seed document's step-20 decision, from the live rows up to `at_step`.

    PROCEED needs all three: the mean reward trends up (least-squares slope over steps > 0), at
    least one reward above 0, and rewards not stuck at one value. None until `at_step` is logged.
    """
    live = sorted(
        (row for row in rows if not row.get("superseded") and row["step"] <= at_step), key=lambda r: r["step"]
    )
    if not live or live[-1]["step"] < at_step:
        return None
    steps = [float(row["step"]) for row in live]
    means = [float(row["reward_mean"]) for row in live]
    slope = _slope(steps, means)
    values = {float(row[key]) for row in live for key in ("reward_min", "reward_max", "reward_mean")}
    checks = {
        "reward_trending_up": slope > 0,
        "any_reward_positive": any(float(row["reward_max"]) > 0 for row in live),
        "not_stuck": len(values) > 1 or any(float(row.get("reward_std") or 0) > 0 for row in live),
    }
    return {
        "step": at_step,
        "steps_seen": len(live),
        "reward_slope": slope,
        "first_reward_mean": means[0],
        "last_reward_mean": means[-1],
        "checks": checks,
        "decision": "PROCEED" if all(checks.values()) else "STOP AND DEBUG",
    }


def _slope(xs: list[float], ys: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True)) / spread if spread else 0.0


def write_go_no_go(run_dir: str | Path, rows: Iterable[Mapping[str, Any]], at_step: int = 20) -> dict | None:
    verdict = go_no_go(rows, at_step)
    if verdict is not None:
        write_json(Path(run_dir) / GO_NO_GO_NAME, verdict)
    return verdict
