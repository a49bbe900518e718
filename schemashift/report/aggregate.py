"""Merge result cells into the aggregated tables and describe what ran in a manifest.

pyarrow only (no pandas), so the aggregate job of the workflow starts fast.
"""

from __future__ import annotations

import array
import importlib.metadata
import platform
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import schemashift
from schemashift.report import ReportError
from schemashift.report.load import (
    CELL_KEYS,
    EPISODES_FILE,
    CellFiles,
    cell_key,
    find_cells,
    read_json,
    read_table,
)
from schemashift.rollout import records

if TYPE_CHECKING:
    import pyarrow as pa

#: row order of the aggregated tables; the last keys only break ties between runs of one cell
EPISODE_ORDER = (*CELL_KEYS, "train_run", "checkpoint_step", "run_id")
DRIFT_ORDER = (*EPISODE_ORDER, "drift_index")
#: what identifies one episode: the same identity in two files means a cell was counted twice
IDENTITY = ("ruleset", "policy", "train_run", "checkpoint_step", "scenario", "seed", "sample_index")
STATUSES = ("graded", "infra_error")
#: packages whose versions the manifest records, when installed
PACKAGES = ("pyarrow", "pandas", "numpy", "matplotlib", "seaborn")
IMAGE_FILE = Path("containers") / "env.image.json"


@dataclass
class Merged:
    episodes: pa.Table
    drifts: pa.Table
    cells: list[CellFiles] = field(default_factory=list)


def merge(dirs: Iterable[str | Path], exclude: Iterable[str | Path] = ()) -> Merged:
    """Read and validate every cell under `dirs` and merge them, rows in a deterministic order.

    No cell at all, an episode found in two places or a row with an unknown status raises
    ReportError naming the files.
    """
    import pyarrow as pa

    dirs = list(dirs)
    cells = find_cells(dirs, exclude)
    if not cells:
        raise ReportError(f"no cells (no {EPISODES_FILE}) found under {', '.join(map(str, dirs))}")
    episode_tables, drift_tables = [], []
    seen: dict[tuple[Any, ...], Path] = {}
    for cell in cells:
        episodes = read_table(cell.episodes, "episodes")
        for row in episodes.select(["status", *IDENTITY]).to_pylist():
            if row["status"] not in STATUSES:
                raise ReportError(f"{cell.episodes}: unknown episode status {row['status']!r}")
            identity = tuple(row[key] for key in IDENTITY)
            if identity in seen:
                where = "twice in it" if seen[identity] == cell.episodes else f"also in {seen[identity]}"
                raise ReportError(
                    f"{cell.episodes}: the episode {_describe(row)} is {where}; pass the cell "
                    "directories so that each episode is found once"
                )
            seen[identity] = cell.episodes
        episode_tables.append(episodes)
        drift_tables.append(read_table(cell.drifts, "drifts"))
    episodes = _sorted(pa.concat_tables(episode_tables), EPISODE_ORDER)
    drifts = _sorted(pa.concat_tables(drift_tables), DRIFT_ORDER)
    if episodes.num_rows == 0:
        raise ReportError(f"the {len(cells)} episodes file(s) under {', '.join(map(str, dirs))} hold no rows")
    return Merged(episodes, drifts, cells)


def _describe(row: Mapping[str, Any]) -> str:
    return ", ".join(f"{key}={row[key]}" for key in IDENTITY if row.get(key) is not None)


