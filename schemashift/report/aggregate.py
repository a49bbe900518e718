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
from schemashift.env.arms import DEFAULT_ARM
from schemashift.lineage import GO_NO_GO_FILE, RUN_INDEX, read_run_index
from schemashift.report import ReportError
from schemashift.report.load import (
    ARM,
    CELL_KEYS,
    EPISODES_FILE,
    MODEL_KEYS,
    TRAINING_FILE,
    TRAJECTORIES_FILE,
    CellFiles,
    arm_of,
    cell_key,
    find_cells,
    read_json,
    read_table,
)
from schemashift.rollout import records
from schemashift.rollout.subject import Subject

if TYPE_CHECKING:
    import pyarrow as pa

#: row order of the aggregated tables; the last keys only break ties between runs of one cell
EPISODE_ORDER = (*CELL_KEYS, ARM, "train_run", "checkpoint_step", "sweep_id")
DRIFT_ORDER = (*EPISODE_ORDER, "drift_index")
#: what a drift row shares with its episode besides the run id (drift rows carry no harness: a
#: run id is one sweep, so one harness); the arm too, so a control episode is never its drift twin
IDENTITY = ("ruleset", "policy", "train_run", "checkpoint_step", "scenario", "seed", "sample_index", ARM)
#: what identifies one episode: the same identity in two files means a cell was counted twice
EPISODE_IDENTITY = (*IDENTITY, "harness")
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

    No cell at all, a directory that is not one result set, a drift row of an episode its
    directory does not hold, an episode found in two places or a row with an unknown status
    raises ReportError naming the files.
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
        drifts = read_table(cell.drifts, "drifts")
        _check_drift_keys(cell, episodes, drifts)
        _check_trajectories(cell)
        for row in _rows(episodes, ["status", *EPISODE_IDENTITY]):
            if row["status"] not in STATUSES:
                raise ReportError(f"{cell.episodes}: unknown episode status {row['status']!r}")
            identity = tuple(row[key] for key in EPISODE_IDENTITY)
            if identity in seen:
                where = "twice in it" if seen[identity] == cell.episodes else f"also in {seen[identity]}"
                raise ReportError(
                    f"{cell.episodes}: the episode {_describe(row)} is {where}; pass the cell "
                    "directories so that each episode is found once"
                )
            seen[identity] = cell.episodes
        episode_tables.append(episodes)
        drift_tables.append(drifts)
    episodes = _sorted(pa.concat_tables(episode_tables), EPISODE_ORDER)
    drifts = _sorted(pa.concat_tables(drift_tables), DRIFT_ORDER)
    if episodes.num_rows == 0:
        raise ReportError(f"the {len(cells)} episodes file(s) under {', '.join(map(str, dirs))} hold no rows")
    return Merged(episodes, drifts, cells)


def _check_trajectories(cell: CellFiles) -> None:
    """The cell's trajectories file is complete: read to its end, its length and CRC checked,
    whether or not examples are asked for (a truncated file is refused, not half read)."""
    from schemashift.rollout import io

    try:
        io.count_lines(cell.directory / TRAJECTORIES_FILE)
    except ValueError as exc:
        raise ReportError(f"{exc}; rerun this cell") from None


def _check_drift_keys(cell: CellFiles, episodes: pa.Table, drifts: pa.Table) -> None:
    """Every drift row belongs to an episode of its own directory (same run id and cell)."""
    keys = ("sweep_id", *IDENTITY)
    known = {tuple(row[k] for k in keys) for row in _rows(episodes, keys)}
    for row in _rows(drifts, keys):
        if tuple(row[k] for k in keys) not in known:
            raise ReportError(
                f"{cell.drifts}: a drift row of sweep {row['sweep_id']} ({_describe(row)}) has no episode "
                f"in {cell.episodes}: the files do not belong together; rerun this cell"
            )


def _rows(table: pa.Table, keys: Sequence[str]) -> list[dict[str, Any]]:
    """`keys` of every row as dicts; `arm` filled with the drift arm where the table has no such
    column (written before arms existed) or a row holds null."""
    rows = table.select([k for k in keys if k in table.column_names]).to_pylist()
    if ARM in keys:
        for row in rows:
            row[ARM] = row.get(ARM) or DEFAULT_ARM
    return rows


def _describe(row: Mapping[str, Any]) -> str:
    shown = (k for k in EPISODE_IDENTITY if k != ARM or row.get(ARM, DEFAULT_ARM) != DEFAULT_ARM)
    return ", ".join(f"{key}={row[key]}" for key in shown if row.get(key) is not None)


