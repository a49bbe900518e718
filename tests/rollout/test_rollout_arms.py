"""The arm (`env.arms`) carried through the rollout layer: cells, records, resumable sweeps,
replay and re-grading. Real v1 episodes played by the oracle in both arms; nothing is mocked."""

from __future__ import annotations

import json

import pytest

from schemashift.env.arms import CONTROL, DRIFT
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout import io, records, resultset
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.replay import record_actions, replay, trajectory_actions
from schemashift.rollout.runner import Cell, SweepContext, cells, run_sweep, write_results
from schemashift.rollout.selection import CellSelectionError, parse_arms
from schemashift.rollout.sweep import ResumableSweep, cell_name, in_cell_order
from schemashift.rollout.validate import differences

pytestmark = pytest.mark.timeout(120)

V1 = get_ruleset("v1")
LEGACY = get_ruleset("legacy")
SCENARIOS = ["customer_lookup", "weekly_report"]
CELLS = cells(["v1"], SCENARIOS, [0, 1], arms=[DRIFT, CONTROL])


@pytest.fixture(scope="module")
def played():
    backend = InProcessBackend()
    try:
        return run_sweep(backend, make_policy("oracle", "v1"), CELLS, SweepContext("s", "oracle"))
    finally:
        backend.close()


def test_cells_play_every_arm_of_a_cell_side_by_side_drift_first_by_default() -> None:
    assert [cell.arm for cell in CELLS] == [DRIFT, CONTROL] * 4
    assert {(c.scenario, c.seed) for c in CELLS[::2]} == {(c.scenario, c.seed) for c in CELLS[1::2]}
    assert {cell.arm for cell in cells(["v1"], SCENARIOS, [0])} == {DRIFT}
    with pytest.raises(ValueError, match="unknown arm 'Control'"):
        cells(["v1"], SCENARIOS, [0], arms=["Control"])


def test_every_record_names_its_arm_and_the_control_arm_fires_no_drift(played) -> None:
    for cell, result in zip(CELLS, played, strict=True):
        assert result.record["status"] == "graded", result.record["error"]
        assert result.record["arm"] == cell.arm == result.trajectory["arm"]
        assert result.record["success"] is True  # the oracle solves both arms
        if cell.arm == CONTROL:
            assert result.record["drifts_fired"] == 0
            assert result.drifts == [] and result.trajectory["schedule"] == []
        else:
            assert result.record["drifts_fired"] > 0
            assert result.drifts and {row["arm"] for row in result.drifts} == {DRIFT}


def test_the_arm_is_written_to_both_tables_and_read_back(tmp_path, played) -> None:
    write_results(tmp_path, played)
    episodes = io.read_parquet_rows(tmp_path / resultset.EPISODES_FILE)
    assert [row["arm"] for row in episodes] == [cell.arm for cell in CELLS]
    drifts = io.read_parquet_rows(tmp_path / resultset.DRIFTS_FILE)
    assert drifts and {row["arm"] for row in drifts} == {DRIFT}
    assert [t["arm"] for t in io.read_jsonl(tmp_path / resultset.TRAJECTORIES_FILE)] == [c.arm for c in CELLS]


def test_arm_lists_are_checked_against_the_ruleset() -> None:
    assert parse_arms("drift,control", V1) == [DRIFT, CONTROL]
    assert parse_arms(" control ", V1) == [CONTROL]
    assert parse_arms(["drift"], LEGACY) == [DRIFT]
    for text, message in (
        ("control", "ruleset 'legacy' does not play the control arm"),
        ("drift,sideways", "unknown arm 'sideways'"),
        ("drift,drift", "named twice"),
        ("", "no arm given"),
    ):
        with pytest.raises(CellSelectionError, match=message):
            parse_arms(text, LEGACY)


