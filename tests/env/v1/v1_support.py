"""Shared helpers of the v1 tests: playing action lists and the seeds the property tests cover."""

from __future__ import annotations

import json
import os
from typing import Any

from schemashift.env import DRIFT, Environment, Task
from schemashift.env.rulesets import get_ruleset

RULESET = get_ruleset("v1")
FAMILIES = RULESET.scenario_ids()
#: the six families and the two generated compositions
SCENARIOS = FAMILIES + [info.id for info in RULESET.compositions()]
#: seeds per scenario and split in the property tests (SCHEMASHIFT_V1_SEEDS raises it for deeper runs)
N_SEEDS = int(os.environ.get("SCHEMASHIFT_V1_SEEDS", "200"))
TEST_SEEDS = list(range(0, N_SEEDS))
TRAIN_SEEDS = list(range(10000, 10000 + N_SEEDS))
ALL_SEEDS = TEST_SEEDS + TRAIN_SEEDS


def play(scenario: str, seed: int, actions: list[Any], env: Environment | None = None) -> dict[str, Any]:
    """Play `actions` from reset until the episode ends; returns the ruleset summary."""
    env = env or Environment(RULESET)
    env.reset(scenario, seed)
    for action in actions:
        if env.episode.done:
            break
        env.step(action)
    return RULESET.summary(env.episode)


def play_policy(
    policy,
    scenario: str,
    seed: int,
    env: Environment | None = None,
    *,
    arm: str = DRIFT,
    actions: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Play a policy that sees every observation only after a JSON round trip, in `arm` of the
    cell (started on it, as the runner starts it); its actions are appended to `actions` when given."""
    from schemashift.rollout.runner import Cell

    env = env or Environment(RULESET)
    policy.reset()
    if hasattr(policy, "start_episode"):
        policy.start_episode(Cell(RULESET.name, scenario, seed, arm=arm))
    observation = env.reset(scenario, seed, arm=arm)
    while not observation["done"]:
        action = policy.act(json.loads(json.dumps(observation)))
        if actions is not None:
            actions.append(action)
        observation, _ = env.step(action)
    return RULESET.summary(env.episode)


def call(tool: str, endpoint: str, **params: Any) -> dict[str, Any]:
    return {"type": "call_tool", "tool_call": {"tool": tool, "endpoint": endpoint, "params": params}}


def inspect(tool: str) -> dict[str, Any]:
    return {"type": "inspect_schema", "inspect": {"tool": tool}}


def report(tool: str, kind: str) -> dict[str, Any]:
    return {"type": "report_drift", "report": {"tool": tool, "drift_kind": kind, "description": "seen"}}


def complete(summary: str = "done") -> dict[str, Any]:
    return {"type": "complete_task", "complete": {"summary": summary}}


def documented_plan(task: Task) -> list[dict[str, Any]]:
    """The task's calls, reads included, as the start-of-episode documentation describes them
    (no drift knowledge), with the values the ground truth holds."""
    return [call(op["tool"], op["endpoint"], **op["params"]) for op in task.ground_truth["ops"]]
