"""The record schemas: declared columns, derived pyarrow schemas and row validation."""

from __future__ import annotations

import math
import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemashift.env import Environment
from schemashift.rollout import records
from schemashift.rollout.records import (
    DRIFT_COLUMNS,
    EPISODE_COLUMNS,
    RECORD_SCHEMA_VERSION,
    TRAINING_METRICS_COLUMNS,
    Column,
    to_table,
)

# The column lists as specified, written out independently of the module under test.
EPISODE_SPEC = """
record_version:int32 sweep_id:string train_run:string ruleset:string ruleset_version:string
env_version:string policy:string base_model:string adapter_sha256:string checkpoint_step:int64
harness:string scenario:string family:string tier:string seed:int64 split:string salt_id:string
sample_index:int32 arm:string status:string error:string success:bool score:float64 completion:float64
drift_detection:float64 adaptation:float64 efficiency:float64 shaped_total:float64 binary:float64
cumulative_reward:float64 training_reward:float64 schedule_hash:string catastrophe:bool
invalid_actions:int32 drifts_discovered:int32 drifts_recovered:int32 steps_to_recover:float64
deprecated_calls:int32 steps:int32 max_steps:int32 final_action:string tool_calls:int32 failed_calls:int32
parse_failures:int32 drifts_fired:int32 drifts_detected:int32 tokens_in:int64 tokens_out:int64
wall_s:float64 generation_config:string config_hash:string git_sha:string image:string
"""
DRIFT_SPEC = """
record_version:int32 sweep_id:string train_run:string ruleset:string policy:string checkpoint_step:int64
harness:string scenario:string seed:int64 sample_index:int32 arm:string drift_index:int32 kind:string
tool:string endpoint:string planned_step:int32 fired_step:int32 discovered_step:int32 reported_step:int32
failed_step:int32 recovered_step:int32 steps_to_recover:int32
"""
TRAINING_SPEC = """
record_version:int32 train_run:string step:int64 reward_mean:float64 reward_std:float64 reward_min:float64
reward_max:float64 reward_completion:float64 reward_drift_detection:float64 reward_adaptation:float64
reward_efficiency:float64 reward_success:float64 reward_shaping:float64 loss:float64 kl:float64
grad_norm:float64 learning_rate:float64 is_ratio_min:float64 is_ratio_mean:float64 is_ratio_max:float64
logp_diff_mean:float64 logp_diff_max:float64 completion_tokens:float64 tool_calls_per_episode:float64
seconds_per_step:float64 peak_gpu_mem_gb:float64 gpu_type:string gpu_count:int32 superseded:bool
config_hash:string git_sha:string image:string
"""
SPECS = {
    "episodes": (EPISODE_COLUMNS, EPISODE_SPEC),
    "drifts": (DRIFT_COLUMNS, DRIFT_SPEC),
    "training_metrics": (TRAINING_METRICS_COLUMNS, TRAINING_SPEC),
}
SCHEMA_FUNCTIONS = {
    "episodes": records.episode_schema,
    "drifts": records.drift_schema,
    "training_metrics": records.training_metrics_schema,
}
ARROW = {
    "bool": pa.bool_(),
    "int32": pa.int32(),
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
}


def test_schema_version_is_five() -> None:
    assert RECORD_SCHEMA_VERSION == 5
    assert 5 in records.CHANGES and "arm" in records.CHANGES[5]


def test_a_row_without_an_arm_was_played_in_the_drift_arm() -> None:
    assert records.read_arm({"seed": 0}) == "drift"
    assert records.read_arm({"arm": None}) == "drift"
    assert records.read_arm({"arm": "control"}) == "control"
    with pytest.raises(ValueError, match="unknown arm 'sideways'"):
        records.read_arm({"arm": "sideways"})


@pytest.mark.parametrize("table", sorted(SPECS))
def test_columns_match_the_specification_in_order(table: str) -> None:
    columns, spec = SPECS[table]
    assert [(c.name, c.type) for c in columns] == [tuple(item.split(":")) for item in spec.split()]
    assert records.TABLES[table] is columns


@pytest.mark.parametrize("table", sorted(SPECS))
def test_every_column_is_nullable_and_documented_on_one_line(table: str) -> None:
    for column in records.TABLES[table]:
        assert column.nullable, column.name
        assert column.type in records.ARROW_TYPES, column.name
        assert column.doc.strip() and "\n" not in column.doc, column.name


@pytest.mark.parametrize("table", sorted(SPECS))
def test_schema_functions_build_the_declared_schema_with_version_metadata(table: str) -> None:
    schema = SCHEMA_FUNCTIONS[table]()
    columns = records.TABLES[table]
    assert schema.names == [c.name for c in columns]
    assert [f.type for f in schema] == [ARROW[c.type] for c in columns]
    assert all(f.nullable for f in schema)
    assert schema.metadata[b"schemashift.record_version"] == b"5"
    assert schema.metadata[b"schemashift.table"] == table.encode()
    assert schema.field(columns[1].name).metadata[b"description"] == columns[1].doc.encode()


def test_importing_records_does_not_import_pyarrow() -> None:
    code = "import sys, schemashift.rollout.records as r; r.column_docs(); print('pyarrow' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"


