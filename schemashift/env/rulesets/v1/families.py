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
them) raises `Redraw`, and the caller draws again from the same generator.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from schemashift.env.rulesets.v1.grading import has_phrase

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
#: customers write from personal mailboxes whose names reveal neither their name nor their company
MAIL_PROVIDERS = ("inboxly.net", "postbox.org", "mailfast.io", "zenmail.com", "heymail.net")
HANDLE_WORDS = (
    "amber", "birch", "cedar", "delta", "ember", "fjord", "glade", "harbor", "indigo", "juniper",
    "kestrel", "lumen", "meadow", "nimbus", "orchid", "pebble", "quartz", "raven", "sierra", "tundra",
)  # fmt: skip
TEAMS = ("Platform", "Data", "Design", "Growth", "Support", "Security", "Mobile", "Finance", "Research")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("", "January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")  # fmt: skip
#: the first Monday a split's requests may be dated (the year tells the splits apart)
SPLIT_START = {"test": date(2026, 1, 5), "train": date(2028, 1, 3)}
REQUEST_WEEKS = 46


class Redraw(Exception):
    """The drawn task contradicts itself; draw again from the same generator."""


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
    time: str  # e.g. "10:00 UTC"
    day: str  # ISO date
    minutes: int


def day_label(day: date) -> str:
    return f"{WEEKDAYS[day.weekday()]} {MONTHS[day.month]} {day.day}, {day.year}"


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
    split: str
    domain: str = "company.com"
    used_names: set[str] = field(default_factory=set)
    used_ids: set[str] = field(default_factory=set)
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
    honest_texts: list[tuple[dict[str, Any], str, str]] = field(default_factory=list)
    today: date = SPLIT_START["test"]

    def __post_init__(self) -> None:
        self.today = SPLIT_START[self.split] + timedelta(
            weeks=self.rng.randrange(REQUEST_WEEKS), days=self.rng.randrange(5)
        )

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

    def customer(self, first: str | None = None) -> Person:
        """A customer: a full name and a personal address that does not spell it."""
        rng = self.rng
        while True:
            given = first or rng.choice(FIRST)
            last = rng.choice(LAST)
            handle = f"{rng.choice(HANDLE_WORDS)}.{rng.choice(HANDLE_WORDS)}{rng.randint(10, 99)}"
            email = f"{handle}@{rng.choice(MAIL_PROVIDERS)}"
            if f"{given} {last}" not in self.used_names and email not in self.used_names:
                break
        self.used_names.update((f"{given} {last}", email))
        return Person(given, last, email)

    def record_id(self, prefix: str) -> str:
        """An id no agent can guess: the prefix and five random digits."""
        while True:
            rid = f"{prefix}_{self.rng.randint(10000, 99999)}"
            if rid not in self.used_ids:
                self.used_ids.add(rid)
                return rid

    def companies(self, n: int) -> list[str]:
        return self.rng.sample(COMPANIES, n)

    def day(self, earliest: int = 1, latest: int = 21) -> date:
        """A weekday `earliest`..`latest` days after the request date."""
        day = self.today + timedelta(days=self.rng.randint(earliest, latest))
        if day.weekday() >= 5:
            day += timedelta(days=7 - day.weekday())
        return day

    def slot(
        self, minutes: int | None = None, hours: tuple[int, int] = (9, 16), on: date | None = None
    ) -> Slot:
        rng = self.rng
        minutes = minutes or rng.choice((30, 45, 60))
        return fixed_slot(on or self.day(), rng.randint(*hours), rng.choice((0, 30)), minutes)

    def use(self, *tools: str) -> None:
        for tool in tools:
            if tool not in self.tools:
                self.tools.append(tool)

    def request(self, text: str) -> str:
        return f"Today is {day_label(self.today)}. {text}"

    # -- seeded records ----------------------------------------------------------------------------
    def contact(self, person: Person, company: str, status: str = "active") -> dict[str, Any]:
        record = {
            "contact_id": self.record_id("c"),
            "name": person.name,
            "email": person.email,
            "company": company,
            "status": status,
        }
        self.contacts.append(record)
        return record

    def event(self, title: str, slot: Slot, attendees: list[str]) -> dict[str, Any]:
        record = {
            "event_id": self.record_id("evt"),
            "title": title,
            "start": slot.start,
            "end": slot.end,
            "attendees": list(attendees),
            "location": "",
            "status": "confirmed",
        }
        self.events.append(record)
        return record

    def message(self, sender: str, subject: str, body: str) -> dict[str, Any]:
        record = {
            "message_id": self.record_id("msg"),
            "from": sender,
            "to": [f"me@{self.domain}"],
            "subject": subject,
            "body": body,
            "folder": "inbox",
        }
        self.inbox.append(record)
        return record

    def shuffle_records(self) -> None:
        """Distractors must not sit at predictable positions."""
        self.rng.shuffle(self.contacts)
        self.rng.shuffle(self.events)
        self.rng.shuffle(self.inbox)

    # -- plan steps and their criteria -------------------------------------------------------------
    def read(self, tool: str, endpoint: str, **params: Any) -> None:
        self.use(tool)
        self.ops.append({"tool": tool, "endpoint": endpoint, "params": params})

    def send(
        self,
        to: str,
        subject: str,
        body: str,
        check: str,
        subject_has: list[str],
        body_has: list[str] = (),
        body_lacks: list[str] = (),
    ) -> None:
        """One message to `to` alone; `check` is the criterion text (what is checked, no answers)."""
        self.use("mail")
        self.ops.append(
            {
                "tool": "mail",
                "endpoint": "send_message",
                "params": {"to": to, "subject": subject, "body": body},
            }
        )
        self.recipients[to] = self.recipients.get(to, 0) + 1
        criterion = {
            "kind": "message",
            "to": to,
            "subject_has": list(subject_has),
            "body_has": list(body_has),
            "body_lacks": list(body_lacks),
            "text": check,
        }
        self.criteria.append(criterion)
        self.honest_texts.append((criterion, subject, body))

    def create_event(self, title: str, slot: Slot, attendees: list[str], check: str) -> None:
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
                "text": check,
            }
        )

    def set_status(self, contact: dict[str, Any], status: str, check: str) -> None:
        self.use("crm")
        cid = contact["contact_id"]
        self.ops.append(
            {"tool": "crm", "endpoint": "update_contact", "params": {"contact_id": cid, "status": status}}
        )
        self.mutable.setdefault(cid, []).append("status")
        self.criteria.append({"kind": "contact_status", "contact_id": cid, "status": status, "text": check})

    def cancel(self, event: dict[str, Any], check: str) -> None:
        self.use("calendar")
        eid = event["event_id"]
        self.ops.append({"tool": "calendar", "endpoint": "delete_event", "params": {"event_id": eid}})
        self.deletable.add(eid)
        self.mutable.setdefault(eid, []).append("status")
        self.criteria.append({"kind": "event_cancelled", "event_id": eid, "text": check})

    def summary_criterion(self, has: list[str], lacks: list[str], check: str) -> None:
        self.criteria.append({"kind": "summary", "has": has, "lacks": lacks, "text": check})

    def finish(self, description: str, summary: str) -> FamilySpec:
        self._check_consistent(summary)
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
        return FamilySpec(
            self.request(description), tools, seed_data, self.criteria, self.ops, summary, allowed
        )

    def _check_consistent(self, summary: str) -> None:
        """Redraw a task whose honest messages or summary would fail its own criteria."""
        for criterion, subject, body in self.honest_texts:
            if not (
                all(has_phrase(subject, s) for s in criterion["subject_has"])
                and all(has_phrase(body, s) for s in criterion["body_has"])
                and not any(has_phrase(body, s) for s in criterion["body_lacks"])
            ):
                raise Redraw(f"message criterion contradicts itself: {criterion}")
        for criterion in self.criteria:
            if criterion["kind"] == "summary" and not (
                all(has_phrase(summary, s) for s in criterion["has"])
                and not any(has_phrase(summary, s) for s in criterion["lacks"])
            ):
                raise Redraw(f"summary criterion contradicts itself: {criterion}")


