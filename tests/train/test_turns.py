"""The trainer's turn loop: every scenario runs to its own step limit, and an episode the loop
cuts off earns no more than one that ended in failure (no reward for stopping early)."""

from __future__ import annotations

import pytest

from schemashift.env.rulesets import get_ruleset
from schemashift.policies.llm.format import action_text
from schemashift.rollout.runner import SweepContext
from schemashift.train.dataset import episode_key
from schemashift.train.turns import TurnLoop, play_texts

pytestmark = pytest.mark.timeout(60)

V1 = get_ruleset("v1")
LEGACY = get_ruleset("legacy")
V1_FIRST_TRAIN_SEED = V1.splits()["train"][0]
V1_SCENARIOS = V1.scenario_ids() + [info.id for info in V1.compositions()]
#: (ruleset, scenario, seed): every v1 family and composition at three train seeds, every legacy scenario
EPISODES = [
    ("v1", scenario, V1_FIRST_TRAIN_SEED + offset) for scenario in V1_SCENARIOS for offset in range(3)
] + [("legacy", scenario, 0) for scenario in LEGACY.scenario_ids()]


def _oracle_texts(ruleset_name: str, scenario: str, seed: int) -> list[str]:
    """The oracle's solution as a model would write it, one action per turn."""
    ruleset = get_ruleset(ruleset_name)
    return [action_text(action) for action in ruleset.solution(ruleset.build_task(scenario, seed))]


@pytest.mark.parametrize(("ruleset_name", "scenario", "seed"), EPISODES)
def test_each_scenario_gets_its_own_step_limit_and_the_oracle_finishes_within_it(
    ruleset_name, scenario, seed
):
    key = episode_key(ruleset_name, scenario, seed)
    limit = get_ruleset(ruleset_name).scenario_info(scenario).max_steps
    assert TurnLoop(key, SweepContext(sweep_id="t", policy="texts")).limit == limit

    reward = "v1" if ruleset_name == "v1" else "legacy_cumulative"
    record, ended, _ = play_texts(key, _oracle_texts(ruleset_name, scenario, seed), reward=reward)
    assert ended, f"{key}: the oracle's episode was cut off at {limit} turns"
    assert record["success"] and record["parse_failures"] == 0
    assert record["steps"] <= limit


@pytest.mark.parametrize("ruleset_name", ["v1", "legacy"])
def test_unreadable_turns_never_outlast_the_limit_the_environment_ends_the_episode(ruleset_name):
    ruleset = get_ruleset(ruleset_name)
    for scenario in ruleset.scenario_ids():
        limit = ruleset.scenario_info(scenario).max_steps
        seed = V1_FIRST_TRAIN_SEED if ruleset_name == "v1" else 0
        reward = "v1" if ruleset_name == "v1" else "legacy_cumulative"
        record, ended, _ = play_texts(
            episode_key(ruleset_name, scenario, seed), ["I am not sure."] * limit, reward=reward
        )
        assert ended and not record["success"]


def test_a_loop_that_is_over_refuses_another_turn():
    key = episode_key("legacy", LEGACY.scenario_ids()[0], 0)
    loop = TurnLoop(key, SweepContext(sweep_id="t", policy="texts"), max_turns=1)
    assert loop.take(action_text({"type": "inspect_schema", "inspect": {"tool": "mail"}})) is False
    assert not loop.ended and not loop.running
    with pytest.raises(RuntimeError, match="is over"):
        loop.take("{}")


@pytest.mark.parametrize("scenario", V1_SCENARIOS)
def test_a_cut_off_episode_earns_no_more_than_a_failed_ended_one_of_the_same_writes(scenario):
    """Every prefix of the oracle's play, cut off before its completion, against the same prefix
    ended by completing: the ended episode minus its terminal score is what failing it earns."""
    key = episode_key("v1", scenario, V1_FIRST_TRAIN_SEED)
    texts = _oracle_texts("v1", scenario, V1_FIRST_TRAIN_SEED)
    *writes, complete = texts
    for cut in range(1, len(writes) + 1):
        cut_off, cut_off_ended, cut_off_v1 = play_texts(key, writes[:cut], reward="v1")
        ended_record, ended, ended_v1 = play_texts(key, [*writes[:cut], complete], reward="v1")
        assert not cut_off_ended and ended
        assert play_texts(key, writes[:cut], reward="binary")[2] == 0.0
        failed_v1 = ended_v1 - ended_record["score"]
        assert cut_off_v1 <= failed_v1 + 1e-9, f"cut off after {cut} turns: {cut_off_v1} > {failed_v1}"
        assert not cut_off["success"] and cut_off["score"] == 0
