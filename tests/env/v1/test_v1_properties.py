"""Property tests of the v1 guarantees (docs/rulesets.md, "Guarantees") over every family and both
compositions, N_SEEDS test and N_SEEDS train seeds each.

Who solves what: the oracle every seed; `random`, an agent that never reads a tool response, and
an agent that plays the documented plan without adapting to drift almost none. What pays: no
farming strategy, and no sequence a hill-climbing search finds from the honest solution, earns
more than the honest solution under any v1 reward variant or the score, all played through the
trainer's own turn loop and stopping rule (`schemashift.train.turns.play_texts`).
"""

from __future__ import annotations

import json
import random

import pytest
from v1_agents import hide_unseen, oblivious_actions, play_no_read, shown_before_any_response
from v1_support import (
    ALL_SEEDS,
    RULESET,
    SCENARIOS,
    TEST_SEEDS,
    TRAIN_SEEDS,
    call,
    complete,
    inspect,
    play,
    report,
)

from schemashift.env import Environment
from schemashift.env.rulesets.v1.catalogue import DRIFT_KINDS, HELD_OUT_KINDS, HELD_OUT_PAIRS
from schemashift.env.rulesets.v1.tools import WRITE_ENDPOINTS
from schemashift.policies import make_policy
from schemashift.policies.llm.format import action_text
from schemashift.rollout.runner import Cell
from schemashift.runs.rewards import episode_reward
from schemashift.train.turns import play_texts

#: the reward variants a training run may use on v1 (legacy_cumulative exists only on legacy)
V1_REWARDS = ("v1", "binary")


def _honest(scenario: str, seed: int) -> list[dict]:
    return RULESET.solution(RULESET.build_task(scenario, seed))


# -- who solves what ------------------------------------------------------------------------------
@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_oracle_solves_every_seed(scenario):
    env = Environment(RULESET)
    oracle = make_policy("oracle", RULESET)
    for seed in ALL_SEEDS:
        oracle.reset()
        oracle.start_episode(Cell("v1", scenario, seed))
        observation = env.reset(scenario, seed)
        while not observation["done"]:
            observation, _ = env.step(oracle.act(observation))
        summary = RULESET.summary(env.episode)
        assert summary["success"] and not summary["catastrophe"], (scenario, seed)
        assert summary["drift_detection"] == 1.0 and summary["adaptation"] == 1.0, (scenario, seed)
        assert summary["score"] > 0.5 and summary["training_reward"] == summary["score"], (scenario, seed)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_random_policy_is_the_floor(scenario):
    env = Environment(RULESET)
    policy = make_policy("random", RULESET)
    successes = 0
    for seed in ALL_SEEDS:
        policy.reset()
        observation = env.reset(scenario, seed)
        while not observation["done"]:
            observation, _ = env.step(policy.act(observation))
        successes += RULESET.summary(env.episode)["success"]
    assert successes / len(ALL_SEEDS) < 0.05


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_an_agent_that_never_reads_a_response_fails(scenario):
    """Task text, criteria and docs give no value the task asks the agent to find."""
    env = Environment(RULESET)
    successes = sum(play_no_read(scenario, seed, env)["success"] for seed in ALL_SEEDS)
    assert successes / len(ALL_SEEDS) <= 0.05
    # the control: the same agent, shown the values a response gives, solves every seed
    assert all(play_no_read(scenario, seed, env, blind=False)["success"] for seed in ALL_SEEDS[::10])


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_criteria_and_docs_reveal_no_value_the_task_asks_to_find(scenario):
    """Every address, id, name and company in the honest writes and summary that the task text
    does not give is absent from the criteria and the documentation too."""
    env = Environment(RULESET)
    for seed in ALL_SEEDS:
        task = RULESET.build_task(scenario, seed)
        observation = env.reset(scenario, seed)
        values = [v for op in task.ground_truth["ops"] for v in op["params"].values()]
        values.append(task.ground_truth["summary"])
        hidden = json.dumps(hide_unseen(values, task.description))
        shown = shown_before_any_response(observation)
        assert hide_unseen(values, shown) == json.loads(hidden), (scenario, seed)
        assert "[unknown]" in hidden, (scenario, seed)  # there is something to find


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_drift_oblivious_agent_fails(scenario):
    """The documented plan with the right values breaks on a drift it does not adapt to."""
    env = Environment(RULESET)
    successes = sum(
        play(scenario, seed, oblivious_actions(scenario, seed), env)["success"] for seed in ALL_SEEDS
    )
    assert successes / len(ALL_SEEDS) <= 0.02


