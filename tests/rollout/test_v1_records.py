"""Records of v1 episodes: the rubric and v1 columns are filled from the ruleset summary, the
legacy totals stay null, per-drift rows follow the plan, and replay reproduces the row."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.policies.base import call_tool
from schemashift.rollout import records
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.replay import replay, trajectory_actions
from schemashift.rollout.runner import FINAL_KEYS, Cell, SweepContext, play_episode, write_results

V1 = get_ruleset("v1")
#: outcome columns only the legacy ruleset fills
LEGACY_TOTALS = ("shaped_total", "binary", "cumulative_reward")
#: outcome columns every v1 episode fills (steps_to_recover stays null without a recovery)
V1_COLUMNS = tuple(c for c in FINAL_KEYS if c not in (*LEGACY_TOTALS, "steps_to_recover"))


@pytest.fixture(scope="module")
def results():
    backend = InProcessBackend()
    out = []
    for policy in ("oracle", "random", "policy_aware_heuristic"):
        for family in V1.scenario_ids():
            for seed in (0, 10000):
                cell = Cell("v1", family, seed)
                out.append(play_episode(backend, make_policy(policy, V1), cell, SweepContext("r", policy)))
    return out


def test_v1_rows_fill_the_rubric_and_v1_columns_and_leave_legacy_totals_null(results):
    for result in results:
        row = result.record
        assert row["status"] == "graded", row["error"]
        assert all(row[c] is not None for c in V1_COLUMNS), row
        assert all(row[c] is None for c in LEGACY_TOTALS), row
        assert row["split"] == ("test" if row["seed"] < 10000 else "train")
        assert row["ruleset_version"] == V1.version and row["family"] == row["scenario"]
        if row["policy"] == "oracle":
            assert row["success"] and row["score"] > 0 and row["drifts_discovered"] == row["drifts_fired"]
    records.to_table([r.record for r in results], records.EPISODE_COLUMNS)


def test_one_drift_row_per_planned_drift(results):
    for result in results:
        task = V1.build_task(result.record["scenario"], result.record["seed"])
        assert [(d["kind"], d["tool"], d["planned_step"]) for d in result.drifts] == [
            (s.kind, s.tool, s.fires_at_step) for s in task.drift_plan
        ]
        for d in result.drifts:
            if d["recovered_step"] is not None:
                assert d["steps_to_recover"] == d["recovered_step"] - d["failed_step"] > 0
    records.to_table([d for r in results for d in r.drifts], records.DRIFT_COLUMNS)


def test_trajectories_record_the_drift_schedule(results):
    for result in results:
        task = V1.build_task(result.record["scenario"], result.record["seed"])
        assert result.trajectory["schedule"] == task.schedule()


def test_replaying_a_v1_trajectory_reproduces_its_row(results):
    for result in results:
        actions, tokens = trajectory_actions(result.trajectory)
        row = result.record
        final = replay("v1", row["scenario"], row["seed"], actions, tokens)["final"]
        for key in FINAL_KEYS:
            if key in final:
                assert final[key] == row[key], key
        assert final["training_reward"] is not None and final["schedule_hash"] == row["schedule_hash"]


def test_invalid_actions_are_recorded_steps_on_v1(tmp_path: Path):
    class Sloppy:
        def __init__(self):
            self.n = 0

        def reset(self):
            self.n = 0

        def act(self, observation):
            self.n += 1
            return "not json" if self.n % 2 else call_tool("crm", "search_contacts", {})

    result = play_episode(
        InProcessBackend(), Sloppy(), Cell("v1", "customer_lookup", 1), SweepContext("r", "x")
    )
    row = result.record
    assert row["invalid_actions"] == (row["steps"] + 1) // 2 and row["parse_failures"] == 0
    invalid = [s for s in result.trajectory["steps"] if s["action"]["type"] == "invalid"]
    assert invalid and invalid[0]["action"]["raw"] == "not json"
    actions, tokens = trajectory_actions(result.trajectory)
    assert (
        replay("v1", "customer_lookup", 1, actions, tokens)["final"]["invalid_actions"]
        == row["invalid_actions"]
    )
    paths = write_results(tmp_path, [result])
    assert pq.read_table(paths["episodes"]).to_pylist()[0]["invalid_actions"] == row["invalid_actions"]
