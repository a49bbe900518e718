"""Closed-loop rollouts: the model's next turn sees the environment's answer to its last one, in
exactly the conversation evaluation renders."""

from __future__ import annotations

import pytest

from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset
from schemashift.policies.llm.format import Conversation
from schemashift.policies.llm.parser import parse_output
from schemashift.train.closed_loop import ClosedLoopRollout, reward_function
from schemashift.train.dataset import opening_messages

pytestmark = [pytest.mark.model, pytest.mark.timeout(600)]


class RecordingRollout(ClosedLoopRollout):
    """The real rollout, keeping every batch of token sequences it asks the model to continue."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.inputs: list[list[list[int]]] = []

    def _generate(self, decoder, plays):
        self.inputs.append([list(play.context()) for play in plays])
        return super()._generate(decoder, plays)


@pytest.fixture(scope="module")
def model_and_tokenizer(tiny_model):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    return AutoModelForCausalLM.from_pretrained(tiny_model), AutoTokenizer.from_pretrained(tiny_model)


def test_the_second_turn_sees_the_first_turns_observation(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    ruleset = get_ruleset("v1")
    scenario, seed = ruleset.scenario_ids()[0], 10_000
    rollout = RecordingRollout(tokenizer, reward="v1", max_turn_tokens=96, max_turns=2, temperature=0)
    out = rollout.play(model, [opening_messages("v1", scenario, seed)])

    assert len(rollout.inputs) == 2, "the episode should still run after one turn"
    first_input, second_input = rollout.inputs[0][0], rollout.inputs[1][0]
    assert first_input == out["prompt_ids"][0]
    mask = out["env_mask"][0]
    first_turn_end = mask.index(0)
    second_turn_start = mask.index(1, first_turn_end)
    first_turn = out["completion_ids"][0][:first_turn_end]
    assert second_input == first_input + out["completion_ids"][0][:second_turn_start]

    # What the environment answered to the first turn, rendered by the shared format...
    env = Environment(ruleset)
    conversation = Conversation.for_ruleset(ruleset, env.reset(scenario, seed))
    text = tokenizer.decode(first_turn, skip_special_tokens=True)
    parsed = parse_output(text, ruleset.tool_names, ruleset.drift_kinds)
    # The rollout charges the turn's prompt and generated tokens, as evaluation does.
    observation, _ = env.step(
        parsed.action if parsed.action is not None else text, len(first_input) + len(first_turn)
    )
    conversation.add_turn(text, observation)
    # ...is in the second turn's input, which is the evaluation conversation's exact rendering.
    rendered = tokenizer.apply_chat_template(
        conversation.messages(), add_generation_prompt=True, tokenize=False
    )
    assert tokenizer.decode(second_input) == rendered
    assert conversation.render_observation(observation) in tokenizer.decode(second_input)
    assert f"STEP 1 of {observation['max_steps']}" in tokenizer.decode(second_input)


def test_rollout_outputs_feed_trl_and_the_reward_function(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    ruleset = get_ruleset("v1")
    prompts = [opening_messages("v1", scenario, 10_001) for scenario in ruleset.scenario_ids()[:2]]
    rollout = ClosedLoopRollout(tokenizer, reward="v1", max_turn_tokens=64, max_turns=2, temperature=1.0)
    out = rollout.play(model, prompts)
    assert set(out) == {"prompt_ids", "completion_ids", "logprobs", "env_mask", "outcome", "ended"}
    for completion, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        assert len(completion) == len(mask) and mask[0] == 1
    rewards = reward_function("v1")(prompts, None, outcome=out["outcome"], ended=out["ended"])
    assert rewards == [record["training_reward"] for record in out["outcome"]]
    played = rollout.drain()
    assert [row["scenario"] for row in played] == ruleset.scenario_ids()[:2]
    assert all(row["status"] == "graded" and row["model_tokens"] > 0 for row in played)
    assert rollout.drain() == []


def test_a_prompt_without_its_episode_is_refused(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    rollout = ClosedLoopRollout(tokenizer, reward="v1", max_turn_tokens=8, max_turns=1)
    prompt = [{"role": "system", "content": "x"}, {"role": "user", "content": "y"}]
    with pytest.raises(ValueError, match="episode"):
        rollout.play(model, [prompt])


def test_by_default_each_episode_runs_until_the_environment_ends_it(model_and_tokenizer):
    model, tokenizer = model_and_tokenizer
    ruleset = get_ruleset("v1")
    seed = ruleset.splits()["train"][0]
    rollout = ClosedLoopRollout(tokenizer, reward="binary", max_turn_tokens=128, temperature=0)
    out = rollout.play(model, [opening_messages("v1", "customer_lookup", seed)])
    assert out["ended"] == [True]
    assert out["outcome"][0]["steps"] <= ruleset.scenario_info("customer_lookup").max_steps
