"""`schemashift validate`: check a results folder by re-grading it, so a published number can be
checked by anyone with the folder and the code.

Every result set under the folder (episodes, drifts, trajectories) is re-graded: each graded
episode's trajectory is replayed in-process through the runner's own bookkeeping and must give
the recorded row (every column but what the policy side measured: tokens, parse failures, wall
time, package version) and drift rows. Then the settings the folder declares are checked against
what the records show: the aggregate's `manifest.json` at the top (record version, sources such
as ruleset versions and generation configs, every cell with its harness, seed and status, the
counts, and the merged tables beside it) and each evaluation's `eval.json` beside its result set
(policy, ruleset and version, the scenarios x seeds x samples, generation config with its
harness, run id and config digest).
`differences` yields what disagrees, first found first.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from schemashift.env.arms import DEFAULT_ARM
from schemashift.env.rulesets import UnknownRuleset, get_ruleset
from schemashift.rollout import io, resultset
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.records import read_arm
from schemashift.rollout.replay import ReplayError, trajectory_actions
from schemashift.rollout.runner import Cell, EpisodeRecorder, SweepContext

MANIFEST = "manifest.json"
EVAL_PIN = "eval.json"
#: what identifies an episode among a folder's rows (as the aggregate and its manifest key cells)
IDENTITY = (
    "ruleset",
    "policy",
    "train_run",
    "checkpoint_step",
    "harness",
    "scenario",
    "seed",
    "sample_index",
    "arm",
)
#: columns the policy side or the machine measured, which a replay cannot give again
NOT_REGRADED = frozenset({"wall_s", "tokens_in", "tokens_out", "parse_failures", "env_version"})
#: the manifest's `sources` (distinct values of these columns over every row)
SOURCES = ("env_version", "ruleset_version", "git_sha", "config_hash", "image", "generation_config")


def differences(root: str | Path) -> Iterator[str]:
    """Every disagreement found in the results folder `root`, as one line each."""
    root = Path(root)
    sets = result_sets(root)
    if not sets:
        yield f"{root}: no result set (episodes.parquet beside trajectories.jsonl.gz) to re-grade"
        return
    rows: list[dict[str, Any]] = []
    for directory in sets:
        try:
            resultset.check(directory)
        except resultset.MixedResultSet as exc:
            yield str(exc)
            return
        found = io.read_parquet_rows(directory / resultset.EPISODES_FILE)
        yield from regrade(directory, found)
        if (directory / EVAL_PIN).is_file():
            yield from check_eval_pin(directory / EVAL_PIN, _read_json(directory / EVAL_PIN), found)
        rows += found
    if (root / MANIFEST).is_file():
        yield from check_manifest(root, _read_json(root / MANIFEST), rows)


def result_sets(root: Path) -> list[Path]:
    """The folders under `root` holding a result set, in path order (hidden folders skipped)."""
    found = []
    for episodes in sorted(root.rglob(resultset.EPISODES_FILE)):
        relative = episodes.relative_to(root).parts[:-1]
        if any(part.startswith(".") for part in relative):
            continue
        if (episodes.parent / resultset.TRAJECTORIES_FILE).is_file():
            found.append(episodes.parent)
    return found


def describe(row: dict[str, Any]) -> str:
    subject = row["policy"]
    if row.get("train_run") is not None:
        subject += f" ({row['train_run']} step {row.get('checkpoint_step')})"
    if row.get("harness") is not None:
        subject += f" [{row['harness']}]"
    arm = read_arm(row)
    where = f"{row['ruleset']}/{subject}/{row['scenario']} seed {row['seed']} sample {row['sample_index']}"
    return where if arm == DEFAULT_ARM else f"{where} ({arm} arm)"


def regrade(directory: Path, rows: list[dict[str, Any]]) -> Iterator[str]:
    """Replay every graded episode of one result set and compare with its rows."""
    trajectories = {_key(t): t for t in io.read_jsonl(directory / resultset.TRAJECTORIES_FILE)}
    drifts: dict[tuple, list[dict[str, Any]]] = {}
    for drift in io.read_parquet_rows(directory / resultset.DRIFTS_FILE):
        drifts.setdefault(_key(drift), []).append(drift)
    for row in rows:
        where = f"{directory}: {describe(row)}"
        trajectory = trajectories.get(_key(row))
        if trajectory is None:
            yield f"{where}: no trajectory to replay"
            continue
        if row["status"] != "graded":
            continue
        try:
            replayed = replay_row(row, trajectory)
        except (ReplayError, UnknownRuleset, KeyError, ValueError) as exc:
            yield f"{where}: cannot replay its trajectory: {exc}"
            continue
        for column, value in replayed.record.items():
            if column not in NOT_REGRADED and not same(row.get(column), value):
                yield f"{where}: {column} recorded {row.get(column)!r}, re-graded {value!r}"
                break
        stored = sorted(drifts.get(_key(row), []), key=lambda d: d["drift_index"])
        if len(stored) != len(replayed.drifts):
            yield f"{where}: {len(stored)} drift rows recorded, re-graded {len(replayed.drifts)}"
            continue
        for recorded, again in zip(stored, replayed.drifts, strict=True):
            column = next((c for c, v in again.items() if not same(recorded.get(c), v)), None)
            if column is not None:
                yield (
                    f"{where}: drift {again['drift_index']} {column} recorded {recorded.get(column)!r}, "
                    f"re-graded {again[column]!r}"
                )
                break


def replay_row(row: dict[str, Any], trajectory: dict[str, Any]) -> Any:
    """The records of a stored episode played again from its trajectory's actions, under the
    row's own identity and provenance."""
    ruleset = get_ruleset(row["ruleset"])
    if row["ruleset_version"] != ruleset.version:
        raise ValueError(
            f"recorded under {row['ruleset']} version {row['ruleset_version']}, this schemashift has "
            f"{ruleset.version}"
        )
    drawn = ruleset.build_task(row["scenario"], row["seed"]).salt_id
    if row.get("salt_id") != drawn:
        raise ValueError(
            f"drawn under salt id {row.get('salt_id') or 'none'}, this process draws it under "
            f"{drawn or 'none'} (set SCHEMASHIFT_SALT to the run's salt)"
        )
    context = SweepContext(**{name: row.get(name) for name in SweepContext.__dataclass_fields__})
    cell = Cell(row["ruleset"], row["scenario"], row["seed"], row["sample_index"], read_arm(row))
    actions, tokens = trajectory_actions(trajectory)
    recorder = EpisodeRecorder(InProcessBackend(), cell, context)
    observation = recorder.start()
    for action, used in zip(actions, tokens, strict=True):
        if observation["done"]:
            break
        observation = recorder.apply(action, (used, 0))
    return recorder.finish()


