"""Observations and reward breakdowns are snapshots: nothing a policy does to them reaches the
world, the grade, the episode's records, later observations or another episode.

A hostile policy plays the oracle's actions but, after every decision, tries to wreck everything
it was ever given (every observation, every reward breakdown, every action it sent), recursively:
keys set and deleted, lists appended to and cleared, at every depth. The observation's own
top-level dict gives way; everything below it refuses (`ReadOnlyError`). Its run must be
indistinguishable from a clean one, and so must the next episode played on the same environment.
"""

from __future__ import annotations

import copy
import json
import pickle
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from schemashift.env import Environment, get_ruleset
from schemashift.env.actions import InvalidAction
from schemashift.env.frozen import FrozenDict, FrozenList, ReadOnlyError, freeze
from schemashift.policies import BUILTIN, make_policy
from schemashift.rollout.runner import Cell

SEEDS = (0, 1, 2)


def cells(ruleset: str) -> list[tuple[str, int]]:
    rs = get_ruleset(ruleset)
    scenarios = rs.scenario_ids() + [info.id for info in rs.compositions()]
    return [(scenario, seed) for scenario in scenarios for seed in SEEDS]


def text(value: Any) -> str:
    """An exact fingerprint: tells 1 from 1.0 from True and sees key order."""
    return json.dumps(value, allow_nan=True)


def attempt(mutation) -> None:
    """One wrecking move; read-only parts refuse it, and that refusal is all that may happen."""
    try:
        mutation()
    except ReadOnlyError:
        pass


def wreck(value: Any, seen: set[int] | None = None) -> None:
    """Try to mutate `value` in place at every depth: children first, then the container itself."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    if isinstance(value, dict):
        seen.add(id(value))
        for item in list(value.values()):
            wreck(item, seen)
        for key in list(value):
            attempt(lambda key=key: value.__setitem__(key, "wrecked"))
        attempt(lambda: value.pop(next(iter(value), None), None))
        attempt(value.clear)
        attempt(lambda: value.__setitem__("wrecked", {"by": ["policy"]}))
        attempt(lambda: value.update({0: None}))
    elif isinstance(value, list):
        seen.add(id(value))
        for item in value:
            wreck(item, seen)
        attempt(lambda: value.append("wrecked"))
        if value:
            attempt(lambda: value.__setitem__(0, {"wrecked": True}))
        attempt(value.clear)
        attempt(lambda: value.extend([["wrecked"]]))


class Hostile:
    """The oracle's decisions; afterwards everything it ever held is wrecked again."""

    def __init__(self, ruleset: str) -> None:
        self.oracle = make_policy("oracle", ruleset)
        self.held: list[Any] = []

    def reset(self) -> None:
        self.oracle.reset()

    def start_episode(self, cell: Any) -> None:
        self.oracle.start_episode(cell)

    def act(self, observation: dict[str, Any]) -> dict[str, Any]:
        # A private copy goes to the environment (the oracle's own objects stay intact); the
        # policy keeps it and wrecks it after the step, which must not reach the world.
        action = copy.deepcopy(self.oracle.act(observation))
        self.held.append(observation)
        self.wreck_all()  # before the step: the environment must not read what it handed out
        self.held.append(action)
        return action

    def stepped(self, reward: dict[str, Any]) -> None:
        self.held.append(reward)
        self.wreck_all()

    def wreck_all(self) -> None:
        for value in self.held:
            wreck(value)


def play(env: Environment, policy, scenario: str, seed: int, hostile: bool) -> dict[str, Any]:
    policy.reset()
    policy.start_episode(Cell(env.ruleset.name, scenario, seed))
    observation = env.reset(scenario, seed, episode_id="episode")
    seen, rewards = [text(observation)], []
    while not observation["done"]:
        observation, reward = env.step(policy.act(observation))
        seen.append(text(observation))
        rewards.append(text(reward))
        if hostile:
            policy.stepped(reward)
    ep, rs = env.episode, env.ruleset
    return {
        "observations": seen,
        "rewards": rewards,
        "summary": text(rs.summary(ep)),
        "drifts": text(rs.drift_outcomes(ep)),
        "history": text(ep.history),
    }


