"""Replay the published step-by-step traces through Environment("legacy") and check every number.

Reference values come from tests/data/legacy_reference.json (spec 8.4 worked examples and the
spec 14.3 traces). Besides the components the spec prints, every step's completion (C),
drift detection (D), adaptation (A) and shaping (sigma) is derived here by hand from the rules
of spec sections 7-8, and that derivation is itself checked against the published shaped_total,
so a step is checked in full: C, D, A, E, sigma, gates, shaped_total, binary, cumulative, done,
response status/error and feedback text.
"""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
from legacy_reference import REF, assert_close, exact

from schemashift.env import Environment

TRACES = REF["traces"]
WORKED = REF["worked_examples"]
WEIGHTS = {
    "completion": Fraction(2, 5),
    "drift_detection": Fraction(1, 4),
    "adaptation": Fraction(1, 5),
    "efficiency": Fraction(3, 20),
}
COMPONENTS = (
    "completion",
    "drift_detection",
    "adaptation",
    "efficiency",
    "step_shaping",
    "correct_final_gate",
)


def drift_suffix(step: int, n: int = 1) -> str:
    return f" [DRIFT FIRED: {n} drift event(s) on step {step}.]"


def expected_feedback(action: dict, status: int | None, report_match: int | None) -> str:
    """Feedback text of spec 3.3 for a well-formed action."""
    kind = action["type"]
    if kind == "call_tool":
        sub = action["tool_call"]
        return f"Called {sub['tool']}.{sub['endpoint']}: status={status}"
    if kind == "retry_with_variant":
        sub = action["retry"]
        return f"Retried {sub['tool']}.{sub['endpoint']}: status={status}"
    if kind == "inspect_schema":
        return f"Inspected {action['inspect']['tool']} schema."
    if kind == "report_drift":
        sub = action["report"]
        if report_match is None:
            return "Drift report did not match any undetected fired drift."
        return f"Drift correctly reported: {sub['drift_kind']} on {sub['tool']} at step {report_match}."
    return f"Episode marked complete. Summary: {action['complete']['summary'][:80]}"


# Hand derivation (spec 7, 8.1, 8.3) of (C, D, A, sigma) after each step of the policy_aware traces.
_ = 0
DERIVED_POLICY_AWARE = {
    # send welcome (3/5 keys) | create with both attendees (5/5) | complete: drift fires, undetected
    "E1_onboard_new_hire": [("3/5", _, _, _), (1, _, _, _), (1, _, _, _)],
    # 410 on the drift step (ignored by A) | inspect after failure | correct report | first mail call
    # after step 1 succeeds (prev had no response: no +0.20) | complete, 1 of 3 mails: gate 0
    "E2_meeting_invite_blast": [
        (_, _, _, _),
        (_, _, _, "0.1"),
        (_, 1, _, "0.15"),
        (_, 1, 1, _),
        (_, 1, 1, _),
    ],
    # search | update on the drift step (A ignores it) | complete mentioning Globex
    "E3_customer_lookup": [(_, _, _, _), ("1/2", _, _, _), (1, _, _, _)],
    # mail (2/6 keys) | first crm call after step 1 fails: A = 0/1 for good | inspect | report |
    # retry (prev: report, no response) | update (3/6), calendar drift fires: D = 1/2 | complete
    "M1_customer_escalation": [
        ("1/3", _, _, _),
        ("1/3", _, _, _),
        ("1/3", _, _, "0.1"),
        ("1/3", 1, _, "0.15"),
        ("1/3", 1, _, _),
        ("1/2", "1/2", _, _),
        ("1/2", "1/2", _, _),
    ],
    # mail (1/4) | searches; the step-5 search is the first crm call after the rate-limit drift (ok):
    # A = 1/1 | 429 | inspect after 429 | wrong report | retry 429 | safety-net complete
    "M2_weekly_report": [("1/4", _, _, _)] * 4
    + [("1/4", _, 1, _)] * 2
    + [("1/4", _, 1, "0.1")]
    + [("1/4", _, 1, _)] * 3,
    # mail (1/5) | generic event (no key; the call is on the drift step) | complete
    "M3_event_cleanup": [("1/5", _, _, _)] * 3,
}


def derived_components(baseline: str, scenario: str) -> list[dict[str, Fraction]]:
    trace = TRACES[baseline]["scenarios"][scenario]
    steps, max_steps = trace["steps"], trace["max_steps"]
    if baseline == "naive_heuristic":
        rows = [(0, 0, 0, exact(step.get("step_shaping", 0))) for step in steps]
    else:
        rows = DERIVED_POLICY_AWARE[scenario]
    out = []
    for t, (c, d, a, sigma) in enumerate(rows, start=1):
        comp = {
            "completion": exact(c),
            "drift_detection": exact(d),
            "adaptation": exact(a),
            "efficiency": 1 - Fraction(t, 2 * max_steps),
            "step_shaping": exact(sigma),
        }
        terminal = t == len(rows)
        comp["correct_final_gate"] = Fraction(int(comp["completion"] == 1)) if terminal else Fraction(1)
        comp["binary"] = Fraction(
            int(comp["completion"] >= Fraction(95, 100) and comp["correct_final_gate"] == 1)
        )
        rubric = sum(WEIGHTS[k] * comp[k] for k in WEIGHTS)
        comp["shaped_total"] = rubric * comp["correct_final_gate"] + comp["step_shaping"]
        out.append(comp)
    return out


