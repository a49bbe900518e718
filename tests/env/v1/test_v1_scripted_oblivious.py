"""`scripted_oblivious`: the scripted agent with its drift handling switched off.

It is `ScriptedPolicy(handles_drift=False)`, the same code: it solves the control arm and fails
under drift, so the difference between the arms is adaptation. `scripted` itself solves both
arms (drift handling is never needed where nothing drifts). Figures are printed (run with -s).
"""

from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from v1_support import RULESET, SCENARIOS, play_policy

from schemashift.env import ARMS, CONTROL, DRIFT, Environment
from schemashift.policies import BUILTIN, make_policy, policy_module
from schemashift.policies.scripted import OBLIVIOUS, ScriptedPolicy

pytestmark = pytest.mark.timeout(300)

#: seeds no other test uses, drawn afresh from a fixed generator (test and train splits of v1)
_DRAW = random.Random(31_0512)
SEEDS = _DRAW.sample(range(300, 9000), 50) + _DRAW.sample(range(10300, 60000), 50)
POLICIES = ("scripted", OBLIVIOUS)
#: the oblivious agent's success rate per scenario: at least this in the control arm, at most
#: one minus it under drift
NEAR = 0.95
#: scripted's success rate per scenario under drift (docs/rulesets.md: >= 0.985)
SCRIPTED_DRIFT = 0.985
ADAPTING = {"inspect_schema", "report_drift", "retry_with_variant"}


@pytest.fixture(scope="module")
def played() -> dict[tuple[str, str, str], list[tuple[dict, list[dict]]]]:
    """(policy, arm, scenario) -> (summary, actions) of each seed in SEEDS."""
    env = Environment(RULESET)
    out = {}
    for name in POLICIES:
        policy = make_policy(name, RULESET)
        for arm in ARMS:
            for scenario in SCENARIOS:
                runs = []
                for seed in SEEDS:
                    actions: list[dict] = []
                    summary = play_policy(policy, scenario, seed, env, arm=arm, actions=actions)
                    runs.append((summary, actions))
                out[name, arm, scenario] = runs
    return out


def _successes(played, name: str, arm: str, scenario: str) -> int:
    return sum(summary["success"] for summary, _ in played[name, arm, scenario])


def test_registered_as_a_configuration_of_scripted():
    policy = make_policy(OBLIVIOUS, "v1")
    assert OBLIVIOUS == "scripted_oblivious" and OBLIVIOUS in BUILTIN
    assert type(policy) is ScriptedPolicy and not policy.handles_drift and policy.name == OBLIVIOUS
    assert make_policy("scripted", "v1").handles_drift
    # the same module: the workflow gives both policies' cells the same code digest
    assert policy_module(OBLIVIOUS) == policy_module("scripted")


def test_legacy_is_refused():
    """Legacy has no control arm, and scripted's legacy fallback (policy-aware) handles drift."""
    with pytest.raises(ValueError, match="scripted_oblivious plays v1 only"):
        make_policy(OBLIVIOUS, "legacy")


def test_figures(played):
    for scenario in SCENARIOS:
        row = [f"{n}/{a} {_successes(played, n, a, scenario)}/{len(SEEDS)}" for n in POLICIES for a in ARMS]
        print(f"{scenario:22s}", " | ".join(row))


def test_oblivious_solves_the_control_arm_and_fails_under_drift(played):
    rates = {
        (scenario, arm): _successes(played, OBLIVIOUS, arm, scenario) / len(SEEDS)
        for scenario in SCENARIOS
        for arm in ARMS
    }
    assert all(rates[scenario, CONTROL] >= NEAR for scenario in SCENARIOS), rates
    assert all(rates[scenario, DRIFT] <= 1 - NEAR for scenario in SCENARIOS), rates
    drift = [summary for s in SCENARIOS for summary, _ in played[OBLIVIOUS, DRIFT, s]]
    assert sum(summary["catastrophe"] for summary in drift) <= 0.01 * len(drift)