@pytest.mark.timeout(300)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_episode_has_a_crux_drift_on_a_write_that_fires_on_use(scenario):
    for seed in ALL_SEEDS:
        plan = RULESET.build_task(scenario, seed).drift_plan
        assert all(d.fires_at_step is None and d.on_call >= 1 for d in plan), (scenario, seed)
        assert any(
            d.endpoint is not None
            and (d.tool, d.endpoint) in WRITE_ENDPOINTS
            and d.kind in ("field_rename", "new_required_param", "type_change")
            for d in plan
        ), (scenario, seed)


@pytest.mark.parametrize("split", ["test", "train"])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_seeds_draw_distinct_schedules_and_worlds(scenario, split):
    seeds = TEST_SEEDS if split == "test" else TRAIN_SEEDS
    tasks = [RULESET.build_task(scenario, seed) for seed in seeds]
    assert len({t.schedule_hash() for t in tasks}) >= 0.95 * len(seeds)
    assert len({t.description for t in tasks}) >= 0.95 * len(seeds)
    assert all(t.split == split for t in tasks)


def test_every_drift_kind_is_drawn_and_held_out_ones_only_in_test():
    by_split: dict[str, set] = {"test": set(), "train": set()}
    for scenario in SCENARIOS:
        for seed in ALL_SEEDS:
            task = RULESET.build_task(scenario, seed)
            by_split[task.split] |= {(spec.tool, spec.kind) for spec in task.drift_plan}
    assert {kind for _, kind in by_split["test"]} == set(DRIFT_KINDS)
    assert {kind for _, kind in by_split["train"]} == set(DRIFT_KINDS) - HELD_OUT_KINDS
    assert not by_split["train"] & HELD_OUT_PAIRS
    assert by_split["test"] >= HELD_OUT_PAIRS


# -- what pays: strategies and search through the trainer's own loop -------------------------------
def _key(scenario: str, seed: int) -> str:
    return f"v1/{scenario}/{seed}"


def _outcome(scenario: str, seed: int, actions: list[dict]) -> dict[str, float]:
    """Score and every v1 reward variant of `actions` played through the trainer's turn loop."""
    record, ended, reward = play_texts(_key(scenario, seed), [action_text(a) for a in actions], reward="v1")
    outcome = {"score": record["score"] or 0.0, "v1": reward, "ended": ended, "success": record["success"]}
    for variant in V1_REWARDS[1:]:
        outcome[variant] = episode_reward(variant, record, done=ended)
    return outcome


def _tools(task) -> list[str]:
    return list(task.tools)


def pad_with_inspections(task, actions):
    body, done = actions[:-1], actions[-1]
    tools = _tools(task)
    return body + [inspect(tools[i % len(tools)]) for i in range(task.max_steps - len(actions))] + [done]


def stall_to_the_step_limit(task, actions):
    """The work, then inspections until the environment ends the episode: never completes."""
    tools = _tools(task)
    return actions[:-1] + [inspect(tools[i % len(tools)]) for i in range(task.max_steps)]


def cut_off_before_completing(task, actions):
    """The work without the completion: the texts run out, so the trainer's loop cuts it off."""
    return actions[:-1]


def writes_late_and_cut_off(task, actions):
    tools = _tools(task)
    waiting = [inspect(tools[i % len(tools)]) for i in range(max(0, task.max_steps - len(actions) - 1))]
    return waiting + actions[:-1]


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
    return actions[:-1] + [report(tool, kind) for tool in task.tools for kind in DRIFT_KINDS] + actions[-1:]


def repeat_reports(task, actions):
    farmed = []
    for action in actions:
        farmed.append(action)
        if action["type"] == "report_drift":
            farmed += [action, action]
    return farmed


