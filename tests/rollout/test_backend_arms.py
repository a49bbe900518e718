"""The in-process backend plays the arm it is asked for; the remote one is tested against a real
server in tests/server/test_arms.py."""

from __future__ import annotations

import pytest

from schemashift.env.arms import CONTROL, DRIFT
from schemashift.env.rulesets import get_ruleset
from schemashift.rollout.backends import InProcessBackend

SCENARIO, SEED = "customer_escalation", 4


def without_episode_id(view: dict) -> dict:
    return {key: value for key, value in view.items() if key != "episode_id"}


def play(backend: InProcessBackend, arm: str) -> tuple[dict, dict]:
    rs = get_ruleset("v1")
    first = backend.reset("v1", SCENARIO, SEED, arm=arm)
    for action in rs.solution(rs.arm_task(SCENARIO, SEED, arm)):
        observation, _ = backend.step(action)
        if observation["done"]:
            break
    return without_episode_id(first), backend.outcome()


def test_in_process_backend_plays_the_arm_asked_for():
    backend = InProcessBackend()
    first_drift, drift = play(backend, DRIFT)
    first_control, control = play(backend, CONTROL)
    assert first_control == first_drift  # the agent is not told the arm
    assert drift["task"]["arm"] == DRIFT and control["task"]["arm"] == CONTROL
    assert drift["drifts"] and drift["task"]["schedule"]
    assert control["drifts"] == [] and not control["task"]["schedule"]
    assert drift["summary"]["success"] is True and control["summary"]["success"] is True
    assert control["summary"]["drifts_fired"] == 0 < drift["summary"]["drifts_fired"]
    # the default is the drift arm
    assert without_episode_id(backend.reset("v1", SCENARIO, SEED)) == first_drift
    assert backend._env.episode.task.arm == DRIFT


def test_in_process_backend_refuses_arms_it_cannot_play():
    backend = InProcessBackend()
    with pytest.raises(ValueError, match="unknown arm 'placebo'"):
        backend.reset("v1", SCENARIO, SEED, arm="placebo")
    with pytest.raises(ValueError, match="legacy plays only the drift arm"):
        backend.reset("legacy", "E1_onboard_new_hire", 0, arm=CONTROL)