def check_cells(ruleset: str, cell_list: list[tuple[str, int]]) -> None:
    clean_env, hostile_env = Environment(ruleset), Environment(ruleset)
    for index, (scenario, seed) in enumerate(cell_list):
        follow_scenario, follow_seed = cell_list[(index + 1) % len(cell_list)]
        hostile = Hostile(ruleset)
        attacked = play(hostile_env, hostile, scenario, seed, hostile=True)
        # The next episode on the same environment, played cleanly after the attack.
        after = play(hostile_env, make_policy("oracle", ruleset), follow_scenario, follow_seed, False)
        clean = play(clean_env, make_policy("oracle", ruleset), scenario, seed, False)
        clean_after = play(clean_env, make_policy("oracle", ruleset), follow_scenario, follow_seed, False)
        for part in clean:
            assert attacked[part] == clean[part], (scenario, seed, part)
            assert after[part] == clean_after[part], (follow_scenario, follow_seed, part)
        # And a brand-new environment (shared caches of the ruleset) sees what the clean one saw.
        fresh = play(Environment(ruleset), make_policy("oracle", ruleset), scenario, seed, False)
        assert fresh == clean, (scenario, seed)


@pytest.mark.timeout(300)
def test_a_hostile_policy_changes_nothing_on_legacy():
    check_cells("legacy", cells("legacy"))


@pytest.mark.timeout(600)
def test_a_hostile_policy_changes_nothing_on_v1():
    check_cells("v1", cells("v1"))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("ruleset", ["legacy", "v1"])
def test_views_share_no_mutable_container_with_each_other_or_the_episode(ruleset):
    """Below the top level every container is read-only; each top-level dict is new; and the
    only containers a policy shares with the episode (its records, state, caches) are frozen."""
    env = Environment(ruleset)
    policy = make_policy("oracle", ruleset)
    tops: set[int] = set()
    given: set[int] = set()
    held: list[Any] = []  # everything stays alive, so no id is reused

    def check(view: Any) -> None:
        assert type(view) is dict and id(view) not in tops
        tops.add(id(view))
        for part in view.values():
            _check_frozen(part, given)

    for scenario, seed in cells(ruleset)[::7]:
        policy.reset()
        policy.start_episode(Cell(env.ruleset.name, scenario, seed))
        observation = env.reset(scenario, seed)
        held.append(observation)
        check(observation)
        while not observation["done"]:
            observation, reward = env.step(policy.act(observation))
            held += [observation, reward]
            check(observation)
            for part in reward.values():
                _check_frozen(part, given)
        for name in ("history", "visible_history", "agent_state", "extra", "docs", "tools"):
            episode_containers: dict[int, Any] = {}
            _collect(getattr(env.episode, name, None), episode_containers)
            held.append(env.episode)
            shared = [episode_containers[i] for i in episode_containers.keys() & given]
            # the episode may hold what it froze itself; nothing mutable is ever shared
            assert all(type(c) in (FrozenDict, FrozenList) for c in shared), f"the episode's {name}"


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ruleset", ["legacy", "v1"])
def test_a_ruleset_that_says_its_views_are_frozen_builds_every_part_frozen(ruleset):
    """`frozen_views` lets the Environment hand views out unchecked, so the claim is checked here
    instead: every built-in policy that plays the ruleset (the random one's invalid actions
    included), every cell, every view and reward breakdown, at every depth."""
    rs = get_ruleset(ruleset)
    assert rs.frozen_views
    env = Environment(ruleset)
    for name in BUILTIN:
        try:
            policy = make_policy(name, ruleset)
        except ValueError:  # a policy that does not play this ruleset
            continue
        for scenario, seed in cells(ruleset):
            policy.reset()
            if hasattr(policy, "start_episode"):
                policy.start_episode(Cell(ruleset, scenario, seed))
            observation = env.reset(scenario, seed)
            views, rewards = [observation], []
            while not observation["done"]:
                action = policy.act(observation)
                try:
                    observation, reward = env.step(action)
                except InvalidAction:
                    continue
                views.append(observation)
                rewards.append(reward)
            for view in views:
                assert type(view) is dict, (name, scenario, seed)
                for part in view.values():
                    _check_frozen(part, set())
            for reward in rewards:
                _check_frozen(reward, set())


