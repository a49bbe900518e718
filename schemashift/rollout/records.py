"""Versioned record schemas for rollouts and training, declared once as plain data.

Every table that runs, replays and training write is described here and nowhere else: the
Parquet schemas, the row validation and the column documentation are all derived from these
declarations. pyarrow is imported only when a schema or table is built, so importing this module
stays standard-library only.

All columns are nullable and null means "unknown", never zero. Bump RECORD_SCHEMA_VERSION when a
column is renamed, removed or changes meaning; readers compare it with the schema metadata.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

RECORD_SCHEMA_VERSION = 5
#: what each version changed, newest first (docs/records.md shows it)
CHANGES = {
    5: "the `arm` column (episodes, drifts and trajectories): `drift` or `control` (`schemashift.env.arms`); "
    "rows of version 4 and older carry none and were all played in the drift arm, so readers take a missing "
    "arm as `drift` (`read_arm`). The episodes' `salt_id` column: the digest naming the salt a held-out v1 "
    "test task was drawn under (older rows: none was).",
}

#: schema metadata keys (Parquet files carry them in their footer)
VERSION_KEY = "schemashift.record_version"
TABLE_KEY = "schemashift.table"

ARROW_TYPES = ("bool", "int32", "int64", "float64", "string")


@dataclass(frozen=True)
class Column:
    """One column: its name, arrow type name (one of ARROW_TYPES), nullability and meaning."""

    name: str
    type: str
    nullable: bool
    doc: str


def _columns(*specs: tuple[str, str, str]) -> tuple[Column, ...]:
    return tuple(Column(name, type_, True, doc) for name, type_, doc in specs)


_RECORD_VERSION = ("record_version", "int32", "Record schema version the row was written with.")
_SWEEP_ID = (
    "sweep_id",
    "string",
    "Identifier of the sweep that wrote the row: one `schemashift run` or `eval` (policy x ruleset x cells).",
)
_TRAIN_RUN = (
    "train_run",
    "string",
    "Training run behind the row: of the evaluated checkpoint (its manifest's), or of the metrics row.",
)
_RULESET = ("ruleset", "string", "Ruleset name the episode ran under, e.g. legacy.")
_HARNESS = (
    "harness",
    "string",
    "Prompting/parsing harness that wraps the policy: `default` (JSON actions in text), `tools` "
    "(native tool calling), `legacy` (the original prompt); null for rule baselines.",
)
_POLICY = ("policy", "string", "Policy name, e.g. oracle or a model policy.")
_CHECKPOINT_STEP = (
    "checkpoint_step",
    "int64",
    "Optimizer step of the evaluated checkpoint (its manifest's); 0 for a local model evaluated as it "
    "is (step 0 of every run from it); null where unknown (API models, an adapter without a manifest).",
)
_SCENARIO = ("scenario", "string", "Scenario id.")
_SEED = ("seed", "int64", "Seed the task instance was drawn with.")
_SAMPLE_INDEX = ("sample_index", "int32", "Index of the sample when a (scenario, seed) is run repeatedly.")
_ARM = (
    "arm",
    "string",
    "Arm the episode was played in: `drift` (the task with its drift plan) or `control` (the same world, "
    "task text and seed with the drift plan off); the paired difference is what drift costs.",
)
_CONFIG_HASH = ("config_hash", "string", "Digest of the resolved run configuration.")
_GIT_SHA = ("git_sha", "string", "Commit of the code that wrote the row.")
_IMAGE = (
    "image",
    "string",
    "Container image the row was made in: the project image's tag (`localhost/schemashift-<name>:<digest>`, "
    "the digest of what it holds), or `host` outside the project's images.",
)

EPISODE_COLUMNS = _columns(
    _RECORD_VERSION,
    _SWEEP_ID,
    _TRAIN_RUN,
    _RULESET,
    ("ruleset_version", "string", "Version string of the ruleset."),
    ("env_version", "string", "schemashift package version."),
    _POLICY,
    ("base_model", "string", "Base model id of a model policy."),
    ("adapter_sha256", "string", "SHA-256 of the LoRA adapter weights, if any."),
    _CHECKPOINT_STEP,
    _HARNESS,
    _SCENARIO,
    ("family", "string", "Scenario family."),
    ("tier", "string", "Scenario difficulty tier."),
    _SEED,
    ("split", "string", "Seed split (e.g. train, eval) the seed belongs to."),
    (
        "salt_id",
        "string",
        "Recorded name (a digest) of the salt a held-out v1 test task was drawn under; null where none was.",
    ),
    _SAMPLE_INDEX,
    _ARM,
    ("status", "string", "graded: the episode ran and was scored; infra_error: it could not be scored."),
    ("error", "string", "Error message of an infra_error episode."),
    ("success", "bool", "Whether the ruleset counts the episode as solved."),
    ("score", "float64", "Headline per-episode score of the ruleset."),
    ("completion", "float64", "Rubric component: share of success criteria met."),
    ("drift_detection", "float64", "Rubric component: drift detection."),
    ("adaptation", "float64", "Rubric component: adaptation after drift."),
    ("efficiency", "float64", "Rubric component: step efficiency."),
    ("shaped_total", "float64", "Shaped reward of the final step."),
    ("binary", "float64", "Binary success reward (1.0 or 0.0)."),
    ("cumulative_reward", "float64", "Sum of per-step shaped rewards."),
    ("training_reward", "float64", "Reward a trainer would assign to the episode."),
    ("schedule_hash", "string", "Digest of the drift schedule; equal schedules hash equally."),
    ("catastrophe", "bool", "Whether a catastrophic action happened."),
    ("invalid_actions", "int32", "Actions the ruleset rejected or recorded as invalid."),
    ("drifts_discovered", "int32", "Fired drifts with evidence seen on the drifted tool."),
    ("drifts_recovered", "int32", "Drifts followed by a successful call after a failure."),
    ("steps_to_recover", "float64", "Mean steps from first failure to recovery over recovered drifts."),
    ("deprecated_calls", "int32", "Tool calls answered 410 (deprecated endpoint)."),
    ("steps", "int32", "Steps taken."),
    ("max_steps", "int32", "Step limit of the scenario."),
    ("final_action", "string", "Type of the last action taken."),
    ("tool_calls", "int32", "Tool calls and retries that reached a tool."),
    ("failed_calls", "int32", "Tool calls that failed."),
    ("parse_failures", "int32", "Policy outputs that could not be parsed into an action."),
    ("drifts_fired", "int32", "Planned drifts that fired."),
    ("drifts_detected", "int32", "Drifts the agent reported correctly."),
    ("tokens_in", "int64", "Prompt tokens consumed by the policy."),
    ("tokens_out", "int64", "Tokens generated by the policy."),
    ("wall_s", "float64", "Wall-clock seconds the episode took."),
    ("generation_config", "string", "Sampling configuration of a model policy, as JSON text."),
    _CONFIG_HASH,
    _GIT_SHA,
    _IMAGE,
)

DRIFT_COLUMNS = _columns(
    _RECORD_VERSION,
    _SWEEP_ID,
    _TRAIN_RUN,
    _RULESET,
    _POLICY,
    _CHECKPOINT_STEP,
    _HARNESS,
    _SCENARIO,
    _SEED,
    _SAMPLE_INDEX,
    _ARM,
    ("drift_index", "int32", "Position of the drift in the episode's drift plan."),
    ("kind", "string", "Drift kind, e.g. field_rename."),
    ("tool", "string", "Tool the drift changes."),
    ("endpoint", "string", "Endpoint the drift changes; null for a tool-wide drift."),
    (
        "planned_step",
        "int32",
        "Step the drift was scheduled to fire at; null where drifts fire on the agent's own calls "
        "(v1: the schedule's `on_call`).",
    ),
    ("fired_step", "int32", "Step the drift fired at; null if the episode ended first."),
    ("discovered_step", "int32", "First step at or after firing with evidence on the drifted tool."),
    ("reported_step", "int32", "Step the agent reported the drift correctly."),
    ("failed_step", "int32", "First failed call on the drifted tool at or after firing."),
    ("recovered_step", "int32", "First successful call on the drifted tool after that failure."),
    ("steps_to_recover", "int32", "recovered_step - failed_step."),
)

TRAINING_METRICS_COLUMNS = _columns(
    _RECORD_VERSION,
    _TRAIN_RUN,
    ("step", "int64", "Optimizer step."),
    ("reward_mean", "float64", "Mean total reward over the step's completions."),
    ("reward_std", "float64", "Standard deviation of the total reward."),
    ("reward_min", "float64", "Minimum total reward."),
    ("reward_max", "float64", "Maximum total reward."),
    ("reward_completion", "float64", "Mean completion reward component."),
    ("reward_drift_detection", "float64", "Mean drift-detection reward component."),
    ("reward_adaptation", "float64", "Mean adaptation reward component."),
    ("reward_efficiency", "float64", "Mean efficiency reward component."),
    ("reward_success", "float64", "Mean binary success reward component."),
    ("reward_shaping", "float64", "Mean dense shaping reward component."),
    ("loss", "float64", "Training loss."),
    ("kl", "float64", "KL divergence from the reference policy."),
    ("grad_norm", "float64", "Gradient norm before clipping."),
    ("learning_rate", "float64", "Learning rate at the step."),
    (
        "is_ratio_min",
        "float64",
        "Smallest importance-sampling ratio (trainer over engine probability of a sampled token, "
        "after TRL's truncation); null where the stack does not correct for its engine (not vLLM).",
    ),
    ("is_ratio_mean", "float64", "Mean importance-sampling ratio; near 1 when engine and trainer agree."),
    ("is_ratio_max", "float64", "Largest importance-sampling ratio (at most the truncation bound)."),
    (
        "logp_diff_mean",
        "float64",
        "Mean absolute difference of engine and trainer log-probability of the sampled tokens.",
    ),
    ("logp_diff_max", "float64", "Largest absolute engine/trainer log-probability difference."),
    ("completion_tokens", "float64", "Mean tokens per completion."),
    ("tool_calls_per_episode", "float64", "Mean tool calls per rollout episode."),
    ("seconds_per_step", "float64", "Wall-clock seconds the step took."),
    ("peak_gpu_mem_gb", "float64", "Peak GPU memory allocated, in GiB."),
    ("gpu_type", "string", "GPU model name."),
    ("gpu_count", "int32", "Number of GPUs used."),
    ("superseded", "bool", "True when a resumed run rewrote this step; readers keep the latest."),
    _CONFIG_HASH,
    _GIT_SHA,
    _IMAGE,
)

#: table name (as written into schema metadata) -> its columns
TABLES: dict[str, tuple[Column, ...]] = {
    "episodes": EPISODE_COLUMNS,
    "drifts": DRIFT_COLUMNS,
    "training_metrics": TRAINING_METRICS_COLUMNS,
}

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}


def schema(columns: Sequence[Column]) -> pa.Schema:
    """The pyarrow schema of `columns`, with the record version (and table name) as metadata."""
    return _schema(tuple(columns))


@cache
def _schema(columns: tuple[Column, ...]) -> pa.Schema:
    import pyarrow as pa

    types = {
        "bool": pa.bool_(),
        "int32": pa.int32(),
        "int64": pa.int64(),
        "float64": pa.float64(),
        "string": pa.string(),
    }
    fields = [
        pa.field(c.name, types[c.type], nullable=c.nullable, metadata={"description": c.doc}) for c in columns
    ]
    metadata = {VERSION_KEY: str(RECORD_SCHEMA_VERSION)}
    table = _table_name(columns)
    if table is not None:
        metadata[TABLE_KEY] = table
    return pa.schema(fields, metadata=metadata)


def episode_schema() -> pa.Schema:
    return schema(EPISODE_COLUMNS)


def drift_schema() -> pa.Schema:
    return schema(DRIFT_COLUMNS)


def training_metrics_schema() -> pa.Schema:
    return schema(TRAINING_METRICS_COLUMNS)


def to_table(rows: Sequence[Mapping[str, Any]], columns: Sequence[Column]) -> pa.Table:
    """A pyarrow Table with exactly `columns`, validated row by row.

    A missing key is null, except `record_version`, which is filled with RECORD_SCHEMA_VERSION
    (a row written now is at the current version; any other value raises ValueError). An unknown
    key raises ValueError, a value of the wrong type TypeError, an out-of-range integer or a null
    in a non-nullable column ValueError; each message names the row and column.
    """
    import pyarrow as pa

    columns = tuple(columns)
    names = {c.name for c in columns}
    data: dict[str, list[Any]] = {c.name: [] for c in columns}
    for i, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise TypeError(f"row {i}: expected a mapping, got {type(row).__name__}")
        unknown = [key for key in row if key not in names]
        if unknown:
            raise ValueError(f"row {i}: unknown column(s) {', '.join(map(repr, unknown))}")
        for column in columns:
            data[column.name].append(_check(i, column, row.get(column.name)))
    return _without_pandas(lambda: pa.table(data, schema=schema(columns)))


class _NoPandas:
    """An import hook that makes `import pandas` fail while it is installed."""

    def find_spec(self, name, path=None, target=None):
        if name == "pandas" or name.startswith("pandas."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


def _without_pandas(build):
    """pyarrow imports pandas (0.3-0.5 s) the first time it converts a Python list, only to ask
    whether the list is a pandas object. A process that has not imported pandas (a cell job)
    skips that import; pyarrow tries again later wherever it really needs pandas."""
    import sys

    if "pandas" in sys.modules:
        return build()
    blocker = _NoPandas()
    sys.meta_path.insert(0, blocker)
    try:
        return build()
    finally:
        sys.meta_path.remove(blocker)


def _check(i: int, column: Column, value: Any) -> Any:
    """The value converted to the plain Python type pyarrow stores for `column`, or an error."""
    where = f"row {i}, column {column.name!r}"
    if column.name == "record_version" and value is None:
        return RECORD_SCHEMA_VERSION
    if value is None:
        if not column.nullable:
            raise ValueError(f"{where}: null in a non-nullable column")
        return None
    kind = column.type
    if kind == "bool":
        ok = isinstance(value, bool)
    elif kind == "string":
        ok = isinstance(value, str)
    elif isinstance(value, bool):  # an int subclass, but never a number in a record
        ok = False
    elif kind == "float64":
        ok = isinstance(value, numbers.Real)
    else:
        ok = isinstance(value, numbers.Integral)
    if not ok:
        raise TypeError(f"{where}: expected {kind}, got {type(value).__name__} {value!r:.80}")
    if kind in _INT_RANGES:
        low, high = _INT_RANGES[kind]
        if not low <= int(value) <= high:
            raise ValueError(f"{where}: {value!r} does not fit in {kind}")
        if column.name == "record_version" and value != RECORD_SCHEMA_VERSION:
            raise ValueError(f"{where}: record_version {value!r} differs from {RECORD_SCHEMA_VERSION}")
        return int(value)
    if kind == "float64":
        try:
            return float(value)
        except OverflowError:
            raise ValueError(f"{where}: {value!r:.80} does not fit in float64") from None
    return value


def _table_name(columns: tuple[Column, ...]) -> str | None:
    for name, table_columns in TABLES.items():
        if table_columns == columns:
            return name
    return None


def read_arm(row: Mapping[str, Any]) -> str:
    """The arm of a stored row or trajectory: its `arm`, or `drift` where it has none (written
    before version 5, when every episode was played in the drift arm)."""
    from schemashift.env.arms import DEFAULT_ARM, check_arm

    arm = row.get("arm")
    return DEFAULT_ARM if arm is None else check_arm(arm)


def column_docs() -> str:
    """Markdown reference of every table and column, for generated documentation."""
    lines = [f"Record schema version {RECORD_SCHEMA_VERSION}. Every column is nullable; null means unknown."]
    lines += ["", "What changed:", ""]
    lines += [
        f"- version {version}: {_escape(text)}" for version, text in sorted(CHANGES.items(), reverse=True)
    ]
    for table, columns in TABLES.items():
        lines += ["", f"## {table}", "", "| column | type | description |", "| --- | --- | --- |"]
        lines += [f"| `{c.name}` | {c.type} | {_escape(c.doc)} |" for c in columns]
    return "\n".join(lines) + "\n"


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


DOC_HEADER = """# Record schemas

Generated from `schemashift/rollout/records.py` (the single declaration of every column);
`tests/rollout/test_records_doc.py` fails when this file is stale. Regenerate with
`python -m schemashift.rollout.records > docs/records.md`.

"""


if __name__ == "__main__":
    print(DOC_HEADER + column_docs(), end="")
