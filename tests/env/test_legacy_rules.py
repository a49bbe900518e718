"""Unit tests of individual rules of the legacy ruleset (spec sections 3-8, 16) that the published
traces do not exercise. Each test names the spec section it checks."""

from __future__ import annotations

import copy
import dataclasses
import json
from fractions import Fraction

import pytest
from legacy_reference import REF

from schemashift.env import DriftSpec, Environment, EpisodeStateError, InvalidAction, UnknownScenario
from schemashift.env.rulesets.legacy import LegacyRuleset

SCENARIOS = {info["id"]: info for key, info in REF["scenarios"].items() if not key.startswith("_")}
E1, E2, E3 = "E1_onboard_new_hire", "E2_meeting_invite_blast", "E3_customer_lookup"
M1, M2, M3 = "M1_customer_escalation", "M2_weekly_report", "M3_event_cleanup"
TOL = Fraction(1, 10**9)

PRIYA, ALEX, BOB = "priya@company.com", "alex@company.com", "bob@customer.com"
START, END = "2026-04-27T10:00:00Z", "2026-04-27T11:00:00Z"


# -- action builders -------------------------------------------------------------------------------


def call(tool: str, endpoint: str, **params) -> dict:
    return {"type": "call_tool", "tool_call": {"tool": tool, "endpoint": endpoint, "params": params}}


def retry(tool: str, endpoint: str, **params) -> dict:
    return {"type": "retry_with_variant", "retry": {"tool": tool, "endpoint": endpoint, "params": params}}


def inspect(tool: str) -> dict:
    return {"type": "inspect_schema", "inspect": {"tool": tool}}


def report(tool: str, kind: str, description: str = "seen it") -> dict:
    return {"type": "report_drift", "report": {"tool": tool, "drift_kind": kind, "description": description}}


def complete(summary: str = "done") -> dict:
    return {"type": "complete_task", "complete": {"summary": summary}}


NOOP = {"type": "call_tool"}  # valid action without its sub-object: uses up a step, does nothing
WELCOME = call("mail", "send_message", to=PRIYA, subject="Welcome!", body="Hi")
ORIENTATION = call(
    "calendar", "create_event", title="New Hire Orientation", start=START, end=END, attendees=[PRIYA, ALEX]
)
LIST_INBOX = call("mail", "list_messages", folder="inbox")
BAD_LIST = call("mail", "list_messages")  # 400: missing 'folder'


# -- helpers ---------------------------------------------------------------------------------------


def new_env(scenario: str, seed: int = 0, ruleset="legacy") -> Environment:
    env = Environment(ruleset)
    env.reset(scenario, seed=seed)
    return env


def play(scenario: str, *actions: dict, env: Environment | None = None) -> list[tuple[dict, dict]]:
    env = env or new_env(scenario)
    return [env.step(copy.deepcopy(action)) for action in actions]


def last(scenario: str, *actions: dict) -> tuple[dict, dict]:
    return play(scenario, *actions)[-1]


def approx_eq(actual, expected) -> bool:
    return abs(Fraction(actual) - Fraction(expected)) <= TOL


def efficiency(
    step: int, max_steps: int, tokens_left: int | None = None, budget: int | None = None
) -> Fraction:
    token_part = Fraction(1) if tokens_left is None else Fraction(tokens_left, budget)
    return Fraction(1, 2) * max(Fraction(0), 1 - Fraction(step, max_steps)) + Fraction(1, 2) * token_part


def only_efficiency(step: int, max_steps: int) -> Fraction:
    """shaped_total of a mid-episode step with C = D = A = 0 and no shaping."""
    return Fraction(3, 20) * efficiency(step, max_steps)


def status(obs: dict) -> tuple[int, str | None]:
    response = obs["last_response"]
    return response["status"], response["error"]


# -- 3.1 reset and the seed ------------------------------------------------------------------------

EXPECTED_TOOLS = {
    E1: ["mail", "calendar"],
    E2: ["mail"],
    E3: ["crm"],
    M1: ["mail", "calendar", "crm"],
    M2: ["mail", "calendar", "crm"],
    M3: ["mail", "calendar"],
}
BUDGETS = {E1: 4000, E2: 4000, E3: 4000, M1: 6000, M2: 5000, M3: 6000}


@pytest.mark.parametrize("scenario", list(EXPECTED_TOOLS))
def test_reset_observation(scenario):
    obs = Environment("legacy").reset(scenario, seed=0)
    assert obs["feedback"] == "Episode started."
    assert obs["task_id"] == scenario and obs["ruleset"] == "legacy"
    assert obs["difficulty"] == SCENARIOS[scenario]["tier"]
    assert obs["max_steps"] == SCENARIOS[scenario]["max_steps"]
    assert obs["token_budget_remaining"] == BUDGETS[scenario]
    assert (obs["step"], obs["done"], obs["history"], obs["last_response"]) == (0, False, [], None)
    assert obs["known_state"] == {} and obs["drift_events_visible"] == []
    assert list(obs["tool_schemas"]) == EXPECTED_TOOLS[scenario]  # tool order = required_tools order


SEED_SCRIPT = [
    BAD_LIST,
    inspect("calendar"),
    ORIENTATION,
    report("calendar", "field_rename"),
    WELCOME,
    complete(),
]


def _without_ids(obs: dict) -> dict:
    return {k: v for k, v in obs.items() if k not in ("episode_id", "seed")}


def test_seed_is_ignored():
    """3.1 / 13: the seed changes nothing but the uuid episode_id (and the echoed seed field)."""
    env_a, env_b = Environment("legacy"), Environment("legacy")
    obs_a, obs_b = env_a.reset(E1, seed=0), env_b.reset(E1, seed=12345)
    assert obs_a["episode_id"] != obs_b["episode_id"]
    assert (obs_a["seed"], obs_b["seed"]) == (0, 12345)
    assert _without_ids(obs_a) == _without_ids(obs_b)
    for action in SEED_SCRIPT:
        (obs_a, rew_a), (obs_b, rew_b) = env_a.step(copy.deepcopy(action)), env_b.step(copy.deepcopy(action))
        assert _without_ids(obs_a) == _without_ids(obs_b)
        assert rew_a == rew_b