TRACE_CASES = [(b, s) for b in ("naive_heuristic", "policy_aware_heuristic") for s in TRACES[b]["scenarios"]]


@pytest.mark.parametrize(("baseline", "scenario"), TRACE_CASES)
def test_hand_derivation_reproduces_published_trace(baseline, scenario):
    """Guards the derivation used below: it must give the published per-step shaped_total."""
    steps = TRACES[baseline]["scenarios"][scenario]["steps"]
    derived = derived_components(baseline, scenario)
    assert len(derived) == len(steps)
    for t, (step, comp) in enumerate(zip(steps, derived, strict=True), start=1):
        assert comp["shaped_total"] == exact(step["shaped_total"]), f"step {t}"
        for key in COMPONENTS:
            if key in step:
                assert comp[key] == exact(step[key]), f"step {t} {key}"


@pytest.mark.parametrize(("baseline", "scenario"), TRACE_CASES)
def test_published_trace(baseline, scenario):
    trace = TRACES[baseline]["scenarios"][scenario]
    derived = derived_components(baseline, scenario)
    env = Environment("legacy")
    obs = env.reset(scenario, seed=0)
    assert obs["max_steps"] == trace["max_steps"]
    cumulative = Fraction(0)
    for t, (step, comp) in enumerate(zip(trace["steps"], derived, strict=True), start=1):
        where = f"{baseline} {scenario} step {t}"
        action = step["action"]
        obs, reward = env.step(copy.deepcopy(action))

        assert obs["step"] == t == reward["steps"], where
        terminal = t == len(trace["steps"])
        assert obs["done"] is terminal and reward["done"] is terminal, where

        response = obs["last_response"]
        if action["type"] in ("report_drift", "complete_task"):
            assert response is None, where
        else:
            assert response["status"] == step["status"], (where, response)
            assert response["ok"] is (step["status"] == 200), where
            if "error" in step:
                assert response["error"] == step["error"], where
            if response["ok"]:
                assert response["error"] is None, where
        if "total" in step:
            assert response["body"]["total"] == step["total"] == len(response["body"]["contacts"]), where
        if "event_id" in step:
            assert response["body"]["event_id"] == step["event_id"], where
        if action["type"] == "inspect_schema":
            tool = action["inspect"]["tool"]
            assert response["body"] == {"schema": obs["tool_schemas"][tool]}, where

        feedback = expected_feedback(action, step.get("status"), step.get("report_matches_drift_fired_at"))
        if step.get("drift_fired"):
            feedback += drift_suffix(t)
        assert obs["feedback"] == feedback, where

        assert_close(reward["shaped_total"], step["shaped_total"], f"{where} shaped_total")
        for key in COMPONENTS:
            if key in step:
                assert_close(reward[key], step[key], f"{where} {key} (published)")
            assert_close(reward[key], comp[key], f"{where} {key} (derived)")
        assert_close(reward["catastrophic_gate"], 1, f"{where} catastrophic_gate")
        assert_close(reward["binary"], step.get("binary", comp["binary"]), f"{where} binary")
        assert reward["success"] is (comp["binary"] == 1), where
        cumulative += exact(step["shaped_total"])
        assert_close(reward["cumulative_reward"], cumulative, f"{where} cumulative_reward")
    assert_close(
        reward["cumulative_reward"], trace["cumulative_reward"], f"{baseline} {scenario} final cumul"
    )


def test_naive_pattern_efficiency_pairs():
    """14.3: naive steps 1-2 score 0.15*E1 and 0.15*E2 with E_t = 1 - t/(2T)."""
    env = Environment("legacy")
    by_steps = {}
    for scenario, trace in TRACES["naive_heuristic"]["scenarios"].items():
        by_steps.setdefault(trace["max_steps"], scenario)
    pairs = TRACES["naive_heuristic"]["efficiency_pairs"]
    assert sorted(map(int, pairs)) == sorted(by_steps)
    for max_steps, scenario in by_steps.items():
        env.reset(scenario, seed=0)
        for t, expected in enumerate(pairs[str(max_steps)], start=1):
            _, reward = env.step(TRACES["naive_heuristic"]["scenarios"][scenario]["steps"][t - 1]["action"])
            assert_close(reward["efficiency"], expected, f"T={max_steps} E{t}")


# -- spec 8.4 worked examples ----------------------------------------------------------------------


