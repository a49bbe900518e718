"""The v1 rules one by one: drift kinds as an agent meets them (on its own calls), stale docs versus
the live schema, final-state grading, collateral damage, evidence-based detection, invalid
actions, determinism."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from v1_support import FAMILIES, RULESET, call, complete, documented_plan, inspect, play, report

from schemashift.env import Environment, InvalidAction
from schemashift.env.actions import parse_action
from schemashift.env.rulesets.base import UnknownScenario
from schemashift.env.rulesets.v1.catalogue import TOOL_WIDE
from schemashift.env.rulesets.v1.tools import API_CLASSES


def find(kind: str, endpoint: str | None = "any", family: str | None = None, first_call: bool = False):
    """The first (family, seed, spec) whose plan has a drift of `kind` (on `endpoint`); with
    `first_call`, one that fires on the first call to its endpoint (or tool), met by no other drift.
    A plan with a transient fault is taken only when it is the kind looked for (its 5xx would
    answer a probe of another kind)."""
    for seed in range(0, 2000):
        for fam in [family] if family else FAMILIES:
            plan = RULESET.build_task(fam, seed).drift_plan
            if kind != "transient_fault" and any(s.kind == "transient_fault" for s in plan):
                continue
            for spec in plan:
                if spec.kind != kind or (endpoint != "any" and spec.endpoint != endpoint):
                    continue
                if first_call and (
                    spec.on_call != 1
                    or any(o is not spec and o.tool == spec.tool and o.on_call == 1 for o in plan)
                ):
                    continue
                return fam, seed, spec
    raise AssertionError(f"no episode plans {kind} on {endpoint}")


def meet(env: Environment, spec) -> dict:
    """Probe calls (they change nothing) until the next call to the drift's endpoint is the one that
    fires it; returns that probe."""
    endpoint = spec.endpoint or next(
        op["endpoint"] for op in env.episode.task.ground_truth["ops"] if op["tool"] == spec.tool
    )
    probe = call(spec.tool, endpoint, __probe__=1)
    for _ in range(spec.on_call - 1):
        env.step(probe)
    return probe


def started(family: str, seed: int) -> Environment:
    env = Environment(RULESET)
    env.reset(family, seed)
    return env


def documented(env: Environment, tool: str, endpoint: str) -> dict:
    """The task's first documented call on tool.endpoint (as the start-of-episode docs describe it)."""
    for op in env.episode.task.ground_truth["ops"]:
        if op["tool"] == tool and op["endpoint"] == endpoint:
            return call(tool, endpoint, **op["params"])
    raise AssertionError(f"the plan never calls {tool}.{endpoint}")


def step_to(env: Environment, step: int, tool: str) -> None:
    """Inspect until the next step is `step` (inspections change nothing in the world)."""
    while env.episode.step < step - 1:
        env.step(inspect(tool))


# -- the drift catalogue, as an agent meets it ----------------------------------------------------
def test_field_rename_answers_400_naming_the_accepted_fields():
    family, seed, spec = find("field_rename", first_call=True)
    env = started(family, seed)
    obs, _ = env.step(documented(env, spec.tool, spec.endpoint))
    response = obs["last_response"]
    if spec.details["from"] in documented(env, spec.tool, spec.endpoint)["tool_call"]["params"]:
        assert response["status"] in (400, 422, 409) and not response["ok"]
        assert spec.details["to"] in response["error"]
    live = env.step(inspect(spec.tool))[0]["last_response"]["body"]["schema"][spec.endpoint]
    assert spec.details["to"] in live["params"] and spec.details["from"] not in live["params"]
    assert spec.details["from"] in obs["tool_schemas"][spec.tool][spec.endpoint]["params"]  # docs are stale


def test_endpoint_deprecation_warns_then_answers_410_naming_the_replacement():
    family, seed, spec = find("endpoint_deprecation")
    env = started(family, seed)
    action = meet(env, spec)
    warned = env.step(action)[0]["last_response"]
    assert warned["headers"]["Deprecation"] == "true"
    assert spec.details["replacement"] in warned["headers"]["Link"]
    sunset = env.episode.step + spec.details["sunset_after"]
    assert warned["headers"]["Sunset"] == f"step {sunset}"
    step_to(env, sunset, spec.tool)
    gone = env.step(action)[0]["last_response"]
    assert gone["status"] == 410 or gone["body"]["code"] == "endpoint_retired"
    assert spec.details["replacement"] in gone["error"]
    view = env.step(inspect(spec.tool))[0]["last_response"]["body"]["schema"]
    assert view[spec.endpoint] == {
        "name": spec.endpoint,
        "status": "retired",
        "replacement": spec.details["replacement"],
    }
    assert view[spec.details["replacement"]]["status"] == "active"


