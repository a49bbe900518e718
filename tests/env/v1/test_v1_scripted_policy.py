"""The registered `scripted` baseline solves v1 tasks from what an agent is shown.

It sees only JSON round-tripped observations (`play_policy`), parses the task text, does the
lookups, writes under the live contract, and discovers, reports and recovers from every drift
kind. Figures are printed (run with -s to see them).
"""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from v1_support import FAMILIES, RULESET, play_policy

from schemashift.env import Environment
from schemashift.env.rulesets.v1.catalogue import DRIFT_KINDS
from schemashift.policies import BUILTIN, make_policy
from schemashift.policies.policy_aware import PolicyAwareHeuristic
from schemashift.policies.scripted import ScriptedPolicy, parse_slot, plan_task

SCENARIOS = FAMILIES + [info.id for info in RULESET.compositions()]
SPLITS = {"test": range(0, 200), "train": range(10000, 10200)}
MIN_SUCCESS = 0.85
EPISODES_PER_KIND = 12


def _play(scenario: str, seed: int, env: Environment, policy) -> dict:
    summary = play_policy(policy, scenario, seed, env)
    summary["met"] = len(RULESET.met_drifts(env.episode))
    return summary


@pytest.fixture(scope="module")
def played() -> dict[str, dict[str, list[dict]]]:
    """split -> scenario -> the summaries of its 200 seeds."""
    env = Environment(RULESET)
    policy = make_policy("scripted", "v1")
    return {
        split: {s: [_play(s, seed, env, policy) for seed in seeds] for s in SCENARIOS}
        for split, seeds in SPLITS.items()
    }


def test_registered_and_lazy():
    assert "scripted" in BUILTIN
    assert isinstance(make_policy("scripted", "v1"), ScriptedPolicy)


def test_legacy_plays_the_policy_aware_fallback():
    """config.yaml's baselines apply to every ruleset, so a legacy cell must still play."""
    policy = make_policy("scripted", "legacy")
    assert isinstance(policy._fallback, PolicyAwareHeuristic)
    env = Environment("legacy")
    policy.reset()
    observation = env.reset(env.ruleset.scenario_ids()[0], 0)
    steps = 0
    while not observation["done"] and steps < 100:
        observation, _ = env.step(policy.act(json.loads(json.dumps(observation))))
        steps += 1
    assert observation["done"]


def test_slot_and_task_parsing():
    assert parse_slot("Monday April 27, 2026 at 10:00 UTC", 45) == (
        "2026-04-27T10:00:00Z",
        "2026-04-27T10:45:00Z",
    )
    assert parse_slot("Friday January 30, 2026 at 16:30 UTC", 60) == (
        "2026-01-30T16:30:00Z",
        "2026-01-30T17:30:00Z",
    )
    for scenario in SCENARIOS:
        for seed in (0, 1, 10000):
            ops, _ = plan_task(RULESET.build_task(scenario, seed).description, {})
            assert ops, (scenario, seed)


@pytest.mark.timeout(300)
@pytest.mark.parametrize("split", sorted(SPLITS))
def test_success_on_every_scenario(played, split):
    rows = []
    for scenario in SCENARIOS:
        runs = played[split][scenario]
        success = sum(r["success"] for r in runs) / len(runs)
        score = sum(r["score"] for r in runs) / len(runs)
        failed = [seed for seed, r in zip(SPLITS[split], runs, strict=True) if not r["success"]]
        rows.append((scenario, success, score, failed))
        print(f"{split:5s} {scenario:22s} success {success:.3f} score {score:.3f} failed seeds {failed}")
    assert all(success >= MIN_SUCCESS for _, success, _, _ in rows), rows
    episodes = [r for scenario in SCENARIOS for r in played[split][scenario]]
    catastrophes = sum(r["catastrophe"] for r in episodes)
    assert catastrophes <= 0.01 * len(episodes), catastrophes


@pytest.mark.timeout(300)
def test_detection_of_met_drifts_is_high(played):
    runs = [r for split in played.values() for runs in split.values() for r in runs if r["met"]]
    detection = sum(r["drift_detection"] for r in runs) / len(runs)
    print(f"mean drift_detection over {len(runs)} episodes with met drifts: {detection:.3f}")
    assert detection >= 0.8


@pytest.mark.timeout(300)
def test_between_random_and_oracle(played):
    env = Environment(RULESET)
    seeds = range(0, 25)
    figures = {}
    for name in ("random", "oracle"):
        policy = make_policy(name, "v1")
        runs = [_play(s, seed, env, policy) for s in SCENARIOS for seed in seeds]
        figures[name] = (
            sum(r["success"] for r in runs) / len(runs),
            sum(r["score"] for r in runs) / len(runs),
        )
    mine = [r for s in SCENARIOS for r in played["test"][s][: len(seeds)]]
    figures["scripted"] = (
        sum(r["success"] for r in mine) / len(mine),
        sum(r["score"] for r in mine) / len(mine),
    )
    print({name: (round(a, 3), round(b, 3)) for name, (a, b) in figures.items()})
    assert figures["scripted"][1] < figures["oracle"][1]
    assert figures["scripted"][0] >= figures["random"][0] + 0.7


# -- drift handling per kind (moved from the former test-only scripted agent) ---------------------
def _episodes_by_kind() -> dict[str, list[tuple[str, int]]]:
    """The first episodes (scenarios round-robin, test then train seeds) that plan each kind."""
    found: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for seed in list(range(0, 200)) + list(range(10000, 10200)):
        for scenario in SCENARIOS:
            for spec in RULESET.build_task(scenario, seed).drift_plan:
                if len(found[spec.kind]) < EPISODES_PER_KIND and (scenario, seed) not in found[spec.kind]:
                    found[spec.kind].append((scenario, seed))
    return found


EPISODES = _episodes_by_kind()


def test_every_kind_has_episodes():
    assert {kind: len(EPISODES[kind]) for kind in DRIFT_KINDS} == dict.fromkeys(
        DRIFT_KINDS, EPISODES_PER_KIND
    )


#: kinds whose drift makes a call fail when met (the others show in headers, layouts, statuses)
BREAKING = {"field_rename", "new_required_param", "type_change", "tool_removal"}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("kind", DRIFT_KINDS)
def test_discovers_reports_and_recovers(kind):
    env = Environment(RULESET)
    policy = make_policy("scripted", "v1")
    met = recoveries = 0
    for scenario, seed in EPISODES[kind]:
        summary = play_policy(policy, scenario, seed, env)
        rows = RULESET.drift_outcomes(env.episode)
        where = f"{scenario} seed {seed}: {rows}"
        assert summary["success"], where
        assert summary["drift_detection"] == 1.0, where
        fired = [r for r in rows if r["fired_step"] is not None]
        assert all(r["reported_step"] is not None for r in fired), where
        assert all(r["failed_step"] is None or r["recovered_step"] is not None for r in fired), where
        of_kind = [r for r in fired if r["kind"] == kind]
        assert all(r["discovered_step"] is not None for r in of_kind), where
        met += len(of_kind)
        recoveries += sum(1 for r in of_kind if r["recovered_step"] is not None)
    assert met >= EPISODES_PER_KIND // 2
    if kind in BREAKING:
        # it really hit the drift (a failed call) and came back from it
        assert recoveries >= EPISODES_PER_KIND // 2


def test_reset_forgets_the_episode():
    env = Environment(RULESET)
    policy = make_policy("scripted", "v1")
    first = play_policy(policy, "customer_lookup", 3, env)
    again = play_policy(policy, "customer_lookup", 3, env)
    assert first["success"] and again["success"]
    assert first["score"] == again["score"]
