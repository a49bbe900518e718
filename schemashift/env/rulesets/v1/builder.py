"""The machinery v1 families draw a task with: name pools, people, time slots and the `Builder`.

A `Builder` holds one task's generator and accumulates, as a family draws them, its world (contacts,
events, inbox), its sentences, the documented plan (`read`, `send`, `create_event`, `set_status`,
`cancel`), the checkable criteria each plan step states and the collateral-damage rules; `finish`
returns the `FamilySpec`, or raises `Redraw` when the task's honest texts would fail its own
criteria. Every request is dated in its split's year (test 2026, train 2028 onwards).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import date, timedelta
from functools import lru_cache
from typing import Any, NamedTuple

from schemashift.env.frozen import FrozenDict, FrozenList
from schemashift.env.rulesets.v1.grading import message_text_ok, summary_text_ok

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
#: a colleague's address forms: the first name, first.last, or initial and last name
ADDRESS_FORMS = (0, 1, 2)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
MONTHS = ("", "January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December")  # fmt: skip
#: the first Monday a split's requests may be dated (the year tells the splits apart)
SPLIT_START = {"test": date(2026, 1, 5), "train": date(2028, 1, 3)}
REQUEST_WEEKS = 46
#: split -> week -> weekday -> the request date: every date a task may be requested on
REQUEST_DAYS = {
    split: tuple(
        tuple(first + timedelta(weeks=week, days=day) for day in range(5)) for week in range(REQUEST_WEEKS)
    )
    for split, first in SPLIT_START.items()
}


class Redraw(Exception):
    """The drawn task contradicts itself; draw again from the same generator."""


# Person and Slot are named tuples, not frozen dataclasses: a task draws a dozen of them, and a
# frozen dataclass spends a Python-level setattr per field on building one.
class Person(NamedTuple):
    first: str
    last: str
    email: str

    @property
    def name(self) -> str:
        return f"{self.first} {self.last}"


class Slot(NamedTuple):
    start: str
    end: str
    label: str  # e.g. "Monday April 27, 2026 at 10:00 UTC"
    time: str  # e.g. "10:00 UTC"
    day: str  # ISO date
    minutes: int


@lru_cache(maxsize=1024)
def day_label(day: date) -> str:
    """The day as texts write it; cached, since a split has a few hundred days to name."""
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
    #: each clause of the task text and the check that grades it (`clauses.CLAUSES`)
    clauses: tuple[Any, ...] = ()


class Builder:
    """Accumulates one task: its world, sentences, plan, criteria and collateral-damage rules.

    A plain class with slots: every fresh episode builds one, and a dataclass's generated
    `__init__` tested each of its thirteen default factories first."""

    __slots__ = (
        "rng",
        "split",
        "domain",
        "used_names",
        "used_ids",
        "contacts",
        "events",
        "inbox",
        "tools",
        "ops",
        "criteria",
        "recipients",
        "people",
        "mutable",
        "deletable",
        "titles",
        "invitations",
        "honest_texts",
        "today",
    )

    def __init__(self, rng: random.Random, split: str) -> None:
        self.rng = rng
        self.split = split
        self.domain = "company.com"
        self.used_names: set[str] = set()
        self.used_ids: set[str] = set()
        self.contacts: list[dict[str, Any]] = []
        self.events: list[dict[str, Any]] = []
        self.inbox: list[dict[str, Any]] = []
        self.tools: list[str] = []
        self.ops: list[dict[str, Any]] = []
        self.criteria: list[dict[str, Any]] = []
        self.recipients: dict[str, int] = {}
        self.people: set[str] = set()
        self.mutable: dict[str, list[str]] = {}
        self.deletable: set[str] = set()
        self.titles: dict[str, int] = {}
        self.invitations: dict[str, dict[str, int]] = {}
        self.honest_texts: list[tuple[dict[str, Any], str, str]] = []
        # The request date; randint(0, n - 1) draws what randrange(n) draws, in one Python frame.
        week = rng.randint(0, REQUEST_WEEKS - 1)
        self.today: date = REQUEST_DAYS[split][week][rng.randint(0, 4)]

    # -- entities ----------------------------------------------------------------------------------
    def person(self, domain: str | None = None, first: str | None = None) -> Person:
        rng = self.rng
        dom = domain or self.domain
        used = self.used_names
        while True:
            given = first or rng.choice(FIRST)
            last = rng.choice(LAST)
            # The address form drawn as a choice among the three forms, only the drawn one written.
            form = rng.choice(ADDRESS_FORMS)
            local = given if form == 0 else f"{given}.{last}" if form == 1 else given[0] + last
            name = f"{given} {last}"
            email = f"{local.lower()}@{dom}"
            if name not in used and email not in used:
                break
        used.add(name)
        used.add(email)
        return Person(given, last, email)

    def customer(self, first: str | None = None) -> Person:
        """A customer: a full name and a personal address that does not spell it."""
        rng = self.rng
        used = self.used_names
        while True:
            given = first or rng.choice(FIRST)
            last = rng.choice(LAST)
            handle = f"{rng.choice(HANDLE_WORDS)}.{rng.choice(HANDLE_WORDS)}{rng.randint(10, 99)}"
            email = f"{handle}@{rng.choice(MAIL_PROVIDERS)}"
            name = f"{given} {last}"
            if name not in used and email not in used:
                break
        used.add(name)
        used.add(email)
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

    def internal_domain(self) -> None:
        """Draw the company domain the task's colleagues work at (`person` addresses them there)."""
        self.domain = self.rng.choice(INTERNAL_DOMAINS)

    def use(self, *tools: str) -> None:
        for tool in tools:
            if tool not in self.tools:
                self.tools.append(tool)

    def request(self, text: str) -> str:
        return f"Today is {day_label(self.today)}. {text}"

    # -- seeded records ----------------------------------------------------------------------------
    # Seeded records are read-only from the start: every episode of the task starts its world
    # from them as they are (v1 tools write by replacing a record, never by changing one).
    def contact(self, person: Person, company: str, status: str = "active") -> dict[str, Any]:
        record = FrozenDict(
            contact_id=self.record_id("c"),
            name=person.name,
            email=person.email,
            company=company,
            status=status,
        )
        self.contacts.append(record)
        return record

    def event(self, title: str, slot: Slot, attendees: list[str]) -> dict[str, Any]:
        record = FrozenDict(
            event_id=self.record_id("evt"),
            title=title,
            start=slot.start,
            end=slot.end,
            attendees=FrozenList(attendees),
            location="",
            status="confirmed",
        )
        self.events.append(record)
        return record

    def message(self, sender: str, subject: str, body: str) -> dict[str, Any]:
        record = FrozenDict(
            {
                "message_id": self.record_id("msg"),
                "from": sender,
                "to": FrozenList([f"me@{self.domain}"]),
                "subject": subject,
                "body": body,
                "folder": "inbox",
            }
        )
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
        lacks: list[str] = (),
        body_any: list[list[str]] = (),
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
            "body_any": [list(group) for group in body_any],
            "lacks": list(lacks),
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
        invited = self.invitations.setdefault(title.lower(), {})
        for person in attendees:
            invited[person] = invited.get(person, 0) + 1
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
            "invitations": self.invitations,
        }
        order = {"mail": 0, "calendar": 1, "crm": 2}
        tools = tuple(sorted(self.tools, key=order.__getitem__))
        return FamilySpec(
            self.request(description), tools, seed_data, self.criteria, self.ops, summary, allowed
        )

    def _check_consistent(self, summary: str) -> None:
        """Redraw a task whose honest messages or summary would fail its own criteria."""
        for criterion, subject, body in self.honest_texts:
            if not message_text_ok(criterion, subject, body):
                raise Redraw(f"message criterion contradicts itself: {criterion}")
        for criterion in self.criteria:
            if criterion["kind"] == "summary" and not summary_text_ok(criterion, summary):
                raise Redraw(f"summary criterion contradicts itself: {criterion}")


@lru_cache(maxsize=256)
def fixed_slot(day: date, hour: int, minute: int, minutes: int) -> Slot:
    """The slot and its texts; cached (a `Slot` is immutable), since seeds draw the same slots
    again and formatting them was a tenth of building a task. Kept small: with `_clock` a miss is
    cheap, while 8192 kept slots gave the garbage collector that many more objects to walk (a
    fresh-seed v1 step measured about 2.5% slower side by side)."""
    iso = day.isoformat()
    start, end, time = _clock(hour, minute, minutes)
    return Slot(iso + start, iso + end, f"{day_label(day)} at {time}", time, iso, minutes)


@lru_cache(maxsize=256)
def _clock(hour: int, minute: int, minutes: int) -> tuple[str, str, str]:
    """A slot's texts that do not depend on its day: the start and end times as they follow the
    ISO date, and the time as texts write it. Fresh seeds mostly draw slots never drawn before,
    but from a few dozen times of day; formatting them was most of a slot's cost."""
    end_min = hour * 60 + minute + minutes
    return (
        f"T{hour:02d}:{minute:02d}:00Z",
        f"T{end_min // 60:02d}:{end_min % 60:02d}:00Z",
        f"{hour:02d}:{minute:02d} UTC",
    )
