"""The lockstep path: many episodes per policy call, records identical to one-at-a-time play."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy
from schemashift.rollout.backends import InProcessBackend
from schemashift.rollout.runner import SweepContext, cells, run_sweep, run_sweep_batched

LEGACY = get_ruleset("legacy")


@dataclass
class Decision:
    action: Any
    usage: tuple[int, int] = (5, 2)
    parse_failed: bool = False
    text: str | None = None
    error: BaseException | None = None


class LockstepOracle:
    """The oracle, one instance per slot, behind the lockstep interface; records each round."""

    def __init__(self, fail_on: str | None = None, garble_at: int | None = None) -> None:
        self.slots: dict[int, Any] = {}
        self.rounds: list[int] = []
        self.fail_on, self.garble_at = fail_on, garble_at
        self.single = make_policy("oracle", LEGACY)
        self.last_usage = (5, 2)
        self.last_parse_failed = False
        self.last_text = None

    def start_slot(self, slot: int, cell) -> None:
        self.slots[slot] = make_policy("oracle", LEGACY)

    def act_batch(self, entries):
        self.rounds.append(len(entries))
        out = []
        for slot, cell, observation in entries:
            if cell.scenario == self.fail_on:
                out.append(Decision(None, error=RuntimeError("model server went away")))
                continue
            if observation["step"] == self.garble_at:
                out.append(Decision("not json at all", parse_failed=True, text="not json at all"))
                continue
            out.append(Decision(self.slots[slot].act(observation)))
        return out

    # the sequential protocol, for comparison
    def reset(self) -> None:
        self.single.reset()

    def act(self, observation):
        if observation["step"] == self.garble_at:
            self.last_parse_failed, self.last_text = True, "not json at all"
            return "not json at all"
        self.last_parse_failed, self.last_text = False, None
        return self.single.act(observation)


CELLS = cells(["legacy"], LEGACY.scenario_ids(), [0, 1], samples=2)
CONTEXT = SweepContext("lockstep", "oracle")


def strip(result) -> tuple:
    return {k: v for k, v in result.record.items() if k != "wall_s"}, result.drifts, result.trajectory


@pytest.mark.parametrize("batch_size", [1, 5, 64])
def test_lockstep_records_equal_sequential_records(batch_size: int) -> None:
    batched = run_sweep_batched(InProcessBackend, LockstepOracle(), CELLS, CONTEXT, batch_size)
    sequential = run_sweep(InProcessBackend(), LockstepOracle(), CELLS, CONTEXT)
    assert [strip(r) for r in batched] == [strip(r) for r in sequential]
    assert all(r.record["tokens_in"] == 5 * r.record["steps"] for r in batched)


def test_rounds_batch_all_running_episodes_and_refill_slots() -> None:
    policy = LockstepOracle()
    seen = []
    run_sweep_batched(InProcessBackend, policy, CELLS, CONTEXT, 8, on_episode=seen.append)
    assert max(policy.rounds) == 8 and policy.rounds[0] == 8
    assert len(seen) == len(CELLS)
    assert sum(policy.rounds) == sum(r.record["steps"] for r in seen)


def test_a_parse_failure_is_counted_once_and_keeps_the_raw_text() -> None:
    batched = run_sweep_batched(InProcessBackend, LockstepOracle(garble_at=1), CELLS[:2], CONTEXT, 2)
    sequential = run_sweep(InProcessBackend(), LockstepOracle(garble_at=1), CELLS[:2], CONTEXT)
    assert [strip(r) for r in batched] == [strip(r) for r in sequential]
    for result in batched:
        assert result.record["parse_failures"] == 1
        step = result.trajectory["steps"][-1]
        assert step["raw"] == "not json at all" and step["action"]["type"] == "complete_task"


def test_a_failed_decision_is_an_infra_error_of_its_episode_only() -> None:
    policy = LockstepOracle(fail_on="E2_meeting_invite_blast")
    results = run_sweep_batched(InProcessBackend, policy, CELLS, CONTEXT, 6)
    for result in results:
        failed = result.record["scenario"] == "E2_meeting_invite_blast"
        assert result.record["status"] == ("infra_error" if failed else "graded")
        if failed:
            assert "model server went away" in result.record["error"]


def test_a_round_that_raises_fails_every_episode_in_it() -> None:
    class Broken(LockstepOracle):
        def act_batch(self, entries):
            raise MemoryError("out of memory")

    results = run_sweep_batched(InProcessBackend, Broken(), CELLS[:3], CONTEXT, 2)
    assert [r.record["status"] for r in results] == ["infra_error"] * 3
    assert all("out of memory" in r.record["error"] for r in results)


def test_batch_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="batch_size"):
        run_sweep_batched(InProcessBackend, LockstepOracle(), CELLS, CONTEXT, 0)
