"""A resumable sweep: its output folder keeps each finished cell as it lands, so a killed sweep
continues where it stopped.

`OUT/progress/<ruleset>/<scenario>/seed-<n>/sample-<k>.json` holds one cell's record, drift rows
and trajectory (`sample-<k>.control.json` the same cell in the control arm), written atomically;
a rerun plays only the cells not yet graded (infra_error
cells are retried) and then writes the result set from all cells. `OUT/<pin file>` pins the
sweep's run id and configuration digest: a different configuration in the same folder is
refused, so cells of two configurations never mix.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from schemashift.env.arms import DEFAULT_ARM, check_arm
from schemashift.rollout import io, resultset
from schemashift.rollout.records import RECORD_SCHEMA_VERSION, read_arm
from schemashift.rollout.runner import Cell, EpisodeResult

PROGRESS = "progress"


class SweepConflict(ValueError):
    """The output folder holds a sweep of another configuration or run, or an unreadable pin."""


def cell_name(ruleset: str, scenario: str, seed: int, sample_index: int, arm: str = DEFAULT_ARM) -> str:
    """Where a cell's progress is kept: the drift arm's name is the one every cell had before
    arms existed, any other arm's carries the arm (`sample-0.control.json`)."""
    suffix = "" if check_arm(arm) == DEFAULT_ARM else f".{arm}"
    return f"{ruleset}/{scenario}/seed-{seed}/sample-{sample_index}{suffix}.json"


class ResumableSweep:
    """The progress of one sweep in `out`, pinned by the file `pin_name`."""

    def __init__(self, out: str | Path, pin_name: str) -> None:
        self.out = Path(out)
        self.pin_name = pin_name
        self.progress = self.out / PROGRESS

    def pin(self, sweep_id: str | None, digest: str, invocation: dict[str, Any]) -> dict[str, Any]:
        """The run id and configuration of the folder, written on first use and checked on every
        rerun (a SweepConflict where they differ)."""
        path = self.out / self.pin_name
        if path.exists():
            try:
                pinned = json.loads(path.read_text())
            except ValueError as exc:
                raise SweepConflict(f"{path} is not valid JSON ({exc}); remove it to start over") from None
            if pinned.get("config_hash") != digest:
                raise SweepConflict(
                    f"--out {self.out} holds an evaluation with another configuration "
                    f"({pinned.get('config_hash')} != {digest}); use a new directory"
                )
            if sweep_id is not None and pinned.get("sweep_id") != sweep_id:
                raise SweepConflict(
                    f"--out {self.out} belongs to sweep {pinned.get('sweep_id')}, not {sweep_id}"
                )
            return pinned
        pinned = {"sweep_id": sweep_id or uuid.uuid4().hex, "config_hash": digest, "invocation": invocation}
        io.write_json(path, pinned)
        return pinned

    def note_applied(self, applied: dict[str, Any]) -> None:
        """Append what one invocation applied to the pin's `applied` list: settings that may
        change between resumes (a longer timeout for a slow server) without changing the
        configuration, so each is recorded as it was used rather than pinned."""
        path = self.out / self.pin_name
        pinned = json.loads(path.read_text())
        pinned.setdefault("applied", []).append(applied)
        io.write_json(path, pinned)

    def remove_leftovers(self) -> None:
        """The temporary files a killed sweep left: of the result set, the pin and the cells."""
        resultset.clean(self.out)
        io.remove_stale_temps(self.out, [self.pin_name])
        for directory, _, _ in os.walk(self.progress):
            io.remove_stale_temps(directory)

    def finished(self, cells: Sequence[Cell]) -> dict[int, EpisodeResult]:
        """Position -> stored result of every cell already graded under this record schema (a
        cell kept by an older version of the records is played again)."""
        done = {}
        for position, cell in enumerate(cells):
            stored = self._load(
                cell_name(cell.ruleset, cell.scenario, cell.seed, cell.sample_index, cell.arm)
            )
            if (
                stored is not None
                and stored.record.get("status") == "graded"
                and stored.record.get("record_version") == RECORD_SCHEMA_VERSION
                and read_arm(stored.record) == cell.arm
            ):
                done[position] = stored
        return done

    def persist(self, result: EpisodeResult) -> None:
        """Keep one cell's result as it lands."""
        record = result.record
        name = cell_name(
            record["ruleset"], record["scenario"], record["seed"], record["sample_index"], read_arm(record)
        )
        io.write_json(
            self.progress / name,
            {"record": record, "drifts": result.drifts, "trajectory": result.trajectory},
        )

    def _load(self, name: str) -> EpisodeResult | None:
        try:
            data = json.loads((self.progress / name).read_text())
            return EpisodeResult(data["record"], data["drifts"], data["trajectory"])
        except (OSError, ValueError, KeyError, TypeError):
            return None


def in_cell_order(
    count: int, finished: dict[int, EpisodeResult], fresh: Iterable[EpisodeResult]
) -> list[EpisodeResult]:
    """All `count` cells' results in cell order: the stored ones where they were finished, the
    freshly played ones (in the order of the cells they played) everywhere else."""
    played = iter(fresh)
    return [finished[p] if p in finished else next(played) for p in range(count)]
