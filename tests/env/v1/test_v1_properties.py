"""Property tests of the v1 ruleset over every family and N_SEEDS seeds of each split.

The oracle solves every episode, the random policy almost none, seeds change the episode, every
drift kind is drawn, and no farming strategy built from the oracle's own solution (nor any
failing sequence a bounded random search finds) earns as much as the honest solution.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest
from v1_support import ALL_SEEDS, FAMILIES, RULESET, TEST_SEEDS, TRAIN_SEEDS, complete, inspect, play, report

from schemashift.env import Environment
from schemashift.env.rulesets.v1.catalogue import DRIFT_KINDS, HELD_OUT_KINDS, HELD_OUT_PAIRS
from schemashift.policies import make_policy


def _honest(family: str, seed: int, env: Environment) -> tuple[list, dict]:
    actions = RULESET.solution(RULESET.build_task(family, seed))
    return actions, play(family, seed, actions, env)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("family", FAMILIES)
def test_oracle_solves_every_seed(family):
    env = Environment(RULESET)
    oracle = make_policy("oracle", RULESET)
    for seed in ALL_SEEDS:
        oracle.reset()
        observation = env.reset(family, seed)
        while not observation["done"]:
            observation, _ = env.step(oracle.act(observation))
        summary = RULESET.summary(env.episode)
        assert summary["success"] and not summary["catastrophe"], (family, seed)
        assert summary["drift_detection"] == 1.0 and summary["adaptation"] == 1.0, (family, seed)
        assert summary["score"] > 0.5 and summary["training_reward"] > 0, (family, seed)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("family", FAMILIES)
def test_random_policy_is_the_floor(family):
    env = Environment(RULESET)
    policy = make_policy("random", RULESET)
    successes = 0
    for seed in ALL_SEEDS:
        policy.reset()
        observation = env.reset(family, seed)
        while not observation["done"]:
            observation, _ = env.step(policy.act(observation))
        successes += RULESET.summary(env.episode)["success"]
    assert successes / len(ALL_SEEDS) < 0.05


@pytest.mark.parametrize("split", ["test", "train"])
@pytest.mark.parametrize("family", FAMILIES)
def test_seeds_draw_distinct_schedules(family, split):
    seeds = TEST_SEEDS if split == "test" else TRAIN_SEEDS
    tasks = [RULESET.build_task(family, seed) for seed in seeds]
    assert len({t.schedule_hash() for t in tasks}) >= 0.95 * len(seeds)
    # the world changes with the seed too, not just the drift
    assert len({t.description for t in tasks}) >= 0.95 * len(seeds)
    assert all(t.split == split for t in tasks)


def test_every_drift_kind_is_drawn_and_held_out_ones_only_in_test():
    by_split: dict[str, Counter] = {"test": Counter(), "train": Counter()}
    for family in FAMILIES:
        for seed in ALL_SEEDS:
            task = RULESET.build_task(family, seed)
            for spec in task.drift_plan:
                by_split[task.split][(spec.tool, spec.kind)] += 1
    test_kinds = {kind for _, kind in by_split["test"]}
    train_kinds = {kind for _, kind in by_split["train"]}
    assert test_kinds == set(DRIFT_KINDS)
    assert train_kinds == set(DRIFT_KINDS) - HELD_OUT_KINDS
    assert not set(by_split["train"]) & HELD_OUT_PAIRS
    assert set(by_split["test"]) >= HELD_OUT_PAIRS


# -- farming --------------------------------------------------------------------------------------
def _calls(actions):
    return [a for a in actions if a["type"] == "call_tool"]


def pad_with_inspections(task, actions):
    body, done = actions[:-1], actions[-1]
    tools = list(task.tools)
    padding = [inspect(tools[i % len(tools)]) for i in range(task.max_steps - len(actions))]
    assert padding, "the honest solution leaves no room to pad"
    return body + padding + [done]


def fail_then_retry(task, actions):
    farmed = []
    for action in actions:
        if action["type"] == "call_tool":
            sub = action["tool_call"]
            bogus = {**sub["params"], "unexpected_field": "x"}
            farmed.append({"type": "call_tool", "tool_call": {**sub, "params": bogus}})
            farmed.append({"type": "retry_with_variant", "retry": dict(sub)})
        else:
            farmed.append(action)
    return farmed


def report_everything(task, actions):
    reports = [report(tool, kind) for tool in task.tools for kind in DRIFT_KINDS]
    return actions[:-1] + reports + actions[-1:]


def repeat_reports(task, actions):
    farmed = []
    for action in actions:
        farmed.append(action)
        if action["type"] == "report_drift":
            farmed += [action, action]
    return farmed


def inspect_without_working(task, actions):
    return [inspect(task.tools[i % len(task.tools)]) for i in range(task.max_steps)]


def complete_at_once(task, actions):
    return [complete(task.ground_truth["summary"])]


STRATEGIES = [
    pad_with_inspections,
    fail_then_retry,
    report_everything,
    repeat_reports,
    inspect_without_working,
    complete_at_once,
]


@pytest.mark.timeout(300)
@pytest.mark.parametrize("family", FAMILIES)
def test_farming_strategies_earn_less_than_the_honest_solution(family):
    env = Environment(RULESET)
    for seed in ALL_SEEDS:
        task = RULESET.build_task(family, seed)
        actions, honest = _honest(family, seed, env)
        for strategy in STRATEGIES:
            farmed = play(family, seed, strategy(task, actions), env)
            where = (family, seed, strategy.__name__)
            assert farmed["training_reward"] < honest["training_reward"], where
            assert farmed["score"] < honest["score"], where


# -- bounded random search ------------------------------------------------------------------------
SEARCH_SEQUENCES = 1000


def _mutate(rng: random.Random, task, actions: list) -> list:
    """A random edit of the honest solution: drop, duplicate, swap, or insert inspections,
    reports, failing calls or an early completion."""
    seq = list(actions)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(6)
        i = rng.randrange(len(seq))
        if op == 0 and len(seq) > 1:
            del seq[i]
        elif op == 1:
            seq.insert(i, seq[i])
        elif op == 2:
            j = rng.randrange(len(seq))
            seq[i], seq[j] = seq[j], seq[i]
        elif op == 3:
            seq.insert(i, inspect(rng.choice(task.tools)))
        elif op == 4:
            seq.insert(i, report(rng.choice(task.tools), rng.choice(DRIFT_KINDS)))
        else:
            calls = _calls(actions)
            if calls:
                sub = rng.choice(calls)["tool_call"]
                seq.insert(i, {"type": "call_tool", "tool_call": {**sub, "params": {}}})
    return seq


@pytest.mark.timeout(600)
@pytest.mark.parametrize("family", FAMILIES)
def test_random_search_finds_no_failing_sequence_above_the_honest_reward(family):
    """1,000 sequences per family: edits of the honest solution (the dangerous neighbourhood)
    and random-policy episodes, over the family's seeds; none that fails the task beats honesty."""
    rng = random.Random(f"search/{family}")
    env = Environment(RULESET)
    policy = make_policy("random", RULESET)
    failing = 0
    for n in range(SEARCH_SEQUENCES):
        seed = ALL_SEEDS[n % len(ALL_SEEDS)]
        task = RULESET.build_task(family, seed)
        actions, honest = _honest(family, seed, env)
        if n % 4 == 3:
            policy.reset()
            observation = env.reset(family, seed)
            while not observation["done"]:
                observation, _ = env.step(policy.act(observation))
            outcome = RULESET.summary(env.episode)
        else:
            outcome = play(family, seed, _mutate(rng, task, actions), env)
        if not outcome["success"]:
            failing += 1
            assert outcome["training_reward"] < honest["training_reward"], (family, seed, n)
            assert outcome["score"] == 0.0
    assert failing >= SEARCH_SEQUENCES // 4  # the search did explore failures


DEEP_SEEDS = 1000


@pytest.mark.slow
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("scenario", FAMILIES + ["composed_pair", "composed_triple"])
def test_oracle_solves_many_more_seeds(scenario):
    """The oracle over 1,000 seeds of each split (compositions included)."""
    env = Environment(RULESET)
    seeds = list(range(DEEP_SEEDS)) + list(range(10000, 10000 + DEEP_SEEDS)) + [9999, 2**40]
    for seed in seeds:
        task = RULESET.build_task(scenario, seed)
        summary = play(scenario, seed, RULESET.solution(task), env)
        assert summary["success"] and summary["drift_detection"] == 1.0, (scenario, seed)
