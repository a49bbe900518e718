"""Two grading classes of v1 (docs/rulesets.md, guarantees 10 and 11), on seeds drawn fresh here.

- Damage as a class: every notice the world sends and every record left at the end is judged
  against what the task names. A junk pair (an extra copy of an event then deleted, emptied or
  renamed; an attendee removed and re-added; an event renamed away and back; cancelled and
  re-confirmed) put at every pair of positions of an honest solution is damage; a write the API
  rejects sends nothing and is none.
- Every clause graded: each clause of each family's text (`clauses.CLAUSES`) names the check that
  grades it, and perturbing that clause's subject in an honest solution fails the episode.
"""

from __future__ import annotations

import random
from datetime import date, datetime, timedelta

import pytest
from v1_junk import JUNK_PAIRS, honest_intents, placements, play_intents, with_junk
from v1_support import RULESET, SCENARIOS

from schemashift.env import CONTROL, DRIFT, Environment
from schemashift.env.rulesets.v1.builder import day_label
from schemashift.env.rulesets.v1.clauses import CLAUSES
from schemashift.env.rulesets.v1.grading import CHECKS, DAMAGE_CHECKS, criterion_met
from schemashift.env.rulesets.v1.tools import API_CLASSES

pytestmark = pytest.mark.timeout(600)

#: seeds no other test uses, drawn afresh per run of this generator (test and train splits)
_DRAW = random.Random(20261212)