def check_manifest(root: Path, manifest: dict[str, Any], rows: list[dict[str, Any]]) -> Iterator[str]:
    """The aggregate's manifest against the rows of every result set under `root`."""
    where = root / MANIFEST
    versions = sorted({row["record_version"] for row in rows})
    if versions != [manifest.get("record_schema_version")]:
        declared = manifest.get("record_schema_version")
        yield f"{where}: record_schema_version {declared!r}, the records show {versions}"
        return
    for column in SOURCES:
        shown = sorted({row.get(column) for row in rows if row.get(column) is not None})
        declared = (manifest.get("sources") or {}).get(column)
        if declared is not None and declared != shown:
            yield f"{where}: sources.{column} {declared!r}, the records show {shown!r}"
            return
    by_key = {_key(row): row for row in rows}
    listed = set()
    for cell in manifest.get("cells") or []:
        key = _key(cell)
        listed.add(key)
        row = by_key.get(key)
        status = row["status"] if row is not None else "missing"
        if cell.get("status") != status:
            if row is not None:
                shown = f"the records show {status!r}"
            else:
                closest = _closest(cell, rows)
                shown = "the records hold no such episode" + (f" (theirs has {closest})" if closest else "")
            yield f"{where}: cell {describe(cell)} is {cell.get('status')!r} there, {shown}"
            return
    inputs = manifest.get("inputs") or {}
    statuses = [row["status"] for row in rows]
    shown = {
        "episodes": len(rows),
        "graded": statuses.count("graded"),
        "infra_error": statuses.count("infra_error"),
        "not_expected": sum(1 for key in by_key if key not in listed),
    }
    for name, count in shown.items():
        if name in inputs and inputs[name] != count:
            yield f"{where}: inputs.{name} {inputs[name]!r}, the records show {count}"
            return
    merged = root / resultset.EPISODES_FILE
    if merged.is_file() and not (root / resultset.TRAJECTORIES_FILE).is_file():
        yield from _check_merged(merged, by_key)


