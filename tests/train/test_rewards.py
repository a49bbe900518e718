"""Reward variants on recorded episodes: the original's summed reward, binary, and v1's."""

from __future__ import annotations

from pathlib import Path

import pytest

from schemashift.env.rulesets import get_ruleset
from schemashift.rollout.replay import replay
from schemashift.runs.rewards import (
    REWARD_VARIANTS,
    UNFINISHED_PENALTY,
    RewardError,
    RewardVariant,
    episode_reward,
    reward_components,
)

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


def _toy_variant() -> RewardVariant:
    """Half a point for an ended episode, a full point for a solved one; v1 only."""
    return RewardVariant(
        "toy_half",
        lambda final, done: (0.5 if done else 0.0) + (0.5 if done and final.get("success") else 0.0),
        rulesets=("v1",),
        why="is a test's toy",
    )


def test_a_toy_variant_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    from schemashift.runs.contract import RunConfigError, resolve_run
    from schemashift.train.dataset import episode_key
    from schemashift.train.sft import oracle_conversation
    from schemashift.train.turns import play_texts

    monkeypatch.setitem(REWARD_VARIANTS, "toy_half", _toy_variant())
    config = {
        "train": {
            "runs": {"toy": {"base_model": "m", "ruleset": "v1", "split": "train", "reward": "toy_half"}}
        }
    }
    assert resolve_run(config, "toy").reward == "toy_half"
    config["train"]["runs"]["toy"]["ruleset"] = "legacy"
    with pytest.raises(
        RunConfigError, match="reward toy_half is a test's toy and exists only on the v1 ruleset"
    ):
        resolve_run(config, "toy")
    turns = [
        m["content"] for m in oracle_conversation("v1", "customer_lookup", 10000) if m["role"] == "assistant"
    ]
    key = episode_key("v1", "customer_lookup", 10000)
    assert play_texts(key, turns, reward="toy_half")[2] == 1.0
    assert play_texts(key, turns[:1], reward="toy_half", max_turns=1)[2] == 0.0
    record, ended, _ = play_texts(key, turns, reward="toy_half")
    assert reward_components("toy_half", record, done=ended)["reward_shaping"] is None


def test_the_config_schema_allows_exactly_the_registered_variants() -> None:
    import yaml

    schema = yaml.safe_load(
        (Path(__file__).resolve().parents[2] / "workflow/schemas/config.schema.yaml").read_text()
    )
    found = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("reward"), dict) and "enum" in node["reward"]:
                found.append(node["reward"]["enum"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(schema)
    assert found and all(sorted(enum) == sorted(REWARD_VARIANTS) for enum in found)
