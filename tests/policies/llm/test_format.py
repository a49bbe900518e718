"""The interaction format: what each message shows, the history budget, the legacy prompt."""

from __future__ import annotations

import json
import random

import pytest

from schemashift.env.environment import Environment
from schemashift.policies.base import call_tool, complete_task, inspect_schema
from schemashift.policies.llm.format import (
    Conversation,
    LegacyPrompt,
    action_text,
    estimate_tokens,
)
from schemashift.policies.llm.harnesses import get_harness
from schemashift.policies.llm.parser import parse_output


def play(scenario: str, actions: list[dict], **kwargs) -> tuple[Conversation, list[dict]]:
    env = Environment("legacy")
    observation = env.reset(scenario, 0)
    conversation = Conversation.for_ruleset(env.ruleset, observation, **kwargs)
    observations = [observation]
    for action in actions:
        observation, _ = env.step(action)
        conversation.add_turn(action_text(action), observation)
        observations.append(observation)
    return conversation, observations


def test_the_first_prompt_holds_grammar_vocabulary_task_and_documentation() -> None:
    conversation, (obs,) = play("E1_onboard_new_hire", [])
    system, task = conversation.messages()
    assert system["role"] == "system" and task["role"] == "user"
    for kind in ("call_tool", "inspect_schema", "retry_with_variant", "report_drift", "complete_task"):
        assert f'"type": "{kind}"' in system["content"]
    assert "field_rename" in system["content"] and "endpoint_deprecation" in system["content"]
    assert obs["task_description"] in task["content"]
    for criterion in obs["success_criteria"]:
        assert criterion in task["content"]
    assert "send_message(to: str, subject: str, body: str) required: to, subject, body" in task["content"]
    assert "at most 8 steps" in task["content"]
    assert obs["episode_id"] not in json.dumps(conversation.messages())


def test_each_step_shows_status_error_body_and_changed_documentation() -> None:
    bad = call_tool("mail", "list_messages", {})
    good = call_tool("mail", "list_messages", {"folder": "inbox"})
    conversation, observations = play("E2_meeting_invite_blast", [bad, good])
    messages = conversation.messages()
    assert [m["role"] for m in messages] == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[2]["content"] == action_text(bad)
    failed, succeeded = messages[3]["content"], messages[5]["content"]
    assert "RESPONSE: status 400 error" in failed and "ERROR: " in failed
    assert observations[1]["last_response"]["error"] in failed
    assert "RESPONSE: status 200 ok" in succeeded and "BODY: " in succeeded
    # E2 deprecates send_message at step 1: the documentation change is shown once
    assert "TOOL DOCUMENTATION CHANGED" in failed and "messages.send" in failed
    assert "TOOL DOCUMENTATION CHANGED" not in succeeded
    assert "FEEDBACK: " in failed


def test_history_is_kept_within_the_budget_and_the_task_is_never_dropped() -> None:
    actions = [call_tool("mail", "list_messages", {"folder": "inbox"})] * 5
    full, _ = play("E1_onboard_new_hire", actions)
    full_tokens = estimate_tokens(full.messages())
    budget = full_tokens - 150
    trimmed, _ = play("E1_onboard_new_hire", actions, max_prompt_tokens=budget)
    messages = trimmed.messages()
    assert estimate_tokens(messages) <= budget
    assert trimmed.dropped >= 1
    assert messages[0] == full.messages()[0]
    assert messages[1]["content"].startswith(full.messages()[1]["content"])
    assert (
        "EARLIER STEPS (summarised):\nstep 1: call_tool mail.list_messages -> 200" in messages[1]["content"]
    )
    assert messages[-1] == full.messages()[-1]
    # the latest turn stays even when nothing fits
    tiny, _ = play("E1_onboard_new_hire", actions, max_prompt_tokens=1)
    assert tiny.messages()[-1] == full.messages()[-1] and tiny.dropped == 4


