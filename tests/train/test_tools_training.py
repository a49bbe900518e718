"""Training through the tools harness (`train.runs.<run>.harness`): the run setting, the dataset's
opening, the trainer's turn loop (one step per call) and, with the tiny model, the warm start's
encoding and the closed-loop rollout rendering exactly what evaluation renders."""

from __future__ import annotations

import json

import pytest

from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset
from schemashift.policies.llm.format import (
    TOOLS_FIELD,
    ToolConversation,
    action_text,
    template_request,
)
from schemashift.policies.llm.functions import NO_CALL, action_call_text
from schemashift.policies.llm.harnesses import get_harness
from schemashift.runs.contract import RunConfigError, resolve_run
from schemashift.train.dataset import EPISODE_FIELD, build_rows, episode_key, opening_messages
from schemashift.train.turns import play_texts

pytestmark = pytest.mark.timeout(120)

V1 = get_ruleset("v1")
SEED = V1.splits()["train"][0]


def _run(**overrides):
    spec = {"base_model": "m", "ruleset": "v1", "split": "train", "reward": "v1", "overrides": overrides}
    return resolve_run({"train": {"runs": {"r": spec}}}, "r")


def test_the_harness_is_a_run_setting() -> None:
    assert _run()["harness"] == "default" and _run(harness="tools")["harness"] == "tools"
    with pytest.raises(RunConfigError, match="harness must be one of"):
        _run(harness="legacy")


def test_the_dataset_opens_each_episode_in_the_runs_harness() -> None:
    rows = build_rows(_run(harness="tools", dataset_size=2, scenarios=["customer_lookup"]))
    prompt = rows[0]["prompt"]
    assert prompt[0][EPISODE_FIELD] == episode_key("v1", "customer_lookup", rows[0]["seed"])
    # the definitions travel as JSON text, and render as the evaluation conversation's
    observation = Environment(V1).reset("customer_lookup", rows[0]["seed"])
    opening = ToolConversation.for_ruleset(V1, observation).messages()
    assert json.loads(prompt[0][TOOLS_FIELD]) == opening[0][TOOLS_FIELD]
    assert template_request(prompt) == template_request(opening)
    from datasets import Dataset  # the trainer's container for the rows

    stored = Dataset.from_list(rows).to_list()
    assert template_request(stored[0]["prompt"]) == template_request(opening)


@pytest.mark.parametrize("scenario", ["customer_lookup", "weekly_report", "event_cleanup"])
def test_the_turn_loop_takes_a_step_per_call_and_scores_as_the_json_harness(scenario) -> None:
    key = episode_key("v1", scenario, SEED)
    plan = V1.solution(V1.build_task(scenario, SEED))
    by_json = play_texts(key, [action_text(a) for a in plan], reward="v1")
    pairs = ["\n".join(action_call_text(a) for a in plan[i : i + 2]) for i in range(0, len(plan), 2)]
    by_tools = play_texts(key, pairs, reward="v1", harness="tools")
    assert by_json[1] and by_tools[1] and by_json[2] == by_tools[2]
    own = {"sweep_id", "harness", "wall_s"}
    assert {k: v for k, v in by_json[0].items() if k not in own} == {
        k: v for k, v in by_tools[0].items() if k not in own
    }
    assert by_tools[0]["harness"] == "tools" and by_tools[0]["success"]


def test_a_turn_is_read_alike_by_evaluation_and_training() -> None:
    text = action_call_text({"type": "complete_task", "complete": {"summary": "x"}}) + "\n<tool_call>\n{bad"
    steps = get_harness("tools").read_turn(text, V1.tool_names, V1.drift_kinds)
    assert [failed for _, failed, _ in steps] == [False, True]
    inspect = {"type": "inspect_schema", "inspect": {"tool": "crm"}}
    # an action written as JSON text is no call in the tools harness, and played in the default one
    ((action, failed, recorded),) = get_harness("tools").read_turn(
        action_text(inspect), V1.tool_names, V1.drift_kinds
    )
    assert failed and action == {"type": NO_CALL} and recorded == action_text(inspect)
    (only,) = get_harness("default").read_turn(
        action_text(inspect),
        V1.tool_names,
        V1.drift_kinds,
    )
    assert only[0] == {"type": "inspect_schema", "inspect": {"tool": "crm"}} and not only[1]


@pytest.mark.model
@pytest.mark.timeout(600)
def test_the_warm_start_and_the_rollout_render_the_tools_harness_as_evaluation_does(tiny_model) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from schemashift.policies.llm.turn_end import end_of_turn_ids
    from schemashift.train.closed_loop import ClosedLoopRollout
    from schemashift.train.sft import encode_conversation, oracle_conversation

    model, tokenizer = (
        AutoModelForCausalLM.from_pretrained(tiny_model),
        AutoTokenizer.from_pretrained(tiny_model),
    )
    messages = oracle_conversation("v1", "customer_lookup", SEED, "tools")
    ids, labels = encode_conversation(
        tokenizer, messages, end_of_turn_ids(tokenizer, model.generation_config)
    )
    trained = tokenizer.decode([t for t, label in zip(ids, labels, strict=True) if label != -100])
    assert trained.count("<tool_call>") == sum(m["role"] == "assistant" for m in messages)
    assert "<tool_response>" not in trained  # the environment's text carries no loss

    rollout = ClosedLoopRollout(
        tokenizer, reward="v1", max_turn_tokens=48, max_turns=2, temperature=0, harness="tools"
    )
    out = rollout.play(model, [opening_messages("v1", "customer_lookup", SEED, "tools")])
    plain, tools = template_request(opening_messages("v1", "customer_lookup", SEED, "tools"))
    opening = tokenizer.apply_chat_template(plain, tools=tools, add_generation_prompt=True, tokenize=False)
    assert tokenizer.decode(out["prompt_ids"][0]) == opening and "<tools>" in opening
    (row,) = rollout.drain()
    assert row["status"] == "graded" and row["harness"] == "tools"