def replay(scenario: str, actions: list[dict]) -> list[tuple[dict, dict]]:
    env = Environment("legacy")
    env.reset(scenario, seed=0)
    return [env.step(copy.deepcopy(action)) for action in actions]


def trace_actions(baseline: str, scenario: str) -> list[dict]:
    return [step["action"] for step in TRACES[baseline]["scenarios"][scenario]["steps"]]


def check_steps(results, example) -> None:
    assert len(results) == len(example["steps"])
    for t, ((_, reward), expected) in enumerate(zip(results, example["steps"], strict=True), start=1):
        assert_close(reward["shaped_total"], expected, f"step {t} shaped_total")
    assert results[-1][0]["done"] is True
    assert_close(results[-1][1]["cumulative_reward"], example["cumulative_reward"], "cumulative_reward")


def test_worked_example_1_naive_e1():
    example = WORKED["1_naive_E1"]
    results = replay(example["scenario"], trace_actions("naive_heuristic", example["scenario"]))
    check_steps(results, example)
    first = results[0][0]["last_response"]
    assert (first["status"], first["error"]) == (example["step1_status"], example["step1_error"])
    final = results[-1][1]
    assert_close(final["drift_detection"], example["step3_drift_detection"], "D after the drift fires")
    assert_close(final["efficiency"], example["final_efficiency"], "final efficiency")
    assert_close(final["shaped_total"], example["final_shaped"], "final shaped")


def test_worked_example_2_policy_aware_e1():
    example = WORKED["2_policy_aware_E1"]
    results = replay(example["scenario"], trace_actions("policy_aware_heuristic", example["scenario"]))
    check_steps(results, example)
    assert_close(results[0][1]["completion"], example["step1_completion"], "step 1 C")
    assert_close(results[1][1]["completion"], example["step2_completion"], "step 2 C")
    assert_close(results[2][1]["drift_detection"], example["step3_drift_detection"], "step 3 D")
    assert_close(results[2][1]["adaptation"], example["step3_adaptation"], "step 3 A")
    assert results[2][1]["binary"] == 1.0


def test_worked_example_3_policy_aware_e3():
    example = WORKED["3_policy_aware_E3"]
    results = replay(example["scenario"], trace_actions("policy_aware_heuristic", example["scenario"]))
    check_steps(results, example)
    assert_close(results[1][1]["completion"], example["step2_completion"], "step 2 C")
    # the drift fired on step 2 but did not touch contact_id/status
    assert results[1][0]["last_response"]["body"]["status"] == "support_in_progress"


def test_worked_example_4_policy_aware_m2():
    example = WORKED["4_policy_aware_M2"]
    results = replay(example["scenario"], trace_actions("policy_aware_heuristic", example["scenario"]))
    check_steps(results, example)
    assert_close(results[3][1]["adaptation"], 0, "A before the first post-drift crm call")
    assert_close(results[4][1]["adaptation"], example["step5_adaptation"], "step 5 A")
    assert_close(results[6][1]["step_shaping"], example["step7_step_shaping"], "step 7 shaping")
    assert_close(results[7][1]["step_shaping"], example["step8_step_shaping"], "step 8 shaping")
    assert results[7][0]["feedback"] == "Drift report did not match any undetected fired drift."


def _participants_as_dicts(actions: list[dict]) -> list[dict]:
    actions = copy.deepcopy(actions)
    params = actions[4]["retry"]["params"]
    params["participants"] = [{"email": e, "role": "required"} for e in params["participants"]]
    return actions


@pytest.mark.parametrize("participants", ["emails", "email_dicts"])
def test_worked_example_5_phase6_e1(participants):
    example = WORKED["5_phase6_E1"]
    actions = example["actions"] if participants == "emails" else _participants_as_dicts(example["actions"])
    results = replay(example["scenario"], actions)
    check_steps(results, example)
    obs3 = results[2][0]
    assert obs3["last_response"]["status"] == example["step3_status"]
    assert obs3["last_response"]["error"] == example["step3_error"]
    assert obs3["feedback"] == "Called calendar.create_event: status=400" + drift_suffix(3)
    for t in (4, 5, 6):
        assert_close(results[t - 1][1]["step_shaping"], example[f"step{t}_step_shaping"], f"step {t} shaping")
    assert results[4][0]["last_response"]["ok"] is True
    final = results[-1][1]
    for key in ("completion", "drift_detection", "adaptation", "efficiency"):
        assert_close(final[key], example["final"][key], f"final {key}")
    assert_close(final["shaped_total"], example["final"]["shaped"], "final shaped")
    assert final["binary"] == 1.0 and final["correct_final_gate"] == 1.0


def test_worked_example_6_runbook_smoke():
    example = WORKED["6_runbook_smoke"]
    ((obs, reward),) = replay(example["scenario"], example["actions"])
    check_steps([(obs, reward)], example)
    assert reward["shaped_total"] != pytest.approx(exact(example["runbook_claimed_wrongly"]))
    assert reward["correct_final_gate"] == 0.0 and reward["binary"] == 0.0
