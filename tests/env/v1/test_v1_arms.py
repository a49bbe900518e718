"""The control arm: the same cell with its drift plan off (env.arms)."""

from __future__ import annotations

import random

import pytest
from v1_agents import oblivious_actions
from v1_support import play_policy

from schemashift.env import ARMS, CONTROL, DRIFT, Environment, check_arm, get_ruleset
from schemashift.policies import make_policy

pytestmark = pytest.mark.timeout(300)

#: seeds no other test uses, drawn afresh from a fixed generator (test and train splits of v1)
_DRAW = random.Random(20261205)
V1_SEEDS = _DRAW.sample(range(300, 9000), 12) + _DRAW.sample(range(10300, 60000), 12)


def _first_view(env: Environment, scenario: str, seed: int, arm: str) -> dict:
    view = env.reset(scenario, seed, arm=arm)
    return {key: value for key, value in view.items() if key != "episode_id"}


def test_arms_are_named_once_and_checked():
    assert ARMS == (DRIFT, CONTROL) == ("drift", "control")
    assert [check_arm(arm) for arm in ARMS] == list(ARMS)
    for bad in ("Control", "", None, 0, "none"):
        with pytest.raises(ValueError, match="the arms are drift, control"):
            check_arm(bad)


def test_the_control_task_is_the_drift_task_without_its_plan():
    rs = get_ruleset("v1")
    env = Environment(rs)
    for scenario in rs.scenario_ids():
        for seed in V1_SEEDS[:4] + V1_SEEDS[-4:]:
            drift, control = rs.arm_task(scenario, seed, DRIFT), rs.arm_task(scenario, seed, CONTROL)
            assert drift.drift_plan and control.drift_plan == () and (drift.arm, control.arm) == ARMS
            assert {**vars_of(control), "drift_plan": drift.drift_plan, "arm": DRIFT} == vars_of(drift)
            assert drift == rs.build_task(scenario, seed)
            # Nothing the agent sees tells the arms apart.
            assert _first_view(env, scenario, seed, CONTROL) == _first_view(env, scenario, seed, DRIFT)
            # A reset that names no arm plays the drift arm.
            default = {key: value for key, value in env.reset(scenario, seed).items() if key != "episode_id"}
            assert env.episode.task == drift and default == _first_view(env, scenario, seed, DRIFT)


def vars_of(task) -> dict:
    return {name: getattr(task, name) for name in task.__slots__}


def test_an_unknown_arm_is_refused_and_the_running_episode_is_kept():
    env = Environment("v1")
    env.reset("customer_lookup", 3)
    running = env.episode
    with pytest.raises(ValueError, match="unknown arm 'controls'"):
        env.reset("customer_lookup", 4, arm="controls")
    assert env.episode is running


@pytest.mark.parametrize("scenario", get_ruleset("v1").scenario_ids())
def test_v1_control_arm_measures_drift_handling(scenario):
    """The oracle solves both arms; a drift-oblivious agent (the documented plan with the right
    values and the right summary) solves the control arm and fails under drift: the arms'
    difference is adaptation."""
    rs = get_ruleset("v1")
    env = Environment(rs)
    oracle = make_policy("oracle", rs)
    oblivious = {DRIFT: 0, CONTROL: 0}
    for seed in V1_SEEDS:
        for arm in ARMS:
            summary = play_policy(oracle, scenario, seed, env, arm=arm)
            assert summary["success"] and not summary["catastrophe"], (scenario, seed, arm)
        control = play_policy(oracle, scenario, seed, env, arm=CONTROL)
        assert control["drifts_fired"] == 0 and rs.drift_outcomes(env.episode) == []
        assert control["drift_detection"] == 1.0 and control["adaptation"] == 1.0
        plan = oblivious_actions(scenario, seed)
        for arm in ARMS:
            env.reset(scenario, seed, arm=arm)
            for action in plan:
                if env.episode.done:
                    break
                env.step(action)
            oblivious[arm] += rs.summary(env.episode)["success"]
    assert oblivious[CONTROL] == len(V1_SEEDS)
    assert oblivious[DRIFT] <= 0.1 * len(V1_SEEDS)


def test_legacy_plays_only_the_drift_arm():
    """The original has no control arm; its published solutions are written for the drifted schemas."""
    env = Environment("legacy")
    env.reset("E1_onboard_new_hire", 0)
    running = env.episode
    with pytest.raises(ValueError, match="ruleset legacy plays only the drift arm"):
        env.reset("E1_onboard_new_hire", 0, arm=CONTROL)
    assert env.episode is running and env.ruleset.arms == (DRIFT,)


def test_nothing_tells_the_arms_apart_before_a_drift_fires():
    """A search: random agents play a cell in both arms with the same actions; every observation
    is the same in both until the drift arm's first drift fires."""
    rs = get_ruleset("v1")
    envs = {arm: Environment(rs) for arm in ARMS}
    draw = random.Random(4417)
    compared = 0
    for scenario in rs.scenario_ids():
        for seed in draw.sample(range(300, 60000), 15):
            agent = make_policy("random", rs)
            agent.reset()
            views = {arm: envs[arm].reset(scenario, seed, arm=arm) for arm in ARMS}
            while not views[DRIFT]["done"]:
                assert _without_id(views[DRIFT]) == _without_id(views[CONTROL]), (scenario, seed)
                compared += 1
                action = agent.act(views[DRIFT])
                views = {arm: envs[arm].step(action)[0] for arm in ARMS}
                if any(drift.fired for drift in envs[DRIFT].episode.drifts):
                    break
    assert compared > 6 * 15


def _without_id(view: dict) -> dict:
    return {key: value for key, value in view.items() if key != "episode_id"}
