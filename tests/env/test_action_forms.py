"""An action's frozen form (the step record's action) is built once per Action, and the Environment
keeps the parse of a frozen action that cannot change: what a step records must always be the
canonical form of the action just sent, whatever was sent before."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemashift.env import Environment, pipeline
from schemashift.env.actions import Action, InvalidAction, parse_action
from schemashift.env.frozen import FrozenDict, FrozenList, freeze

TOOLS = frozenset({"mail", "calendar", "crm"})
KINDS = frozenset({"field_rename", "tool_removal"})

_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=3)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=8,
)
_ACTION = st.one_of(
    st.builds(
        lambda kind, tool, endpoint, params: (
            {kind: {"tool": tool, "endpoint": endpoint, "params": params}}
            | {"type": {"tool_call": "call_tool", "retry": "retry_with_variant"}[kind]}
        ),
        st.sampled_from(["tool_call", "retry"]),
        st.sampled_from(sorted(TOOLS)),
        st.sampled_from(["send_message", "create_event", "x"]),
        st.dictionaries(st.sampled_from(["to", "subject", "a"]), _JSON, max_size=3),
    ),
    st.builds(
        lambda tool: {"type": "inspect_schema", "inspect": {"tool": tool}}, st.sampled_from(sorted(TOOLS))
    ),
    st.builds(
        lambda tool, kind, text: {
            "type": "report_drift",
            "report": {"tool": tool, "drift_kind": kind, "description": text},
        },
        st.sampled_from(sorted(TOOLS)),
        st.sampled_from(sorted(KINDS)),
        st.text(max_size=4),
    ),
    st.builds(lambda text: {"type": "complete_task", "complete": {"summary": text}}, st.text(max_size=4)),
    st.sampled_from([{"type": kind} for kind in ("call_tool", "inspect_schema", "complete_task")]),
)


def _deeply_frozen(value) -> bool:
    if isinstance(value, dict):
        return type(value) is FrozenDict and all(_deeply_frozen(v) for v in value.values())
    if isinstance(value, list):
        return type(value) is FrozenList and all(_deeply_frozen(v) for v in value)
    return True


@pytest.mark.timeout(120)
@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_ACTION, st.booleans()), min_size=1, max_size=12))
def test_every_action_gets_its_own_canonical_frozen_form(actions):
    """Sent in any order, with parameters plain or frozen (a frozen one may be sent again): the
    frozen form is always the canonical form of the action just parsed, deeply read-only."""
    sent = []
    for action, frozen_params in actions:
        sub = next((v for k, v in action.items() if k != "type"), None)
        if frozen_params and isinstance(sub, dict) and "params" in sub:
            sub["params"] = freeze(sub["params"])
        sent.append(action)
        for again in sent[-2:]:  # the same objects sent again hit what was kept for them
            parsed = parse_action(again, TOOLS, KINDS)
            form = parsed.frozen()
            assert json.dumps(form) == json.dumps(parsed.to_dict())
            assert _deeply_frozen(form)


@pytest.mark.timeout(120)
def test_a_kept_parse_is_never_handed_to_another_action_at_a_reused_address():
    """The Environment tells kept parses apart by the action's identity, and an entry keeps its
    action alive, so the address cannot be reused while it is kept; once the memo is full and
    cleared, freed actions' addresses are reused (CPython hands them out at once) and must be
    parsed for what they say. The memo stays within its bound."""
    env = Environment("legacy")
    observation = env.reset("E1_onboard_new_hire", 0)
    seen: set[int] = set()
    reused = 0
    for i in range(3 * pipeline.PARSED_KEPT):
        if observation["done"]:
            observation = env.reset("E1_onboard_new_hire", i)
        action = freeze(
            {
                "type": "report_drift",
                "report": {"tool": "mail", "drift_kind": "field_rename", "description": f"d{i}"},
            }
        )
        reused += id(action) in seen
        seen.add(id(action))
        observation, _ = env.step(action)
        assert env.episode.history[-1]["action"]["report"]["description"] == f"d{i}"
        assert len(env._parsed) <= pipeline.PARSED_KEPT
        del action
    assert reused, "no address was reused, so nothing was tested"


@pytest.mark.timeout(60)
def test_a_frozen_action_is_parsed_once_and_a_changeable_one_every_time():
    """The Environment keeps the parse of a frozen action whose sub-object is frozen too; a frozen
    action around a plain sub-object can change between steps, so it is parsed at every step and
    the step follows what it says now."""
    env = Environment("legacy")
    env.reset("E1_onboard_new_hire", 0)
    sub = {"tool": "mail"}
    shallow = FrozenDict(type="inspect_schema", inspect=sub)
    first, _ = env.step(shallow)
    sub["tool"] = "calendar"
    second, _ = env.step(shallow)
    assert first["history"][-1]["action"]["inspect"]["tool"] == "mail"
    assert second["history"][-1]["action"]["inspect"]["tool"] == "calendar"
    assert second["last_response"]["body"]["schema"] == first["tool_schemas"]["calendar"]

    deep = freeze({"type": "inspect_schema", "inspect": {"tool": "crm"}})
    for _ in range(2):  # crm is not a tool of this scenario: the same answer both times
        view, _ = env.step(deep)
        assert view["last_response"]["status"] == 404
    assert [entry[0] for entry in env._parsed.values()] == [deep]


@pytest.mark.timeout(60)
def test_an_invalid_frozen_action_is_refused_every_time():
    env = Environment("legacy")
    env.reset("E1_onboard_new_hire", 0)
    bad = freeze({"type": "inspect_schema", "inspect": {"tool": "teleporter"}})
    for _ in range(2):
        with pytest.raises(InvalidAction):
            env.step(bad)
    assert not env._parsed


def _plain(action):
    """What an action says now, as plain data (what a policy sending JSON text would send)."""
    if isinstance(action, Action):
        return action.to_dict()
    return copy.deepcopy(action)


_SUBS = {
    "call_tool": ("tool_call", lambda tool, p: {"tool": tool, "endpoint": "send_message", "params": p}),
    "retry_with_variant": ("retry", lambda tool, p: {"tool": tool, "endpoint": "create_event", "params": p}),
    "inspect_schema": ("inspect", lambda tool, p: {"tool": tool}),
    "report_drift": (
        "report",
        lambda tool, p: {"tool": tool, "drift_kind": "field_rename", "description": "d"},
    ),
    "complete_task": ("complete", lambda tool, p: {"summary": "s"}),
}


_NEXT_TOOL = {"mail": "calendar", "calendar": "crm", "crm": "mail"}


@pytest.mark.timeout(300)
@settings(max_examples=200, deadline=None)
@given(
    ruleset=st.sampled_from(["legacy", "v1"]),
    seed=st.integers(0, 30),
    moves=st.lists(
        st.tuples(
            # which action of a small repertoire (objects are sent again); the completion, which
            # ends the episode, is one of nine
            st.integers(0, 8),
            st.sampled_from(["plain", "frozen", "shallow", "action"]),
        ),
        min_size=1,
        max_size=16,
    ),
)
def test_no_kept_parse_or_record_form_outlives_what_the_action_says(ruleset, seed, moves):
    """A search through the real step loop: a repertoire of actions sent again and again as plain
    dicts, deeply frozen dicts (kept by the Environment), frozen dicts around a plain sub-object and
    `Action` objects, the changeable ones edited between steps. Every step must record and answer
    exactly what a second environment answers to the same action sent as fresh plain data."""
    env, reference = Environment(ruleset), Environment(ruleset)
    scenario = env.ruleset.scenario_ids()[seed % len(env.ruleset.scenario_ids())]
    env.reset(scenario, seed)
    reference.reset(scenario, seed)
    kinds = list(_SUBS)
    repertoire: dict[tuple[int, str], Any] = {}
    for index, form in moves:
        if env.episode.done:
            break
        kind = kinds[min(index // 2, len(kinds) - 1)]
        key, make = _SUBS[kind]
        action = repertoire.get((index, form))
        if action is None:
            sub = make("mail", {"to": "a@b.c"})
            if form == "frozen":
                action = freeze({"type": kind, key: sub})
            elif form == "shallow":
                action = FrozenDict(type=kind, **{key: sub})
            elif form == "action":
                action = parse_action({"type": kind, key: sub}, TOOLS, set(env.ruleset.drift_kinds))
            else:
                action = {"type": kind, key: sub}
            repertoire[(index, form)] = action
        elif form in ("plain", "shallow"):
            sub = action[key]
            if "tool" in sub:
                sub["tool"] = _NEXT_TOOL[sub["tool"]]  # the edit a later step must see
        elif form == "action" and action.tool is not None:
            action.tool = _NEXT_TOOL[action.tool]
        sent = _plain(action)
        outcomes = []
        for target, message in ((env, action), (reference, sent)):
            try:
                view, reward = target.step(message)
                outcomes.append(
                    json.dumps([target.episode.history[-1]["action"], view["last_response"], reward])
                )
            except InvalidAction as exc:
                outcomes.append(f"invalid: {exc}")
        assert outcomes[0] == outcomes[1], (kind, form, sent)