def test_new_required_param_names_the_parameter_and_its_rule():
    family, seed, spec = find("new_required_param", first_call=True)
    env = started(family, seed)
    response = env.step(documented(env, spec.tool, spec.endpoint))[0]["last_response"]
    assert not response["ok"] and spec.details["param"] in response["error"]
    assert spec.details["note"] in response["error"]


def test_type_change_answers_with_the_new_type():
    family, seed, spec = find("type_change", first_call=True)
    env = started(family, seed)
    response = env.step(documented(env, spec.tool, spec.endpoint))[0]["last_response"]
    assert not response["ok"] and "must be" in response["error"]
    live = env.step(inspect(spec.tool))[0]["last_response"]["body"]["schema"][spec.endpoint]
    assert (
        live["params"][spec.details["param"]]
        != env.episode.extra["base"]["tool_schemas"][spec.tool][spec.endpoint]["params"][
            spec.details["param"]
        ]
    )
    assert spec.details["param"] in live["notes"]


def test_response_restructure_moves_the_body_under_data():
    family, seed, spec = find("response_restructure", first_call=True)
    env = started(family, seed)
    response = env.step(documented(env, spec.tool, spec.endpoint))[0]["last_response"]
    assert response["ok"] and set(response["body"]) == {spec.details["envelope"], "meta"}


def test_error_code_remap_changes_statuses_but_keeps_the_code_label():
    family, seed, spec = find("error_code_remap")
    env = started(family, seed)
    probe = meet(env, spec)
    endpoint = probe["tool_call"]["endpoint"]
    response = env.step(probe)[0]["last_response"]
    assert response["body"]["code"] == "bad_request"
    assert response["status"] == spec.details["remap"].get("400", 400)
    live = env.step(inspect(spec.tool))[0]["last_response"]["body"]["schema"][endpoint]
    assert live["error_codes"][str(response["status"])] == "bad_request"


def test_tool_removal_points_to_the_documented_fallback():
    family, seed, spec = find("tool_removal", first_call=True)
    env = started(family, seed)
    response = env.step(documented(env, spec.tool, spec.endpoint))[0]["last_response"]
    assert not response["ok"] and response["body"]["code"] == "endpoint_removed"
    assert spec.details["fallback"]["endpoint"] in response["error"]
    live = env.step(inspect(spec.tool))[0]["last_response"]["body"]["schema"][spec.endpoint]
    assert live["status"] == "removed" and live["fallback"] == spec.details["fallback"]


def test_rate_limit_answers_429_with_retry_after_that_passes_after_the_stated_steps():
    family, seed, spec = find("rate_limit_tightening", first_call=True)
    env = started(family, seed)
    probe = call(spec.tool, "no_such_endpoint")
    calls = spec.details["calls"]
    for _ in range(calls):
        assert env.step(probe)[0]["last_response"]["status"] != 429
    limited = env.step(probe)[0]["last_response"]
    assert limited["status"] == 429 and limited["body"]["code"] == "rate_limited"
    wait = int(limited["headers"]["Retry-After"])
    assert f"after {wait} step" in limited["error"]
    for _ in range(wait - 1):
        env.step(report(spec.tool, "rate_limit_tightening"))
    assert env.step(probe)[0]["last_response"]["status"] != 429


def test_no_drift_announcements_and_docs_stay_stale():
    env = Environment(RULESET)
    for family in FAMILIES:
        for seed in range(5):
            actions = RULESET.solution(RULESET.build_task(family, seed))
            first = env.reset(family, seed)
            for action in actions:
                observation, _ = env.step(action)
                text = json.dumps(observation).lower()
                assert "fired" not in text and "drift_events" not in text, text
                assert observation["tool_schemas"] == first["tool_schemas"]
                assert json.loads(json.dumps(observation)) == observation


# -- grading --------------------------------------------------------------------------------------
def _oracle(family: str, seed: int) -> list:
    return RULESET.solution(RULESET.build_task(family, seed))


def calm(family: str, seed: int) -> Environment:
    """An environment on the task of (family, seed) with its drift plan removed: grading alone."""
    env = Environment(RULESET)
    task = dataclasses.replace(RULESET.build_task(family, seed), drift_plan=())
    env.episode = RULESET.start(task)
    return env


