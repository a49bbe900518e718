"""Reward variants on recorded episodes: the original's summed reward, binary, and v1's."""

from __future__ import annotations

import pytest

from schemashift.env.rulesets import get_ruleset
from schemashift.rollout.replay import replay
from schemashift.train.rewards import UNFINISHED_PENALTY, RewardError, episode_reward, reward_components

LEGACY = get_ruleset("legacy")


def _oracle_actions(scenario: str) -> list:
    return LEGACY.solution(LEGACY.build_task(scenario, 0))


@pytest.mark.parametrize("scenario", LEGACY.scenario_ids())
def test_legacy_cumulative_is_the_sum_of_per_step_shaped_totals_on_a_finished_episode(scenario):
    played = replay("legacy", scenario, 0, _oracle_actions(scenario))
    final = played["final"]
    assert final["done"]
    summed = sum(step["reward"]["shaped_total"] for step in played["steps"])
    assert episode_reward("legacy_cumulative", final, done=True) == pytest.approx(summed, abs=1e-12)
    assert episode_reward("binary", final, done=True) == 1.0


def test_an_episode_that_did_not_end_loses_half_a_point():
    scenario = LEGACY.scenario_ids()[0]
    played = replay("legacy", scenario, 0, _oracle_actions(scenario)[:1])
    final = played["final"]
    assert not final["done"]
    summed = sum(step["reward"]["shaped_total"] for step in played["steps"])
    assert episode_reward("legacy_cumulative", final, done=False) == pytest.approx(
        summed - UNFINISHED_PENALTY
    )
    assert episode_reward("binary", final, done=False) == 0.0


def test_no_step_taken_is_penalised_even_when_marked_done():
    final = {"cumulative_reward": 0.0, "steps": 0, "success": False}
    assert episode_reward("legacy_cumulative", final, done=True) == -UNFINISHED_PENALTY


def test_v1_reward_refuses_an_episode_without_a_training_reward():
    scenario = LEGACY.scenario_ids()[0]
    final = replay("legacy", scenario, 0, _oracle_actions(scenario))["final"]
    with pytest.raises(RewardError, match="training_reward"):
        episode_reward("v1", final, done=True)


def test_v1_reward_and_its_components_come_from_the_outcome():
    final = {
        "training_reward": 0.8,
        "score": 0.7,
        "success": True,
        "completion": 1.0,
        "drift_detection": 0.5,
        "adaptation": 1.0,
        "efficiency": 0.6,
    }
    assert episode_reward("v1", final, done=True) == 0.8
    components = reward_components("v1", final, done=True)
    assert components["reward_shaping"] == pytest.approx(0.1)
    assert components["reward_success"] == 1.0
    assert components["reward_drift_detection"] == 0.5


@pytest.mark.timeout(10)
def test_binary_pays_nothing_for_success_in_an_episode_that_did_not_end():
    final = {"success": True, "score": 0.9, "training_reward": 0.9, "steps": 5}
    assert episode_reward("binary", final, done=True) == 1.0
    assert episode_reward("binary", final, done=False) == 0.0
    assert reward_components("binary", final, done=False)["reward_success"] == 0.0


def test_unknown_variant_is_an_error():
    with pytest.raises(RewardError, match="unknown reward variant"):
        episode_reward("shaped", {"success": True}, done=True)
