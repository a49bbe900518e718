"""v1 scenario families: templates with procedural variants, and generated cross-tool compositions.

A family builder draws, from its own `random.Random`, the people, companies, dates, wording,
record ids and distractor records of one task, and states what success means as checkable
criteria on the final world (see `grading.py`), what collateral damage is (who may be mailed or
invited, which records may change) and the documented plan: the calls that solve the task on the
API as documented at the start, reads included.

Three rules keep the task honest (docs/rulesets.md, "Guarantees"):
- every task needs a value that only a tool response gives (a record id, a name, an address), so
  nothing the agent is shown before it reads a response solves it;
- the success criteria shown to the agent describe each check, never the value it looks for;
- every text starts with a dated request whose year belongs to the split (test 2026, train
  2028 onwards), so no training task can equal a test task.
A drawn task whose criteria contradict each other (the honest messages or summary would fail
them) raises `builder.Redraw`, and the caller draws again from the same generator. The world
machinery (name pools, people, slots, the `Builder` that accumulates a task) is `builder.py`.
"""

from __future__ import annotations

import functools
import random
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

from schemashift.env.rulesets.v1.builder import Builder, FamilySpec, day_label, fixed_slot
from schemashift.env.rulesets.v1.clauses import CLAUSES

TEAMS = ("Platform", "Data", "Design", "Growth", "Support", "Security", "Mobile", "Finance", "Research")


def _pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)


COMMON_EVENTS = (
    "Design Review",
    "1:1 Check-in",
    "Sprint Planning",
    "Budget Sync",
    "Team Lunch",
    "Hiring Panel",
)


def _distractor_events(b: Builder, n: int, people: list[str]) -> None:
    for title in b.rng.sample(COMMON_EVENTS, n):
        b.event(title, b.slot(), b.rng.sample(people, min(2, len(people))))


#: family id -> (tier, builder, step limit, tools), in the order the families are defined below
FAMILIES: dict[str, tuple[str, Any, int, tuple[str, ...]]] = {}


def family(
    tier: str, step_limit: int, tools: tuple[str, ...], *, internal: bool = False
) -> Callable[[Callable[[Builder], FamilySpec]], Callable[[Builder], FamilySpec]]:
    """Registers a family builder in `FAMILIES` under its own name. An `internal` family's task is
    set inside a company: the company's mail domain is the first thing its builder draws."""

    def register(build: Callable[[Builder], FamilySpec]) -> Callable[[Builder], FamilySpec]:
        @functools.wraps(build)
        def draw(b: Builder) -> FamilySpec:
            if internal:
                b.internal_domain()
            spec = build(b)
            spec.clauses = CLAUSES[build.__name__]
            return spec

        FAMILIES[build.__name__] = (tier, draw, step_limit, tools)
        return draw

    return register


def _day_forms(day: date) -> list[str]:
    """The ways a text may give `day`: as texts write it, month and day, or ISO."""
    label = day_label(day)
    return [label, label.split(" ", 1)[1].split(",")[0], day.isoformat()]