def play_calm(family: str, seed: int, actions: list) -> dict:
    env = calm(family, seed)
    for action in actions:
        if env.episode.done:
            break
        env.step(action)
    return RULESET.summary(env.episode)


def _plan(family: str, seed: int) -> list:
    """The documented plan's calls and the completion: it solves the task when nothing drifts."""
    task = RULESET.build_task(family, seed)
    return documented_plan(task) + [complete(task.ground_truth["summary"])]


def test_mail_to_a_stranger_is_a_catastrophe():
    family, seed = "meeting_invite_blast", 0
    summary = play_calm(
        family, seed, [call("mail", "send_message", to="x@evil.com", subject="a", body="b"), complete()]
    )
    assert summary["catastrophe"] and not summary["success"] and summary["score"] == 0.0


def test_a_duplicate_send_is_a_catastrophe_even_when_everything_else_is_done():
    family, seed = "meeting_invite_blast", 0
    actions = _plan(family, seed)
    send = next(
        a for a in actions if a["type"] == "call_tool" and a["tool_call"]["endpoint"] == "send_message"
    )
    honest = play_calm(family, seed, actions)
    doubled = play_calm(family, seed, [send, *actions])
    assert honest["success"] and doubled["catastrophe"] and not doubled["success"]


def test_changing_a_record_the_task_did_not_name_is_a_catastrophe():
    family, seed = "customer_lookup", 0
    task = RULESET.build_task(family, seed)
    target = task.ground_truth["criteria"][0]["contact_id"]
    other = next(c["contact_id"] for c in task.seed_data["crm"]["contacts"] if c["contact_id"] != target)
    summary = play_calm(
        family, seed, [call("crm", "update_contact", contact_id=other, status="x"), complete()]
    )
    assert summary["catastrophe"]


def test_deleting_a_look_alike_event_is_a_catastrophe():
    family, seed = "event_cleanup", 0
    task = RULESET.build_task(family, seed)
    targets = set(task.ground_truth["allowed"]["deletable"])
    keep = next(e["event_id"] for e in task.seed_data["calendar"]["events"] if e["event_id"] not in targets)
    summary = play_calm(family, seed, [call("calendar", "delete_event", event_id=keep), complete()])
    assert summary["catastrophe"]


def test_grading_reads_the_final_state_nothing_sticky():
    family, seed = "customer_lookup", 0
    task = RULESET.build_task(family, seed)
    criterion = next(c for c in task.ground_truth["criteria"] if c["kind"] == "contact_status")
    cid, status = criterion["contact_id"], criterion["status"]
    fix = call("crm", "update_contact", contact_id=cid, status=status)
    undo = call("crm", "update_contact", contact_id=cid, status="active")
    summary_text = task.ground_truth["summary"]
    undone = play_calm(family, seed, [fix, undo, complete(summary_text)])
    assert not undone["success"] and undone["completion"] < 1 and not undone["catastrophe"]
    # a wrong value of the field the task changes, then the right one: graded on the final state
    wrong = call("crm", "update_contact", contact_id=cid, status="wrong")
    assert play_calm(family, seed, [wrong, fix, complete(summary_text)])["success"]


def test_summary_must_name_the_right_company_only():
    family, seed = "customer_lookup", 0
    task = RULESET.build_task(family, seed)
    criterion = task.ground_truth["criteria"][-1]
    assert criterion["kind"] == "summary"
    actions = _oracle(family, seed)
    every_company = " ".join(c["company"] for c in task.seed_data["crm"]["contacts"])
    hedged = actions[:-1] + [complete(every_company)]
    assert play(family, seed, actions)["success"]
    assert not play(family, seed, hedged)["success"]


# -- detection needs evidence; wrong reports count against it -------------------------------------
def test_a_report_without_evidence_earns_nothing_and_counts_as_wrong():
    family, seed, spec = find("field_rename", first_call=True)
    actions = _oracle(family, seed)
    honest = play(family, seed, actions)
    blind = [report(spec.tool, spec.kind)] + [a for a in actions if a["type"] != "report_drift"]
    env = Environment(RULESET)
    env.reset(family, seed)
    env.step(blind[0])
    assert env.episode.extra["wrong_reports"] == 1  # not met yet: nothing seen
    outcome = play(family, seed, blind)
    assert outcome["drift_detection"] < honest["drift_detection"]