def test_unknown_scenario_lists_available():
    with pytest.raises(UnknownScenario) as info:
        Environment("legacy").reset("Z9_nothing", seed=0)
    message = str(info.value)
    assert "Z9_nothing" in message and "Available" in message
    for scenario in EXPECTED_TOOLS:
        assert scenario in message


# -- 3.2 lifecycle errors --------------------------------------------------------------------------


def test_step_before_reset_raises():
    with pytest.raises(EpisodeStateError, match="reset"):
        Environment("legacy").step(complete())


def test_step_after_done_raises_and_reset_starts_over():
    env = new_env(E1)
    env.step(complete())
    with pytest.raises(EpisodeStateError, match="done"):
        env.step(complete())
    obs = env.reset(E1, seed=0)
    assert obs["step"] == 0 and not obs["done"]
    obs, reward = env.step(NOOP)
    assert obs["step"] == 1 and approx_eq(reward["cumulative_reward"], only_efficiency(1, 8))


def test_episode_ends_at_max_steps_without_complete():
    env = new_env(E2)
    results = play(E2, *[NOOP] * 6, env=env)
    assert [obs["done"] for obs, _ in results] == [False] * 5 + [True]
    assert results[-1][1]["correct_final_gate"] == 0.0  # GT unmet at the terminal step
    with pytest.raises(EpisodeStateError):
        env.step(NOOP)


# -- 2.2 / 3.3 malformed and invalid actions -------------------------------------------------------


@pytest.mark.parametrize(
    "action",
    [
        {"type": "call_tool"},
        {"type": "call_tool", "tool_call": None},
        {
            "type": "call_tool",
            "tool": "mail",
            "endpoint": "send_message",
            "params": {"to": PRIYA, "subject": "Welcome!", "body": "Hi"},
        },
        {"type": "call_tool", "tool": "slack", "endpoint": "post"},  # extra keys are ignored, even bad ones
    ],
    ids=["bare", "null-subobject", "flat-form", "flat-form-bad-tool"],
)
def test_call_tool_without_tool_call_is_a_noop_step(action):
    env = new_env(E1)
    obs, reward = env.step(action)
    assert obs["step"] == 1 and not obs["done"]
    assert obs["last_response"] is None
    assert obs["feedback"] == "Invalid call_tool: missing tool_call params."
    assert obs["known_state"] == {}
    assert approx_eq(reward["shaped_total"], only_efficiency(1, 8)) and reward["step_shaping"] == 0.0
    assert obs["history"][-1]["response"] is None
    # the no-op has no response, so an inspect right after it earns no +0.10
    _, reward = env.step(inspect("mail"))
    assert reward["step_shaping"] == 0.0


def test_retry_without_retry_subobject_is_a_404():
    obs, reward = last(E1, {"type": "retry_with_variant"})
    assert status(obs) == (404, "Retry target unavailable.")
    assert obs["feedback"] == "Retry target missing."
    assert reward["step_shaping"] == 0.0


def test_report_without_report_subobject():
    obs, reward = last(E2, {"type": "report_drift"})
    assert obs["last_response"] is None
    assert (
        obs["feedback"]
        == "Invalid report_drift: missing report params." + " [DRIFT FIRED: 1 drift event(s) on step 1.]"
    )
    assert reward["drift_detection"] == 0.0 and reward["step_shaping"] == 0.0


def test_complete_without_complete_subobject_and_summary_truncation():
    obs, _ = last(E1, {"type": "complete_task"})
    assert obs["done"] and obs["feedback"] == "Episode marked complete. Summary: "
    assert obs["known_state"]["_completion_summary"] == ""
    summary = "x" * 79 + "YZ"
    obs, _ = last(E1, complete(summary))
    assert obs["feedback"] == "Episode marked complete. Summary: " + "x" * 79 + "Y"
    assert obs["known_state"]["_completion_summary"] == summary