@pytest.mark.parametrize("case", range(12))
def test_a_prompt_over_budget_is_compacted_in_one_block_that_later_prompts_extend(case) -> None:
    """Between two compactions each prompt extends the one before (so a model reuses its cache of
    it); a compaction brings the prompt within COMPACT_TO of the budget, or keeps only the latest
    turn; every prompt that can fit the budget does."""
    rng = random.Random(case)
    env = Environment("v1")
    scenario = rng.choice(env.ruleset.scenario_ids())
    observation = env.reset(scenario, rng.randrange(50))
    opening = estimate_tokens(Conversation.for_ruleset(env.ruleset, observation).messages())
    budget = opening + rng.randrange(200, 3000)
    conversation = Conversation.for_ruleset(env.ruleset, observation, max_prompt_tokens=budget)
    probes = [
        call_tool("mail", "list_messages", {"folder": "inbox"}),
        call_tool("crm", "search_contacts", {"query": "a" * rng.randrange(1, 300)}),
        inspect_schema(rng.choice(["mail", "calendar", "crm"])),
    ]
    previous, compactions = conversation.messages(), 0
    while not observation.get("done"):
        action = rng.choice(probes)
        observation, _ = env.step(action)
        text = action_text(action) if rng.random() < 0.7 else "noise " * rng.randrange(1, 120)
        conversation.add_turn(text, observation)
        grown = [*previous, *conversation.messages()[-2:]]
        messages = conversation.messages()
        assert conversation.messages() == messages  # asking again changes nothing
        if messages[: len(previous)] != previous:
            compactions += 1
            assert estimate_tokens(grown) > budget  # only a prompt over budget is compacted
            assert (
                estimate_tokens(messages) <= int(budget * Conversation.COMPACT_TO)
                or conversation.dropped == len(conversation.turns) - 1
            )
            assert "EARLIER STEPS (summarised)" in messages[1]["content"]
        assert len(messages) == 2 + 2 * (len(conversation.turns) - conversation.dropped)
        if estimate_tokens(messages) > budget:
            assert conversation.dropped == len(conversation.turns) - 1
        previous = messages
    assert compactions < len(conversation.turns) - 1 or budget < opening + 1000


def test_compaction_leaves_room_for_later_turns() -> None:
    actions = [call_tool("mail", "list_messages", {"folder": "inbox"})] * 12
    env = Environment("v1")
    observation = env.reset("onboard_new_hire", 0)
    budget = estimate_tokens(Conversation.for_ruleset(env.ruleset, observation).messages()) + 600
    conversation = Conversation.for_ruleset(env.ruleset, observation, max_prompt_tokens=budget)
    dropped = []
    for action in actions:
        observation, _ = env.step(action)
        conversation.add_turn(action_text(action), observation)
        conversation.messages()
        dropped.append(conversation.dropped)
    changes = sum(1 for a, b in zip(dropped[:-1], dropped[1:], strict=True) if a != b)
    assert dropped[-1] >= 2 and changes < dropped[-1]


def test_an_unparseable_output_is_kept_verbatim_in_the_conversation() -> None:
    env = Environment("legacy")
    obs = env.reset("E1_onboard_new_hire", 0)
    conversation = Conversation.for_ruleset(env.ruleset, obs)
    obs, _ = env.step(inspect_schema("mail"))
    conversation.add_turn("I will inspect {mail", obs)
    assert conversation.messages()[2]["content"] == "I will inspect {mail"


def test_the_legacy_prompt_is_the_original_stateless_one() -> None:
    env = Environment("legacy")
    obs = env.reset("E1_onboard_new_hire", 0)
    prompt = LegacyPrompt.for_ruleset(env.ruleset, obs)
    (message,) = prompt.messages()
    text = message["content"]
    assert text.startswith("You are an autonomous workflow agent. Complete the task using tools.\n\nTASK: ")
    assert "RECENT HISTORY (last 0 steps):\n(no history yet)" in text
    assert json.dumps(obs["tool_schemas"], indent=2) in text
    assert text.endswith("Your next action:")
    obs, _ = env.step(call_tool("mail", "list_messages", {}))
    prompt.add_turn("ignored", obs)
    (message,) = prompt.messages()
    assert "Step 1: call_tool -> status=400, ok=False" in message["content"]
    assert "field_rename" not in message["content"]  # the original never listed the drift kinds


def test_harness_names() -> None:
    assert get_harness("default").conversation is Conversation
    assert get_harness("legacy").conversation is LegacyPrompt
    with pytest.raises(ValueError, match="unknown harness 'chat'; known: default, legacy, tools"):
        get_harness("chat")


def test_the_final_action_parses_back_from_the_assistant_turn() -> None:
    conversation, _ = play("E1_onboard_new_hire", [complete_task("Done.")])
    text = conversation.messages()[2]["content"]
    assert parse_output(text).action == complete_task("Done.")