def _fresh_seeds(n: int) -> list[int]:
    return _DRAW.sample(range(1000, 9999), n // 2) + _DRAW.sample(range(60000, 99999), n - n // 2)


# -- damage as a class ----------------------------------------------------------------------------
@pytest.mark.parametrize("junk", JUNK_PAIRS, ids=lambda f: f.__name__)
def test_every_placement_of_a_junk_pair_in_an_honest_solution_is_damage(junk):
    rng = random.Random(f"junk/{junk.__name__}/{_DRAW.random()}")
    env = Environment(RULESET)
    played = 0
    for scenario in SCENARIOS:
        for seed in _fresh_seeds(4):
            task = RULESET.build_task(scenario, seed)
            pair = junk(task, rng)
            if pair is None:
                continue
            for arm in (DRIFT, CONTROL):
                honest = play_intents(scenario, seed, honest_intents(task), env, arm)
                assert honest["success"], (scenario, seed, arm)  # the control: no junk, no damage
                for i, j in placements(task, pair):
                    summary = play_intents(scenario, seed, with_junk(task, pair, i, j), env, arm)
                    where = (scenario, seed, arm, i, j)
                    assert summary["catastrophe"] and not summary["success"], where
                    played += 1
    assert played >= 20


def test_a_write_the_api_rejects_sends_nothing_and_is_no_damage():
    """Bad times, an unknown status, an unknown event, a bad address: each rejected before the
    honest solution, which still succeeds."""
    env = Environment(RULESET)
    rejected = [
        ("calendar", "create_event", {"title": "X", "start": "bad", "end": "bad", "attendees": ["a@b.c"]}),
        ("calendar", "update_event", {"event_id": "evt_0", "status": "cancelled"}),
        ("calendar", "delete_event", {"event_id": "evt_0"}),
        ("mail", "send_message", {"to": "nobody", "subject": "s", "body": "b"}),
    ]
    for scenario in SCENARIOS:
        for seed in _fresh_seeds(4):
            task = RULESET.build_task(scenario, seed)
            before = [
                {"type": "call_tool", "tool_call": {"tool": tool, "endpoint": endpoint, "params": params}}
                for tool, endpoint, params in rejected
                if tool in task.tools
            ]
            for arm in (DRIFT, CONTROL):
                summary = play_intents(scenario, seed, honest_intents(task), env, arm, before=before)
                assert summary["success"], (scenario, seed, arm, summary["collateral_damage"])


# -- every clause graded --------------------------------------------------------------------------
def _ops(task) -> list[dict]:
    ops = []
    for op in task.ground_truth["ops"]:
        params = {k: list(v) if isinstance(v, (list, tuple)) else v for k, v in op["params"].items()}
        ops.append({"tool": op["tool"], "endpoint": op["endpoint"], "params": params})
    return ops


def grade_ops(task, ops: list[dict], summary: str) -> bool:
    """Success of canonical `ops` played on a fresh world (handlers alone, no drift)."""
    world = {tool: API_CLASSES[tool](task.seed_data[tool]) for tool in task.tools}
    for op in ops:
        getattr(world[op["tool"]], "h_" + op["endpoint"])(op["params"])
    truth = task.ground_truth
    met = all(criterion_met(c, world, summary) for c in truth["criteria"])
    damage = [
        d
        for tool in task.tools
        for d in DAMAGE_CHECKS[tool](truth["allowed"], task.seed_data[tool], world[tool])
    ]
    return met and not damage


def _first(ops, endpoint):
    return next(op for op in ops if op["endpoint"] == endpoint)


def _sends(ops):
    return [op for op in ops if op["endpoint"] == "send_message"]


def _shift(iso: str, **delta) -> str:
    moved = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ") + timedelta(**delta)
    return moved.strftime("%Y-%m-%dT%H:%M:%SZ")


def _contacts(task):
    return task.seed_data.get("crm", {}).get("contacts", ())


def _inbox(task):
    return task.seed_data["mail"]["messages"]


def _stranger(rng, ops, task, summary):
    _first(ops, "send_message")["params"]["to"] = "someone.else@elsewhere.org"


def _extra_recipient(rng, ops, task, summary):
    p = _first(ops, "send_message")["params"]
    p["to"] = [p["to"], "someone.else@elsewhere.org"]


def _twice(rng, ops, task, summary):
    ops.append({**_first(ops, "send_message"), "params": dict(_first(ops, "send_message")["params"])})


def _subject(rng, ops, task, summary):
    _first(ops, "send_message")["params"]["subject"] = "Update"


def _other_clock_time(rng, ops, task, summary):
    p = _first(ops, "send_message")["params"]
    time = next(c for c in task.ground_truth["criteria"] if c["kind"] == "message")["body_has"][0]
    hour = (int(time[:2]) + 1) % 24
    p["body"] = p["body"].replace(time, f"{hour:02d}{time[2:]}")


def _other_day(rng, ops, task, summary):
    p = _first(ops, "send_message")["params"]
    day = date.fromisoformat(_first(ops, "create_event")["params"]["start"][:10])
    p["body"] = p["body"].replace(day_label(day), day_label(day + timedelta(days=rng.choice((1, 7)))))


def _agenda(rng, ops, task, summary):
    for op in _sends(ops):
        op["params"]["body"] = op["params"]["body"].split(" Agenda:")[0] + " Agenda: misc."


def _on_leave(rng, ops, task, summary):
    away = next(m for m in _inbox(task) if m["subject"].startswith("Out of office"))
    ops.append({**_sends(ops)[0], "params": {**_sends(ops)[0]["params"], "to": away["from"]}})


def _other_team(rng, ops, task, summary):
    invited = {op["params"]["to"] for op in _sends(ops)}
    for message in _inbox(task):
        if "roster" in message["subject"] and not any(a in message["body"] for a in invited):
            address = message["body"].split("<")[1].split(">")[0]
            ops.append({**_sends(ops)[0], "params": {**_sends(ops)[0]["params"], "to": address}})
            return
    raise AssertionError("no other roster")


def _status(rng, ops, task, summary):
    _first(ops, "update_contact")["params"]["status"] = "churned"


def _other_contact(rng, ops, task, summary):
    target = _first(ops, "update_contact")["params"]
    other = rng.choice([c for c in _contacts(task) if c["contact_id"] != target["contact_id"]])
    ops.append({**_first(ops, "update_contact"), "params": {**target, "contact_id": other["contact_id"]}})


def _drop_company(rng, ops, task, summary):
    return "Done."


def _other_company(rng, ops, task, summary):
    target = next(
        c for c in _contacts(task) if c["contact_id"] == _first(ops, "update_contact")["params"]["contact_id"]
    )
    other = rng.choice(sorted({c["company"] for c in _contacts(task)} - {target["company"]}))
    return f"{summary} Also {other}."


def _event_title(rng, ops, task, summary):
    _first(ops, "create_event")["params"]["title"] = "Team Party"


def _event_start(rng, ops, task, summary):
    p = _first(ops, "create_event")["params"]
    delta = rng.choice(({"days": 1}, {"hours": 1}))
    p["start"], p["end"] = _shift(p["start"], **delta), _shift(p["end"], **delta)


def _event_length(rng, ops, task, summary):
    p = _first(ops, "create_event")["params"]
    p["end"] = _shift(p["end"], minutes=15)


def _event_attendees(rng, ops, task, summary):
    p = _first(ops, "create_event")["params"]
    p["attendees"] = rng.choice((p["attendees"][:-1], [*p["attendees"], "someone.else@elsewhere.org"]))


def _drop_active(rng, ops, task, summary):
    p = _first(ops, "send_message")["params"]
    company_contacts = [c for c in _contacts(task) if c["status"] == "active" and c["name"] in p["body"]]
    p["body"] = p["body"].replace(rng.choice(company_contacts)["name"], "")


def _report_company(task, ops):
    subject = _first(ops, "send_message")["params"]["subject"]
    return next(c for c in {c["company"] for c in _contacts(task)} if c in subject)


def _other_company_contact(rng, ops, task, summary):
    company = _report_company(task, ops)
    other = rng.choice([c for c in _contacts(task) if c["company"] != company])
    _first(ops, "send_message")["params"]["body"] += f" Also {other['name']}."


def _inactive_in_subject(rng, ops, task, summary):
    company = _report_company(task, ops)
    inactive = rng.choice([c for c in _contacts(task) if c["company"] == company and c["status"] != "active"])
    _first(ops, "send_message")["params"]["subject"] += f" (not {inactive['name']})"


def _drop_cancel(rng, ops, task, summary):
    ops.remove(rng.choice([op for op in ops if op["endpoint"] == "delete_event"]))


def _cancel_other(rng, ops, task, summary):
    targets = {op["params"]["event_id"] for op in ops if op["endpoint"] == "delete_event"}
    other = rng.choice([e for e in task.seed_data["calendar"]["events"] if e["event_id"] not in targets])
    ops.append({"tool": "calendar", "endpoint": "delete_event", "params": {"event_id": other["event_id"]}})


def _drop_cancelled_name(rng, ops, task, summary):
    p = _first(ops, "send_message")["params"]
    title = rng.choice([e["title"] for e in task.seed_data["calendar"]["events"] if e["title"] in p["body"]])
    p["body"] = p["body"].replace(title, "an event")


#: clause id -> a perturbation of its subject in the honest ops (returns a new summary, or None)
PERTURBATIONS = {
    "welcome_recipient": _stranger,
    "customer_recipient": _stranger,
    "report_recipient": _stranger,
    "notify_recipient": _stranger,
    "notice_recipient": _stranger,
    "each_member": _stranger,
    "to_alone": _extra_recipient,
    "one_message": _twice,
    "one_per_person": _twice,
    "welcome_subject": _subject,
    "meeting_subject": _subject,
    "subject_name": _subject,
    "subject_words": _subject,
    "notify_subject": _subject,
    "notice_subject": _subject,
    "orientation_time": _other_clock_time,
    "orientation_day": _other_day,
    "time_and_agenda": _agenda,
    "not_on_leave": _on_leave,
    "team_only": _other_team,
    "status": _status,
    "by_address": _other_contact,
    "name_company": _drop_company,
    "no_other_company": _other_company,
    "event_title": _event_title,
    "event_start": _event_start,
    "event_length": _event_length,
    "event_attendees": _event_attendees,
    "all_active": _drop_active,
    "company_filter": _other_company_contact,
    "active_only": _inactive_in_subject,
    "cancel_both": _drop_cancel,
    "cancel_named": _drop_cancel,
    "keep_others": _cancel_other,
    "keep_lookalike": _cancel_other,
    "names_cancelled": _drop_cancelled_name,
}


def test_every_clause_has_a_check_and_a_perturbation():
    for family, clauses in CLAUSES.items():
        for clause in clauses:
            assert clause.check in CHECKS, (family, clause)
            assert clause.key in PERTURBATIONS, (family, clause.key, "has no perturbation")
        assert len({c.key for c in clauses}) == len(clauses), family
    assert {f for f in CLAUSES if not f.startswith("part:")} == set(RULESET.scenario_ids())


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_perturbing_any_clause_of_an_honest_solution_fails(scenario):
    rng = random.Random(f"clauses/{scenario}/{_DRAW.random()}")
    for seed in _fresh_seeds(30):
        task = RULESET.build_task(scenario, seed)
        summary = task.ground_truth["summary"]
        assert grade_ops(task, _ops(task), summary), (scenario, seed)  # the control
        keys = task.ground_truth["clauses"]
        assert keys, (scenario, seed)
        for key in keys:
            ops = _ops(task)
            perturbed = PERTURBATIONS[key](rng, ops, task, summary) or summary
            assert not grade_ops(task, ops, perturbed), (scenario, seed, key)