def repeat_inspections(task, actions):
    farmed = []
    for action in actions:
        farmed.append(action)
        if action["type"] == "call_tool":
            farmed += [inspect(action["tool_call"]["tool"])] * 2
    return farmed


def inspect_without_working(task, actions):
    return [inspect(task.tools[i % len(task.tools)]) for i in range(task.max_steps)]


def complete_at_once(task, actions):
    return [complete(task.ground_truth["summary"])]


def complete_after_first_write(task, actions):
    first = next(i for i, a in enumerate(actions) if a["type"] == "call_tool")
    return actions[: first + 1] + [complete(task.ground_truth["summary"])]


#: fields a damaging write may change, per tool, with the junk value it writes
_DAMAGEABLE = {
    "crm": ("update_contact", "contact_id", {"status": "churned", "name": "X Y", "company": "Nowhere"}),
    "calendar": ("update_event", "event_id", {"title": "Moved", "location": "Room 0", "status": "tentative"}),
}


def damage_pair(task, rng: random.Random | None = None) -> tuple[dict, dict] | None:
    """A write to a field the task does not ask to change (of any seeded record, targets
    included), and the write that restores it: the first such field, or one drawn by `rng`."""
    mutable = task.ground_truth["allowed"]["mutable"]
    candidates = []
    for tool, (endpoint, key, junk) in _DAMAGEABLE.items():
        records = task.seed_data.get(tool, {}).get("contacts" if tool == "crm" else "events", ())
        for record in records:
            for field, value in junk.items():
                if field not in mutable.get(record[key], ()) and record.get(field) != value:
                    candidates.append((tool, endpoint, key, record, field, value))
    if not candidates:
        return None
    tool, endpoint, key, record, field, value = rng.choice(candidates) if rng else candidates[0]
    rid = record[key]
    return (
        call(tool, endpoint, **{key: rid, field: value}),
        call(tool, endpoint, **{key: rid, field: record[field]}),
    )


def damage_and_restore(task, actions):
    pair = damage_pair(task)
    if pair is None:  # mail alone: nothing sent can be taken back
        return [call("mail", "send_message", to="x@elsewhere.org", subject="hi", body="hi"), *actions]
    return [pair[0], *actions[:-1], pair[1], actions[-1]]


STRATEGIES = [
    pad_with_inspections,
    stall_to_the_step_limit,
    cut_off_before_completing,
    writes_late_and_cut_off,
    fail_then_retry,
    report_everything,
    repeat_reports,
    repeat_inspections,
    inspect_without_working,
    complete_at_once,
    complete_after_first_write,
    damage_and_restore,
]
FARMING_SEEDS = TEST_SEEDS[:40] + TRAIN_SEEDS[:40]


def _assert_not_above(farmed: dict, honest: dict, where) -> None:
    for measure in ("score", *V1_REWARDS):
        assert farmed[measure] <= honest[measure] + 1e-12, (where, measure, farmed, honest)


@pytest.mark.timeout(600)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_farming_strategies_earn_no_more_than_the_honest_solution(scenario):
    for seed in FARMING_SEEDS:
        task = RULESET.build_task(scenario, seed)
        actions = _honest(scenario, seed)
        honest = _outcome(scenario, seed, actions)
        assert honest["success"] and honest["ended"]
        for strategy in STRATEGIES:
            farmed = _outcome(scenario, seed, strategy(task, actions))
            where = (scenario, seed, strategy.__name__)
            _assert_not_above(farmed, honest, where)
            if not farmed["success"]:
                assert farmed["v1"] < honest["v1"] and farmed["binary"] == 0.0, where
            if not farmed["ended"]:  # cut off: no more than a failed episode earns
                assert farmed["v1"] <= _outcome(scenario, seed, complete_at_once(task, actions))["v1"], where


def test_damage_then_restore_never_pays_anywhere_in_the_sequence():
    """Item 2 of the guarantees: breaking a field the task does not ask to change (a record and
    field drawn at random per seed) at any point and restoring it at any later point never
    raises the training reward or the score."""
    for scenario in SCENARIOS:
        rng = random.Random(f"damage/{scenario}")
        for seed in FARMING_SEEDS[::8]:
            task = RULESET.build_task(scenario, seed)
            actions = _honest(scenario, seed)
            honest = _outcome(scenario, seed, actions)
            pair = damage_pair(task, rng)
            if pair is None:
                continue
            for i in range(len(actions)):
                for j in range(i + 1, len(actions) + 1):
                    farmed = actions[:i] + [pair[0]] + actions[i:j] + [pair[1]] + actions[j:]
                    _assert_not_above(_outcome(scenario, seed, farmed), honest, (scenario, seed, i, j))