def _check_frozen(value: Any, given: set[int]) -> None:
    if isinstance(value, (dict, list)):
        assert type(value) in (FrozenDict, FrozenList), type(value)
        given.add(id(value))
        for item in value.values() if isinstance(value, dict) else value:
            _check_frozen(item, given)


def _collect(value: Any, out: dict[int, Any]) -> None:
    if isinstance(value, (dict, list)) and id(value) not in out:
        out[id(value)] = value
        for item in value.values() if isinstance(value, dict) else value:
            _collect(item, out)
    elif hasattr(value, "__dict__") and id(value) not in out:
        out[id(value)] = value
        _collect(vars(value), out)


@pytest.mark.timeout(30)
def test_snapshots_false_hands_out_the_shared_views():
    env = Environment("legacy", snapshots=False)
    first = env.reset(get_ruleset("legacy").scenario_ids()[0], 0)
    second, _ = env.step({"type": "inspect_schema", "inspect": {"tool": "mail"}})
    assert second["tool_schemas"] is first["tool_schemas"]


@pytest.mark.timeout(30)
def test_frozen_data_refuses_every_mutation_and_copies_to_plain_data():
    leaf = "a string"
    value = {"b": [1, 1.0, True, None, leaf, {"x": (1, [2])}], "a": {}, 3: (4, 5), "t": ()}
    frozen = freeze(value)
    assert text(frozen) == text(value) and frozen == value and list(frozen) == list(value)
    assert [type(item) for item in frozen["b"][:5]] == [type(item) for item in value["b"][:5]]
    assert frozen["b"][4] is leaf and frozen["b"] is not value["b"]
    assert json.loads(json.dumps(frozen)) == json.loads(json.dumps(value))
    mutations = [
        lambda: frozen.__setitem__("a", 1), lambda: frozen.__delitem__("a"), frozen.clear,
        lambda: frozen.pop("a"), frozen.popitem, lambda: frozen.setdefault("z", 1),
        lambda: frozen.update(z=1), lambda: frozen["b"].append(1), lambda: frozen["b"].extend([1]),
        lambda: frozen["b"].insert(0, 1), frozen["b"].pop, lambda: frozen["b"].remove(1),
        frozen["b"].clear, frozen["b"].sort, frozen["b"].reverse,
        lambda: frozen["b"].__setitem__(0, 2), lambda: frozen["b"].__delitem__(0),
        lambda: frozen["b"][5]["x"][1].append(3),
    ]  # fmt: skip
    for mutation in mutations:
        with pytest.raises(ReadOnlyError, match="deepcopy"):
            mutation()
    assert frozen == value
    with pytest.raises(ReadOnlyError):
        frozen["b"] += [1]
    editable = copy.deepcopy(frozen)
    assert editable == value and type(editable) is dict and type(editable["b"]) is list
    editable["b"].append(9)
    assert frozen == value
    assert type(pickle.loads(pickle.dumps(frozen))) is dict
    assert freeze(frozen) is frozen  # frozen data is shared, never copied again


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(value=_JSON)
def test_freezing_any_json_keeps_its_value_and_refuses_every_edit(value):
    frozen = freeze(value)
    assert frozen == value and text(frozen) == text(value)
    editable = copy.deepcopy(frozen)
    assert editable == value

    def containers(node):
        if isinstance(node, (dict, list)):
            yield node
            for item in node.values() if isinstance(node, dict) else node:
                yield from containers(item)

    for node in containers(frozen):
        assert type(node) in (FrozenDict, FrozenList)
        with pytest.raises(ReadOnlyError):
            node.clear()
    for node in containers(editable):
        assert type(node) in (dict, list)