INVALID_ACTIONS = [
    ({"type": "fly_away"}, "fly_away"),
    ({"tool_call": {"tool": "mail", "endpoint": "list_messages"}}, "type"),
    (call("slack", "post_message"), "slack"),
    ({"type": "inspect_schema", "inspect": {"tool": "sharepoint"}}, "sharepoint"),
    (report("crm", "schema_explosion"), "schema_explosion"),
    (
        {"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "send_message", "params": [1, 2]}},
        "params",
    ),
    ({"type": "retry_with_variant", "retry": {"tool": "mail", "endpoint": "send_message"}}, "params"),
    ({"type": "call_tool", "tool_call": "mail.send_message"}, "tool_call"),
    ({"type": "report_drift", "report": {"tool": "mail", "drift_kind": "field_rename"}}, "description"),
    ({"type": "complete_task", "complete": {"summary": "s"}, "report": {"tool": "jira"}}, "jira"),
    ('{"type": "call_tool", "tool_call": {', "malformed"),
    ("[1, 2, 3]", "object"),
    (42, "object"),
]


@pytest.mark.parametrize(("action", "named"), INVALID_ACTIONS, ids=[str(n) for _, n in INVALID_ACTIONS])
def test_invalid_action_raises_and_leaves_episode_unchanged(action, named):
    env = new_env(E2)  # its drift is due on step 1: an invalid action must not fire it
    with pytest.raises(InvalidAction) as info:
        env.step(action)
    assert named in str(info.value)
    obs, reward = env.step(inspect("mail"))
    assert obs["step"] == 1 and len(obs["history"]) == 1
    assert obs["feedback"] == "Inspected mail schema. [DRIFT FIRED: 1 drift event(s) on step 1.]"
    assert approx_eq(reward["cumulative_reward"], only_efficiency(1, 6))


def test_call_tool_params_default_to_empty():
    obs, _ = last(E1, {"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "list_messages"}})
    assert status(obs) == (400, "Missing required params: ['folder']")


def test_json_text_action_is_accepted():
    obs, reward = last(E1, json.dumps(WELCOME))
    assert status(obs) == (200, None)
    assert obs["known_state"]["mail.sent_count"] == 1


# -- 3.3 dispatch: tools outside the scenario, inspection ------------------------------------------


def test_call_to_tool_not_in_scenario():
    obs, _ = last(E1, call("crm", "search_contacts"))
    assert status(obs) == (404, "Tool 'crm' not available in this scenario.")
    assert obs["feedback"] == "Tool not available."
    assert obs["last_response"]["ok"] is False and obs["last_response"]["body"] is None


@pytest.mark.parametrize("tool", ["chat", "docs"])
@pytest.mark.parametrize(
    ("make", "error", "feedback"),
    [
        (lambda t: call(t, "anything"), "Tool '{t}' not available in this scenario.", "Tool not available."),
        (lambda t: retry(t, "anything"), "Retry target unavailable.", "Retry target missing."),
        (inspect, "Tool unavailable for inspection.", "Inspect target missing."),
    ],
    ids=["call_tool", "retry", "inspect"],
)
def test_stub_tools_answer_404(tool, make, error, feedback):
    obs, _ = last(M1, make(tool))
    assert status(obs) == (404, error.format(t=tool))
    assert obs["feedback"].startswith(feedback)


def test_inspect_absent_or_missing_target():
    obs, _ = last(E3, inspect("mail"))
    assert status(obs) == (404, "Tool unavailable for inspection.")
    assert obs["feedback"] == "Inspect target missing."
    obs, _ = last(E3, {"type": "inspect_schema"})
    assert status(obs) == (404, "Tool unavailable for inspection.")


def test_inspect_returns_the_current_schema():
    obs, _ = last(E1, inspect("calendar"))
    assert status(obs) == (200, None)
    assert obs["feedback"] == "Inspected calendar schema."
    schema = obs["last_response"]["body"]["schema"]
    assert list(schema) == ["list_events", "create_event", "update_event", "delete_event"]
    assert schema == obs["tool_schemas"]["calendar"]
    assert schema["create_event"]["error_codes"] == {"200": "ok", "400": "bad_request", "422": "validation"}


def test_inspect_bonus_chain_on_an_absent_tool():
    """16.4 / summary 11: inspect(docs) always 404s, so every inspect after the first earns +0.10,
    including the gated terminal step at max_steps; the episode scores 1.4875 (published as 1.49)."""
    results = play(E1, *[inspect("docs")] * 8)
    shaping = [reward["step_shaping"] for _, reward in results]
    assert shaping == [0.0] + [pytest.approx(0.10, abs=1e-12)] * 7
    obs, reward = results[-1]
    assert obs["done"] and reward["correct_final_gate"] == 0.0
    assert approx_eq(reward["shaped_total"], Fraction(1, 10))  # shaping is not gated (16.3)
    gaming = REF["gaming"]["E1_inspect_docs_only"]
    assert approx_eq(reward["cumulative_reward"], Fraction(gaming["exact"]))
    assert round(reward["cumulative_reward"], 2) == gaming["published"]


def test_inspect_bonus_needs_a_failed_previous_response():
    results = play(E1, inspect("mail"), BAD_LIST, inspect("calendar"), inspect("mail"), NOOP, inspect("docs"))
    assert [r["step_shaping"] for _, r in results] == [0.0, 0.0, pytest.approx(0.10), 0.0, 0.0, 0.0]


# -- 4.1 generic validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scenario", "action", "expected"),
    [
        (E1, call("mail", "fly"), (410, "Endpoint 'fly' is no longer available on mail.")),
        (
            E3,
            call("crm", "delete_contact", contact_id="c_1"),
            (410, "Endpoint 'delete_contact' is no longer available on crm."),
        ),
        (
            E1,
            call("mail", "send_message", to=PRIYA, cc="a", bcc="b"),
            (400, "Unknown params on send_message: ['cc', 'bcc']"),
        ),
        (E1, call("mail", "send_message", to=PRIYA), (400, "Missing required params: ['subject', 'body']")),
        (E1, call("mail", "list_messages"), (400, "Missing required params: ['folder']")),
        (
            E1,
            call("calendar", "create_event", title="T", attendees=[]),
            (400, "Missing required params: ['start', 'end']"),
        ),
    ],
    ids=[
        "unknown-endpoint",
        "never-existed",
        "unknown-params-first",
        "missing",
        "missing-folder",
        "missing-two",
    ],
)
def test_call_validation_errors(scenario, action, expected):
    obs, _ = last(scenario, action)
    assert status(obs) == expected
    assert obs["last_response"]["ok"] is False and obs["last_response"]["body"] is None


def test_values_are_never_type_checked_and_extra_optionals_are_ignored():
    obs, _ = last(E1, call("mail", "send_message", to=123, subject=["Welcome"], body=None))
    assert status(obs) == (200, None)
    assert obs["known_state"]["mail.last_sent_to"] == 123
    assert obs["known_state"]["mail.last_subject_contains_welcome"] is True  # str(['Welcome']).lower()
    obs, _ = last(E1, call("mail", "list_messages", folder="inbox", limit="ten", page_token="p"))
    assert obs["last_response"]["body"] == {"messages": [], "next_page_token": None}


# -- 4.2 mail --------------------------------------------------------------------------------------


def test_mail_ids_and_get_message():
    sends = [
        call("mail", "messages.send", to=to, subject="All-Hands", body=str(i))
        for i, to in enumerate([ALEX, "jordan@company.com", "sam@company.com"])
    ]
    env = new_env(E2)
    results = play(E2, *sends, env=env)
    assert [obs["last_response"]["body"] for obs, _ in results] == [
        {"message_id": f"msg_{i}", "sent_at": "2026-04-25T10:00:00Z"} for i in (1, 2, 3)
    ]
    obs, _ = env.step(call("mail", "get_message", message_id="msg_2"))
    assert obs["last_response"]["body"] == {
        "id": "msg_2",
        "to": "jordan@company.com",
        "subject": "All-Hands",
        "body": "1",
    }
    obs, _ = env.step(call("mail", "get_message", message_id="msg_9"))
    assert status(obs) == (404, "message not found")


def test_mail_endpoint_deprecation():
    obs, _ = last(E2, call("mail", "send_message", to=ALEX, subject="s", body="b"))
    assert status(obs) == (410, "Endpoint 'send_message' is no longer available on mail.")
    schemas = obs["tool_schemas"]["mail"]
    assert list(schemas) == ["list_messages", "get_message", "messages.send"]
    assert schemas["messages.send"]["params"] == {"to": "str", "subject": "str", "body": "str"}
    assert schemas["messages.send"]["required"] == ["to", "subject", "body"]
    assert schemas["messages.send"]["name"] == "messages.send"


# -- 4.3 calendar ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("date_from", "date_to", "expected"),
    [
        ("2026-04-20T11:00:00Z", "2026-04-21T14:00:00Z", ["evt_1", "evt_2"]),  # inclusive at both ends
        ("2026-04-20T11:00:01Z", "2026-04-30T00:00:00Z", ["evt_2"]),
        ("2026-04-20", "2026-04-21", ["evt_1"]),  # "2026-04-21T14:00:00Z" > "2026-04-21" as strings
        ("2026-04-21", "2026-04-21", []),
        ("2026-04-22T00:00:00Z", "2026-04-19T00:00:00Z", []),
    ],
)
def test_list_events_is_a_string_overlap(date_from, date_to, expected):
    obs, _ = last(M3, call("calendar", "list_events", date_from=date_from, date_to=date_to))
    assert [e["event_id"] for e in obs["last_response"]["body"]["events"]] == expected


def test_create_event_ids_and_stored_fields():
    obs, _ = last(
        M3, call("calendar", "create_event", title="Friday Wrap-up", start="s", end="e", attendees=[ALEX])
    )
    assert obs["last_response"]["body"] == {
        "event_id": "evt_3",
        "title": "Friday Wrap-up",
        "start": "s",
        "end": "e",
        "location": "",
        "status": "confirmed",
        "attendees": [ALEX],
    }
    assert obs["known_state"]["calendar.events_count_new_friday_wrapup"] == 1


def test_calendar_attendee_rename_drift():
    env = new_env(E1)
    play(E1, NOOP, NOOP, env=env)
    obs, _ = env.step(ORIENTATION)  # the drift fires on step 3, before dispatch
    assert status(obs) == (400, "Unknown params on create_event: ['attendees']")
    schema = obs["tool_schemas"]["calendar"]["create_event"]
    assert list(schema["params"]) == ["title", "start", "end", "location", "participants"]
    assert schema["required"] == ["title", "start", "end", "participants"]
    assert (
        list(schema["response_shape"])[-1] == "participants" and "attendees" not in schema["response_shape"]
    )
    assert "attendees" in obs["tool_schemas"]["calendar"]["update_event"]["params"]  # not renamed
    obs, _ = env.step(
        call("calendar", "create_event", title="T", start=START, end=END, participants=[PRIYA, ALEX])
    )
    body = obs["last_response"]["body"]
    assert body["participants"] == [PRIYA, ALEX] and "attendees" not in body
    assert obs["known_state"]["calendar.last_event_has_both_attendees"] is True
    obs, _ = env.step(call("calendar", "update_event", event_id="evt_1", attendees=[ALEX]))
    assert status(obs) == (200, None) and obs["last_response"]["body"]["attendees"] == [ALEX]


def test_m3_delete_works_only_at_step_1_and_makes_the_key_unreachable():
    env = new_env(M3)
    obs, _ = env.step(call("calendar", "delete_event", event_id="evt_1"))
    assert obs["last_response"]["body"] == {"deleted": True, "event_id": "evt_1"}
    obs, _ = env.step(call("calendar", "delete_event", event_id="evt_2"))  # tool_removal fires on step 2
    assert status(obs) == (410, "Endpoint 'delete_event' is no longer available on calendar.")
    assert "delete_event" not in obs["tool_schemas"]["calendar"]
    obs, _ = env.step(call("calendar", "update_event", event_id="evt_1", status="cancelled"))
    assert status(obs) == (404, "event evt_1 not found")
    rest = [
        call("calendar", "update_event", event_id="evt_2", status="cancelled"),
        call(
            "mail",
            "send_message",
            to="team-all@company.com",
            subject="Calendar Updated \u2014 Friday Wrap-up Added",
            body="b",
        ),
        call("calendar", "create_event", title="Friday Wrap-up", start="s", end="e", participants=[ALEX]),
        complete(),
    ]
    obs, reward = play(M3, *rest, env=env)[-1]
    assert "calendar.evt_1_status" not in obs["known_state"]
    assert approx_eq(reward["completion"], Fraction(4, 5))
    assert reward["correct_final_gate"] == 0.0 and reward["binary"] == 0.0


def test_m3_cancel_spelling_matters():
    obs, reward = last(M3, call("calendar", "update_event", event_id="evt_1", status="canceled"))
    assert obs["known_state"]["calendar.evt_1_status"] == "canceled"
    assert reward["completion"] == 0.0
    _, reward = last(M3, call("calendar", "update_event", event_id="evt_1", status="cancelled"))
    assert approx_eq(reward["completion"], Fraction(1, 5))


# -- 4.4 crm ---------------------------------------------------------------------------------------

SEARCH = call("crm", "search_contacts")


def test_crm_rate_limiter_resets_at_drift_then_two_calls_then_permanent_429():
    actions = [SEARCH] * 6 + [
        LIST_INBOX,
        call("crm", "get_contact", contact_id="c_1"),
        call("crm", "no_such_endpoint"),
        call("crm", "search_contacts", bogus=1),
    ]
    results = play(M2, *actions)
    statuses = [obs["last_response"]["status"] for obs, _ in results]
    # steps 1-3: limiter inactive | 4 (drift; counter reset -> 1), 5 (2) ok | then 429 for every crm call,
    # before endpoint and param validation; the mail call on step 7 is not counted and not limited
    assert statuses == [200, 200, 200, 200, 200, 429, 200, 429, 429, 429]
    assert results[5][0]["last_response"]["error"] == "Rate limit exceeded"


def test_crm_rate_limiter_counts_invalid_calls():
    actions = [LIST_INBOX] * 3 + [
        call("crm", "no_such_endpoint"),
        call("crm", "search_contacts", bogus=1),
        SEARCH,
    ]
    statuses = [obs["last_response"]["status"] for obs, _ in play(M2, *actions)]
    assert statuses == [200, 200, 200, 410, 400, 429]


def test_crm_has_no_limit_without_the_drift():
    statuses = [obs["last_response"]["status"] for obs, _ in play(E3, *[SEARCH] * 7)]
    assert statuses == [200] * 7


def test_crm_search_semantics():
    def found(obs: dict) -> list[str]:
        return [c["contact_id"] for c in obs["last_response"]["body"]["contacts"]]

    env = new_env(E3)
    obs, _ = env.step(call("crm", "search_contacts", customer_email="", name="TAY"))  # "" counts as absent
    assert found(obs) == ["c_2"] and obs["last_response"]["body"]["total"] == 1
    obs, _ = env.step(call("crm", "search_contacts", email_address="ALICE@customer.com", name="carol"))
    assert found(obs) == ["c_1", "c_3"]  # email match OR name substring (drift fired on step 2)
    obs, _ = env.step(call("crm", "search_contacts", limit=1))
    assert found(obs) == ["c_1", "c_2", "c_3"]  # no filter: all; limit ignored


def test_crm_email_projection_moves_the_key_to_the_end():
    env = new_env(E3)
    obs, _ = env.step(call("crm", "get_contact", contact_id="c_2"))
    assert list(obs["last_response"]["body"]) == ["contact_id", "customer_email", "name", "company", "status"]
    obs, _ = env.step(call("crm", "get_contact", contact_id="c_2"))  # field_rename fires on step 2
    assert list(obs["last_response"]["body"]) == ["contact_id", "name", "company", "status", "email_address"]
    schemas = obs["tool_schemas"]["crm"]
    assert list(schemas["search_contacts"]["params"]) == ["name", "limit", "email_address"]
    assert schemas["create_contact"]["required"] == ["email_address", "name"]
    assert list(schemas["get_contact"]["response_shape"])[-1] == "email_address"
    obs, _ = env.step(call("crm", "search_contacts", customer_email=BOB))
    assert status(obs) == (400, "Unknown params on search_contacts: ['customer_email']")
    obs, _ = env.step(call("crm", "update_contact", contact_id="c_2", email_address="bob@new.com"))
    assert obs["last_response"]["body"]["email_address"] == "bob@new.com"
    obs, _ = env.step(call("crm", "search_contacts", email_address="BOB@NEW.COM"))
    assert [c["contact_id"] for c in obs["last_response"]["body"]["contacts"]] == ["c_2"]
    obs, _ = env.step(call("crm", "create_contact", email_address="dan@customer.com", name="Dan"))
    assert obs["last_response"]["body"] == {
        "contact_id": "c_4",
        "name": "Dan",
        "company": "",
        "status": "active",
        "email_address": "dan@customer.com",
    }
    assert obs["known_state"] == {}  # search/get/create record nothing


# -- 3.3 / 7 summaries and ground truth ------------------------------------------------------------

E3_WORK = [
    call("crm", "search_contacts", customer_email=BOB),
    call("crm", "update_contact", contact_id="c_2", status="support_in_progress"),
]


@pytest.mark.parametrize(
    ("summary", "credited"),
    [
        ("Company: Globex Industries.", True),
        ("works at acme", True),
        ("INITECH!", True),
        ("Bob Taylor's company", False),
        ("Globe x", False),
    ],
)
def test_e3_summary_accepts_any_of_the_three_companies(summary, credited):
    obs, reward = play(E3, *E3_WORK, complete(summary))[-1]
    assert obs["known_state"].get("complete_summary_mentions_company", False) is credited
    assert reward["binary"] == (1.0 if credited else 0.0)
    assert approx_eq(reward["completion"], 1 if credited else Fraction(1, 2))


def test_summary_company_key_only_where_ground_truth_has_it():
    obs, _ = last(E1, complete("Globex"))
    assert "complete_summary_mentions_company" not in obs["known_state"]
    assert obs["known_state"]["_completion_summary"] == "Globex"


def test_exact_count_ground_truth_two_mails_fail_e1():
    obs, reward = play(E1, ORIENTATION, WELCOME, WELCOME)[-1]
    assert obs["known_state"]["mail.sent_count"] == 2
    assert approx_eq(reward["completion"], Fraction(4, 5))  # every other key holds
    _, reward = play(E1, ORIENTATION, WELCOME, WELCOME, complete())[-1]
    assert reward["correct_final_gate"] == 0.0 and reward["binary"] == 0.0 and reward["shaped_total"] == 0.0


def test_flags_are_sticky_and_recipients_distinct():
    obs, _ = play(E1, WELCOME, call("mail", "send_message", to=ALEX, subject="Hello", body="b"))[-1]
    state = obs["known_state"]
    assert state["mail.last_subject_contains_welcome"] is True
    assert state["mail.last_sent_to"] == ALEX
    assert state["mail.all_recipients"] == [PRIYA, ALEX]


def test_all_three_recipients_flag():
    sends = [
        call("mail", "messages.send", to=to, subject="All-Hands", body="b")
        for to in (ALEX, "jordan@company.com", ALEX, "sam@company.com")
    ]
    results = play(E2, *sends)
    assert "mail.sent_to_all_three_recipients" not in results[2][0]["known_state"]
    state = results[-1][0]["known_state"]
    assert state["mail.all_recipients"] == [ALEX, "jordan@company.com", "sam@company.com"]
    assert state["mail.sent_to_all_three_recipients"] is True
    assert approx_eq(results[-1][1]["completion"], Fraction(1, 2))  # 4 mails != 3


def test_failed_calls_do_not_update_state():
    obs, _ = play(
        E1,
        call("mail", "send_message", to=PRIYA, subject="Welcome"),
        call("calendar", "create_event", title="T", start=START, end=END, attendees=[PRIYA, ALEX], x=1),
    )[-1]
    assert obs["known_state"] == {}


@pytest.mark.parametrize(
    ("scenario", "attendees", "key"),
    [
        (E1, [BOB, ALEX], "calendar.last_event_has_both_attendees"),
        (M1, [PRIYA, ALEX], "calendar.last_event_has_both_attendees"),
        (M2, ["sarah@company.com", "mike@company.com"], "calendar.last_event_has_both_sales_leads"),
    ],
)
def test_attendee_pair_flags(scenario, attendees, key):
    obs, _ = last(
        scenario, call("calendar", "create_event", title="T", start=START, end=END, attendees=attendees)
    )
    assert obs["known_state"][key] is True


def test_shared_attendee_key_lets_bob_and_alex_pass_e1():
    create = call("calendar", "create_event", title="Anything", start="x", end="y", attendees=[BOB, ALEX])
    _, reward = play(E1, WELCOME, create, complete())[-1]
    assert reward["completion"] == 1.0 and reward["binary"] == 1.0


def test_binary_can_read_one_mid_episode():
    obs, reward = play(E1, WELCOME, ORIENTATION)[-1]
    assert not obs["done"]
    assert reward["binary"] == 1.0 and reward["success"] is True and reward["correct_final_gate"] == 1.0


# -- 5 drift detection -----------------------------------------------------------------------------


def test_report_before_the_drift_fires_does_not_match_then_matches_on_its_step():
    results = play(E1, report("calendar", "field_rename"), NOOP, report("calendar", "field_rename"))
    (obs1, rew1), _, (obs3, rew3) = results
    assert obs1["feedback"] == "Drift report did not match any undetected fired drift."
    assert rew1["step_shaping"] == 0.0 and obs1["drift_events_visible"] == []
    assert obs3["feedback"] == (
        "Drift correctly reported: field_rename on calendar at step 3."
        " [DRIFT FIRED: 1 drift event(s) on step 3.]"
    )
    assert rew3["step_shaping"] == pytest.approx(0.15) and rew3["drift_detection"] == 1.0
    assert obs3["drift_events_visible"] == [
        {"tool": "calendar", "kind": "field_rename", "endpoint": "create_event", "fires_at_step": 3}
    ]


def test_each_drift_is_credited_once_and_description_is_ignored():
    results = play(
        E2, report("mail", "endpoint_deprecation", ""), report("mail", "endpoint_deprecation", "again")
    )
    (_, first), (obs, second) = results
    assert first["step_shaping"] == pytest.approx(0.15) and first["drift_detection"] == 1.0
    assert obs["feedback"] == "Drift report did not match any undetected fired drift."
    assert second["step_shaping"] == 0.0 and second["drift_detection"] == 1.0


def test_wrong_reports_cost_nothing():
    wrong = report("mail", "endpoint_deprecation")
    ((_, with_report),) = play(E1, wrong)
    ((_, with_noop),) = play(E1, NOOP)
    assert with_report["step_shaping"] == 0.0
    assert with_report["shaped_total"] == with_noop["shaped_total"]
    _, reward = play(M2, NOOP, NOOP, NOOP, NOOP, report("crm", "field_rename"))[-1]
    assert reward["step_shaping"] == 0.0 and reward["drift_detection"] == 0.0


class _TwinDriftRuleset(LegacyRuleset):
    """E3 with two crm rate-limit drifts, listed out of chronological order: (#0 @3, #1 @1)."""

    def build_task(self, scenario, seed):
        task = super().build_task(scenario, seed)
        twins = (
            DriftSpec("crm", "rate_limit_tightening", 3, None, {"limit": 2}),
            DriftSpec("crm", "rate_limit_tightening", 1, None, {"limit": 2}),
        )
        return dataclasses.replace(task, drift_plan=twins)


def test_report_marks_the_first_undetected_match_in_plan_order():
    reported = report("crm", "rate_limit_tightening")
    env = new_env(E3, ruleset=_TwinDriftRuleset())
    feedback = [
        obs["feedback"].split(" [")[0]
        for obs, _ in play(E3, NOOP, NOOP, reported, reported, reported, env=env)
    ]
    assert feedback[2:] == [
        "Drift correctly reported: rate_limit_tightening on crm at step 3.",  # plan order, not firing order
        "Drift correctly reported: rate_limit_tightening on crm at step 1.",
        "Drift report did not match any undetected fired drift.",
    ]
    env = new_env(E3, ruleset=_TwinDriftRuleset())
    obs, reward = env.step(reported)  # only #1 has fired
    assert obs["feedback"].startswith("Drift correctly reported: rate_limit_tightening on crm at step 1.")
    assert reward["drift_detection"] == 1.0
    obs, reward = play(E3, NOOP, NOOP, env=env)[-1]  # #0 fires on step 3, undetected
    assert reward["drift_detection"] == 0.5


class _SameStepDriftsRuleset(LegacyRuleset):
    """E1 with its calendar rename and a mail deprecation, both due on step 3."""

    def build_task(self, scenario, seed):
        task = super().build_task(scenario, seed)
        extra = DriftSpec("mail", "endpoint_deprecation", 3, "send_message", {"replacement": "messages.send"})
        return dataclasses.replace(task, drift_plan=(*task.drift_plan, extra))


def test_feedback_counts_every_drift_fired_on_the_step():
    env = new_env(E1, ruleset=_SameStepDriftsRuleset())
    obs, reward = play(E1, NOOP, NOOP, inspect("mail"), env=env)[-1]
    assert obs["feedback"] == "Inspected mail schema. [DRIFT FIRED: 2 drift event(s) on step 3.]"
    assert "messages.send" in obs["last_response"]["body"]["schema"]  # applied before dispatch
    assert reward["drift_detection"] == 0.0


# -- 8.3 dense shaping -----------------------------------------------------------------------------


def test_repeated_failed_call_penalty_fires_even_when_the_new_call_succeeds():
    bad_create = call("calendar", "create_event", title="T", start=START, end=END)
    obs, reward = play(E1, bad_create, ORIENTATION)[-1]
    assert status(obs) == (200, None)
    assert reward["step_shaping"] == pytest.approx(-0.05)
    assert approx_eq(
        reward["shaped_total"], Fraction(2, 5) * Fraction(2, 5) + only_efficiency(2, 8) - Fraction(1, 20)
    )


@pytest.mark.parametrize(
    ("first", "second", "expected"),
    [
        (BAD_LIST, BAD_LIST, -0.05),
        (BAD_LIST, LIST_INBOX, -0.05),  # params changed, call succeeds: still penalised
        (BAD_LIST, call("mail", "get_message", message_id="m"), 0.0),  # other endpoint
        (LIST_INBOX, LIST_INBOX, 0.0),  # previous call succeeded
        (retry("mail", "list_messages", limit=1), BAD_LIST, 0.0),  # previous action was a retry
        (BAD_LIST, retry("mail", "list_messages", limit=1), 0.0),  # failed retry: neither rule
        (
            BAD_LIST,
            retry("calendar", "list_events", date_from="a", date_to="b"),
            0.20,
        ),  # any tool, any endpoint
        (LIST_INBOX, retry("mail", "list_messages", folder="x"), 0.0),  # nothing failed before
        (call("crm", "x"), retry("mail", "list_messages", folder="x"), 0.20),  # after a 404 too
        (
            report("mail", "field_rename"),
            retry("mail", "list_messages", folder="x"),
            0.0,
        ),  # no previous response
    ],
    ids=[
        "same-call",
        "fixed-call",
        "other-endpoint",
        "after-success",
        "after-retry",
        "failed-retry",
        "retry-any-target",
        "retry-after-success",
        "retry-after-404",
        "retry-after-report",
    ],
)
def test_call_and_retry_shaping(first, second, expected):
    _, reward = play(E1, first, second)[-1]
    assert reward["step_shaping"] == pytest.approx(expected, abs=1e-12)


# -- 8.1 adaptation --------------------------------------------------------------------------------

SEND = call("mail", "messages.send", to=ALEX, subject="s", body="b")


def test_adaptation_ignores_the_call_on_the_drift_step():
    (_, first), (_, second) = play(E2, SEND, SEND)
    assert first["adaptation"] == 0.0  # successful, but on the drift step itself
    assert second["adaptation"] == 1.0


def test_adaptation_scores_only_the_first_later_call_on_the_tool():
    results = play(E2, NOOP, call("mail", "send_message", to=ALEX, subject="s", body="b"), SEND, SEND)
    assert [r["adaptation"] for _, r in results] == [0.0, 0.0, 0.0, 0.0]


def test_adaptation_counts_read_only_calls_and_retries():
    assert last(E2, NOOP, LIST_INBOX)[1]["adaptation"] == 1.0
    assert last(E2, NOOP, retry("mail", "list_messages", folder="inbox"))[1]["adaptation"] == 1.0


def test_adaptation_only_looks_at_the_drifted_tool():
    crm_ok = call("crm", "search_contacts", email_address=BOB)
    results = play(M1, NOOP, LIST_INBOX, inspect("crm"), crm_ok)
    assert [r["adaptation"] for _, r in results] == [0.0, 0.0, 0.0, 1.0]


# -- 8.1 efficiency and tokens ---------------------------------------------------------------------


def test_efficiency_honours_tokens_used():
    env = new_env(E1)
    obs, reward = env.step(NOOP, tokens_used=1000)
    assert obs["token_budget_remaining"] == 3000
    assert approx_eq(reward["efficiency"], efficiency(1, 8, 3000, 4000))
    assert approx_eq(reward["shaped_total"], Fraction(3, 20) * efficiency(1, 8, 3000, 4000))


def test_grpo_smoke_sequence_with_tokens():
    """Spec 11: training/grpo_smoke.py; it asserts that step 4 has step_shaping == 0.10."""
    steps = [
        (WELCOME, 50),
        (inspect("calendar"), 30),
        (ORIENTATION, 100),
        (inspect("calendar"), 30),
        (complete(), 40),
    ]
    env = new_env(E1)
    left, results = 4000, []
    for t, (action, tokens) in enumerate(steps, start=1):
        obs, reward = env.step(copy.deepcopy(action), tokens_used=tokens)
        left -= tokens
        assert obs["token_budget_remaining"] == left
        assert approx_eq(reward["efficiency"], efficiency(t, 8, left, 4000)), t
        results.append((obs, reward))
    assert status(results[2][0]) == (400, "Unknown params on create_event: ['attendees']")
    assert [r["step_shaping"] for _, r in results] == [0.0, 0.0, 0.0, pytest.approx(0.10), 0.0]
    assert results[-1][0]["done"] and results[-1][1]["shaped_total"] == 0.0  # the event was never created


@pytest.mark.parametrize("tokens", [4000, 99999])
def test_episode_ends_when_tokens_reach_zero(tokens):
    env = new_env(E1)
    obs, reward = env.step(WELCOME, tokens_used=tokens)
    assert obs["done"] and obs["token_budget_remaining"] == 0
    assert approx_eq(reward["efficiency"], efficiency(1, 8, 0, 4000))
    assert reward["correct_final_gate"] == 0.0 and reward["shaped_total"] == 0.0
    with pytest.raises(EpisodeStateError):
        env.step(NOOP)


# -- 0.11 / 16.2 stalling pays ---------------------------------------------------------------------


@pytest.mark.parametrize(("pad", "expected"), [(inspect("calendar"), "5.5525"), (inspect("docs"), "5.9525")])
def test_padding_after_a_two_step_finish(pad, expected):
    """Summary 11: E1 done in 2 steps, report the drift, pad to max_steps: 5.55-5.95 (vs 1.43 honest)."""
    _, reward = play(E1, WELCOME, ORIENTATION, report("calendar", "field_rename"), *[pad] * 5)[-1]
    assert approx_eq(reward["cumulative_reward"], Fraction(expected))
    assert reward["cumulative_reward"] > Fraction(REF["gaming"]["E1_honest_3_step"]["exact"])
    low, high = REF["gaming"]["E1_two_steps_report_then_pad_range"]
    assert low <= round(reward["cumulative_reward"], 2) <= high


# -- 2.5 observation window ------------------------------------------------------------------------


def test_history_window_is_last_five_steps():
    results = play(M1, *[NOOP] * 7)
    obs, reward = results[-1]
    assert [h["step"] for h in obs["history"]] == [3, 4, 5, 6, 7]
    assert obs["history"][-1]["reward_breakdown"] == reward
    assert obs["history"][-1]["action"] == {"type": "call_tool"}


def _drifted_docs(ruleset: LegacyRuleset, scenario: str, seed: int, steps: int) -> dict:
    """The documentation an observation shows after `steps` inspections (drifts fire on the clock)."""
    env = Environment(ruleset)
    obs = env.reset(scenario, seed)
    for _ in range(steps):
        obs, _ = env.step(inspect("mail"))
    return obs["tool_schemas"]


@pytest.mark.parametrize("scenario", [M1, M2, M3])
def test_drifted_documentation_is_shared_only_where_the_same_specs_were_applied(scenario):
    """The documentation after drift is kept by tools and applied specs and shared between
    episodes; it equals one rebuilt from the tools, and a task whose spec is another object (even
    one with equal content, or other details) gets its own."""
    ruleset = LegacyRuleset()
    steps = SCENARIOS[scenario]["max_steps"] - 1
    first = _drifted_docs(ruleset, scenario, 0, steps)
    again = _drifted_docs(ruleset, scenario, 1, steps)
    assert again is first
    env = Environment(LegacyRuleset())
    env.reset(scenario, 0)
    for _ in range(steps):
        env.step(inspect("mail"))
    rebuilt = {name: tool.schema_view() for name, tool in env.episode.tools.items()}
    assert first == rebuilt

    original = ruleset.build_task
    plan = original(scenario, 0).drift_plan
    twins = tuple(dataclasses.replace(spec, details=copy.deepcopy(spec.details)) for spec in plan)
    ruleset.build_task = lambda s, seed: dataclasses.replace(original(s, seed), drift_plan=twins)
    twin_docs = _drifted_docs(ruleset, scenario, 2, steps)
    assert twin_docs is not first and twin_docs == first

    renamed = tuple(
        dataclasses.replace(spec, details={**spec.details, "to": "attendee_list"})
        if spec.details.get("to") == "participants"
        else spec
        for spec in plan
    )
    if renamed != plan:
        ruleset.build_task = lambda s, seed: dataclasses.replace(original(s, seed), drift_plan=renamed)
        other = _drifted_docs(ruleset, scenario, 3, steps)
        assert other != first
        assert "attendee_list" in json.dumps(other)


def test_a_drift_shares_its_edited_schema_and_never_edits_a_shared_one():
    """Tools that apply the same drift share the edited schema (`Tool.edit_schema`); a further
    drift on one of them copies it first, so neither the other tool nor the baseline changes."""
    from schemashift.env.rulesets.legacy.tools.crm import CrmTool
    from schemashift.env.rulesets.legacy.tools.mail import MailTool

    first, second, untouched = CrmTool(), CrmTool(), CrmTool()
    for tool in (first, second):
        tool.apply_drift("field_rename", None, {})
    assert first.schemas["search_contacts"] is second.schemas["search_contacts"]
    assert "email_address" in first.schemas["search_contacts"].params
    assert "customer_email" in untouched.schemas["search_contacts"].params

    mail, other = MailTool(), MailTool()
    for tool in (mail, other):
        tool.apply_drift("field_rename", "list_messages", {})
    mail.apply_drift("new_required_param", "send_message", {})
    mail.apply_drift("new_required_param", "send_message", {})  # the edited schema, edited again
    assert mail.schemas["send_message"].required.count("idempotency_key") == 2
    assert "idempotency_key" not in other.schemas["send_message"].params
    assert mail.schemas["list_messages"] is other.schemas["list_messages"]
    fresh_mail, fresh_crm = MailTool(), CrmTool()
    assert "idempotency_key" not in fresh_mail.schemas["send_message"].params
    assert "messages" in fresh_mail.schemas["list_messages"].response_shape
    assert "customer_email" in fresh_crm.schemas["search_contacts"].params