def _sorted(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """`table` sorted by `keys`, nulls first (in Python, for the same order on every pyarrow)."""
    import pyarrow as pa

    columns = table.select(list(keys)).to_pylist()
    order = sorted(
        range(table.num_rows),
        key=lambda i: tuple((0,) if columns[i][k] is None else (1, columns[i][k]) for k in keys),
    )
    # indices from a buffer: pa.array(list) would import pandas (pyarrow checks for DataFrames)
    indices = pa.Array.from_buffers(pa.int64(), len(order), [None, pa.py_buffer(array.array("q", order))])
    return table.take(indices).combine_chunks()


def cell_statuses(
    episodes: pa.Table, expected: Sequence[Mapping[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Each expected cell (default: each cell with rows) with its status.

    A cell is `missing` without rows, `infra_error` when any of its rows is one (a cell has
    several rows only when several checkpoints of a policy ran) and `graded` otherwise.
    """
    found: dict[tuple[Any, ...], set[str]] = {}
    for row in episodes.select(["status", *CELL_KEYS]).to_pylist():
        found.setdefault(cell_key(row), set()).add(row["status"])
    if expected is None:
        expected = [dict(zip(CELL_KEYS, key, strict=True)) for key in sorted(found)]
    cells = []
    for cell in expected:
        statuses = found.get(cell_key(cell))
        if not statuses:
            status = "missing"
        elif "infra_error" in statuses:
            status = "infra_error"
        else:
            status = "graded"
        cells.append({**{key: cell[key] for key in CELL_KEYS}, "status": status})
    return cells


def count_statuses(cells: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    counts = {"graded": 0, "infra_error": 0, "missing": 0}
    for cell in cells:
        counts[cell["status"]] += 1
    return counts


def manifest(
    merged: Merged,
    manifest_path: str | Path,
    expected: Sequence[Mapping[str, Any]] | None = None,
    config_hash: str | None = None,
) -> dict[str, Any]:
    """The manifest of an aggregate: code, environment, inputs and the status of every cell."""
    from schemashift import provenance

    sha = provenance.git_sha()
    dirty = None if sha is None else sha.endswith("-dirty")
    if sha is not None:
        sha = sha.removesuffix("-dirty")
    cells = cell_statuses(merged.episodes, expected)
    image_path = Path(manifest_path).parent / IMAGE_FILE
    episodes = merged.episodes
    statuses = episodes.column("status").to_pylist()
    expected_keys = {cell_key(c) for c in cells}
    keys = episodes.select(list(CELL_KEYS)).to_pylist()
    return {
        "schemashift_version": schemashift.__version__,
        "record_schema_version": records.RECORD_SCHEMA_VERSION,
        "git_sha": sha,
        "git_dirty": dirty,
        "config_hash": config_hash,
        "python": platform.python_version(),
        "packages": _package_versions(),
        "image": read_json(image_path, "image description") if image_path.is_file() else None,
        "inputs": {
            "cell_dirs": len(merged.cells),
            "episodes": episodes.num_rows,
            "drifts": merged.drifts.num_rows,
            "graded": statuses.count("graded"),
            "infra_error": statuses.count("infra_error"),
            "not_expected": sum(1 for row in keys if cell_key(row) not in expected_keys),
        },
        "sources": {
            column: _distinct(episodes, column)
            for column in ("env_version", "ruleset_version", "git_sha", "config_hash")
        },
        "cells": cells,
        "counts": count_statuses(cells),
    }


def _distinct(table: pa.Table, column: str) -> list[Any]:
    """Distinct non-null values of a column, sorted: the provenance the rows themselves carry."""
    return sorted({value for value in table.column(column).to_pylist() if value is not None})


def _package_versions() -> dict[str, str]:
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return versions


def write(
    merged: Merged,
    out_episodes: str | Path,
    out_drifts: str | Path,
    manifest_path: str | Path | None = None,
    expected: Sequence[Mapping[str, Any]] | None = None,
    config_hash: str | None = None,
) -> dict[str, Any] | None:
    """Write the merged tables (drifts first, episodes last) and the manifest, each atomically."""
    from schemashift.rollout import io

    document = None
    if manifest_path is not None:
        document = manifest(merged, manifest_path, expected, config_hash)
    io.write_parquet(out_drifts, merged.drifts)
    io.write_parquet(out_episodes, merged.episodes)
    if manifest_path is not None:
        io.write_json(manifest_path, document)
    return document
