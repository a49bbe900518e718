"""Play the baseline heuristics through Environment("legacy") and reproduce the published tables.

Reference: tests/data/legacy_reference.json, sections `tables` (spec 14.2, Eval 6 and Eval 7 of the
original training log, docs/original-training-log.md), `aggregates`, `traces` (spec 14.3) and
`oracle` (spec summary point 10).
"""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction
from functools import cache

import pytest
from legacy_reference import COLUMNS, REF, assert_close

from schemashift.env import Environment
from schemashift.env.actions import parse_action
from schemashift.env.rulesets import get_ruleset
from schemashift.policies import make_policy

ROWS = REF["tables"]["rows"]
SEEDS = REF["tables"]["seeds"]
TIERS = {info["id"]: info["tier"] for key, info in REF["scenarios"].items() if not key.startswith("_")}
SCENARIOS = list(TIERS)
BASELINES = ["naive_heuristic", "policy_aware_heuristic"]
LEGACY = get_ruleset("legacy")


def legacy_action(action) -> dict:
    """An action as the legacy ruleset reads it (a validated Action, as a dict)."""
    return parse_action(action, LEGACY.tool_names, LEGACY.drift_kinds).to_dict()


@cache
def play(policy_name: str, scenario: str, seed: int) -> dict:
    """One full episode of the eval loop (spec 10); cached, every test reads the same episode."""
    env = Environment("legacy")
    policy = make_policy(policy_name, ruleset="legacy")
    policy.reset()
    obs = env.reset(scenario, seed=seed)
    actions, rewards = [], []
    while not obs["done"]:
        action = policy.act(obs)
        actions.append(legacy_action(action))
        obs, reward = env.step(action)
        rewards.append(reward)
        assert len(actions) <= obs["max_steps"], "episode did not end by max_steps"
    return {"actions": actions, "rewards": rewards, "final": rewards[-1], "obs": obs}


CELLS = [(b, s, seed) for b in BASELINES for s in SCENARIOS for seed in SEEDS]


@pytest.mark.parametrize(("baseline", "scenario", "seed"), CELLS)
def test_published_cell(baseline, scenario, seed):
    episode = play(baseline, scenario, seed)
    row, final = ROWS[baseline][scenario], episode["final"]
    where = f"{baseline} {scenario} seed {seed}"
    for column, key in COLUMNS.items():
        assert_close(final[key], row[column], f"{where} {column}")
    assert episode["obs"]["step"] == final["steps"] == row["steps"], where
    assert episode["actions"][-1]["type"] == row["last_action"], where
    assert_close(sum(Fraction(r["shaped_total"]) for r in episode["rewards"]), row["cumul"], f"{where} sum")


@pytest.mark.parametrize(("baseline", "scenario"), [(b, s) for b in BASELINES for s in SCENARIOS])
def test_training_log_rows_as_printed(baseline, scenario):
    """Evals 6 and 7 of the original training log (docs/original-training-log.md) print each cell
    with 3 decimals (binary as an integer)."""
    printed = ROWS[baseline][scenario]["training_log"]
    for seed in SEEDS:
        final = play(baseline, scenario, seed)["final"]
        got = {column: f"{final[key]:.3f}" for column, key in COLUMNS.items() if column != "binary"}
        got["binary"] = str(int(final["binary"]))
        assert got == printed, f"seed {seed}"


def _mean(values) -> Fraction:
    values = list(values)
    return sum((Fraction(v) for v in values), Fraction(0)) / len(values)


AGGREGATE_CASES = [
    (b, scope, metric)
    for b in BASELINES
    for scope, block in REF["aggregates"][b].items()
    for metric in block
    if metric != "training_log"
]
SCOPES = {"overall": None, "E_tier": "easy", "M_tier": "medium"}
METRIC_KEYS = {"shaped": "shaped_total", "cumul": "cumulative_reward", "binary_rate": "binary"}


@pytest.mark.parametrize(("baseline", "scope", "metric"), AGGREGATE_CASES)
def test_published_aggregate(baseline, scope, metric):
    tier = SCOPES[scope]
    episodes = [
        play(baseline, s, seed)["final"] for s in SCENARIOS if tier in (None, TIERS[s]) for seed in SEEDS
    ]
    assert len(episodes) == (30 if tier is None else 15)
    value = _mean(e[METRIC_KEYS[metric]] for e in episodes)
    assert_close(value, REF["aggregates"][baseline][scope][metric], f"{baseline} {scope} {metric}")


@pytest.mark.parametrize("baseline", BASELINES)
def test_overall_aggregates_as_printed(baseline):
    printed = REF["aggregates"][baseline]["overall"]["training_log"]
    finals = [play(baseline, s, seed)["final"] for s in SCENARIOS for seed in SEEDS]
    assert f"{float(_mean(e['shaped_total'] for e in finals)):.3f}" == printed["shaped"]
    assert f"{float(_mean(e['cumulative_reward'] for e in finals)):.3f}" == printed["cumul"]
    assert f"{100 * float(_mean(e['binary'] for e in finals)):.2f}%" == printed["binary_rate"]


@pytest.mark.parametrize("baseline", BASELINES)
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_actions_follow_the_published_trace(baseline, scenario):
    """Spec 14.3 lists each action (with the spec-9 parameter values); every seed plays the same."""
    expected = [
        legacy_action(step["action"]) for step in REF["traces"][baseline]["scenarios"][scenario]["steps"]
    ]
    for seed in SEEDS:
        assert play(baseline, scenario, seed)["actions"] == expected, f"seed {seed}"


def _rounded_values(node, path="ref"):
    """Every {published, exact} pair in the reference file, with where it sits."""
    if isinstance(node, dict):
        if "published" in node and "exact" in node:
            yield path, node
        for key, value in node.items():
            yield from _rounded_values(value, f"{path}.{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _rounded_values(value, f"{path}[{i}]")


def test_reference_fractions_round_to_the_published_figures():
    pairs = list(_rounded_values(REF))
    assert len(pairs) >= 20
    for path, pair in pairs:
        published = Decimal(repr(pair["published"]))
        places = -published.as_tuple().exponent
        assert abs(Fraction(pair["exact"]) - Fraction(published)) <= Fraction(1, 2 * 10**places), path


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_oracle_solves_every_scenario(scenario):
    low, high = REF["oracle"]["final_shaped_range"]
    episode = play("oracle", scenario, 0)
    final = episode["final"]
    assert final["binary"] == REF["oracle"]["binary"] and final["success"] is True
    assert final["completion"] == 1.0 and final["correct_final_gate"] == 1.0
    assert low <= final["shaped_total"] <= high
    assert episode["actions"][-1]["type"] == "complete_task"