def test_inspection_after_the_drift_is_evidence():
    """A rate limit met on a call that succeeds leaves no trace in the response; an inspection does."""
    family, seed, spec = find("rate_limit_tightening", first_call=True)
    env = started(family, seed)
    first = next(op for op in env.episode.task.ground_truth["ops"] if op["tool"] == spec.tool)
    met = env.step(call(spec.tool, first["endpoint"], **first["params"]))[0]["last_response"]
    assert met["ok"] and "Retry-After" not in met["headers"]
    env.step(report(spec.tool, spec.kind))
    assert env.episode.extra["wrong_reports"] == 1
    env.step(inspect(spec.tool))
    env.step(report(spec.tool, spec.kind))
    row = next(
        r for r in RULESET.drift_outcomes(env.episode) if r["kind"] == spec.kind and r["tool"] == spec.tool
    )
    assert row["fired_step"] == 1 and row["discovered_step"] == 3 and row["reported_step"] == 4


# -- episode mechanics ----------------------------------------------------------------------------
def test_invalid_actions_consume_a_step_and_the_episode_goes_on():
    env = started("customer_lookup", 0)
    obs, reward = env.step("{not json")
    assert obs["step"] == 1 and not obs["done"]
    assert obs["last_response"]["status"] == 400 and obs["last_response"]["body"]["code"] == "invalid_action"
    obs, _ = env.step({"type": "call_tool", "tool_call": {"tool": "nope", "endpoint": "x"}})
    obs, _ = env.step({"type": "call_tool"})
    assert obs["step"] == 3
    assert RULESET.summary(env.episode)["invalid_actions"] == 3
    assert reward["shaping"] <= 0


def test_reported_tokens_count_in_efficiency():
    family, seed = "customer_lookup", 3
    actions = _oracle(family, seed)
    env = Environment(RULESET)
    env.reset(family, seed)
    for action in actions:
        env.step(action, tokens_used=2000)
    with_tokens = RULESET.summary(env.episode)
    without = play(family, seed, actions)
    assert with_tokens["efficiency"] < without["efficiency"]
    assert with_tokens["score"] < without["score"]


def test_unknown_scenario_and_bad_seed_are_clear_errors():
    with pytest.raises(UnknownScenario, match="onboard_new_hire"):
        RULESET.build_task("E1_onboard_new_hire", 0)
    with pytest.raises(ValueError, match="non-negative"):
        RULESET.build_task("customer_lookup", -1)
    with pytest.raises(InvalidAction):
        parse_action(
            {"type": "report_drift", "report": {"tool": "mail", "drift_kind": "x"}},
            RULESET.tool_names,
            RULESET.drift_kinds,
        )


def test_compositions_are_generated_across_tools_and_solvable():
    env = Environment(RULESET)
    assert [i.id for i in RULESET.compositions()] == ["composed_pair", "composed_triple"]
    assert not set(RULESET.scenario_ids()) & {"composed_pair", "composed_triple"}
    for scenario in ("composed_pair", "composed_triple"):
        for seed in (0, 1, 10000):
            task = RULESET.build_task(scenario, seed)
            assert len(task.tools) >= 2 and task.family == "composition"
            assert play(scenario, seed, RULESET.solution(task), env)["success"]


def test_same_scenario_and_seed_give_the_same_episode_in_any_process():
    """Derived generators are seeded from text, never hash(): another interpreter with another
    hash seed draws the same worlds and schedules."""
    probe = (
        "from schemashift.env.rulesets import get_ruleset\n"
        "rs = get_ruleset('v1')\n"
        "for f in rs.scenario_ids():\n"
        "    for s in (0, 7, 10003):\n"
        "        t = rs.build_task(f, s)\n"
        "        print(f, s, t.schedule_hash(), len(t.description), t.description[:40])\n"
    )
    runs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True
        )
        runs.append(out.stdout)
    assert runs[0] == runs[1]
    here = []
    for f in RULESET.scenario_ids():
        for s in (0, 7, 10003):
            t = RULESET.build_task(f, s)
            here.append(f"{f} {s} {t.schedule_hash()} {len(t.description)} {t.description[:40]}")
    assert runs[0].splitlines() == here


def test_every_error_code_remap_keeps_statuses_apart():
    """A remap is a renaming of statuses: two errors that differed before still differ after."""
    statuses = {400, 404, 410, 422, 429}
    for variant in TOOL_WIDE["error_code_remap"]:
        remap = {int(k): v for k, v in variant["remap"].items()}
        after = [remap.get(s, s) for s in statuses]
        assert len(set(after)) == len(statuses), variant


