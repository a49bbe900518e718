"""Helpers comparing the records of one sweep played on two backends."""

from __future__ import annotations

import json
from typing import Any

#: columns that may differ between two plays of the same cell
VOLATILE = frozenset({"run_id", "wall_s"})


def comparable(value: Any) -> Any:
    """A record as it is written (JSON types), without its volatile columns."""
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, (list, tuple)):
        return [comparable(v) for v in value]
    return value


def as_written(results) -> list[dict[str, Any]]:
    return [
        json.loads(
            json.dumps(comparable({"record": r.record, "drifts": r.drifts, "trajectory": r.trajectory}))
        )
        for r in results
    ]
