"""The `arm` column and the arm-aware reset the report's control-arm tests need, until the
records and the runner carry them (branch arm-plumb: `arm` in every record, RECORD_SCHEMA_VERSION
5, the runner resetting its backend in the cell's arm).

`declared()` declares `arm` in the episode and drift schemas for the duration of a block where
this checkout's records do not (a no-op once they do), and `ArmBackend` is the in-process backend
resetting in the arm of the cell the runner plays (it takes the runner's `arm` where the runner
passes one). Everything else is the real thing: `Environment.reset(scenario, seed, arm=...)`, the
runner's `play_episode` and its writers.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from schemashift.env.arms import DEFAULT_ARM
from schemashift.rollout import records
from schemashift.rollout.backends import InProcessBackend

ARM_COLUMN = records.Column("arm", "string", True, "Arm the episode was played in: drift or control.")


def has_arm() -> bool:
    """Whether this checkout's records declare `arm` (arm-plumb landed, or inside `declared()`)."""
    return any(c.name == ARM_COLUMN.name for c in records.EPISODE_COLUMNS)


@contextmanager
def declared() -> Iterator[None]:
    """The episode and drift schemas with an `arm` column for the block, where they lack one."""
    if has_arm():
        yield
        return
    episodes, drifts, tables = records.EPISODE_COLUMNS, records.DRIFT_COLUMNS, dict(records.TABLES)
    records.EPISODE_COLUMNS = (*episodes, ARM_COLUMN)
    records.DRIFT_COLUMNS = (*drifts, ARM_COLUMN)
    records.TABLES.update(episodes=records.EPISODE_COLUMNS, drifts=records.DRIFT_COLUMNS)
    try:
        yield
    finally:
        records.EPISODE_COLUMNS, records.DRIFT_COLUMNS = episodes, drifts
        records.TABLES.clear()
        records.TABLES.update(tables)


class ArmBackend(InProcessBackend):
    """The in-process backend, resetting in `arm` (or the arm the runner passes)."""

    def __init__(self, arm: str = DEFAULT_ARM) -> None:
        super().__init__()
        self.arm = arm

    def reset(self, ruleset: str, scenario: str, seed: int, arm: str | None = None) -> dict[str, Any]:
        super().reset(ruleset, scenario, seed)  # picks (and caches) the ruleset's environment
        return self._env.reset(scenario, seed, arm=arm or self.arm)


def mark_arm(result: Any, arm: str) -> None:
    """Write the cell's arm into its episode, drift and trajectory rows, where the records declare
    the column (the runner writes it itself once arm-plumb lands)."""
    if not has_arm():
        return
    result.record.setdefault("arm", arm)
    for row in result.drifts:
        row.setdefault("arm", arm)
    result.trajectory.setdefault("arm", arm)