# -- bounded search -------------------------------------------------------------------------------
SEARCH_EPISODES = 2000
SEARCH_SEEDS = 10


def _mutate(rng: random.Random, task, seq: list, honest: list) -> list:
    """A random edit: drop, duplicate, swap, truncate, or insert an inspection, a report, a failing
    call, a completion, a write from the honest plan, or a damage/restore pair."""
    seq = list(seq)
    for _ in range(rng.randint(1, 3)):
        op = rng.randrange(10)
        i = rng.randrange(len(seq) + 1)
        if op == 0 and seq:
            del seq[min(i, len(seq) - 1)]
        elif op == 1 and seq:
            seq.insert(i, seq[min(i, len(seq) - 1)])
        elif op == 2 and len(seq) > 1:
            a, b = rng.randrange(len(seq)), rng.randrange(len(seq))
            seq[a], seq[b] = seq[b], seq[a]
        elif op == 3:
            seq.insert(i, inspect(rng.choice(task.tools)))
        elif op == 4:
            seq.insert(i, report(rng.choice(task.tools), rng.choice(DRIFT_KINDS)))
        elif op == 5:
            calls = [a for a in honest if a["type"] == "call_tool"]
            sub = rng.choice(calls)["tool_call"]
            seq.insert(i, {"type": "call_tool", "tool_call": {**sub, "params": {}}})
        elif op == 6:
            seq.insert(i, complete(task.ground_truth["summary"]))
        elif op == 7:
            seq.insert(i, rng.choice([a for a in honest if a["type"] == "call_tool"]))
        elif op == 8:
            pair = damage_pair(task, rng)
            if pair:
                seq.insert(i, pair[0])
                seq.insert(rng.randrange(i + 1, len(seq) + 1), pair[1])
        elif seq:
            del seq[rng.randrange(len(seq)) :]
    return seq


@pytest.mark.timeout(900)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_hill_climbing_from_the_honest_solution_finds_nothing_better(scenario):
    """SEARCH_EPISODES episodes per scenario through the trainer's turn loop: from the honest
    solution of each seed, keep any edit that earns at least as much (v1 reward), and never find
    one that earns more under any variant or scores higher."""
    rng = random.Random(f"hill-climb/{scenario}")
    per_seed = SEARCH_EPISODES // SEARCH_SEEDS
    seeds = TEST_SEEDS[: SEARCH_SEEDS // 2] + TRAIN_SEEDS[: SEARCH_SEEDS // 2]
    explored_failures = 0
    for seed in seeds:
        task = RULESET.build_task(scenario, seed)
        honest_actions = _honest(scenario, seed)
        honest = _outcome(scenario, seed, honest_actions)
        current, current_reward = honest_actions, honest["v1"]
        for n in range(per_seed):
            candidate = _mutate(rng, task, current, honest_actions)
            outcome = _outcome(scenario, seed, candidate)
            _assert_not_above(outcome, honest, (scenario, seed, n, candidate))
            explored_failures += not outcome["success"]
            if outcome["v1"] >= current_reward:
                current, current_reward = candidate, outcome["v1"]
    assert explored_failures >= SEARCH_EPISODES // 10  # the search did explore failures


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_seeds_matter_over_the_whole_test_split():
    """Guarantee 7 at full scale, with the figures benchmarks/v1_seeds.py prints: >= 95% distinct
    schedules per scenario over all 10,000 test seeds, and no train task equal to a test task."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[3] / "benchmarks" / "v1_seeds.py"
    spec = importlib.util.spec_from_file_location("v1_seeds", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for scenario in SCENARIOS:
        figures = module.seed_figures(scenario, 10_000)
        assert figures["distinct_schedules"] >= 0.95, (scenario, figures)
        assert figures["train_equal_to_test"] == 0, (scenario, figures)