def _check_merged(merged: Path, by_key: dict[tuple, dict[str, Any]]) -> Iterator[str]:
    """The aggregated episodes table (what the report reads) against the result sets' rows."""
    table = io.read_parquet_rows(merged)
    if len(table) != len(by_key):
        yield f"{merged}: {len(table)} episodes, the result sets hold {len(by_key)}"
        return
    for row in table:
        original = by_key.get(_key(row))
        if original is None:
            yield f"{merged}: {describe(row)} is in no result set"
            return
        column = next((c for c, v in row.items() if not same(original.get(c), v)), None)
        if column is not None:
            yield (
                f"{merged}: {describe(row)}: {column} {row[column]!r}, "
                f"its result set has {original.get(column)!r}"
            )
            return


def check_eval_pin(path: Path, pin: dict[str, Any], rows: list[dict[str, Any]]) -> Iterator[str]:
    """An evaluation's pinned invocation against its rows."""
    invocation = pin.get("invocation") or {}
    generation = invocation.get("generation_config")
    try:
        harness = json.loads(generation).get("harness") if isinstance(generation, str) else None
    except ValueError:
        harness = None
    declared = {
        "policy": invocation.get("policy"),
        "ruleset": invocation.get("ruleset"),
        "ruleset_version": invocation.get("ruleset_version"),
        "generation_config": generation,
        "harness": harness,
        "train_run": invocation.get("train_run"),
        "checkpoint_step": invocation.get("checkpoint_step"),
        "sweep_id": pin.get("sweep_id"),
        "config_hash": pin.get("config_hash"),
    }
    for column, value in declared.items():
        shown = sorted({json.dumps(row.get(column)) for row in rows})
        if shown != [json.dumps(value)]:
            yield f"{path}: {column} {value!r}, the records show {', '.join(shown)}"
            return
    samples = invocation.get("samples") or 1
    expected = sorted(
        (scenario, seed, sample, arm)
        for scenario in invocation.get("scenarios") or []
        for seed in invocation.get("seeds") or []
        for sample in range(samples)
        # an evaluation pinned without arms played the drift arm alone
        for arm in invocation.get("arms") or [DEFAULT_ARM]
    )
    played = sorted((row["scenario"], row["seed"], row["sample_index"], read_arm(row)) for row in rows)
    if played != expected:
        extra = sorted(set(played) - set(expected))[:3]
        missing = sorted(set(expected) - set(played))[:3]
        yield (
            f"{path}: scenarios x seeds x samples x arms declare {len(expected)} cells, the records hold "
            f"{len(played)} (not declared: {extra}; not played: {missing})"
        )


def _closest(cell: dict[str, Any], rows: list[dict[str, Any]]) -> str | None:
    """The settings a row of the same (ruleset, policy, scenario, seed, sample) shows, where the
    manifest's cell differs from it in harness or checkpoint."""
    for row in rows:
        if all(row.get(k) == cell.get(k) for k in ("ruleset", "policy", "scenario", "seed", "sample_index")):
            differ = [
                f"{k} {value!r}"
                for k, value, other in zip(IDENTITY, _key(row), _key(cell), strict=True)
                if value != other
            ]
            return ", ".join(differ)
    return None


def _key(row: dict[str, Any]) -> tuple:
    """A row's (or a manifest cell's) IDENTITY; one without an arm was played in the drift arm."""
    return tuple(read_arm(row) if k == "arm" else row.get(k) for k in IDENTITY)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def _read_json(path: Path) -> dict[str, Any]:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, an integer past Python's limit
        raise ValueError(f"{path}: not JSON ({exc})") from None
    except RecursionError:
        raise ValueError(f"{path}: JSON nested too deeply") from None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: not a JSON object")
    return document