def test_missing_keys_become_null_and_record_version_is_filled() -> None:
    table = to_table([{"sweep_id": "r1", "seed": 3}], EPISODE_COLUMNS)
    assert table.schema == records.episode_schema()
    assert table.schema.metadata == records.episode_schema().metadata
    (row,) = table.to_pylist()
    assert row["record_version"] == RECORD_SCHEMA_VERSION
    assert row["sweep_id"] == "r1" and row["seed"] == 3
    assert row["score"] is None and row["success"] is None and row["steps"] is None


def test_an_empty_row_list_gives_an_empty_table_with_the_schema() -> None:
    table = to_table([], DRIFT_COLUMNS)
    assert table.num_rows == 0
    assert table.schema == records.drift_schema()


def test_an_unknown_key_is_named() -> None:
    with pytest.raises(ValueError, match=r"row 1: unknown column\(s\) 'scroe'"):
        to_table([{"score": 1.0}, {"scroe": 1.0}], EPISODE_COLUMNS)


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("steps", 2.0),
        ("steps", "3"),
        ("steps", True),
        ("seed", 1.5),
        ("score", "0.5"),
        ("score", False),
        ("success", 1),
        ("scenario", 7),
        ("generation_config", {"temperature": 1.0}),
    ],
)
def test_a_value_of_the_wrong_type_names_the_column(column: str, value: object) -> None:
    with pytest.raises(TypeError, match=rf"row 0, column '{column}': expected "):
        to_table([{column: value}], EPISODE_COLUMNS)


def test_integers_must_fit_their_width() -> None:
    assert to_table([{"steps": 2**31 - 1}], EPISODE_COLUMNS).column("steps").to_pylist() == [2**31 - 1]
    with pytest.raises(ValueError, match=r"column 'steps': 2147483648 does not fit in int32"):
        to_table([{"steps": 2**31}], EPISODE_COLUMNS)
    with pytest.raises(ValueError, match=r"column 'seed': .* does not fit in int64"):
        to_table([{"seed": -(2**63) - 1}], EPISODE_COLUMNS)
    with pytest.raises(ValueError, match=r"column 'score': .* does not fit in float64"):
        to_table([{"score": 10**400}], EPISODE_COLUMNS)


def test_integers_are_accepted_as_floats_and_nan_is_kept() -> None:
    table = to_table([{"score": 1, "wall_s": float("nan")}], EPISODE_COLUMNS)
    row = table.to_pylist()[0]
    assert row["score"] == 1.0 and isinstance(row["score"], float)
    assert math.isnan(row["wall_s"])


def test_a_record_version_other_than_the_current_one_is_rejected() -> None:
    assert to_table([{"record_version": 5}], EPISODE_COLUMNS).column("record_version").to_pylist() == [5]
    with pytest.raises(ValueError, match="record_version 4 differs from 5"):
        to_table([{"record_version": 4}], EPISODE_COLUMNS)


def test_a_row_that_is_not_a_mapping_is_rejected() -> None:
    with pytest.raises(TypeError, match="row 0: expected a mapping, got list"):
        to_table([["sweep_id", "x"]], EPISODE_COLUMNS)  # type: ignore[list-item]


def test_a_non_nullable_column_rejects_null() -> None:
    columns = (Column("id", "string", False, "Identifier."),)
    with pytest.raises(ValueError, match="row 0, column 'id': null in a non-nullable column"):
        to_table([{}], columns)
    schema = records.schema(columns)
    assert not schema.field("id").nullable
    assert b"schemashift.table" not in schema.metadata


def test_column_docs_list_every_table_and_column() -> None:
    docs = records.column_docs()
    for table, columns in records.TABLES.items():
        assert f"## {table}" in docs
        for column in columns:
            assert f"| `{column.name}` | {column.type} | " in docs


def test_the_environment_summaries_fit_the_record_columns() -> None:
    """The legacy ruleset's summary and drift rows use only declared column names."""
    env = Environment("legacy")
    scenario = env.ruleset.scenario_ids()[0]
    env.reset(scenario, 0)
    summary = env.ruleset.summary(env.episode)
    drifts = env.ruleset.drift_outcomes(env.episode)
    assert drifts, "the first legacy scenario should plan at least one drift"
    table = to_table([summary], EPISODE_COLUMNS)
    assert table.num_rows == 1
    assert to_table(drifts, DRIFT_COLUMNS).num_rows == len(drifts)


_VALUES = {
    "bool": st.booleans(),
    "int32": st.integers(-(2**31), 2**31 - 1),
    "int64": st.integers(-(2**63), 2**63 - 1),
    "float64": st.floats(allow_nan=False),
    "string": st.text(max_size=8),
}


_ROWS = st.fixed_dictionaries(
    {}, optional={c.name: st.none() | _VALUES[c.type] for c in TRAINING_METRICS_COLUMNS[1:]}
)


# Wide rows are slow to draw on a cold start; the size of each draw is what makes it slow, not a bug.
@settings(max_examples=50, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_ROWS, max_size=5))
def test_valid_rows_round_trip_through_arrow(rows: list[dict[str, object]]) -> None:
    table = to_table(rows, TRAINING_METRICS_COLUMNS)
    expected = [
        {"record_version": 5, **{c.name: row.get(c.name) for c in TRAINING_METRICS_COLUMNS[1:]}}
        for row in rows
    ]
    assert table.to_pylist() == expected
