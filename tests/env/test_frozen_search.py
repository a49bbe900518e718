"""A search for a mutable part in what the Environment hands out, beyond the oracle's play.

Parts of a view are built frozen where they are made, and the step hands a view of a ruleset
that says so (`Ruleset.frozen_views`) out unchecked (`StepPipeline.step`): a part built plain, or
as a `FrozenDict` around a plain dict or list, would reach a policy writable. The snapshot tests
walk the oracle's episodes; this one lets Hypothesis choose the play: any action type, tools and
endpoints from the live documentation, parameters of any JSON shape (nested objects and lists
where strings are wanted, the task's own addresses among them), on fixed and fresh seeds. Every
observation and reward is walked to its leaves, then everything handed out is wrecked, and a
replay of the same actions on a fresh environment must see exactly what the first one saw.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from schemashift.env import Environment, get_ruleset
from schemashift.env.actions import ACTION_TYPES, SUBOBJECT, InvalidAction
from schemashift.env.frozen import LEAVES, FrozenDict, FrozenList, ReadOnlyError

_LEAF = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from(["", "priya@company.com", "Team Party", "active", "inbox", "2026-01-05T10:00"]),
    st.text(max_size=8),
)
_JSON = st.recursive(
    _LEAF,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8,
)


def _deep_frozen(value: Any, where: str) -> None:
    if type(value) in LEAVES:
        return
    assert type(value) in (FrozenDict, FrozenList), f"{where}: {type(value).__name__} handed out"
    for key, item in value.items() if isinstance(value, dict) else enumerate(value):
        _deep_frozen(item, f"{where}.{key}")


def _wreck(value: Any) -> None:
    if isinstance(value, (dict, list)):
        for item in list(value.values() if isinstance(value, dict) else value):
            _wreck(item)
        for move in (value.clear, lambda: value.append(1) if isinstance(value, list) else value.update(x=1)):
            try:
                move()
            except ReadOnlyError:
                pass


def _action(data: st.DataObject, observation: dict[str, Any]) -> dict[str, Any]:
    kind = data.draw(st.sampled_from([*ACTION_TYPES, "call_tool", "call_tool"]))
    schemas = observation.get("tool_schemas") or {}
    if kind in ("call_tool", "retry_with_variant") and schemas:
        tool = data.draw(st.sampled_from(sorted(schemas)))
        endpoints = schemas[tool] if isinstance(schemas[tool], dict) else {}
        endpoint = data.draw(st.sampled_from(sorted(endpoints) or ["none"]))
        declared = list((endpoints.get(endpoint) or {}).get("params") or {})
        names = data.draw(st.lists(st.sampled_from([*declared, "extra"]), unique=True, max_size=4))
        params = {name: data.draw(_JSON) for name in names}
        sub = {"tool": tool, "endpoint": endpoint, "params": params}
    else:
        sub = data.draw(
            st.dictionaries(st.sampled_from(["summary", "kind", "tool", "detail"]), _JSON, max_size=3)
        )
    return {"type": kind, SUBOBJECT[kind]: sub}


def _fingerprint(value: Any) -> str:
    return json.dumps(value, allow_nan=True, default=str)


def _replay(ruleset: str, scenario: str, seed: int, actions: list[dict[str, Any]]) -> list[str]:
    env = Environment(ruleset)
    seen = [_fingerprint(env.reset(scenario, seed, episode_id="e"))]
    for action in actions:
        observation, reward = env.step(copy.deepcopy(action))
        seen += [_fingerprint(observation), _fingerprint(reward)]
    return seen


@pytest.mark.timeout(600)
@pytest.mark.parametrize("ruleset", ["legacy", "v1"])
def test_no_play_gets_a_writable_part_or_changes_what_a_replay_sees(ruleset):
    rs = get_ruleset(ruleset)
    scenarios = rs.scenario_ids() + [info.id for info in rs.compositions()]

    @settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(data=st.data(), scenario=st.sampled_from(scenarios), seed=st.integers(0, 20_000))
    def search(data, scenario, seed):
        if rs.splits() and seed >= 10_000:
            seed = 10_000 + seed % 10_000
        env = Environment(ruleset)
        observation = env.reset(scenario, seed, episode_id="e")
        handed, actions, seen = list(observation.values()), [], [_fingerprint(observation)]
        tops, alive = {id(observation)}, [observation]  # alive: no id is reused
        for step in range(data.draw(st.integers(1, 12))):
            if observation["done"]:
                break
            action = _action(data, observation)
            try:
                observation, reward = env.step(copy.deepcopy(action))
            except InvalidAction:
                continue
            actions.append(action)
            assert type(observation) is dict and id(observation) not in tops, "a top-level dict reused"
            tops.add(id(observation))
            alive.append(observation)
            for key, part in observation.items():
                _deep_frozen(part, f"step {step} observation.{key}")
            _deep_frozen(reward, f"step {step} reward")
            seen += [_fingerprint(observation), _fingerprint(reward)]
            # the top-level dict is the policy's own; everything below it and the reward are shared
            handed += [*observation.values(), reward]
            for value in handed:
                _wreck(value)
        assert _replay(ruleset, scenario, seed, actions) == seen

    search()