# -- the six families -----------------------------------------------------------------------------
@family("easy", 20, ("mail", "calendar"), internal=True)
def onboard_new_hire(b: Builder) -> FamilySpec:
    """HR's message in the inbox holds the hire's address and names their manager."""
    rng = b.rng
    hire, manager, other_hire, other_manager = (b.person() for _ in range(4))
    hr = f"{_pick(rng, 'hr', 'people-ops', 'talent')}@{b.domain}"
    start_day = b.day(3, 14)
    slot = b.slot(minutes=rng.choice((30, 60)), on=start_day)
    title = _pick(
        rng, "New Hire Orientation", "Onboarding Session", "Welcome Orientation", "First-Day Kickoff"
    )
    b.use("mail", "calendar")
    for starter, boss, when in ((hire, manager, start_day), (other_hire, other_manager, b.day(15, 30))):
        b.message(
            hr,
            f"New starter: {starter.name}",
            f"{starter.name} joins on {day_label(when)}. Work address: {starter.email}. "
            f"Manager: {boss.name} ({boss.email}).",
        )
    _distractor_events(b, rng.randint(2, 3), [manager.email, other_manager.email])
    b.shuffle_records()
    b.read("mail", "list_messages", folder="inbox")
    steps = [
        lambda: b.send(
            hire.email,
            f"Welcome to the team, {hire.first}!",
            f"Hi {hire.first}, welcome aboard! Your {title} is on {slot.label}.",
            "One welcome message to the new hire alone: 'Welcome' in the subject, the orientation "
            "day and time in the body",
            ["welcome"],
            [slot.time.split()[0]],
            body_any=[_day_forms(start_day)],
        ),
        lambda: b.create_event(
            title,
            slot,
            [hire.email, manager.email],
            "One active event with the requested title and time whose attendees are exactly the new "
            "hire and their manager",
        ),
    ]
    rng.shuffle(steps)
    for plan_step in steps:
        plan_step()
    description = (
        f"{hire.name} starts on {day_label(start_day)}; HR's 'New starter' e-mail in your inbox gives "
        f"their work address and names their manager. Send {hire.first} one welcome e-mail (to them "
        f"alone) with 'Welcome' in the subject that gives the time of their orientation, and schedule "
        f"'{title}' on {slot.label} for {slot.minutes} minutes with exactly {hire.first} and their manager."
    )
    return b.finish(description, f"Welcomed {hire.name} and scheduled '{title}' with {manager.name}.")


@family("easy", 26, ("mail",), internal=True)
def meeting_invite_blast(b: Builder) -> FamilySpec:
    """The roster is in the inbox, and so is an out-of-office reply from one member."""
    rng = b.rng
    team_name, other_team = rng.sample(TEAMS, 2)
    members = [b.person() for _ in range(rng.randint(4, 6))]
    others = [b.person() for _ in range(3)]
    lead, other_lead = b.person(), b.person()
    on_leave = rng.choice(members)
    invited = [p for p in members if p is not on_leave]
    meeting = _pick(rng, "All-Hands", "Town Hall", "Quarterly Kickoff", "Team Sync", "Roadmap Review")
    slot = b.slot(on=b.day(2, 14))
    agenda = _pick(
        rng, "quarterly goals and Q&A", "team updates and demos", "the hiring plan", "roadmap priorities"
    )
    b.use("mail")
    for name, boss, people in ((team_name, lead, members), (other_team, other_lead, others)):
        listing = "; ".join(f"{p.name} <{p.email}>" for p in people)
        b.message(boss.email, f"{name} team roster", f"Current members of the {name} team: {listing}.")
    b.message(
        on_leave.email,
        f"Out of office: {on_leave.name}",
        f"I am on leave until {day_label(b.day(22, 40))} with no access to e-mail. - {on_leave.first}",
    )
    b.shuffle_records()
    b.read("mail", "list_messages", folder="inbox")
    for person in invited:
        b.send(
            person.email,
            f"{meeting}: {slot.label}",
            f"Hi {person.first}, the {meeting} is on {slot.label}. Agenda: {agenda}.",
            f"Exactly one message to each {team_name} team member who is not on leave, addressed to "
            "them alone, with the meeting name in the subject and its time and agenda in the body",
            [meeting.lower()],
            [slot.time.split()[0], agenda],
        )
    description = (
        f"Send an invitation e-mail for the {meeting} on {slot.label} to each member of the {team_name} "
        f"team, one message per person addressed to them alone (the roster is in your inbox). The subject "
        f"must contain '{meeting}' and the body must state the time ({slot.time}) and the agenda "
        f"({agenda}). Anyone on the team with an out-of-office reply in the inbox is on leave: do not "
        "e-mail them."
    )
    return b.finish(description, f"Sent the {meeting} invitation to {len(invited)} {team_name} members.")


CUSTOMER_STATUSES = ("support_in_progress", "awaiting_customer", "escalated_tier2", "renewal_review")


