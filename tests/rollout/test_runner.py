"""The runner: episode rows, drift rows and trajectories of a sweep, failures, and the result files."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from legacy_reference import COLUMNS, REF, SCENARIOS

import schemashift
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.policies.base import call_tool, complete_task, inspect_schema
from schemashift.rollout import io, records, resultset
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.replay import replay, trajectory_actions
from schemashift.rollout.runner import (
    FINAL_KEYS,
    PARSE_ERROR_PREFIX,
    EpisodeResult,
    SweepContext,
    cells,
    run_sweep,
    write_results,
)

SEEDS = REF["tables"]["seeds"]
HEURISTICS = ("policy_aware_heuristic", "naive_heuristic")
#: planned drifts per legacy scenario (spec 6)
PLANNED_DRIFTS = {
    "E1_onboard_new_hire": 1,
    "E2_meeting_invite_blast": 1,
    "E3_customer_lookup": 1,
    "M1_customer_escalation": 2,
    "M2_weekly_report": 2,
    "M3_event_cleanup": 2,
}
OUTCOME_COLUMNS = (
    "success",
    "score",
    "completion",
    "drift_detection",
    "adaptation",
    "efficiency",
    "shaped_total",
    "binary",
    "cumulative_reward",
    "steps",
    "final_action",
)
STEP_KEYS = {"step", "action", "response", "feedback", "drift_events", "reward", "tokens_used"}


def exact(value: Any) -> float:
    """A reference number: plain, or {published, exact} with the exact value as a fraction string."""
    if isinstance(value, dict):
        value = value["exact"]
    return float(Fraction(value)) if isinstance(value, str) else float(value)


def context(policy: str, sweep_id: str = "run-test") -> SweepContext:
    return SweepContext(sweep_id=sweep_id, policy=policy, config_hash="cfg-1234", git_sha="abc123")


def sweep(
    policy_name: str,
    scenarios: list[str] = SCENARIOS,
    seeds: list[int] = SEEDS,
    samples: int = 1,
    policy: Any = None,
) -> list[EpisodeResult]:
    return run_sweep(
        InProcessBackend(),
        policy if policy is not None else make_policy(policy_name, "legacy"),
        cells(["legacy"], scenarios, seeds, samples),
        context(policy_name),
    )


@pytest.fixture(scope="module")
def sweeps() -> dict[str, list[EpisodeResult]]:
    return {name: sweep(name) for name in HEURISTICS}


class Scripted:
    """A policy that plays a fixed list of actions (dicts or raw text), whatever it observes."""

    def __init__(self, actions: list[Any], fail_at: int | None = None) -> None:
        self.actions = actions
        self.fail_at = fail_at
        self.index = 0

    def reset(self) -> None:
        self.index = 0

    def act(self, observation: dict[str, Any]) -> Any:
        if self.fail_at is not None and self.index == self.fail_at:
            raise RuntimeError("the model server went away")
        action = self.actions[self.index]
        self.index += 1
        return action


# -- the published heuristic tables -----------------------------------------------------------------


@pytest.mark.parametrize("policy", HEURISTICS)
def test_a_heuristic_sweep_reproduces_the_published_rows(sweeps: dict, policy: str) -> None:
    results = sweeps[policy]
    assert [(r.record["scenario"], r.record["seed"]) for r in results] == [
        (s, n) for s in SCENARIOS for n in SEEDS
    ]
    table = REF["tables"]["rows"][policy]
    for result in results:
        row = result.record
        expected = table[row["scenario"]]
        where = f"{policy} {row['scenario']} seed {row['seed']}"
        for key, column in COLUMNS.items():
            assert row[column] == pytest.approx(exact(expected[key]), abs=1e-9), f"{where}: {column}"
        assert row["steps"] == expected["steps"], where
        assert row["final_action"] == expected["last_action"], where
        assert row["success"] is (row["binary"] == 1), where
        assert row["score"] == row["shaped_total"], where
        assert row["status"] == "graded" and row["error"] is None, where
        assert row["tokens_in"] == 0 and row["tokens_out"] == 0, where
        assert row["parse_failures"] == 0, where


@pytest.mark.parametrize("policy", HEURISTICS)
def test_episode_rows_carry_their_identity_and_fit_the_schema(sweeps: dict, policy: str) -> None:
    results = sweeps[policy]
    tiers = {entry["id"]: entry["tier"] for key, entry in REF["scenarios"].items() if not key.startswith("_")}
    max_steps = {entry["id"]: entry["max_steps"] for k, entry in REF["scenarios"].items() if k[0] != "_"}
    for result in results:
        row = result.record
        assert row["record_version"] == records.RECORD_SCHEMA_VERSION
        assert row["ruleset"] == "legacy"
        assert row["ruleset_version"] == get_ruleset("legacy").version
        assert row["env_version"] == schemashift.__version__
        assert row["policy"] == policy
        assert row["tier"] == tiers[row["scenario"]]
        assert row["family"] == row["scenario"]
        assert row["max_steps"] == max_steps[row["scenario"]]
        assert row["sample_index"] == 0
        assert row["sweep_id"] == "run-test"
        assert row["config_hash"] == "cfg-1234"
        assert row["git_sha"] == "abc123"
        assert row["wall_s"] >= 0
    table = records.to_table([r.record for r in results], records.EPISODE_COLUMNS)
    assert table.num_rows == len(SCENARIOS) * len(SEEDS)
    assert set(table.column("seed").to_pylist()) == set(SEEDS)


# -- drift rows ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", HEURISTICS)
def test_one_drift_row_per_planned_drift(sweeps: dict, policy: str) -> None:
    for result in sweeps[policy]:
        row = result.record
        drifts = result.drifts
        assert len(drifts) == PLANNED_DRIFTS[row["scenario"]], row["scenario"]
        assert [d["drift_index"] for d in drifts] == list(range(len(drifts)))
        for d in drifts:
            assert (d["sweep_id"], d["policy"], d["scenario"], d["seed"], d["sample_index"]) == (
                "run-test",
                policy,
                row["scenario"],
                row["seed"],
                0,
            )
        assert sum(d["fired_step"] is not None for d in drifts) == row["drifts_fired"]
        assert sum(d["reported_step"] is not None for d in drifts) == row["drifts_detected"]
    rows = [d for result in sweeps[policy] for d in result.drifts]
    assert records.to_table(rows, records.DRIFT_COLUMNS).num_rows == len(rows)


def test_m1_policy_aware_drift_timeline(sweeps: dict) -> None:
    result = next(
        r for r in sweeps["policy_aware_heuristic"] if r.record["scenario"] == "M1_customer_escalation"
    )
    crm, calendar = result.drifts
    assert (crm["tool"], crm["kind"]) == ("crm", "field_rename")
    assert {
        k: crm[k]
        for k in (
            "fired_step",
            "failed_step",
            "discovered_step",
            "reported_step",
            "recovered_step",
            "steps_to_recover",
        )
    } == {
        "fired_step": 1,
        "failed_step": 2,
        "discovered_step": 2,
        "reported_step": 4,
        "recovered_step": 5,
        "steps_to_recover": 3,
    }
    assert (calendar["tool"], calendar["kind"]) == ("calendar", "field_rename")
    assert calendar["fired_step"] == 6
    assert calendar["reported_step"] is None
    assert result.record["drifts_fired"] == 2 and result.record["drifts_detected"] == 1
    assert result.record["steps_to_recover"] == 3


# -- trajectories --------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", HEURISTICS)
def test_trajectory_steps_and_final_match_the_row(sweeps: dict, policy: str) -> None:
    for result in sweeps[policy]:
        row, trajectory = result.record, result.trajectory
        assert trajectory["status"] == "graded"
        assert trajectory["trajectory_version"] == 1
        for key in (
            "sweep_id",
            "ruleset",
            "ruleset_version",
            "env_version",
            "policy",
            "scenario",
            "seed",
            "sample_index",
        ):
            assert trajectory[key] == row[key], key
        steps = trajectory["steps"]
        assert len(steps) == row["steps"]
        assert [s["step"] for s in steps] == list(range(1, row["steps"] + 1))
        for step in steps:
            assert set(step) == STEP_KEYS
            assert step["tokens_used"] == 0
        assert steps[-1]["action"]["type"] == row["final_action"]
        assert steps[-1]["reward"]["shaped_total"] == row["shaped_total"]
        assert sum(s["reward"]["shaped_total"] for s in steps) == pytest.approx(
            row["cumulative_reward"], abs=1e-12
        )
        assert sum(len(s["drift_events"]) for s in steps) == row["drifts_fired"]
        final = trajectory["final"]
        assert final, "a graded trajectory repeats the outcome"
        for key, value in final.items():
            assert value == row[key], key
        assert set(final) == set(FINAL_KEYS)
        json.dumps(trajectory)  # plain JSON


@pytest.mark.parametrize("policy", HEURISTICS)
def test_replaying_a_trajectory_reproduces_its_steps_and_row(sweeps: dict, policy: str) -> None:
    for result in sweeps[policy]:
        trajectory = result.trajectory
        actions, tokens = trajectory_actions(trajectory)
        replayed = replay(trajectory["ruleset"], trajectory["scenario"], trajectory["seed"], actions, tokens)
        assert replayed["ignored"] == []
        assert [s["reward"] for s in replayed["steps"]] == [s["reward"] for s in trajectory["steps"]]
        assert [s["response"] for s in replayed["steps"]] == [s["response"] for s in trajectory["steps"]]
        assert replayed["final"]["done"] is True
        for key, value in replayed["final"].items():
            if key != "done":
                assert value == result.record[key], (trajectory["scenario"], key)


# -- failures --------------------------------------------------------------------------------------------


def test_a_policy_that_raises_gives_an_infra_error_row_and_the_sweep_goes_on() -> None:
    e1 = REF["worked_examples"]["5_phase6_E1"]["actions"]
    policy = Scripted(e1, fail_at=2)
    results = run_sweep(
        InProcessBackend(),
        policy,
        cells(["legacy"], ["E1_onboard_new_hire"], [0, 1]),
        context("scripted"),
    )
    assert len(results) == 2
    for result in results:  # the scripted policy fails at its third action in every episode
        row = result.record
        assert row["status"] == "infra_error"
        assert "RuntimeError" in row["error"] and "the model server went away" in row["error"]
        for column in OUTCOME_COLUMNS + ("tokens_in", "tokens_out", "parse_failures", "drifts_fired"):
            assert row.get(column) is None, column
        assert result.drifts == []
        assert result.trajectory["status"] == "infra_error"
        assert result.trajectory["steps"] == []
        assert "RuntimeError" in result.trajectory["traceback"]
    assert [r.record["seed"] for r in results] == [0, 1]
    table = records.to_table([r.record for r in results], records.EPISODE_COLUMNS)
    assert table.column("completion").null_count == 2
    assert table.column("score").null_count == 2


def test_the_sweep_continues_after_an_infra_error_with_a_graded_cell() -> None:
    class FailsOnce(Scripted):
        def reset(self) -> None:
            super().reset()
            self.episodes = getattr(self, "episodes", 0) + 1
            self.fail_at = 1 if self.episodes == 1 else None

    actions = [call_tool("mail", "list_messages", {"folder": "inbox"}), complete_task("Done.")]
    results = run_sweep(
        InProcessBackend(),
        FailsOnce(actions),
        cells(["legacy"], ["E1_onboard_new_hire", "E2_meeting_invite_blast"], [0]),
        context("scripted"),
    )
    assert [r.record["status"] for r in results] == ["infra_error", "graded"]
    assert results[1].record["scenario"] == "E2_meeting_invite_blast"
    assert results[1].record["steps"] == 2


@pytest.mark.parametrize(
    ("invalid", "raw_contains", "message"),
    [
        (call_tool("slack", "post", {"text": "hi"}), "slack", "unknown tool 'slack'"),
        ('{"type": "call_tool", "tool_call": {', '{"type": "call_tool"', "malformed action JSON"),
        ("I think I should inspect the calendar first.", "I think I should", "malformed action JSON"),
    ],
    ids=["unknown-tool", "truncated-json", "prose"],
)
def test_an_invalid_action_is_replaced_by_a_parse_error_completion(
    invalid: Any, raw_contains: str, message: str
) -> None:
    policy = Scripted([inspect_schema("calendar"), invalid, complete_task("never reached")])
    (result,) = run_sweep(
        InProcessBackend(), policy, cells(["legacy"], ["E1_onboard_new_hire"], [0]), context("scripted")
    )
    row = result.record
    assert row["status"] == "graded"
    assert row["parse_failures"] == 1
    assert row["steps"] == 2
    assert row["final_action"] == "complete_task"
    assert row["completion"] is not None and row["binary"] == 0.0 and row["success"] is False
    step = result.trajectory["steps"][-1]
    assert step["action"]["type"] == "complete_task"
    summary = step["action"]["complete"]["summary"]
    assert PARSE_ERROR_PREFIX == "Parse error \u2014 LLM output: "
    assert summary.startswith("Parse error \u2014 LLM output: ")
    assert raw_contains in summary
    assert raw_contains in step["raw"]
    assert message in step["invalid"]
    assert "raw" not in result.trajectory["steps"][0] and "invalid" not in result.trajectory["steps"][0]
    # the stored trajectory replays to the same episode
    actions, tokens = trajectory_actions(result.trajectory)
    replayed = replay("legacy", "E1_onboard_new_hire", 0, actions, tokens)
    assert replayed["final"]["cumulative_reward"] == row["cumulative_reward"]


def test_a_parse_error_summary_keeps_the_first_120_characters() -> None:
    text = "x" * 300
    policy = Scripted([text])
    (result,) = run_sweep(
        InProcessBackend(), policy, cells(["legacy"], ["E2_meeting_invite_blast"], [0]), context("scripted")
    )
    summary = result.trajectory["steps"][0]["action"]["complete"]["summary"]
    assert summary == PARSE_ERROR_PREFIX + "x" * 120
    assert result.trajectory["steps"][0]["raw"] == text
    assert result.record["parse_failures"] == 1 and result.record["steps"] == 1


def test_policy_usage_is_summed_into_token_columns() -> None:
    class Counting(Scripted):
        last_usage = (11, 3)
        parse_failures = 0

    actions = [call_tool("mail", "list_messages", {"folder": "inbox"}), complete_task("Done.")]
    (result,) = run_sweep(
        InProcessBackend(),
        Counting(actions),
        cells(["legacy"], ["E1_onboard_new_hire"], [0]),
        context("scripted"),
    )
    assert (result.record["tokens_in"], result.record["tokens_out"]) == (22, 6)
    # legacy does not charge tokens against the budget
    assert [s["tokens_used"] for s in result.trajectory["steps"]] == [0, 0]


# -- samples and cells -----------------------------------------------------------------------------------


def test_samples_give_one_row_per_sample_index() -> None:
    results = sweep("policy_aware_heuristic", ["E1_onboard_new_hire", "M2_weekly_report"], [0, 3], samples=3)
    keys = [(r.record["scenario"], r.record["seed"], r.record["sample_index"]) for r in results]
    assert keys == [
        (s, n, i) for s in ("E1_onboard_new_hire", "M2_weekly_report") for n in (0, 3) for i in range(3)
    ]
    for r in results:
        assert r.trajectory["sample_index"] == r.record["sample_index"]
        assert all(d["sample_index"] == r.record["sample_index"] for d in r.drifts)
    # a deterministic policy scores every sample alike
    e1 = [r.record["cumulative_reward"] for r in results if r.record["scenario"] == "E1_onboard_new_hire"]
    assert e1 == [e1[0]] * 6


# -- result files ------------------------------------------------------------------------------------------


def test_write_results_writes_three_files_that_read_back_equal(sweeps: dict, tmp_path: Path) -> None:
    results = sweeps["policy_aware_heuristic"]
    out = tmp_path / "nested" / "out"
    paths = write_results(out, results)
    assert paths == {
        "episodes": str(out / "episodes.parquet"),
        "drifts": str(out / "drifts.parquet"),
        "trajectories": str(out / "trajectories.jsonl.gz"),
    }
    assert sorted(p.name for p in out.iterdir()) == [
        "drifts.parquet",
        "episodes.parquet",
        "trajectories.jsonl.gz",
    ]

    episodes = pq.read_table(out / "episodes.parquet")
    set_id = resultset.check(out)
    stamp = {resultset.SET_KEY.encode(): set_id.encode()}
    assert episodes.schema.equals(records.episode_schema(), check_metadata=False)
    assert episodes.schema.metadata == {**records.episode_schema().metadata, **stamp}
    names = [c.name for c in records.EPISODE_COLUMNS]
    assert episodes.to_pylist() == [{name: r.record.get(name) for name in names} for r in results]

    drifts = pq.read_table(out / "drifts.parquet")
    assert drifts.schema.equals(records.drift_schema(), check_metadata=False)
    assert drifts.schema.metadata == {**records.drift_schema().metadata, **stamp}
    drift_names = [c.name for c in records.DRIFT_COLUMNS]
    assert drifts.to_pylist() == [
        {name: d.get(name) for name in drift_names} for r in results for d in r.drifts
    ]

    assert list(io.read_jsonl(out / "trajectories.jsonl.gz")) == [r.trajectory for r in results]


def test_write_results_replaces_files_atomically(sweeps: dict, tmp_path: Path) -> None:
    first = sweeps["naive_heuristic"][:2]
    write_results(tmp_path, first)
    first_set = resultset.check(tmp_path)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    # A trajectory that does not serialise fails the write after the tables were staged:
    # nothing changes and no temporary file stays.
    broken = [EpisodeResult(r.record, r.drifts, {**r.trajectory, "bad": {1, 2}}) for r in first]
    with pytest.raises(TypeError, match="not JSON serializable"):
        write_results(tmp_path, broken)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before

    # A complete rewrite replaces all three files and leaves nothing else.
    write_results(tmp_path, sweeps["policy_aware_heuristic"])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)
    assert len(list(io.read_jsonl(tmp_path / "trajectories.jsonl.gz"))) == len(
        sweeps["policy_aware_heuristic"]
    )
    assert resultset.check(tmp_path) != first_set


def test_write_results_with_infra_errors_keeps_nulls(tmp_path: Path) -> None:
    results = run_sweep(
        InProcessBackend(),
        Scripted([], fail_at=0),
        cells(["legacy"], ["E1_onboard_new_hire"], [0]),
        context("scripted"),
    )
    write_results(tmp_path, results)
    (row,) = io.read_parquet_rows(tmp_path / "episodes.parquet")
    assert row["status"] == "infra_error"
    assert row["completion"] is None and row["score"] is None and row["success"] is None
    assert io.read_parquet_rows(tmp_path / "drifts.parquet") == []
    (trajectory,) = io.read_jsonl(tmp_path / "trajectories.jsonl.gz")
    assert trajectory["status"] == "infra_error" and trajectory["steps"] == []


def test_write_results_writes_nothing_when_a_drift_row_is_invalid(tmp_path: Path) -> None:
    results = run_sweep(
        InProcessBackend(),
        make_policy("oracle"),
        cells(["legacy"], ["E1_onboard_new_hire"], [0]),
        SweepContext(sweep_id="first", policy="oracle"),
    )
    write_results(tmp_path, results)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    results[0].record["sweep_id"] = "second"
    results[0].drifts[0]["fired_step"] = "one"
    with pytest.raises(TypeError):
        write_results(tmp_path, results)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before


def test_infra_error_rows_keep_what_the_catalogue_knows() -> None:
    class Broken:
        def reset(self) -> None:
            raise RuntimeError("boom")

        def act(self, observation):
            raise AssertionError("never called")

    [result] = run_sweep(
        InProcessBackend(),
        Broken(),
        cells(["legacy"], ["M2_weekly_report"], [3]),
        SweepContext(sweep_id="r", policy="x"),
    )
    record = result.record
    assert record["status"] == "infra_error"
    assert (record["tier"], record["family"], record["max_steps"], record["ruleset_version"]) == (
        "medium",
        "M2_weekly_report",
        10,
        "1",
    )
    assert record.get("score") is None and record.get("steps") is None
