"""Observations and reward breakdowns are snapshots: nothing a policy does to them reaches the
world, the grade, the episode's records, later observations or another episode.

A hostile policy plays the oracle's actions but, after every decision, wrecks everything it was
ever given (every observation, every reward breakdown, every action it sent), recursively: keys
set and deleted, lists appended to and cleared, at every depth. Its run must be
indistinguishable from a clean one, and so must the next episode played on the same environment.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from schemashift.env import Environment, get_ruleset
from schemashift.env.environment import _Constructors, snapshot
from schemashift.policies import make_policy

SEEDS = (0, 1, 2)


def cells(ruleset: str) -> list[tuple[str, int]]:
    rs = get_ruleset(ruleset)
    scenarios = rs.scenario_ids() + [info.id for info in rs.compositions()]
    return [(scenario, seed) for scenario in scenarios for seed in SEEDS]


def text(value: Any) -> str:
    """An exact fingerprint: tells 1 from 1.0 from True and sees key order."""
    return json.dumps(value, allow_nan=True)


def wreck(value: Any, seen: set[int] | None = None) -> None:
    """Mutate `value` in place at every depth: children first, then the container itself."""
    seen = set() if seen is None else seen
    if id(value) in seen:
        return
    if isinstance(value, dict):
        seen.add(id(value))
        for item in list(value.values()):
            wreck(item, seen)
        for key in list(value):
            value[key] = "wrecked"
        value.pop(next(iter(value), None), None)
        value.clear()
        value["wrecked"] = {"by": ["policy"]}
        value[0] = None
    elif isinstance(value, list):
        seen.add(id(value))
        for item in value:
            wreck(item, seen)
        value.append("wrecked")
        value[0] = {"wrecked": True}
        value.clear()
        value.append(["wrecked"])


class Hostile:
    """The oracle's decisions; afterwards everything it ever held is wrecked again."""

    def __init__(self, ruleset: str) -> None:
        self.oracle = make_policy("oracle", ruleset)
        self.held: list[Any] = []

    def reset(self) -> None:
        self.oracle.reset()

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
def test_every_observation_is_a_new_object_at_every_depth(ruleset):
    """No container of one observation is a container of another, of the episode or of a reward."""
    env = Environment(ruleset)
    policy = make_policy("oracle", ruleset)
    ids: dict[int, str] = {}

    def containers(value: Any, where: str, own: set[int]) -> None:
        if isinstance(value, (dict, list)):
            if id(value) not in own:
                assert id(value) not in ids, f"{where} is shared with {ids[id(value)]}"
                own.add(id(value))
            for key, item in value.items() if isinstance(value, dict) else enumerate(value):
                containers(item, f"{where}/{key}", own)

    held = []
    for scenario, seed in cells(ruleset)[::7]:
        policy.reset()
        observation = env.reset(scenario, seed)
        while True:
            where = f"{scenario}/{seed}/step{observation['step']}"
            own: set[int] = set()
            containers(observation, where, own)
            ids.update(dict.fromkeys(own, where))
            held.append(observation)
            if observation["done"]:
                break
            observation, reward = env.step(policy.act(observation))
            own = set()
            containers(reward, f"{where}/reward", own)
            ids.update(dict.fromkeys(own, f"{where}/reward"))
            held.append(reward)
        for name in ("history", "visible_history", "agent_state", "extra", "docs"):
            episode_containers: set[int] = set()
            _collect(getattr(env.episode, name, None), episode_containers)
            assert not episode_containers & set(ids), f"the episode's {name} shares containers with a view"


def _collect(value: Any, out: set[int]) -> None:
    if isinstance(value, (dict, list)) and id(value) not in out:
        out.add(id(value))
        for item in value.values() if isinstance(value, dict) else value:
            _collect(item, out)


@pytest.mark.timeout(30)
def test_snapshots_false_hands_out_the_shared_views():
    env = Environment("legacy", snapshots=False)
    first = env.reset(get_ruleset("legacy").scenario_ids()[0], 0)
    second, _ = env.step({"type": "inspect_schema", "inspect": {"tool": "mail"}})
    assert second["tool_schemas"] is first["tool_schemas"]


@pytest.mark.timeout(30)
def test_snapshot_copies_containers_and_keeps_types_and_order():
    leaf = "a string"
    value = {"b": [1, 1.0, True, None, leaf, {"x": (1, [2])}], "a": {}, 3: (4, 5), "t": ()}
    copied = snapshot(value)
    assert text(copied) == text(value) and list(copied) == list(value)
    assert copied["b"] is not value["b"] and copied["b"][5] is not value["b"][5]
    assert copied["b"][5]["x"][1] is not value["b"][5]["x"][1]
    assert copied["b"][4] is leaf and copied[3] is value[3]  # immutable leaves are shared
    assert [type(item) for item in copied["b"]] == [type(item) for item in value["b"]]

    class Odd:
        def __init__(self) -> None:
            self.items = [1]

    odd = {"o": Odd()}
    assert snapshot(odd)["o"] is not odd["o"] and snapshot(odd)["o"].items == [1]


@pytest.mark.timeout(30)
def test_constructors_are_found_by_exact_content():
    constructors = _Constructors(size=2)
    one, true, real = {"a": [1]}, {"a": [True]}, {"a": [1.0]}
    builds = [constructors.get(value) for value in (one, true, real)]
    assert len({id(build) for build in builds}) == 3
    for value, build in zip((one, true, real), builds, strict=True):
        made = build()
        assert text(made) == text(value) and made is not value and made["a"] is not build()["a"]
    assert constructors.get({"a": float("nan")}) is None  # no literal for it: copied instead
    assert constructors.get({"a": {1, 2}}) is None
    assert len(constructors._by_content) == 2  # bounded