def test_scripted_solves_both_arms(played):
    """Drift handling is never needed where nothing drifts: scripted solves every control seed."""
    for scenario in SCENARIOS:
        failed = [
            seed
            for seed, (summary, _) in zip(SEEDS, played["scripted", CONTROL, scenario], strict=True)
            if not summary["success"]
        ]
        assert failed == [], (scenario, failed)
        assert _successes(played, "scripted", DRIFT, scenario) >= SCRIPTED_DRIFT * len(SEEDS), scenario


def test_oblivious_never_looks_reports_or_adapts(played):
    """Only documented calls and the completion, and every call it makes under drift it makes,
    with the same values, in the control arm of the same cell: nothing is adapted to a drift."""
    env = Environment(RULESET)
    for scenario in SCENARIOS:
        for seed, (_, control), (_, drift) in zip(
            SEEDS, played[OBLIVIOUS, CONTROL, scenario], played[OBLIVIOUS, DRIFT, scenario], strict=True
        ):
            docs = env.reset(scenario, seed)["tool_schemas"]
            for action in control + drift:
                assert action["type"] in ("call_tool", "complete_task"), (scenario, seed, action)
                if action["type"] == "call_tool":
                    call = action["tool_call"]
                    contract = docs[call["tool"]][call["endpoint"]]
                    assert set(call["params"]) <= set(contract["params"]), (scenario, seed, call)
            calls = [
                Counter(json.dumps(a, sort_keys=True) for a in run if a["type"] == "call_tool")
                for run in (control, drift)
            ]
            assert not calls[1] - calls[0], (scenario, seed, calls[1] - calls[0])


def test_same_actions_as_scripted_in_the_control_arm(played):
    """Not identical: before completing, scripted inspects each tool it called since that tool's
    last inspection (drift that never got in its way: error-code remaps, rate limits), which it
    does in the control arm too, where the inspections find nothing. So the weaker property holds
    exactly: scripted's control actions are the oblivious agent's with inspections added after
    its last call, and no report or variant among them."""
    for scenario in SCENARIOS:
        for seed, (_, mine), (_, blind) in zip(
            SEEDS, played["scripted", CONTROL, scenario], played[OBLIVIOUS, CONTROL, scenario], strict=True
        ):
            kinds = [action["type"] for action in mine]
            assert ADAPTING & set(kinds) <= {"inspect_schema"}, (scenario, seed, kinds)
            last_call = max(i for i, kind in enumerate(kinds) if kind == "call_tool")
            assert "inspect_schema" not in kinds[:last_call], (scenario, seed, kinds)
            assert [a for a in mine if a["type"] != "inspect_schema"] == blind, (scenario, seed)


def test_the_switch_is_the_only_difference():
    """A drifted answer changes nothing the oblivious agent knows: no route, rate limit, report
    or inspection is learned from a deprecation header, a restructured body or a 429."""
    env = Environment(RULESET)
    for name, learns in (("scripted", True), (OBLIVIOUS, False)):
        policy = make_policy(name, RULESET)
        policy.reset()
        observation = json.loads(json.dumps(env.reset("customer_lookup", SEEDS[0], arm=CONTROL)))
        action = policy.act(observation)
        assert action["type"] == "call_tool" and action["tool_call"]["endpoint"] == "search_contacts"
        op, canonical = policy.awaiting[1]
        read = {
            "ok": True,
            "status": 200,
            "headers": {"Deprecation": "true", "Link": "<contacts.find>; rel=successor-version"},
            "body": {"data": {"items": []}, "meta": {"total": 0}},
        }
        policy._call_result(op, canonical, read, 1, observation)
        refused = {
            "ok": False,
            "status": 429,
            "headers": {"Retry-After": "3"},
            "body": {"code": "rate_limited"},
        }
        write = type(op)("crm", "update_contact", {"contact_id": "c_1", "status": "x"}, write=True)
        write.last_call = ("update_contact", {"contact_id": "c_1", "status": "x"})
        policy._call_result(write, "update_contact", refused, 2, observation)
        learned = (bool(policy.route), bool(policy.reports), bool(policy.wait_until), write.state == "todo")
        assert learned == (learns,) * 4, (name, learned)
