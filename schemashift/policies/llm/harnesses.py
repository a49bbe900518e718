"""The harness registry: how a model acts in the environment, one entry per harness.

A harness is the interaction format a model plays through: how an episode becomes messages
(its conversation class), how a model turn is read back into steps, how a known action is
written as a model turn (supervised warm-starts), and the facts other layers ask of it (does it
need a chat template with tool support, what an API call's default token limit is). Every layer
asks the entry instead of comparing names, so adding a harness is one `Harness` in `HARNESSES`;
the config schema's harness enums are tested against this registry.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from schemashift.policies.llm.format import (
    Conversation,
    LegacyPrompt,
    ToolConversation,
    action_text,
)
from schemashift.policies.llm.functions import (
    NO_CALL,
    action_call_text,
    call_action,
    read_calls,
    unreadable_action,
)
from schemashift.policies.llm.parser import legacy_parse, parse_output

#: one step a model turn takes: (action, or what stands for an unreadable one, whether it was
#: unreadable, the text the step records)
Step = tuple[Any, bool, str]
#: reads a model turn: (text, the ruleset's tool names, its drift kinds) -> the turn's steps
TurnReader = Callable[[str, Sequence[str], Sequence[str]], list[Step]]

#: the harness a model plays unless told otherwise
DEFAULT_HARNESS = "default"
#: the original harness asked for 500 tokens per step (legacy spec 9.3)
LEGACY_MAX_TOKENS = 500


def read_text_action(parse: Callable[..., Any]) -> TurnReader:
    """A reader of one JSON action in a turn's text (`parse`: the default or the legacy parser);
    an unreadable turn is handed on as its text, which the environment rejects."""

    def read(text: str, tools: Sequence[str], drift_kinds: Sequence[str]) -> list[Step]:
        parsed = parse(text, tools, drift_kinds)
        if parsed.action is None:
            return [(text, True, text)]
        return [(parsed.action, False, text)]

    return read


def read_function_calls(text: str, tools: Sequence[str], drift_kinds: Sequence[str]) -> list[Step]:
    """One step per native function call (the first records the whole turn, the others their
    call's block); a turn without a call is one invalid step (`functions.NO_CALL`)."""
    calls = read_calls(text)
    if not calls:
        return [(unreadable_action(NO_CALL), True, text)]
    return [(*call_action(call), text if k == 0 else call.text) for k, call in enumerate(calls)]


@dataclass(frozen=True)
class Harness:
    """One harness: its name, its behaviour, and what the other layers ask of it."""

    name: str
    #: renders an episode as messages (`for_ruleset(ruleset, observation, ...)`)
    conversation: type[Conversation] | type[LegacyPrompt]
    #: reads a model turn back into the steps it takes
    read_turn: TurnReader
    #: writes a known action as the model turn that takes it (oracle warm-starts)
    write_action: Callable[[dict[str, Any]], str]
    #: actions travel as native function calls: a chat template must support tools, and a
    #: dataset row carries the function definitions (as JSON text, one schema for every row)
    function_calls: bool = False
    #: an API call's `max_tokens` unless the user sets one (None: the client's default)
    api_max_tokens: int | None = None
    #: played by models unless their config names their harnesses
    model_default: bool = True
    #: a training run may train through it (multi-turn rollouts and warm-starts in this format)
    trainable: bool = True


HARNESSES: dict[str, Harness] = {
    harness.name: harness
    for harness in (
        Harness(DEFAULT_HARNESS, Conversation, read_text_action(parse_output), action_text),
        Harness(
            "legacy",
            LegacyPrompt,
            read_text_action(legacy_parse),
            action_text,
            api_max_tokens=LEGACY_MAX_TOKENS,
            model_default=False,
            trainable=False,
        ),
        Harness("tools", ToolConversation, read_function_calls, action_call_text, function_calls=True),
    )
}


def get_harness(name: str) -> Harness:
    """The registry's entry for `name`; a ValueError naming the known harnesses otherwise."""
    try:
        return HARNESSES[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown harness {name!r}; known: {', '.join(HARNESSES)}") from None


def model_harnesses() -> tuple[str, ...]:
    """The harnesses a model plays unless its config names its own."""
    return tuple(name for name, harness in HARNESSES.items() if harness.model_default)


def trainable_harnesses() -> tuple[str, ...]:
    """The harnesses a training run may train through."""
    return tuple(name for name, harness in HARNESSES.items() if harness.trainable)