def test_a_control_cell_is_kept_apart_from_its_drift_twin_and_drift_names_are_unchanged(
    tmp_path, played
) -> None:
    assert cell_name("v1", "customer_lookup", 3, 0) == "v1/customer_lookup/seed-3/sample-0.json"
    assert cell_name("v1", "customer_lookup", 3, 0, DRIFT) == "v1/customer_lookup/seed-3/sample-0.json"
    assert (
        cell_name("v1", "customer_lookup", 3, 0, CONTROL) == "v1/customer_lookup/seed-3/sample-0.control.json"
    )
    sweep = ResumableSweep(tmp_path, "eval.json")
    # only the drift halves are kept: a resume plays exactly the control cells again
    for cell, result in zip(CELLS, played, strict=True):
        if cell.arm == DRIFT:
            sweep.persist(result)
    finished = sweep.finished(CELLS)
    assert sorted(finished) == [p for p, cell in enumerate(CELLS) if cell.arm == DRIFT]
    todo = [cell for p, cell in enumerate(CELLS) if p not in finished]
    assert {cell.arm for cell in todo} == {CONTROL}
    merged = in_cell_order(len(CELLS), finished, [played[p] for p in range(len(CELLS)) if p not in finished])
    assert [r.record["arm"] for r in merged] == [c.arm for c in CELLS]
    # a stored record whose arm is not the cell's is played again
    path = sweep.progress / cell_name("v1", "customer_lookup", 0, 0)
    data = json.loads(path.read_text())
    data["record"]["arm"] = CONTROL
    path.write_text(json.dumps(data))
    assert 0 not in sweep.finished(CELLS)


def test_replay_and_recording_play_the_arm_they_are_given(played) -> None:
    position = next(p for p, c in enumerate(CELLS) if c.arm == CONTROL)
    cell, result = CELLS[position], played[position]
    actions, tokens = trajectory_actions(result.trajectory)
    again = replay("v1", cell.scenario, cell.seed, actions, tokens, arm=CONTROL)
    assert again["final"]["success"] is True and again["final"]["score"] == result.record["score"]
    # the control arm's plan under drift: the same actions meet the drifts they do not handle
    drifted = replay("v1", cell.scenario, cell.seed, actions, tokens, arm=DRIFT)
    assert drifted["final"]["score"] != result.record["score"] or drifted["final"]["success"] is False
    recorded = record_actions("v1", cell.scenario, cell.seed, actions, SweepContext("r", "external"), CONTROL)
    assert recorded.record["arm"] == CONTROL and recorded.record["score"] == result.record["score"]


def test_validate_regrades_each_episode_in_its_own_arm(tmp_path, played) -> None:
    write_results(tmp_path / "ok", played)
    assert list(differences(tmp_path / "ok")) == []
    # a control row relabelled as drift is re-graded under drift, and differs
    position = next(p for p, c in enumerate(CELLS) if c.arm == CONTROL)
    tampered = [r for r in played]
    result = played[position]
    import dataclasses

    tampered[position] = dataclasses.replace(
        result,
        record={**result.record, "arm": DRIFT, "sample_index": 1},
        trajectory={**result.trajectory, "arm": DRIFT, "sample_index": 1},
    )
    write_results(tmp_path / "bad", tampered)
    found = list(differences(tmp_path / "bad"))
    assert found and "re-graded" in found[0], found


def test_a_row_written_before_arms_is_re_graded_in_the_drift_arm(tmp_path, played) -> None:
    """Version 4 rows carry no arm: validate, replay and the sweep read them as drift."""
    position = next(p for p, c in enumerate(CELLS) if c.arm == DRIFT)
    result = played[position]
    older = {k: v for k, v in result.record.items() if k != "arm"}
    assert records.read_arm(older) == DRIFT
    from schemashift.rollout.validate import replay_row

    again = replay_row(older, {k: v for k, v in result.trajectory.items() if k != "arm"})
    assert again.record["arm"] == DRIFT and again.record["score"] == result.record["score"]


def test_the_in_process_backend_resets_in_the_arm_it_is_asked_for() -> None:
    backend = InProcessBackend()
    cell = Cell("v1", "customer_lookup", 0, arm=CONTROL)
    backend.reset(cell.ruleset, cell.scenario, cell.seed, arm=cell.arm)
    assert backend.outcome()["task"]["schedule"] == []
    backend.reset(cell.ruleset, cell.scenario, cell.seed)
    assert backend.outcome()["task"]["schedule"] != []
    with pytest.raises(ValueError, match="plays only the drift arm"):
        backend.reset("legacy", LEGACY.scenario_ids()[0], 0, arm=CONTROL)
