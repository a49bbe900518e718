"""Adding a harness is one registry entry: a toy harness registered here (and nowhere else) is
validated, named in folders and labels, rendered into training prompts, written by the oracle's
warm-start conversations and played by the trainer's turn loop, all from its `Harness` entry."""

from __future__ import annotations

import pytest

from schemashift.policies.llm.format import Conversation, action_text
from schemashift.policies.llm.functions import unreadable_action
from schemashift.policies.llm.harnesses import (
    DEFAULT_HARNESS,
    HARNESSES,
    Harness,
    Step,
    get_harness,
    model_harnesses,
    trainable_harnesses,
)
from schemashift.policies.llm.parser import parse_output
from schemashift.rollout.subject import Subject, check_harness, harness_folder, split_harness
from schemashift.train.dataset import EPISODE_FIELD, episode_key, opening_messages
from schemashift.train.sft import oracle_conversation
from schemashift.train.turns import play_texts

pytestmark = pytest.mark.timeout(120)

PREFIX = "ACT>"


class ToyConversation(Conversation):
    """The default conversation with one more line of instructions: actions follow a prefix."""

    def messages(self):
        out = super().messages()
        return [{**out[0], "content": out[0]["content"] + f"\nStart each action with {PREFIX}."}, *out[1:]]


def read_prefixed(text: str, tools, drift_kinds) -> list[Step]:
    """An action counts only after the prefix; a turn without one is an action the environment
    rejects (text handed on as it is would be read by the environment itself)."""
    _, mark, rest = text.partition(PREFIX)
    parsed = parse_output(rest, tools, drift_kinds) if mark else None
    if parsed is None or parsed.action is None:
        return [(unreadable_action(f"no {PREFIX} prefix"), True, text)]
    return [(parsed.action, False, text)]


TOY = Harness(
    "toy",
    ToyConversation,
    read_prefixed,
    lambda action: f"{PREFIX} {action_text(action)}",
    model_default=False,
)


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Harness:
    monkeypatch.setitem(HARNESSES, TOY.name, TOY)
    return TOY


def test_the_entry_is_what_every_layer_sees(toy: Harness) -> None:
    assert get_harness("toy") is toy and check_harness("toy") == "toy"
    assert "toy" in trainable_harnesses() and "toy" not in model_harnesses()
    assert split_harness(harness_folder("tiny", "toy")) == ("tiny", "toy")
    subject = Subject.of_record(
        {"policy": "hf:m", "train_run": "run1", "checkpoint_step": 4, "harness": "toy"}
    )
    assert subject.label == "run1@step-4+toy" and Subject.parse(subject.label, "checkpoint") == subject


def test_unregistered_it_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="unknown harness 'toy'; known: " + ", ".join(HARNESSES)):
        check_harness("toy")
    assert DEFAULT_HARNESS in HARNESSES


def test_training_prompts_and_warm_starts_follow_the_entry(toy: Harness) -> None:
    prompt = opening_messages("v1", "onboard_new_hire", 10000, "toy")
    assert prompt[0]["content"].endswith(f"Start each action with {PREFIX}.")
    assert prompt[0][EPISODE_FIELD] == episode_key("v1", "onboard_new_hire", 10000)
    conversation = oracle_conversation("v1", "onboard_new_hire", 10000, "toy")
    turns = [m["content"] for m in conversation if m["role"] == "assistant"]
    assert turns and all(t.startswith(PREFIX) for t in turns)
    # the oracle's turns, played back through the trainer's turn loop in the toy harness, solve it
    record, ended, reward = play_texts(
        episode_key("v1", "onboard_new_hire", 10000), turns, reward="binary", harness="toy"
    )
    assert ended and record["success"] and reward == 1.0 and record["parse_failures"] == 0
    # the same turns without the prefix are unreadable to the toy harness
    bare = [t.removeprefix(PREFIX).strip() for t in turns]
    record, _, reward = play_texts(
        episode_key("v1", "onboard_new_hire", 10000), bare, reward="binary", harness="toy"
    )
    assert reward == 0.0 and not record["success"] and record["parse_failures"] > 0