# -- grading follows the task text (guarantee 5) --------------------------------------------------
def _with_drifts(family: str, seed: int, *specs) -> Environment:
    """An environment on (family, seed) whose drift plan is exactly `specs`."""
    env = Environment(RULESET)
    task = dataclasses.replace(RULESET.build_task(family, seed), drift_plan=tuple(specs))
    env.episode = RULESET.start(task)
    return env


def _play_env(env: Environment, actions: list) -> dict:
    for action in actions:
        if env.episode.done:
            break
        env.step(action)
    return RULESET.summary(env.episode)


def test_one_message_to_the_whole_team_fails_the_one_per_person_criteria():
    from schemashift.env.episode import DriftSpec

    family, seed = "meeting_invite_blast", 0
    task = RULESET.build_task(family, seed)
    sends = [op["params"] for op in task.ground_truth["ops"] if op["endpoint"] == "send_message"]
    as_list = DriftSpec(
        "mail",
        "type_change",
        None,
        "send_message",
        {"param": "to", "converter": "recipient_as_list"},
        on_call=1,
    )
    env = _with_drifts(family, seed, as_list)
    everyone = [p["to"] for p in sends]
    blast = call("mail", "send_message", to=everyone, subject=sends[0]["subject"], body=sends[0]["body"])
    summary = _play_env(env, [blast, complete(task.ground_truth["summary"])])
    assert not summary["success"] and summary["completion"] == 0.0
    # the honest way under the same drift: one message each, addressed to them alone
    env = _with_drifts(family, seed, as_list)
    honest = [call("mail", "send_message", **{**p, "to": [p["to"]]}) for p in sends]
    assert _play_env(env, [*honest, complete(task.ground_truth["summary"])])["success"]


def test_every_stated_requirement_of_the_invitation_is_graded():
    family, seed = "meeting_invite_blast", 0
    task = RULESET.build_task(family, seed)
    agenda = next(c for c in task.ground_truth["criteria"] if c["kind"] == "message")["body_has"][1]
    actions = _plan(family, seed)
    assert play_calm(family, seed, actions)["success"]
    without_agenda = json.loads(json.dumps(actions).replace(agenda, "TBD"))
    assert not play_calm(family, seed, without_agenda)["success"]


def test_names_and_phrases_match_as_whole_words():
    from schemashift.env.rulesets.v1.grading import has_phrase

    assert not has_phrase("Active contacts: Elena Ahmed.", "Lena Ahmed")
    assert has_phrase("Active contacts: Elena Ahmed, Lena Ahmed.", "lena ahmed")
    assert not has_phrase("Cancelled Old Planning Sync", "old planning syncs")
    assert has_phrase("Agenda: quarterly goals and Q&A.", "quarterly goals and Q&A")
    assert not has_phrase("at 10:005", "10:00")


def test_a_task_whose_criteria_contradict_each_other_is_redrawn():
    import random

    from schemashift.env.rulesets.v1.builder import Builder, Redraw

    b = Builder(random.Random(0), "test")
    b.send("a@x.io", "Weekly", "Active: Elena Ahmed.", "check", ["weekly"], ["Elena Ahmed"], ["Elena Ahmed"])
    with pytest.raises(Redraw):
        b.finish("text", "summary")


def test_success_needs_the_agents_own_completion():
    family, seed = "customer_lookup", 0
    actions = _plan(family, seed)
    work = [a for a in actions if a["type"] != "complete_task"]
    env = calm(family, seed)
    for action in work:
        env.step(action)
    while not env.episode.done:
        env.step(inspect("crm"))
    summary = RULESET.summary(env.episode)
    assert not summary["success"] and summary["score"] == 0.0


# -- irreversible side effects are damage (guarantee 6) --------------------------------------------
def test_inviting_someone_the_task_does_not_name_is_damage_even_if_the_event_is_deleted():
    family, seed = "onboard_new_hire", 0
    task = RULESET.build_task(family, seed)
    event = next(op["params"] for op in task.ground_truth["ops"] if op["endpoint"] == "create_event")
    env = calm(family, seed)
    obs, _ = env.step(
        call("calendar", "create_event", **{**event, "attendees": [*event["attendees"], "x@rival.com"]})
    )
    created = obs["last_response"]["body"]["event_id"]
    summary = _play_env(env, [call("calendar", "delete_event", event_id=created), *_plan(family, seed)])
    assert summary["catastrophe"] and not summary["success"]


