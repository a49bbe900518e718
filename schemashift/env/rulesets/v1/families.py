"""v1 scenario families: templates with procedural variants, and generated cross-tool compositions.

A family builder draws, from its own `random.Random`, the people, companies, dates, wording and
distractor records of one task, and states what success means as checkable criteria on the
final world (see `grading.py`), what collateral damage is (who may be mailed or invited, which
records may change) and the canonical plan: the calls that solve the task on the documented API.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

FIRST = (
    "Priya", "Alex", "Jordan", "Sam", "Taylor", "Morgan", "Casey", "Riley", "Avery", "Quinn",
    "Harper", "Rowan", "Elena", "Mateo", "Aisha", "Kenji", "Lena", "Omar", "Sofia", "Noah",
    "Maya", "Luca", "Zara", "Ivan", "Chloe", "Diego", "Hana", "Felix", "Nora", "Tariq",
    "Ines", "Oscar", "Leila", "Pavel", "Grace", "Ravi", "Yara", "Bruno", "Mei", "Ezra",
)  # fmt: skip
LAST = (
    "Sharma", "Nguyen", "Taylor", "Davis", "Okafor", "Kowalski", "Haddad", "Lindqvist", "Moreau",
    "Tanaka", "Silva", "Mensah", "Novak", "Rossi", "Fischer", "Kim", "Patel", "Garcia", "Ahmed",
    "Costa", "Brennan", "Ivanova", "Laurent", "Yilmaz", "Andersen", "Murphy", "Castillo", "Weber",
    "Dubois", "Horvat", "Mwangi", "Sato", "Ortiz", "Berg", "Quist", "Romano", "Schmidt", "Lopez",
)  # fmt: skip
COMPANIES = (
    "Globex Industries", "Acme Corp", "Initech", "Umbrella Health", "Stark Logistics", "Wayne Foods",
    "Hooli Cloud", "Vandelay Imports", "Soylent Labs", "Cyberdyne Energy", "Tyrell Bio", "Wonka Retail",
    "Oscorp Media", "Nakatomi Trading", "Massive Dynamic", "Pied Piper", "Gringotts Finance",
    "Monarch Travel", "Aperture Devices", "Blue Sun Mining", "Dunder Paper", "Sirius Robotics",
)  # fmt: skip
INTERNAL_DOMAINS = ("company.com", "northwind.io", "contoso.dev", "fabrikam.net", "tailspin.co")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("", "January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")  # fmt: skip
FIRST_DAY = date(2026, 4, 6)


@dataclass(frozen=True)
class Person:
    first: str
    last: str
    email: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


@dataclass(frozen=True)
class Slot:
    start: str
    end: str
    label: str  # e.g. "Monday April 27, 2026 at 10:00 UTC"
    day: str  # ISO date
    minutes: int


@dataclass
class FamilySpec:
    """Everything a family builder draws for one task instance."""

    description: str
    tools: tuple[str, ...]
    seed_data: dict[str, dict[str, Any]]
    criteria: list[dict[str, Any]]
    ops: list[dict[str, Any]]
    summary: str
    allowed: dict[str, Any]


@dataclass
class Builder:
    """Accumulates one task: its world, sentences, plan, criteria and collateral-damage rules."""

    rng: random.Random
    domain: str = "company.com"
    used_names: set[str] = field(default_factory=set)
    contacts: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    inbox: list[dict[str, Any]] = field(default_factory=list)
    tools: list[str] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    criteria: list[dict[str, Any]] = field(default_factory=list)
    recipients: dict[str, int] = field(default_factory=dict)
    people: set[str] = field(default_factory=set)
    mutable: dict[str, list[str]] = field(default_factory=dict)
    deletable: set[str] = field(default_factory=set)
    titles: dict[str, int] = field(default_factory=dict)

    # -- entities ----------------------------------------------------------------------------------
    def person(self, domain: str | None = None, first: str | None = None) -> Person:
        rng = self.rng
        dom = domain or self.domain
        while True:
            given = first or rng.choice(FIRST)
            last = rng.choice(LAST)
            local = rng.choice((given, f"{given}.{last}", f"{given[0]}{last}")).lower()
            email = f"{local}@{dom}"
            if f"{given} {last}" not in self.used_names and email not in self.used_names:
                break
        self.used_names.update((f"{given} {last}", email))
        return Person(given, last, email)

    def companies(self, n: int) -> list[str]:
        return self.rng.sample(COMPANIES, n)

    def slot(self, minutes: int | None = None, hours: tuple[int, int] = (9, 16)) -> Slot:
        rng = self.rng
        day = FIRST_DAY + timedelta(days=rng.randrange(7 * 10))
        if day.weekday() >= 5:
            day += timedelta(days=7 - day.weekday())
        hour, minute = rng.randint(*hours), rng.choice((0, 30))
        minutes = minutes or rng.choice((30, 45, 60))
        start_min = hour * 60 + minute
        end_min = start_min + minutes
        iso = day.isoformat()
        start = f"{iso}T{hour:02d}:{minute:02d}:00Z"
        end = f"{iso}T{end_min // 60:02d}:{end_min % 60:02d}:00Z"
        weekday, month = WEEKDAYS[day.weekday()], MONTHS[day.month]
        label = f"{weekday} {month} {day.day}, {day.year} at {hour:02d}:{minute:02d} UTC"
        return Slot(start, end, label, iso, minutes)

    def use(self, *tools: str) -> None:
        for tool in tools:
            if tool not in self.tools:
                self.tools.append(tool)

    # -- seeded records ----------------------------------------------------------------------------
    def contact(self, person: Person, company: str, status: str = "active") -> dict[str, Any]:
        record = {
            "contact_id": f"c_{len(self.contacts) + 1}",
            "name": person.name,
            "email": person.email,
            "company": company,
            "status": status,
        }
        self.contacts.append(record)
        return record

    def event(self, title: str, slot: Slot, attendees: list[str]) -> dict[str, Any]:
        record = {
            "event_id": f"evt_{len(self.events) + 1}",
            "title": title,
            "start": slot.start,
            "end": slot.end,
            "attendees": list(attendees),
            "location": "",
            "status": "confirmed",
        }
        self.events.append(record)
        return record

    def shuffle_records(self) -> None:
        """Distractors must not sit at predictable positions; ids follow the shuffled order."""
        self.rng.shuffle(self.contacts)
        for i, c in enumerate(self.contacts, 1):
            c["contact_id"] = f"c_{i}"
        self.rng.shuffle(self.events)
        for i, e in enumerate(self.events, 1):
            e["event_id"] = f"evt_{i}"

    # -- plan steps and their criteria -------------------------------------------------------------
    def read(self, tool: str, endpoint: str, **params: Any) -> None:
        self.use(tool)
        self.ops.append({"tool": tool, "endpoint": endpoint, "params": params})

    def send(
        self,
        to: str,
        subject: str,
        body: str,
        subject_has: list[str],
        body_has: list[str] = (),
        body_lacks: list[str] = (),
    ) -> None:
        self.use("mail")
        self.ops.append(
            {
                "tool": "mail",
                "endpoint": "send_message",
                "params": {"to": to, "subject": subject, "body": body},
            }
        )
        self.recipients[to] = self.recipients.get(to, 0) + 1
        self.criteria.append(
            {
                "kind": "message",
                "to": to,
                "subject_has": list(subject_has),
                "body_has": list(body_has),
                "body_lacks": list(body_lacks),
                "text": f"Exactly one message to {to} whose subject contains "
                + " and ".join(repr(s) for s in subject_has)
                + (f" and whose body mentions {', '.join(body_has)}" if body_has else "")
                + (f" but not {', '.join(body_lacks)}" if body_lacks else ""),
            }
        )

    def create_event(self, title: str, slot: Slot, attendees: list[str]) -> None:
        self.use("calendar")
        self.ops.append(
            {
                "tool": "calendar",
                "endpoint": "create_event",
                "params": {
                    "title": title,
                    "start": slot.start,
                    "end": slot.end,
                    "attendees": list(attendees),
                },
            }
        )
        self.people.update(attendees)
        self.titles[title.lower()] = self.titles.get(title.lower(), 0) + 1
        self.criteria.append(
            {
                "kind": "event",
                "title": title,
                "start": slot.start,
                "end": slot.end,
                "attendees": sorted(attendees),
                "text": f"One active event '{title}' from {slot.start} to {slot.end} with exactly "
                f"{', '.join(sorted(attendees))}",
            }
        )

    def set_status(self, contact: dict[str, Any], status: str) -> None:
        self.use("crm")
        cid = contact["contact_id"]
        self.ops.append(
            {"tool": "crm", "endpoint": "update_contact", "params": {"contact_id": cid, "status": status}}
        )
        self.mutable.setdefault(cid, []).append("status")
        self.criteria.append(
            {
                "kind": "contact_status",
                "contact_id": cid,
                "status": status,
                "text": f"CRM contact {contact['name']} ({contact['email']}) has status '{status}'",
            }
        )

    def cancel(self, event: dict[str, Any]) -> None:
        self.use("calendar")
        eid = event["event_id"]
        self.ops.append({"tool": "calendar", "endpoint": "delete_event", "params": {"event_id": eid}})
        self.deletable.add(eid)
        self.mutable.setdefault(eid, []).append("status")
        self.criteria.append(
            {
                "kind": "event_cancelled",
                "event_id": eid,
                "text": f"Event '{event['title']}' on {event['start'][:10]} is deleted or cancelled",
            }
        )

    def summary_criterion(self, has: list[str], lacks: list[str], what: str) -> None:
        self.criteria.append({"kind": "summary", "has": has, "lacks": lacks, "text": what})

    def finish(self, description: str, summary: str) -> FamilySpec:
        seed_data: dict[str, dict[str, Any]] = {}
        for tool in self.tools:
            if tool == "mail":
                seed_data["mail"] = {"messages": self.inbox}
            elif tool == "calendar":
                seed_data["calendar"] = {"events": self.events}
            else:
                seed_data["crm"] = {"contacts": self.contacts}
        allowed = {
            "recipients": self.recipients,
            "people": sorted(self.people),
            "mutable": self.mutable,
            "deletable": sorted(self.deletable),
            "titles": self.titles,
        }
        order = {"mail": 0, "calendar": 1, "crm": 2}
        tools = tuple(sorted(self.tools, key=order.__getitem__))
        return FamilySpec(description, tools, seed_data, self.criteria, self.ops, summary, allowed)


def _pick(rng: random.Random, *options: str) -> str:
    return rng.choice(options)


def _seed_distractor_events(b: Builder, n: int, titles: tuple[str, ...], people: list[str]) -> None:
    for title in b.rng.sample(titles, n):
        b.event(title, b.slot(), b.rng.sample(people, min(2, len(people))))


COMMON_EVENTS = (
    "Design Review",
    "1:1 Check-in",
    "Sprint Planning",
    "Budget Sync",
    "Team Lunch",
    "Hiring Panel",
)


# -- the six families -----------------------------------------------------------------------------
def onboard_new_hire(rng: random.Random) -> FamilySpec:
    b = Builder(rng, rng.choice(INTERNAL_DOMAINS))
    hire, manager, later = b.person(), b.person(), b.person()
    slot = b.slot(minutes=rng.choice((30, 60)))
    title = _pick(
        rng, "New Hire Orientation", "Onboarding Session", "Welcome Orientation", "First-Day Kickoff"
    )
    b.use("mail", "calendar")
    _seed_distractor_events(b, rng.randint(2, 3), COMMON_EVENTS, [manager.email, later.email])
    b.event(f"{title} (previous cohort)", b.slot(), [later.email])
    b.shuffle_records()
    if rng.random() < 0.5:
        b.read("calendar", "list_events", date_from=f"{slot.day}T00:00:00Z", date_to=f"{slot.day}T23:59:59Z")
    steps = [
        lambda: b.send(
            hire.email,
            f"Welcome to the team, {hire.first}!",
            f"Hi {hire.first}, welcome aboard! Your {title} is on {slot.label}.",
            ["welcome"],
        ),
        lambda: b.create_event(title, slot, [hire.email, manager.email]),
    ]
    rng.shuffle(steps)
    for plan_step in steps:
        plan_step()
    opener = _pick(
        rng,
        f"{hire.name} ({hire.email}) joins the team on {slot.label[: slot.label.index(' at ')]}.",
        f"Our new colleague {hire.name} starts soon; their address is {hire.email}.",
    )
    description = (
        f"{opener} Send {hire.first} a welcome email at {hire.email} with 'welcome' in the subject. "
        f"Then create a calendar event titled '{title}' on {slot.label} lasting {slot.minutes} minutes, "
        f"inviting exactly {hire.first} and their manager {manager.name} ({manager.email}). "
        f"{later.name} ({later.email}) starts next month: do not contact or invite them yet."
    )
    return b.finish(description, f"Welcomed {hire.name} and scheduled '{title}' with {manager.name}.")


def meeting_invite_blast(rng: random.Random) -> FamilySpec:
    b = Builder(rng, rng.choice(INTERNAL_DOMAINS))
    n = rng.randint(3, 5)
    team = [b.person() for _ in range(n)]
    on_leave = b.person()
    meeting = _pick(rng, "All-Hands", "Town Hall", "Quarterly Kickoff", "Team Sync", "Roadmap Review")
    slot = b.slot()
    when = slot.label
    agenda = _pick(
        rng, "quarterly goals and Q&A", "team updates and demos", "the hiring plan", "roadmap priorities"
    )
    b.use("mail")
    b.inbox.append(
        {
            "message_id": "msg_1",
            "from": on_leave.email,
            "to": [f"me@{b.domain}"],
            "subject": "Out of office",
            "body": f"I am on leave until next month. - {on_leave.first}",
            "folder": "inbox",
        }
    )
    time_text = when[when.index(" at ") + 4 :]
    if rng.random() < 0.5:
        b.read("mail", "list_messages", folder="inbox")
    for person in team:
        b.send(
            person.email,
            f"{meeting}: {when}",
            f"Hi {person.first}, the {meeting} is on {when}. Agenda: {agenda}.",
            [meeting.lower()],
            [time_text.lower()],
        )
    listing = ", ".join(p.email for p in team)
    description = (
        f"Send an invitation email for the {meeting} on {when} to each of these team members, one message "
        f"per person: {listing}. The subject must contain '{meeting}' and the body must state the time "
        f"({time_text}) and the agenda ({agenda}). {on_leave.name} ({on_leave.email}) is on leave: do not "
        "email them."
    )
    return b.finish(description, f"Sent the {meeting} invitation to {n} team members.")


CUSTOMER_STATUSES = ("support_in_progress", "awaiting_customer", "escalated_tier2", "renewal_review")


def _customers(b: Builder, n_distractors: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A target customer plus distractors that share a first name, a company or an email domain."""
    rng = b.rng
    companies = b.companies(n_distractors + 1)
    target_company = companies[0]
    domain = target_company.split()[0].lower() + ".com"
    target_person = b.person(domain)
    target = b.contact(target_person, target_company)
    others = []
    for i in range(n_distractors):
        style = i % 3
        if style == 0:  # same first name, other company
            person = b.person(companies[i + 1].split()[0].lower() + ".com", first=target_person.first)
            others.append(b.contact(person, companies[i + 1]))
        elif style == 1:  # same company, other person
            others.append(b.contact(b.person(domain), target_company, rng.choice(("active", "inactive"))))
        else:  # unrelated
            person = b.person(companies[i + 1].split()[0].lower() + ".io")
            others.append(b.contact(person, companies[i + 1], rng.choice(("active", "inactive"))))
    return target, others


