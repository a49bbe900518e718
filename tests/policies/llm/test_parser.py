"""The action parser on a corpus of realistic outputs, and fuzzed: it never raises."""

from __future__ import annotations

import json
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from parser_corpus import CASES, DONE_JSON, INSPECT_CAL_JSON, INVALID_BUT_TYPED, SEND_JSON

from schemashift.env.rulesets import get_ruleset
from schemashift.policies.llm.format import action_text
from schemashift.policies.llm.parser import legacy_parse, parse_output

LEGACY = get_ruleset("legacy")
TOOLS, KINDS = LEGACY.tool_names, LEGACY.drift_kinds


def test_the_corpus_is_large_enough() -> None:
    assert len(CASES) + len(INVALID_BUT_TYPED) >= 50
    assert len({name for name, *_ in CASES}) == len(CASES)


@pytest.mark.parametrize(("text", "expected", "repaired"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_corpus(text: str, expected: dict | None, repaired: bool) -> None:
    result = parse_output(text, TOOLS, KINDS)
    assert result.action == expected, result
    assert result.repaired is repaired
    if expected is None:
        assert result.error
    else:
        assert result.valid and result.error is None


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in INVALID_BUT_TYPED], ids=[c[0] for c in INVALID_BUT_TYPED]
)
def test_typed_but_invalid_actions_are_passed_on_for_the_environment_to_judge(
    text: str, expected: dict
) -> None:
    result = parse_output(text, TOOLS, KINDS)
    assert result.action == expected and not result.valid


def test_without_a_vocabulary_any_known_type_is_accepted() -> None:
    text = '{"type": "call_tool", "tool_call": {"tool": "slack", "endpoint": "post"}}'
    assert parse_output(text).action == json.loads(text)
    assert parse_output("no action").action is None


def test_every_oracle_action_round_trips_through_its_text() -> None:
    for scenario in LEGACY.scenario_ids():
        for action in LEGACY.solution(LEGACY.build_task(scenario, 0)):
            assert parse_output(action_text(action), TOOLS, KINDS).action == action


def test_legacy_parser_follows_the_original() -> None:
    # fences are stripped, the first decodable and valid chunk wins
    assert legacy_parse("```json\n" + DONE_JSON + "\n```", TOOLS, KINDS).action == json.loads(DONE_JSON)
    assert legacy_parse("x " + INSPECT_CAL_JSON + " " + DONE_JSON, TOOLS, KINDS).action == json.loads(
        INSPECT_CAL_JSON
    )
    # the original's brace counter is not string-aware, so a brace inside a string breaks the chunk
    broken = '{"type": "complete_task", "complete": {"summary": "a } b"}}'
    assert legacy_parse(broken, TOOLS, KINDS).action is None
    assert parse_output(broken, TOOLS, KINDS).action is not None
    # no tool-call tags, no repair
    assert (
        legacy_parse('{"name": "complete_task", "arguments": {"summary": "x"}}', TOOLS, KINDS).action is None
    )
    assert legacy_parse('{"type": "complete_task", "complete": {"summary": "x', TOOLS, KINDS).action is None


# -- fuzzing -------------------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
actions = st.one_of(
    st.builds(
        lambda tool, endpoint, params: {
            "type": "call_tool",
            "tool_call": {"tool": tool, "endpoint": endpoint, "params": params},
        },
        st.sampled_from(TOOLS),
        st.text(min_size=1, max_size=20),
        st.dictionaries(st.text(max_size=10), json_values, max_size=4),
    ),
    st.builds(lambda tool: {"type": "inspect_schema", "inspect": {"tool": tool}}, st.sampled_from(TOOLS)),
    st.builds(
        lambda tool, kind, text: {
            "type": "report_drift",
            "report": {"tool": tool, "drift_kind": kind, "description": text},
        },
        st.sampled_from(TOOLS),
        st.sampled_from(KINDS),
        st.text(max_size=40),
    ),
    st.builds(lambda text: {"type": "complete_task", "complete": {"summary": text}}, st.text(max_size=60)),
)
prose = st.text(alphabet=string.ascii_letters + string.digits + " .,:;!?\n-'", max_size=80)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(max_size=300), st.binary(max_size=200), st.none(), st.integers()))
def test_never_raises_on_arbitrary_input(text) -> None:
    result = parse_output(text, TOOLS, KINDS)
    assert (result.action is None) == (result.error is not None)
    legacy_parse(text, TOOLS, KINDS)


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet='{}[]":,\\ abtype0123', max_size=200))
def test_never_raises_on_json_like_noise(text: str) -> None:
    result = parse_output(text, TOOLS, KINDS)
    assert result.action is None or result.action.get("type") in LEGACY_ACTION_TYPES


LEGACY_ACTION_TYPES = {"call_tool", "inspect_schema", "retry_with_variant", "report_drift", "complete_task"}


@settings(max_examples=300, deadline=None)
@given(actions, prose, prose, st.booleans(), st.booleans())
def test_an_action_in_prose_or_fences_is_found(action, before, after, fenced, indent) -> None:
    body = json.dumps(action, indent=2 if indent else None, ensure_ascii=not indent)
    if fenced:
        body = f"```json\n{body}\n```"
    result = parse_output(f"{before}\n{body}\n{after}", TOOLS, KINDS)
    assert result.action == action and not result.repaired


@settings(max_examples=300, deadline=None)
@given(actions, st.data())
def test_a_truncated_action_never_raises_and_a_repair_keeps_the_prefix(action, data) -> None:
    text = json.dumps(action)
    cut = data.draw(st.integers(min_value=0, max_value=len(text) - 1))
    result = parse_output(text[:cut], TOOLS, KINDS)
    if result.action is not None:
        assert result.repaired and result.valid
        assert result.action["type"] == action["type"]


def test_the_valid_action_is_preferred_over_an_earlier_invalid_one() -> None:
    text = '{"type": "call_tool", "tool_call": {"tool": "slack"}} then ' + SEND_JSON
    assert parse_output(text, TOOLS, KINDS).action == json.loads(SEND_JSON)
