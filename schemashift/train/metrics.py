"""Training metrics: one row per optimizer step, kept across kills and resumes.

While a run trains, each step's row is appended to `metrics.jsonl` and flushed, so a SIGKILL
loses at most the step in flight. A run resumed from checkpoint S marks the rows of steps after
S `superseded` (they belong to the lost continuation) and logs those steps again; readers keep
the rows that are not superseded, so the lineage holds every step once. `metrics.parquet` is
the same rows in the declared `training_metrics` schema, rewritten atomically from the log.
Rows written before a column existed read as null in it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from schemashift import provenance
from schemashift.lineage import GO_NO_GO_FILE, GO_NO_GO_STEP, go_no_go
from schemashift.rollout.io import atomic_write, write_json
from schemashift.runs.tracking import SAMPLING_COLUMNS

LOG_NAME = "metrics.jsonl"
PARQUET_NAME = "metrics.parquet"


def sampling_metrics(logs: Mapping[str, Any]) -> dict[str, float | None]:
    """The sampling-correction columns of one TRL log (null where TRL logged none)."""
    return {column: logs.get(key) for key, column in SAMPLING_COLUMNS.items()}


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
        record = {"train_run": self.train_run, "superseded": False, "image": provenance.image(), **row}
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


def write_go_no_go(
    run_dir: str | Path, rows: Iterable[Mapping[str, Any]], at_step: int = GO_NO_GO_STEP
) -> dict | None:
    """Write the step-`at_step` decision (`schemashift.lineage.go_no_go`) once it can be made."""
    verdict = go_no_go(rows, at_step)
    if verdict is not None:
        write_json(Path(run_dir) / GO_NO_GO_FILE, verdict)
    return verdict