def _sorted(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """`table` sorted by `keys`, nulls first (in Python, for the same order on every pyarrow)."""
    import pyarrow as pa

    columns = _rows(table, keys)
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

    A cell is one subject (a policy, or a training run's checkpoint) on one (ruleset, scenario,
    seed, sample); it is `missing` without rows, `infra_error` when its row is one and `graded`
    otherwise.
    """
    found: dict[tuple[Any, ...], set[str]] = {}
    first: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in _rows(episodes, ["status", *CELL_KEYS, *MODEL_KEYS, ARM]):
        key = cell_key(row)
        found.setdefault(key, set()).add(row["status"])
        first.setdefault(key, row)
    if expected is None:
        expected = [first[key] for key in sorted(found, key=_sort_key)]
    cells = []
    for cell in expected:
        statuses = found.get(cell_key(cell))
        if not statuses:
            status = "missing"
        elif "infra_error" in statuses:
            status = "infra_error"
        else:
            status = "graded"
        cells.append(
            {
                **{key: cell[key] for key in CELL_KEYS},
                **{key: cell.get(key) for key in MODEL_KEYS},
                **({ARM: cell[ARM]} if cell.get(ARM, DEFAULT_ARM) != DEFAULT_ARM else {}),
                "status": status,
            }
        )
    return cells


def _sort_key(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((0,) if v is None else (1, v) for v in key)


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
    training: Training | None = None,
) -> dict[str, Any]:
    """The manifest of an aggregate: code, environment, inputs, the status of every cell and, with
    training results, each run's metric rows, go/no-go record and run index."""
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
    keys = _rows(episodes, [*CELL_KEYS, *MODEL_KEYS, ARM])
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
            for column in (
                "env_version",
                "ruleset_version",
                "git_sha",
                "config_hash",
                "image",
                "generation_config",
            )
        },
        "cells": cells,
        "counts": count_statuses(cells),
        "training": training.runs if training is not None else {},
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


# -- training metrics and go/no-go records -----------------------------------------------------------


@dataclass
class Training:
    metrics: pa.Table
    runs: dict[str, dict[str, Any]] = field(default_factory=dict)


def merge_training(dirs: Iterable[str | Path]) -> Training:
    """Every training run's `metrics.parquet` (and `go_no_go.json` and the run index `run.json`
    beside it) under `dirs`.

    Rows without a run name get their directory's name. Two live (not superseded) rows for one
    run and step raise ReportError; superseded rows are kept, marked, for the record. The run
    index is what the report builds the run from (base model, checkpoints, reported step), so
    one that names another run than its metrics raises ReportError.
    """
    import pyarrow as pa

    tables, runs = [], {}
    seen: dict[tuple[str, int], Path] = {}
    for root in dirs:
        if not Path(root).is_dir():
            raise ReportError(f"{root}: no such directory")
        for path in sorted(Path(root).rglob(TRAINING_FILE)):
            if any(part.startswith(".") for part in path.relative_to(root).parts[:-1]):
                continue
            table = read_table(path, "training_metrics")
            if table.column("train_run").null_count:
                rows = [
                    {**row, "train_run": row["train_run"] or path.parent.name} for row in table.to_pylist()
                ]
                table = records.to_table(rows, records.TRAINING_METRICS_COLUMNS)
            live = 0
            for row in table.select(["train_run", "step", "superseded"]).to_pylist():
                if row["superseded"]:
                    continue
                live += 1
                key = (row["train_run"], row["step"])
                if key in seen:
                    raise ReportError(
                        f"{path}: run {key[0]} step {key[1]} has two live metric rows "
                        f"(also in {seen[key]}); mark the replaced one superseded"
                    )
                seen[key] = path
            go_path = path.parent / GO_NO_GO_FILE
            names = sorted(set(table.column("train_run").to_pylist()))
            index = _run_index(path.parent)
            if index is not None and index.get("train_run") not in names:
                raise ReportError(
                    f"{path.parent / RUN_INDEX}: indexes run {index.get('train_run')!r}, but the metrics "
                    f"beside it are of {', '.join(names)}"
                )
            for run in names:
                runs[run] = {
                    "metrics": str(path),
                    "rows": table.num_rows,
                    "live_rows": live,
                    "superseded_rows": table.num_rows - live,
                    "go_no_go": read_json(go_path, "go/no-go record") if go_path.is_file() else None,
                    "index": index if index is not None and index.get("train_run") == run else None,
                }
            tables.append(table)
    merged = pa.concat_tables(tables) if tables else records.to_table([], records.TRAINING_METRICS_COLUMNS)
    return Training(_sorted(merged, ("train_run", "step", "superseded")), runs)


def _run_index(run_dir: Path) -> dict[str, Any] | None:
    """The run index of a training run's folder (None where the run wrote none), as ReportError
    where it is unreadable."""
    try:
        index = read_run_index(run_dir)
    except (OSError, ValueError) as exc:
        raise ReportError(f"{run_dir / RUN_INDEX}: unreadable run index: {exc}") from None
    if index is not None and not isinstance(index, Mapping):
        raise ReportError(f"{run_dir / RUN_INDEX}: not a run index (a JSON object)")
    return index


# -- failed-episode examples -----------------------------------------------------------------------

EXAMPLES_PER_SUBJECT = 3
KEY_STEPS = 6
TEXT_LIMIT = 240