def customer_lookup(rng: random.Random) -> FamilySpec:
    b = Builder(rng)
    target, others = _customers(b, rng.randint(3, 5))
    status = rng.choice(CUSTOMER_STATUSES)
    b.shuffle_records()
    email = target["email"]
    b.read("crm", "search_contacts", email=email)
    b.read("crm", "get_contact", contact_id=target["contact_id"])
    b.set_status(target, status)
    if rng.random() < 0.5:
        b.read("crm", "get_contact", contact_id=target["contact_id"])
    wrong = sorted({c["company"] for c in others} - {target["company"]})
    b.summary_criterion(
        [target["company"].lower()],
        [w.lower() for w in wrong],
        f"The completion summary names the customer's company ({target['company']}) and no other company",
    )
    description = _pick(
        rng,
        f"A customer wrote to support from {email}. Look them up in the CRM by that email, retrieve their "
        f"full contact record and set their status to '{status}'. Name their company in your final summary.",
        f"Support ticket from {email}: find this contact in the CRM by email, open the full record, change "
        f"the status to '{status}' and report the contact's company when you complete the task.",
    )
    return b.finish(description, f"{target['name']} ({email}) is now {status}. Company: {target['company']}.")


def customer_escalation(rng: random.Random) -> FamilySpec:
    b = Builder(rng, rng.choice(INTERNAL_DOMAINS))
    target, _ = _customers(b, rng.randint(2, 4))
    manager = b.person()
    status = rng.choice(("vip_escalation", "retention_risk", "priority_care"))
    slot = b.slot(minutes=30, hours=(9, 15))
    title = f"Check-in call: {target['name']}"
    b.use("mail", "calendar")
    _seed_distractor_events(b, 2, COMMON_EVENTS, [manager.email])
    b.shuffle_records()
    b.read("crm", "search_contacts", email=target["email"])
    b.set_status(target, status)
    first = target["name"].split()[0]
    b.send(
        target["email"],
        f"Priority Support \u2014 {target['name']}",
        f"Hi {first}, we value {target['company']} and want to make this right. Let's talk on {slot.label}.",
        ["priority support", target["name"].lower()],
    )
    b.create_event(title, slot, [target["email"], manager.email])
    description = (
        f"The VIP customer {target['email']} has escalated: their subscription is about to lapse. Look them "
        f"up in the CRM, set their status to '{status}', send them one retention email with the subject "
        f"'Priority Support \u2014 <their full name>', and schedule a 30-minute event titled "
        f"'Check-in call: <their full name>' on {slot.label} with exactly the customer and the account "
        f"manager {manager.name} ({manager.email})."
    )
    return b.finish(
        description, f"Escalated {target['name']} ({target['company']}), emailed and booked the call."
    )