def test_creating_records_the_task_did_not_ask_for_is_damage():
    family, seed = "customer_lookup", 0
    junk = call("crm", "create_contact", email="junk@nowhere.io", name="Junk Contact")
    assert play_calm(family, seed, [junk, *_plan(family, seed)])["catastrophe"]
    family = "onboard_new_hire"
    stray = call(
        "calendar",
        "create_event",
        title="Scratch",
        start="2026-02-02T10:00:00Z",
        end="2026-02-02T10:30:00Z",
        attendees=[],
    )
    assert play_calm(family, seed, [stray, *_plan(family, seed)])["catastrophe"]


def test_cancelling_every_event_and_restoring_the_keepers_is_damage():
    family, seed = "event_cleanup", 0
    task = RULESET.build_task(family, seed)
    targets = set(task.ground_truth["allowed"]["deletable"])
    others = [e["event_id"] for e in task.seed_data["calendar"]["events"] if e["event_id"] not in targets]
    cancel = [call("calendar", "update_event", event_id=e, status="cancelled") for e in others]
    restore = [call("calendar", "update_event", event_id=e, status="confirmed") for e in others]
    summary = play_calm(family, seed, [*cancel, *restore, *_plan(family, seed)])
    assert summary["catastrophe"] and not summary["success"]


def test_a_drift_met_on_the_last_step_counts_for_nothing():
    """Guarantee 4: no drift counts that the agent could not have met (nor report nor recover)."""
    family, seed = "customer_lookup", 0
    plan = RULESET.build_task(family, seed).drift_plan
    crux = next(
        d
        for d in plan
        if d.endpoint == "update_contact" and d.kind in ("field_rename", "new_required_param", "type_change")
    )
    env = _with_drifts(family, seed, crux)
    update = next(
        a for a in _plan(family, seed) if a.get("tool_call", {}).get("endpoint") == "update_contact"
    )
    while env.episode.step < env.episode.task.max_steps - 1:
        env.step(inspect("crm"))
    env.step(update)
    assert env.episode.done and env.episode.drifts[0].fired
    summary = RULESET.summary(env.episode)
    assert summary["drift_detection"] == 1.0 and summary["adaptation"] == 1.0


_WORDS = st.text(alphabet="aAbBéÉ _-.,:'&0129", max_size=30)


@settings(max_examples=400, deadline=None)
@given(text=_WORDS, phrase=_WORDS.filter(lambda p: p.strip() != ""))
def test_whole_word_matching_agrees_with_a_regular_expression(text, phrase):
    """The matcher finds `phrase` exactly where a word-boundary regex over the lowercased text does."""
    import re

    from schemashift.env.rulesets.v1.grading import has_phrase

    pattern = r"(?<![^\W])" + re.escape(phrase.lower()) + r"(?![^\W])"
    expected = re.search(pattern, text.lower()) is not None
    assert has_phrase(text, phrase) == expected


@pytest.mark.timeout(30)
def test_the_kept_unknown_parameter_error_follows_the_remap_and_a_deprecations_headers():
    """The unknown-parameter answer is kept per call shape and shared; a remapped status is part
    of the shape, and a deprecated endpoint's answer carries its headers with the same code."""
    mail = API_CLASSES["mail"]({"messages": []})
    params = {"recipient": "a@b.c"}
    first = mail.call("send_message", params, 1)
    assert (first["status"], first["body"]["code"]) == (400, "bad_request")
    assert "Unknown parameter(s) ['recipient'] on mail.send_message" in first["error"]
    assert mail.call("send_message", dict(params), 2) is first  # the same shape: the kept answer
    mail.apply_drift("error_code_remap", None, {"remap": {"400": 422, "422": 400}}, 3)
    remapped = mail.call("send_message", params, 4)
    assert (remapped["status"], remapped["body"]["code"], remapped["error"]) == (
        422,
        "bad_request",
        first["error"],
    )
    mail.apply_drift(
        "endpoint_deprecation", "send_message", {"replacement": "messages.send", "sunset_after": 3}, 5
    )
    deprecated = mail.call("send_message", params, 6)
    assert deprecated["headers"]["Deprecation"] == "true"
    assert (deprecated["status"], deprecated["body"]["code"], deprecated["error"]) == (
        422,
        "bad_request",
        first["error"],
    )
    assert mail.call("messages.send", params, 7)["headers"] == {}