def failed_examples(
    cells: Sequence[CellFiles], per_subject: int = EXAMPLES_PER_SUBJECT
) -> list[dict[str, Any]]:
    """Up to `per_subject` failed graded episodes of every subject in the drift arm, as their key
    steps.

    Picked without randomness: the failures of a subject sorted by (scenario, seed, sample), then
    taken one scenario at a time (the first failure of each scenario, then the second...), so the
    examples cover different scenarios where there are any.
    """
    from schemashift.rollout import io

    failures: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for cell in cells:
        path = cell.directory / TRAJECTORIES_FILE
        if not path.is_file():
            continue
        try:
            for trajectory in io.read_jsonl(path):
                final = trajectory.get("final") or {}
                if trajectory.get("status") != "graded" or final.get("success") is not False:
                    continue
                if arm_of(trajectory) != DEFAULT_ARM:  # the examples show the drift arm's failures
                    continue
                subject = Subject.of_record(trajectory).label
                failures.setdefault((trajectory["ruleset"], subject), []).append(_example(trajectory))
        except (ValueError, KeyError) as exc:
            raise ReportError(f"{path}: unreadable trajectory: {exc}") from None
    examples = []
    for (ruleset, subject), found in sorted(failures.items()):
        found.sort(key=lambda e: (e["scenario"], e["seed"], e["sample_index"]))
        by_scenario: dict[str, list[dict[str, Any]]] = {}
        for example in found:
            by_scenario.setdefault(example["scenario"], []).append(example)
        picked: list[dict[str, Any]] = []
        depth = 0
        while len(picked) < per_subject and any(len(v) > depth for v in by_scenario.values()):
            picked += [v[depth] for v in by_scenario.values() if len(v) > depth][: per_subject - len(picked)]
            depth += 1
        examples += [{"ruleset": ruleset, "subject": subject, **e} for e in picked]
    return examples


def _example(trajectory: Mapping[str, Any]) -> dict[str, Any]:
    steps = trajectory.get("steps") or []
    final = trajectory.get("final") or {}
    keep = {0, len(steps) - 1}
    for i, step in enumerate(steps):
        response = step.get("response") or {}
        action_type = (step.get("action") or {}).get("type")
        if (
            step.get("drift_events")
            or step.get("invalid")
            or action_type in ("report_drift", "complete_task")
        ):
            keep.add(i)
        elif isinstance(response, Mapping) and response.get("ok") is False:
            keep.add(i)
    chosen = sorted(i for i in keep if 0 <= i < len(steps))
    if len(chosen) > KEY_STEPS:  # the first steps that matter and the end of the episode
        chosen = [*chosen[: KEY_STEPS - 1], chosen[-1]]
    return {
        "scenario": trajectory["scenario"],
        "seed": trajectory["seed"],
        "sample_index": trajectory.get("sample_index", 0),
        "steps": len(steps),
        "score": final.get("score"),
        "completion": final.get("completion"),
        "key_steps": [_step(steps[i]) for i in chosen],
    }


def _step(step: Mapping[str, Any]) -> dict[str, Any]:
    import json

    response = step.get("response")
    if isinstance(response, Mapping):
        response = {k: response.get(k) for k in ("status", "error", "body") if response.get(k) is not None}
    out = {
        "step": step.get("step"),
        "action": _clip(json.dumps(step.get("action"), ensure_ascii=False)),
        "response": _clip(json.dumps(response, ensure_ascii=False)),
        "drifts": [e.get("kind") for e in step.get("drift_events") or []],
    }
    if step.get("raw") is not None:
        out["raw"] = _clip(str(step["raw"]))
    return out


def _clip(text: str) -> str:
    return text if len(text) <= TEXT_LIMIT else text[: TEXT_LIMIT - 1] + "\u2026"


def write(
    merged: Merged,
    out_episodes: str | Path,
    out_drifts: str | Path,
    manifest_path: str | Path | None = None,
    expected: Sequence[Mapping[str, Any]] | None = None,
    config_hash: str | None = None,
    training: Training | None = None,
    out_training: str | Path | None = None,
    out_examples: str | Path | None = None,
) -> dict[str, Any] | None:
    """Write the merged tables, the training metrics, the failed-episode examples and the
    manifest as one set (`io.write_set`, episodes last): all or, after a kill, no episodes file.
    A killed aggregate's temporary files are removed first."""
    from schemashift.rollout import io

    document = None
    writers = {}
    if out_training is not None:
        writers[Path(out_training)] = io.parquet_writer((training or merge_training([])).metrics)
    if out_examples is not None:
        writers[Path(out_examples)] = io.json_writer(failed_examples(merged.cells))
    writers[Path(out_drifts)] = io.parquet_writer(merged.drifts)
    if manifest_path is not None:
        document = manifest(merged, manifest_path, expected, config_hash, training)
        writers[Path(manifest_path)] = io.json_writer(document)
    writers[Path(out_episodes)] = io.parquet_writer(merged.episodes)
    for target in writers:
        io.remove_stale_temps(target.parent, [target.name])
    io.write_set(writers, commit=Path(out_episodes))
    return document