def weekly_report(rng: random.Random) -> FamilySpec:
    b = Builder(rng, rng.choice(INTERNAL_DOMAINS))
    company, *others = b.companies(3)
    domain = company.split()[0].lower() + ".com"
    active = [b.contact(b.person(domain), company, "active") for _ in range(rng.randint(2, 4))]
    inactive = [b.contact(b.person(domain), company, "inactive") for _ in range(rng.randint(1, 2))]
    for other in others:
        b.contact(b.person(other.split()[0].lower() + ".com"), other, "active")
    leads = [b.person(), b.person()]
    report_to = f"{_pick(rng, 'sales-leads', 'account-team', 'revenue-ops')}@{b.domain}"
    slot = b.slot(minutes=rng.choice((30, 60)))
    title = _pick(rng, "Weekly Report Review", "Pipeline Review", "Account Health Review")
    b.use("mail", "calendar")
    _seed_distractor_events(b, 2, COMMON_EVENTS, [p.email for p in leads])
    b.shuffle_records()
    b.read("crm", "search_contacts", company=company, status="active")
    names = [c["name"] for c in active]
    b.send(
        report_to,
        f"Weekly Active Contacts Report \u2014 {company}",
        f"Active {company} contacts this week: {', '.join(names)}.",
        ["weekly", company.lower()],
        [n.lower() for n in names],
        [c["name"].lower() for c in inactive],
    )
    b.create_event(title, slot, [p.email for p in leads])
    description = (
        f"Prepare the weekly report for {company}: pull the {company} contacts whose status is active from "
        f"the CRM and email {report_to} one message with a subject containing 'Weekly' and '{company}' that "
        f"lists the full names of the active contacts only. Then schedule '{title}' on {slot.label} for "
        f"{slot.minutes} minutes with exactly the sales leads {leads[0].name} ({leads[0].email}) and "
        f"{leads[1].name} ({leads[1].email})."
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


def event_cleanup(rng: random.Random) -> FamilySpec:
    b = Builder(rng, rng.choice(INTERNAL_DOMAINS))
    lead, *team = (b.person() for _ in range(4))
    pairs = rng.sample(CLEANUP_TITLES, 2)
    week = b.slot()
    day0 = date.fromisoformat(week.day)
    monday = day0 - timedelta(days=day0.weekday())
    targets = []
    for i, (cancel_title, keep_title) in enumerate(pairs):
        day = (monday + timedelta(days=i)).isoformat()
        hour = rng.randint(9, 15)
        target_slot = _fixed_slot(day, hour, 60)
        targets.append(b.event(cancel_title, target_slot, [lead.email]))
        b.event(keep_title, _fixed_slot(day, hour + 1, 60), [lead.email, team[i].email])
    b.event(
        rng.choice(COMMON_EVENTS),
        _fixed_slot((monday + timedelta(days=2)).isoformat(), 11, 30),
        [team[2].email],
    )
    friday = (monday + timedelta(days=4)).isoformat()
    wrap = _fixed_slot(friday, rng.choice((15, 16)), rng.choice((30, 60)))
    wrap_title = _pick(rng, "Friday Wrap-up", "Week Wrap-up", "End-of-Week Retro")
    notify = f"{_pick(rng, 'team-all', 'eng-team', 'everyone')}@{b.domain}"
    b.use("calendar", "mail")
    b.shuffle_records()
    b.read(
        "calendar", "list_events", date_from=f"{monday.isoformat()}T00:00:00Z", date_to=f"{friday}T23:59:59Z"
    )
    for target in targets:
        b.cancel(target)
    b.create_event(wrap_title, wrap, [lead.email])
    b.send(
        notify,
        f"Calendar Updated \u2014 {wrap_title} Added",
        f"Cancelled {pairs[0][0]} and {pairs[1][0]}; added {wrap_title} on {wrap.label}.",
        ["calendar updated"],
        [pairs[0][0].lower(), pairs[1][0].lower()],
    )
    description = (
        f"Calendar cleanup for the week of {monday.isoformat()}: find and cancel (or delete) the "
        f"'{pairs[0][0]}' and '{pairs[1][0]}' events, leaving every other event as it is (note "
        f"'{pairs[0][1]}' and '{pairs[1][1]}' stay). Create '{wrap_title}' on {wrap.label} for "
        f"{wrap.minutes} minutes with exactly the team lead {lead.name} ({lead.email}). Then email {notify} "
        f"one message with a subject containing 'Calendar Updated' that names both cancelled events."
    )
    return b.finish(
        description, f"Cancelled {pairs[0][0]} and {pairs[1][0]}, added {wrap_title}, notified {notify}."
    )


def _fixed_slot(day: str, hour: int, minutes: int) -> Slot:
    end = hour * 60 + minutes
    d = date.fromisoformat(day)
    label = f"{WEEKDAYS[d.weekday()]} {MONTHS[d.month]} {d.day}, {d.year} at {hour:02d}:00 UTC"
    return Slot(f"{day}T{hour:02d}:00:00Z", f"{day}T{end // 60:02d}:{end % 60:02d}:00Z", label, day, minutes)


# -- generated compositions -----------------------------------------------------------------------
def composition(rng: random.Random, parts: int) -> FamilySpec:
    """`parts` atomic subtasks drawn across tools (status update, notice, meeting, cancellation)."""
    b = Builder(rng, rng.choice(INTERNAL_DOMAINS))
    kinds = ["status", "notice", "meeting", "cancel"]
    chosen = rng.sample(kinds, parts)
    while len({_PART_TOOL[k] for k in chosen}) < 2:
        chosen = rng.sample(kinds, parts)
    sentences, summary = [], []
    pending = []
    for kind in chosen:
        if kind == "status":
            target, _ = _customers(b, 3)
            status = rng.choice(CUSTOMER_STATUSES)
            pending.append(("status", target, status))
            sentences.append(f"set the CRM status of the contact with email {target['email']} to '{status}'")
            summary.append(f"{target['name']} is {status}")
        elif kind == "notice":
            person = b.person()
            topic = _pick(rng, "Office closure", "Security training", "Expense deadline", "Parking changes")
            pending.append(("notice", person, topic))
            sentences.append(
                f"email {person.name} ({person.email}) one message with '{topic}' in the subject"
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
            sentences.append(f"cancel the '{title}' event on {slot.day}")
            summary.append(f"cancelled {title}")
    b.shuffle_records()
    for kind, subject, extra in pending:
        if kind == "status":
            b.read("crm", "search_contacts", email=subject["email"])
            b.set_status(subject, extra)
        elif kind == "notice":
            text = f"Hi {subject.first}, a note about {extra.lower()}."
            b.send(subject.email, f"{extra}: please read", text, [extra.lower()])
        elif kind == "meeting":
            title, slot = extra
            b.create_event(title, slot, [p.email for p in subject])
        else:
            b.read("calendar", "list_events", date_from=f"{subject['start'][:10]}T00:00:00Z",
                   date_to=f"{subject['start'][:10]}T23:59:59Z")  # fmt: skip
            b.cancel(subject)
    description = "Do all of the following, touching nothing else: " + "; ".join(sentences) + "."
    return b.finish(description, "; ".join(summary) + ".")


_PART_TOOL = {"status": "crm", "notice": "mail", "meeting": "calendar", "cancel": "calendar"}

#: family id -> (tier, builder, step limit, tools)
FAMILIES: dict[str, tuple[str, Any, int, tuple[str, ...]]] = {
    "onboard_new_hire": ("easy", onboard_new_hire, 14, ("mail", "calendar")),
    "meeting_invite_blast": ("easy", meeting_invite_blast, 16, ("mail",)),
    "customer_lookup": ("easy", customer_lookup, 14, ("crm",)),
    "customer_escalation": ("medium", customer_escalation, 20, ("mail", "calendar", "crm")),
    "weekly_report": ("medium", weekly_report, 18, ("mail", "calendar", "crm")),
    "event_cleanup": ("medium", event_cleanup, 22, ("mail", "calendar")),
}
#: composition scenario id -> (tier, number of parts, step limit); listed only when asked for
COMPOSITIONS: dict[str, tuple[str, int, int]] = {
    "composed_pair": ("medium", 2, 20),
    "composed_triple": ("hard", 3, 26),
}