def fixed_slot(day: date, hour: int, minute: int, minutes: int) -> Slot:
    iso = day.isoformat()
    start_min = hour * 60 + minute
    end_min = start_min + minutes
    time = f"{hour:02d}:{minute:02d} UTC"
    return Slot(
        f"{iso}T{hour:02d}:{minute:02d}:00Z",
        f"{iso}T{end_min // 60:02d}:{end_min % 60:02d}:00Z",
        f"{day_label(day)} at {time}",
        time,
        iso,
        minutes,
    )


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


# -- the six families -----------------------------------------------------------------------------
def onboard_new_hire(b: Builder) -> FamilySpec:
    """HR's message in the inbox holds the hire's address and names their manager."""
    rng = b.rng
    b.domain = rng.choice(INTERNAL_DOMAINS)
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
            "time in the body",
            ["welcome"],
            [slot.time.split()[0]],
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


def meeting_invite_blast(b: Builder) -> FamilySpec:
    """The roster is in the inbox, and so is an out-of-office reply from one member."""
    rng = b.rng
    b.domain = rng.choice(INTERNAL_DOMAINS)
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


def customer_escalation(b: Builder) -> FamilySpec:
    rng = b.rng
    b.domain = rng.choice(INTERNAL_DOMAINS)
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


def weekly_report(b: Builder) -> FamilySpec:
    rng = b.rng
    b.domain = rng.choice(INTERNAL_DOMAINS)
    company, *others = b.companies(3)
    active = [b.contact(b.customer(), company, "active") for _ in range(rng.randint(2, 4))]
    inactive = [b.contact(b.customer(), company, "inactive") for _ in range(rng.randint(1, 2))]
    for other in others:
        b.contact(b.customer(), other, "active")
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
        [c["name"] for c in inactive],
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


def event_cleanup(b: Builder) -> FamilySpec:
    rng = b.rng
    b.domain = rng.choice(INTERNAL_DOMAINS)
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
    b.domain = rng.choice(INTERNAL_DOMAINS)
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
    return b.finish(description, "; ".join(summary) + ".")


_PART_TOOL = {"status": "crm", "notice": "mail", "meeting": "calendar", "cancel": "calendar"}

#: family id -> (tier, builder, step limit, tools)
FAMILIES: dict[str, tuple[str, Any, int, tuple[str, ...]]] = {
    "onboard_new_hire": ("easy", onboard_new_hire, 20, ("mail", "calendar")),
    "meeting_invite_blast": ("easy", meeting_invite_blast, 26, ("mail",)),
    "customer_lookup": ("easy", customer_lookup, 20, ("crm",)),
    "customer_escalation": ("medium", customer_escalation, 24, ("mail", "calendar", "crm")),
    "weekly_report": ("medium", weekly_report, 22, ("mail", "calendar", "crm")),
    "event_cleanup": ("medium", event_cleanup, 26, ("mail", "calendar")),
}
#: composition scenario id -> (tier, number of parts, step limit); listed only when asked for
COMPOSITIONS: dict[str, tuple[str, int, int]] = {
    "composed_pair": ("medium", 2, 24),
    "composed_triple": ("hard", 3, 30),
}
