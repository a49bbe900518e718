"""Training's own live Trackio logging (`report_to: trackio`), in the benchmark's project.

The run logs into `runs.tracking.TRACKIO_PROJECT` under its own name (run id = name), grouped by
`<ruleset>/<reward>`, each optimizer step at its step as `train_verified/<column>`: the names
the report's export (`schemashift report trackio`) uses. Trackio stores the rows under
`$TRACKIO_DIR` (default: its cache folder), offline; nothing is sent to a Space.

A resumed run would log the steps after its checkpoint a second time (a sawtooth in the
dashboard): on start the logger rewrites the run to the committed lineage (the metric rows
`MetricsLog` keeps, superseded ones dropped) and logs on from there, so every step appears once
with its committed value. transformers' own Trackio callback logs without a step and appends on
resume, so the trainer does not use it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from schemashift.runs.tracking import TRACKIO_PROJECT, train_verified_metrics


class LiveTrackio:
    def __init__(
        self,
        run_name: str,
        group: str,
        lineage: Iterable[Mapping[str, Any]],
        config: Mapping[str, Any] | None = None,
        project: str = TRACKIO_PROJECT,
    ) -> None:
        from trackio.sqlite_storage import SQLiteStorage

        self.storage, self.project, self.run = SQLiteStorage, project, run_name
        SQLiteStorage.delete_run(project, run_name, run_id=run_name)
        self.config: dict[str, Any] | None = {**(config or {}), "_Group": group}
        rows = [row for row in lineage if not row.get("superseded")]
        if rows:
            self._log(rows)

    def log(self, row: Mapping[str, Any]) -> None:
        """Log one lineage row at its step (written at once: no background thread to flush)."""
        self._log([row])

    def _log(self, rows: list[Mapping[str, Any]]) -> None:
        self.storage.bulk_log(
            self.project,
            self.run,
            [train_verified_metrics(row) for row in rows],
            steps=[int(row["step"]) for row in rows],
            config=self.config,  # with the first rows (Trackio stores a config with metrics)
            run_id=self.run,
        )
        self.config = None