def _customers(b: Builder, n_distractors: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A target customer plus distractors that share a first name, a company or a surname."""
    rng = b.rng
    companies = b.companies(n_distractors + 1)
    target_company = companies[0]
    target = b.contact(b.customer(), target_company)
    first, last = target["name"].split()
    others = []
    for i in range(n_distractors):
        style = i % 3
        if style == 0:  # same first name, other company
            others.append(b.contact(b.customer(first=first), companies[i + 1]))
        elif style == 1:  # same company, other person
            others.append(b.contact(b.customer(), target_company, rng.choice(("active", "inactive"))))
        else:  # another company
            others.append(b.contact(b.customer(), companies[i + 1], rng.choice(("active", "inactive"))))
    return target, others


@family("easy", 20, ("crm",))
def customer_lookup(b: Builder) -> FamilySpec:
    rng = b.rng
    target, others = _customers(b, rng.randint(3, 5))
    status = rng.choice(CUSTOMER_STATUSES)
    b.shuffle_records()
    email = target["email"]
    b.read("crm", "search_contacts", email=email)
    if rng.random() < 0.5:
        b.read("crm", "get_contact", contact_id=target["contact_id"])
    b.set_status(target, status, "The CRM contact with the customer's address has the requested status")
    wrong = sorted({c["company"] for c in others} - {target["company"]})
    b.summary_criterion(
        [target["company"]],
        wrong,
        "The completion summary names the customer's company and no other company in the CRM",
    )
    description = _pick(
        rng,
        f"A customer wrote to support from {email}. Look them up in the CRM by that address, set their "
        f"status to '{status}' and name their company, and no other company, in your completion summary.",
        f"Support ticket from {email}: find this contact in the CRM by e-mail, change the status to "
        f"'{status}' and report the contact's company (no other company) when you complete the task.",
    )
    return b.finish(description, f"{target['name']} ({email}) is now {status}. Company: {target['company']}.")


@family("medium", 24, ("mail", "calendar", "crm"), internal=True)
def customer_escalation(b: Builder) -> FamilySpec:
    rng = b.rng
    target, _ = _customers(b, rng.randint(2, 4))
    manager = b.person()
    status = rng.choice(("vip_escalation", "retention_risk", "priority_care"))
    slot = b.slot(minutes=30, hours=(9, 15))
    name = target["name"]
    title = f"Check-in call: {name}"
    b.use("mail", "calendar")
    _distractor_events(b, 2, [manager.email])
    b.shuffle_records()
    b.read("crm", "search_contacts", email=target["email"])
    b.set_status(target, status, "The escalated customer has the requested CRM status")
    b.send(
        target["email"],
        f"Priority Support \u2014 {name}",
        f"Hi {name.split()[0]}, we value {target['company']} and want to make this right. "
        f"Let's talk on {slot.label}.",
        "One message to the customer alone whose subject is 'Priority Support \u2014' and their full name",
        ["priority support", name],
    )
    b.create_event(
        title,
        slot,
        [target["email"], manager.email],
        "One active 30-minute event titled 'Check-in call:' and the customer's full name, at the "
        "requested time, with exactly the customer and the account manager",
    )
    description = (
        f"The VIP customer {target['email']} has escalated: their subscription is about to lapse. Look them "
        f"up in the CRM, set their status to '{status}', send them one retention e-mail (to them alone) "
        f"with the subject 'Priority Support \u2014 <their full name>', and schedule a 30-minute event "
        f"titled 'Check-in call: <their full name>' on {slot.label} with exactly the customer and the "
        f"account manager {manager.name} ({manager.email})."
    )
    return b.finish(description, f"Escalated {name} ({target['company']}), emailed and booked the call.")


@family("medium", 22, ("mail", "calendar", "crm"), internal=True)
def weekly_report(b: Builder) -> FamilySpec:
    rng = b.rng
    company, *others = b.companies(3)
    active = [b.contact(b.customer(), company, "active") for _ in range(rng.randint(2, 4))]
    inactive = [b.contact(b.customer(), company, "inactive") for _ in range(rng.randint(1, 2))]
    strangers = [b.contact(b.customer(), other, "active") for other in others]
    leads = [b.person(), b.person()]
    report_to = f"{_pick(rng, 'sales-leads', 'account-team', 'revenue-ops')}@{b.domain}"
    slot = b.slot(minutes=rng.choice((30, 60)))
    title = _pick(rng, "Weekly Report Review", "Pipeline Review", "Account Health Review")
    b.use("mail", "calendar")
    _distractor_events(b, 2, [p.email for p in leads])
    b.shuffle_records()
    b.read("crm", "search_contacts", company=company, status="active")
    names = [c["name"] for c in active]
    b.send(
        report_to,
        f"Weekly Active Contacts Report \u2014 {company}",
        f"Active {company} contacts this week: {', '.join(names)}.",
        f"One message to {report_to} alone with 'Weekly' and the company in the subject, whose body names "
        "every active contact of the company and no inactive one",
        ["weekly", company],
        names,
        [c["name"] for c in inactive] + [c["name"] for c in strangers],
    )
    b.create_event(
        title,
        slot,
        [p.email for p in leads],
        "One active event with the requested title, time and length whose attendees are exactly the "
        "two sales leads",
    )
    description = (
        f"Prepare the weekly report for {company}: pull the {company} contacts whose status is active from "
        f"the CRM and e-mail {report_to} one message (to that address alone) with a subject containing "
        f"'Weekly' and '{company}' that lists the full names of the active contacts only. Then schedule "
        f"'{title}' on {slot.label} for {slot.minutes} minutes with exactly the sales leads "
        f"{leads[0].name} ({leads[0].email}) and {leads[1].name} ({leads[1].email})."
    )
    return b.finish(
        description, f"Sent the {company} weekly report ({len(names)} active) and booked '{title}'."
    )


CLEANUP_TITLES = (
    ("Old Planning Sync", "Planning Sync"),
    ("Cancelled Kickoff", "Kickoff Retro"),
    ("Legacy Vendor Call", "Vendor Call"),
    ("Q1 Budget Draft", "Q2 Budget Draft"),
    ("Deprecated API Review", "API Review"),
)


@family("medium", 26, ("mail", "calendar"), internal=True)
def event_cleanup(b: Builder) -> FamilySpec:
    rng = b.rng
    lead, *team = (b.person() for _ in range(4))
    pairs = rng.sample(CLEANUP_TITLES, 2)
    monday = b.today + timedelta(days=7 - b.today.weekday())
    targets = []
    for i, (cancel_title, keep_title) in enumerate(pairs):
        day = monday + timedelta(days=i)
        hour = rng.randint(9, 15)
        targets.append(b.event(cancel_title, fixed_slot(day, hour, 0, 60), [lead.email]))
        b.event(keep_title, fixed_slot(day, hour + 1, 0, 60), [lead.email, team[i].email])
    b.event(rng.choice(COMMON_EVENTS), fixed_slot(monday + timedelta(days=2), 11, 0, 30), [team[2].email])
    friday = monday + timedelta(days=4)
    wrap = fixed_slot(friday, rng.choice((15, 16)), 0, rng.choice((30, 60)))
    wrap_title = _pick(rng, "Friday Wrap-up", "Week Wrap-up", "End-of-Week Retro")
    notify = f"{_pick(rng, 'team-all', 'eng-team', 'everyone')}@{b.domain}"
    b.use("calendar", "mail")
    b.shuffle_records()
    b.read(
        "calendar",
        "list_events",
        date_from=f"{monday.isoformat()}T00:00:00Z",
        date_to=f"{friday.isoformat()}T23:59:59Z",
    )
    for target in targets:
        b.cancel(target, "Each of the two named events is cancelled or deleted; every other event stays")
    b.create_event(
        wrap_title,
        wrap,
        [lead.email],
        "One active wrap-up event with the requested title, time and length whose only attendee is the "
        "team lead",
    )
    b.send(
        notify,
        f"Calendar Updated \u2014 {wrap_title} Added",
        f"Cancelled {pairs[0][0]} and {pairs[1][0]}; added {wrap_title} on {wrap.label}.",
        f"One message to {notify} alone with 'Calendar Updated' in the subject whose body names both "
        "cancelled events",
        ["calendar updated"],
        [pairs[0][0], pairs[1][0]],
    )
    description = (
        f"Calendar cleanup for the week of {day_label(monday)}: find and cancel (or delete) the "
        f"'{pairs[0][0]}' and '{pairs[1][0]}' events, leaving every other event as it is (note "
        f"'{pairs[0][1]}' and '{pairs[1][1]}' stay). Create '{wrap_title}' on {wrap.label} for "
        f"{wrap.minutes} minutes with exactly the team lead {lead.name} ({lead.email}). Then e-mail "
        f"{notify} one message (to that address alone) with a subject containing 'Calendar Updated' "
        "that names both cancelled events."
    )
    return b.finish(
        description, f"Cancelled {pairs[0][0]} and {pairs[1][0]}, added {wrap_title}, notified {notify}."
    )


# -- generated compositions -----------------------------------------------------------------------
#: subtask kinds that need a lookup (a record id only a response gives); every composition has one
LOOKUP_PARTS = frozenset({"status", "cancel"})


def composition(b: Builder, parts: int) -> FamilySpec:
    """`parts` atomic subtasks drawn across tools (status update, notice, meeting, cancellation);
    at least two tools and at least one subtask that needs a lookup."""
    rng = b.rng
    b.internal_domain()
    kinds = ["status", "notice", "meeting", "cancel"]
    chosen = rng.sample(kinds, parts)
    while len({_PART_TOOL[k] for k in chosen}) < 2 or not LOOKUP_PARTS & set(chosen):
        chosen = rng.sample(kinds, parts)
    sentences, summary = [], []
    pending = []
    for kind in chosen:
        if kind == "status":
            target, _ = _customers(b, 3)
            status = rng.choice(CUSTOMER_STATUSES)
            pending.append(("status", target, status))
            sentences.append(f"set the CRM status of the contact with e-mail {target['email']} to '{status}'")
            summary.append(f"updated the contact's status to {status}")
        elif kind == "notice":
            person = b.person()
            topic = _pick(rng, "Office closure", "Security training", "Expense deadline", "Parking changes")
            pending.append(("notice", person, topic))
            sentences.append(
                f"e-mail {person.name} ({person.email}) one message, to them alone, "
                f"with '{topic}' in the subject"
            )
            summary.append(f"notified {person.first}")
        elif kind == "meeting":
            people = [b.person(), b.person()]
            slot = b.slot()
            title = _pick(rng, "Incident Review", "Partner Sync", "Launch Readiness", "Hiring Debrief")
            pending.append(("meeting", people, (title, slot)))
            sentences.append(
                f"schedule '{title}' on {slot.label} for {slot.minutes} minutes with exactly "
                f"{people[0].email} and {people[1].email}"
            )
            summary.append(f"booked {title}")
        else:
            slot = b.slot()
            title = _pick(rng, "Obsolete Standup", "Old Offsite Prep", "Retired Project Sync")
            event = b.event(title, slot, [b.person().email])
            b.event(title.replace("Old ", "New ").replace("Obsolete", "Daily").replace("Retired", "Active"),
                    b.slot(), [b.person().email])  # fmt: skip
            pending.append(("cancel", event, None))
            sentences.append(f"cancel the '{title}' event on {day_label(date.fromisoformat(slot.day))}")
            summary.append(f"cancelled {title}")
    b.shuffle_records()
    for kind, subject, extra in pending:
        if kind == "status":
            b.read("crm", "search_contacts", email=subject["email"])
            b.set_status(subject, extra, "The contact with the given address has the requested CRM status")
        elif kind == "notice":
            text = f"Hi {subject.first}, a note about {extra.lower()}."
            b.send(
                subject.email,
                f"{extra}: please read",
                text,
                "One message to the named colleague alone with the given topic in the subject",
                [extra.lower()],
            )
        elif kind == "meeting":
            title, slot = extra
            b.create_event(
                title,
                slot,
                [p.email for p in subject],
                "One active event with the requested title, time and length whose attendees are exactly "
                "the two named people",
            )
        else:
            day = subject["start"][:10]
            b.read("calendar", "list_events", date_from=f"{day}T00:00:00Z", date_to=f"{day}T23:59:59Z")
            b.cancel(subject, "The named event is cancelled or deleted; its look-alike stays")
    description = "Do all of the following, touching nothing else: " + "; ".join(sentences) + "."
    spec = b.finish(description, "; ".join(summary) + ".")
    spec.clauses = tuple(clause for kind in chosen for clause in CLAUSES[f"part:{kind}"])
    return spec


_PART_TOOL = {"status": "crm", "notice": "mail", "meeting": "calendar", "cancel": "calendar"}

#: composition scenario id -> (tier, number of parts, step limit); listed only when asked for
COMPOSITIONS: dict[str, tuple[str, int, int]] = {
    "composed_pair": ("medium", 2, 24),
    "composed_triple": ("hard", 3, 30),
}
