"""Finding and reading result files, validated against the declared record schemas.

The pyarrow functions (`find_cells`, `read_table`, `read_json`) serve `aggregate`, which must not
pay for pandas; the frame functions import pandas when called and serve the report parts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from schemashift.env.arms import ARMS, DEFAULT_ARM
from schemashift.report import ReportError
from schemashift.rollout import records, resultset
from schemashift.rollout.subject import Subject

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

EPISODES_FILE = resultset.EPISODES_FILE
DRIFTS_FILE = resultset.DRIFTS_FILE
#: the columns that identify an expected cell (the workflow's unit of work)
CELL_KEYS = ("ruleset", "policy", "scenario", "seed", "sample_index")
#: what tells model evaluations apart: the training run, the checkpoint's optimizer step and the
#: harness the model acted through
MODEL_KEYS = ("train_run", "checkpoint_step", "harness")
#: the column naming the arm a row was played in (`env.arms`); a row or file without it (written
#: before arms existed) and a null there are the drift arm, `DEFAULT_ARM`
ARM = "arm"
TRAJECTORIES_FILE = resultset.TRAJECTORIES_FILE
TRAINING_FILE = "metrics.parquet"
#: scenario difficulty tiers in display order; other tiers follow, sorted
#: the group of all scenarios together, beside the tiers and single scenarios
OVERALL = "overall"
TIER_ORDER = ("easy", "medium", "hard")


@dataclass(frozen=True)
class CellFiles:
    """The result files of one `schemashift run` output directory."""

    directory: Path
    episodes: Path
    drifts: Path


def find_cells(dirs: Iterable[str | Path], exclude: Iterable[str | Path] = ()) -> list[CellFiles]:
    """Every directory holding an `episodes.parquet` at or below `dirs`, in path order.

    Hidden directories (such as `.snakemake`) are skipped, a directory reached twice counts once
    and files in `exclude` (the aggregate's own outputs) are ignored. A directory whose three
    files are not one complete result set (`resultset.check`), or a `dirs` entry that is not a
    directory, raises ReportError.
    """
    excluded = {Path(p).resolve() for p in exclude}
    found: dict[Path, CellFiles] = {}
    for entry in dirs:
        root = Path(entry)
        if not root.exists():
            raise ReportError(f"{entry}: no such directory")
        if not root.is_dir():
            raise ReportError(f"{entry}: not a directory")
        for episodes in root.rglob(EPISODES_FILE):
            relative = episodes.relative_to(root).parts[:-1]
            if any(part.startswith(".") for part in relative) or episodes.resolve() in excluded:
                continue
            directory = episodes.parent
            key = directory.resolve()
            if key in found:
                continue
            try:
                resultset.check(directory)
            except resultset.MixedResultSet as exc:
                raise ReportError(str(exc)) from None
            found[key] = CellFiles(directory, episodes, directory / DRIFTS_FILE)
    return sorted(found.values(), key=lambda cell: cell.directory.parts)


def read_table(path: str | Path, table: str) -> pa.Table:
    """The Parquet file at `path` as a pyarrow Table of the declared `table` schema.

    The file must carry the current record schema version and exactly the declared columns and
    types; anything else raises ReportError naming the file and the difference.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    expected = records.schema(records.TABLES[table])
    try:
        found = pq.read_schema(path)
    except FileNotFoundError:
        raise ReportError(f"{path}: no such file") from None
    except (pa.ArrowException, OSError) as exc:
        raise ReportError(f"{path}: not a readable Parquet file: {exc}") from None
    metadata = found.metadata or {}
    version = metadata.get(records.VERSION_KEY.encode())
    if version is None:
        raise ReportError(
            f"{path}: no record schema version in its metadata ({records.VERSION_KEY}); "
            f"not a schemashift {table} file"
        )
    if version.decode() != str(records.RECORD_SCHEMA_VERSION):
        raise ReportError(
            f"{path}: written with record schema version {version.decode()}, but this schemashift "
            f"reads version {records.RECORD_SCHEMA_VERSION}; re-run that cell with this version"
        )
    name = metadata.get(records.TABLE_KEY.encode())
    if name is not None and name.decode() != table:
        raise ReportError(f"{path}: holds the {name.decode()!r} table, expected {table!r}")
    _check_fields(path, table, found, expected)
    try:
        # ParquetFile, not read_table: read_table goes through pyarrow.dataset, which imports pandas
        with pq.ParquetFile(path) as f:
            data = f.read()
    except (pa.ArrowException, OSError) as exc:
        raise ReportError(f"{path}: cannot read: {exc}") from None
    return pa.Table.from_arrays(data.columns, schema=expected)


def _check_fields(path: str | Path, table: str, found: pa.Schema, expected: pa.Schema) -> None:
    found_names, expected_names = found.names, expected.names
    missing = [n for n in expected_names if n not in found_names]
    extra = [n for n in found_names if n not in expected_names]
    problems = []
    if missing:
        problems.append(f"missing column(s) {', '.join(missing)}")
    if extra:
        problems.append(f"unknown column(s) {', '.join(extra)}")
    if not problems and found_names != expected_names:
        problems.append("columns in another order than declared")
    for field in expected:
        if field.name in found_names and not found.field(field.name).type.equals(field.type):
            problems.append(f"column {field.name} is {found.field(field.name).type}, declared {field.type}")
    if problems:
        raise ReportError(f"{path}: does not match the declared {table} schema: {'; '.join(problems)}")


def read_json(path: str | Path, what: str) -> Any:
    """The JSON document at `path`; a missing or malformed file raises ReportError naming `what`."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ReportError(f"{what} {path}: no such file") from None
    except OSError as exc:
        raise ReportError(f"{what} {path}: cannot read: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ReportError(f"{what} {path}: not UTF-8 text: {exc}") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ReportError(f"{what} {path}: malformed JSON: {exc}") from None
    except RecursionError:
        raise ReportError(f"{what} {path}: JSON nested too deeply") from None


def arm_of(row: Mapping[str, Any]) -> str:
    """The arm of a row, expected cell or trajectory: its `arm`, the drift arm where it names none."""
    return row.get(ARM) or DEFAULT_ARM


def read_expected_cells(path: str | Path) -> list[dict[str, Any]]:
    """The expected cells listed in a JSON file, validated.

    Each is `{"ruleset", "policy", "scenario", "seed"}` with optional `sample_index` (default 0),
    and for a model evaluation `train_run` (null for an untrained model), `checkpoint_step`
    (0 for the untrained base model) and `harness`; these default to null. `arm` (`env.arms`)
    defaults to the drift arm.
    """
    data = read_json(path, "expected cells")
    if not isinstance(data, list):
        raise ReportError(f"expected cells {path}: not a JSON list but {type(data).__name__}")
    cells = []
    for i, item in enumerate(data):
        where = f"expected cells {path}: entry {i}"
        if not isinstance(item, Mapping):
            raise ReportError(f"{where}: not an object")
        unknown = sorted(set(item) - set(CELL_KEYS) - set(MODEL_KEYS) - {ARM})
        if unknown:
            raise ReportError(f"{where}: unknown key(s) {', '.join(unknown)}")
        if arm_of(item) not in ARMS:
            raise ReportError(f"{where}: arm must be one of {', '.join(ARMS)}, got {item[ARM]!r}")
        cell = {"sample_index": 0, **dict.fromkeys(MODEL_KEYS), **item}
        for key in (*CELL_KEYS, *MODEL_KEYS):
            value = cell.get(key)
            integer = key in ("seed", "sample_index", "checkpoint_step")
            optional = key in MODEL_KEYS
            ok = (
                isinstance(value, int) and not isinstance(value, bool)
                if integer
                else isinstance(value, str) and value != ""
            ) or (optional and value is None)
            if not ok:
                kind = "an integer" if integer else "a non-empty string"
                raise ReportError(
                    f"{where}: {key} must be {kind}{' or null' if optional else ''}, got {value!r}"
                )
        cells.append({**{key: cell[key] for key in (*CELL_KEYS, *MODEL_KEYS)}, ARM: arm_of(cell)})
    return cells


def cell_key(row: Mapping[str, Any]) -> tuple[Any, ...]:
    """(ruleset, subject, scenario, seed, sample_index, arm): one expected cell of one evaluated
    subject in one arm (a control cell is never the drift cell of the same seed)."""
    label = Subject.of_record(row).label
    return (row["ruleset"], label, row["scenario"], row["seed"], row["sample_index"], arm_of(row))


def tier_rank(tier: str | None) -> tuple[int, str]:
    if tier in TIER_ORDER:
        return (TIER_ORDER.index(tier), "")
    return (len(TIER_ORDER), tier or "\uffff")


# -- pandas frames for the report parts -------------------------------------------------------------


def report_policies(rows: pd.DataFrame, expected: Iterable[Mapping[str, Any]]) -> list[str]:
    """Subject labels of a ruleset's rows plus expected subjects without any row, in display order."""
    kinds = dict(zip(rows["label"], rows["kind"], strict=True))
    for cell in expected:
        subject = Subject.of_record(cell)
        kinds.setdefault(subject.label, subject.kind)
    return sorted(kinds, key=lambda label: Subject.parse(label, kinds[label]).order)


def _subjects(frame: pd.DataFrame) -> list[Subject]:
    columns = [c for c in ("policy", "train_run", "checkpoint_step", "harness", "base_model") if c in frame]
    return [Subject.of_record(row) for row in frame[columns].to_dict("records")]


def with_arm(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its `arm` column filled: the drift arm where the column or a value is missing."""
    frame[ARM] = frame[ARM].fillna(DEFAULT_ARM) if ARM in frame else DEFAULT_ARM
    return frame


def episodes_frame(path: str | Path) -> pd.DataFrame:
    """The episodes file as a frame, with each row's subject's `label` and `kind` (`Subject`),
    `success` as 1.0/0.0/NaN and its `arm` (`with_arm`)."""
    frame = with_arm(read_table(path, "episodes").to_pandas())
    if frame.empty:
        raise ReportError(f"{path}: no episodes")
    unknown = sorted((set(frame["status"].dropna()) - {"graded", "infra_error"}) | _nulls(frame["status"]))
    if unknown:
        raise ReportError(f"{path}: unknown episode status(es) {', '.join(map(str, unknown))}")
    subjects = _subjects(frame)
    frame["label"] = [subject.label for subject in subjects]
    frame["kind"] = [subject.kind for subject in subjects]
    frame["success"] = frame["success"].map({True: 1.0, False: 0.0}).astype("float64")
    frame["score"] = frame["score"].astype("float64")
    return frame


def _nulls(series: pd.Series) -> set[str]:
    return {"null"} if series.isna().any() else set()


def drifts_frame(path: str | Path) -> pd.DataFrame:
    """The drifts file as a frame with each row's subject `label` and its `arm` (`with_arm`)."""
    frame = with_arm(read_table(path, "drifts").to_pandas())
    frame["label"] = [subject.label for subject in _subjects(frame)]
    return frame


def training_frame(path: str | Path) -> pd.DataFrame:
    """Training metrics, without the rows a resumed run superseded (the saved lineage)."""
    frame = read_table(path, "training_metrics").to_pandas()
    superseded = frame["superseded"].fillna(False).astype(bool)
    return frame[~superseded].sort_values(["train_run", "step"]).reset_index(drop=True)


def manifest_cells(manifest: Mapping[str, Any] | None, arm: str = DEFAULT_ARM) -> list[dict[str, Any]]:
    """The cells of `arm` a manifest lists (each with its status and `subject`), or none; a cell
    that names no arm is the drift arm's."""
    if not manifest:
        return []
    cells = []
    for cell in manifest.get("cells") or []:
        if arm_of(cell) != arm:
            continue
        cell = {"train_run": None, "checkpoint_step": None, **cell}
        cells.append({**cell, "subject": cell_key(cell)[1]})
    return cells


def coverage(episodes: pd.DataFrame, manifest: Mapping[str, Any] | None, ruleset: str) -> dict[str, Any]:
    """Graded and infra_error episode counts of a ruleset's drift arm, and the expected cells of
    that arm that are missing."""
    rows = episodes[episodes["ruleset"] == ruleset]
    if ARM in rows:
        rows = rows[rows[ARM].fillna(DEFAULT_ARM) == DEFAULT_ARM]
    cells = [c for c in manifest_cells(manifest) if c.get("ruleset") == ruleset]
    missing = [c for c in cells if c.get("status") == "missing"]
    return {
        "graded": int((rows["status"] == "graded").sum()),
        "infra_error": int((rows["status"] == "infra_error").sum()),
        "expected": len(cells) if manifest else None,
        "missing": len(missing) if manifest else None,
        "missing_cells": missing,
    }


def coverage_text(cov: Mapping[str, Any]) -> str:
    def plural(n: int, word: str) -> str:
        return f"{n} {word}" + ("" if n == 1 else "s")

    text = (
        f"{plural(cov['graded'], 'graded episode')} in the means; "
        f"{plural(cov['infra_error'], 'infra_error episode')} excluded"
    )
    if cov["expected"] is None:
        return text + "; no manifest, so missing cells are unknown."
    return text + f"; {cov['missing']} of {plural(cov['expected'], 'expected cell')} missing."


def sorted_scenarios(scenarios: Iterable[str], tiers: Mapping[str, str | None]) -> list[str]:
    return sorted(set(scenarios), key=lambda s: (tier_rank(tiers.get(s)), s))


def catalogue_tier(ruleset: str, scenario: str) -> str | None:
    """A scenario's tier from the ruleset catalogue, for cells that have no rows."""
    try:
        from schemashift.env.rulesets import get_ruleset

        return get_ruleset(ruleset).scenario_info(scenario).tier
    except Exception:  # noqa: BLE001 - an unknown ruleset or scenario just has no tier
        return None


# -- the run configuration ---------------------------------------------------------------------------


def read_config(path: str | Path | None) -> dict[str, Any]:
    """The workflow configuration (JSON or YAML): which models and training runs there are.

    Only `models`, `train` (its runs, defaults and `enabled`), `report` and `trains_here` are
    read; anything missing is empty. `trains_here` is whether training runs on the machine that
    ran the workflow (`report_config.json` records it; null where unknown). A file that is not a
    mapping raises ReportError.
    """
    if path is None:
        return {"models": {}, "train": {"runs": {}, "defaults": {}}, "report": {}, "trains_here": None}
    text_path = Path(path)
    if text_path.suffix in (".yaml", ".yml"):
        import yaml

        try:
            data = yaml.safe_load(text_path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ReportError(f"config {path}: cannot read: {exc}") from None
        except UnicodeDecodeError as exc:
            raise ReportError(f"config {path}: not UTF-8 text: {exc}") from None
        except (yaml.YAMLError, ValueError, RecursionError) as exc:
            # ValueError: an integer beyond Python's digit limit; RecursionError: nesting
            raise ReportError(f"config {path}: malformed YAML: {type(exc).__name__}: {exc}") from None
    else:
        data = read_json(path, "config")
    if not isinstance(data, Mapping):
        raise ReportError(f"config {path}: not a mapping")
    train = dict(data.get("train") or {})
    return {
        "models": dict(data.get("models") or {}),
        "train": {
            "runs": dict(train.get("runs") or {}),
            "defaults": dict(train.get("defaults") or {}),
            "enabled": train.get("enabled", "auto"),
        },
        "report": dict(data.get("report") or {}),
        "trains_here": data.get("trains_here"),
    }


def read_examples(path: str | Path | None) -> list[dict[str, Any]]:
    """The failed-episode examples `schemashift aggregate --out-examples` wrote, or none."""
    if path is None:
        return []
    data = read_json(path, "examples")
    if not isinstance(data, list):
        raise ReportError(f"examples {path}: not a JSON list")
    return data
