"""The three v1 tools (mail, calendar, crm): their documented endpoints and canonical handlers.

Handlers read and write the episode's world and raise ApiError for request-level failures (a
record that does not exist, a bad value). The world's records are read-only
(`schemashift.env.frozen`) and a write replaces a record instead of changing it, so an episode
starts by sharing its task's seeded records, a response hands out the records themselves, and
nothing a response or the task holds can change the world or be changed by it. Every successful
write is logged
(`log`: create / update with the fields whose value changed / delete), and the calendar also
logs every notice a real calendar sends at once (`notices`: an invitation to each attendee of
an event created or re-confirmed and to each attendee added to an active event; a cancellation
notice to each attendee of an event cancelled or deleted while active and to each attendee removed
from an active one; an update notice to the remaining attendees of an active event whose title,
time or location changes), which grading reads because no later write can take them back. A
rejected write changes nothing and sends nothing: handlers check before they write.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from schemashift.env.frozen import KEPT, FrozenDict, freeze
from schemashift.env.rulesets.v1.api import Api, ApiError

SENT_AT = "2026-04-25T10:00:00Z"
PAGE = 20


def _records(data: dict[str, Any], key: str) -> list[FrozenDict]:
    """A tool's seeded records as its world starts: the list is the episode's, the read-only
    records are shared with the task (frozen here only if a caller seeded plain ones)."""
    records = data.get(key, ())
    if KEPT.issuperset(map(type, records)):
        return list(records)
    return [freeze(record) for record in records]


def _replace(records: list[FrozenDict], record: FrozenDict, changes: dict[str, Any]) -> FrozenDict:
    """Write `changes` to `record` in `records` as a new read-only record (copy-on-write)."""
    new = freeze({**record, **changes})
    records[_index(records, record)] = new
    return new


def _index(records: list[FrozenDict], record: FrozenDict) -> int:
    """Where `record` itself sits (by identity: an equal twin is another record)."""
    for i, candidate in enumerate(records):
        if candidate is record:
            return i
    raise ValueError("record is not in the world")


class MailApi(Api):
    name = "mail"
    ENDPOINTS = (
        (
            "list_messages",
            {"folder": "str", "limit": "int"},
            ["folder"],
            {"messages": "list", "next_page_token": "str"},
            (400, 429),
        ),
        (
            "get_message",
            {"message_id": "str"},
            ["message_id"],
            {"message_id": "str", "from": "str", "to": "list[str]", "subject": "str", "body": "str"},
            (400, 404, 429),
        ),
        (
            "send_message",
            {"to": "str", "subject": "str", "body": "str"},
            ["to", "subject", "body"],
            {"message_id": "str", "sent_at": "str"},
            (400, 422, 429),
        ),
    )
    LIST_KEYS = {"list_messages": "messages"}
    RECORD_FIELDS = frozenset({"to", "subject", "body"})

    def load(self, data: dict[str, Any]) -> None:
        self.inbox = _records(data, "messages")
        self.sent: list[dict[str, Any]] = []

    def h_list_messages(self, p: dict[str, Any]) -> dict[str, Any]:
        folder = p["folder"]
        pool = self.sent if folder == "sent" else [m for m in self.inbox if m.get("folder") == folder]
        limit = p.get("limit", PAGE)
        return {"messages": pool[: max(0, limit)], "next_page_token": None}

    def h_get_message(self, p: dict[str, Any]) -> dict[str, Any]:
        for message in self.inbox + self.sent:
            if message["message_id"] == p["message_id"]:
                return message
        raise ApiError(404, f"Message {p['message_id']!r} not found.")

    def h_send_message(self, p: dict[str, Any]) -> dict[str, Any]:
        to = p["to"]
        recipients = list(to) if isinstance(to, list) else [to]
        if not recipients or not all("@" in r for r in recipients):
            raise ApiError(422, f"Invalid recipient address(es): {recipients!r}.")
        message_id = f"msg_{len(self.inbox) + len(self.sent) + 1}"
        self.sent.append(
            freeze(
                {
                    "message_id": message_id,
                    "from": "me@company.com",
                    "to": recipients,
                    "subject": p["subject"],
                    "body": p["body"],
                    "folder": "sent",
                }
            )
        )
        return {"message_id": message_id, "sent_at": SENT_AT}


def _is_utc_time(value: str) -> bool:
    """An ISO 8601 UTC time to the second, as the calendar stores them (2026-04-27T10:00:00Z)."""
    if len(value) != 20 or not value.endswith("Z"):
        return False
    try:
        datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")
    except ValueError:
        return False
    return True


#: event fields whose change on an active event sends its remaining attendees an update notice
NOTIFYING_FIELDS = frozenset({"title", "start", "end", "location"})

EVENT_SHAPE = {
    "event_id": "str",
    "title": "str",
    "start": "str",
    "end": "str",
    "attendees": "list[str]",
    "status": "str",
}


class CalendarApi(Api):
    name = "calendar"
    ENDPOINTS = (
        (
            "list_events",
            {"date_from": "str", "date_to": "str", "limit": "int"},
            ["date_from", "date_to"],
            {"events": "list"},
            (400, 429),
        ),
        (
            "create_event",
            {"title": "str", "start": "str", "end": "str", "attendees": "list[str]", "location": "str"},
            ["title", "start", "end", "attendees"],
            EVENT_SHAPE,
            (400, 422, 429),
        ),
        (
            "update_event",
            {
                "event_id": "str",
                "title": "str",
                "start": "str",
                "end": "str",
                "attendees": "list[str]",
                "location": "str",
                "status": "str",
            },
            ["event_id"],
            EVENT_SHAPE,
            (400, 404, 422, 429),
        ),
        (
            "delete_event",
            {"event_id": "str"},
            ["event_id"],
            {"deleted": "bool", "event_id": "str"},
            (400, 404, 429),
        ),
    )
    LIST_KEYS = {"list_events": "events"}
    RECORD_FIELDS = frozenset({"title", "start", "end", "attendees", "status", "event_id"})
    STATUSES = ("confirmed", "tentative", "cancelled")

    def load(self, data: dict[str, Any]) -> None:
        self.events = _records(data, "events")
        self.next_id = len(self.events) + 1
        self.log: list[dict[str, Any]] = []
        self.notices: list[dict[str, Any]] = []

    def _notify(self, kind: str, event: dict[str, Any], to: list[str]) -> None:
        if to:
            self.notices.append(
                {"kind": kind, "event_id": event["event_id"], "title": event["title"], "to": to}
            )

    def _find(self, event_id: str) -> dict[str, Any]:
        for event in self.events:
            if event["event_id"] == event_id:
                return event
        raise ApiError(404, f"Event {event_id!r} not found.")

    def h_list_events(self, p: dict[str, Any]) -> dict[str, Any]:
        lo, hi = p["date_from"], p["date_to"]
        hits = [e for e in self.events if e["start"] <= hi and e["end"] >= lo]
        return {"events": hits[: max(0, p.get("limit", PAGE))]}

    def _check_times(self, start: str, end: str) -> None:
        if not (_is_utc_time(start) and _is_utc_time(end)):
            raise ApiError(
                422, f"start and end must be ISO 8601 UTC like 2026-04-27T10:00:00Z, got {start!r}, {end!r}."
            )
        if end <= start:
            raise ApiError(422, f"end {end!r} must be after start {start!r}.")

    def h_create_event(self, p: dict[str, Any]) -> dict[str, Any]:
        self._check_times(p["start"], p["end"])
        event = freeze(
            {
                "event_id": f"evt_{self.next_id}",
                "title": p["title"],
                "start": p["start"],
                "end": p["end"],
                "attendees": list(p["attendees"]),
                "location": p.get("location", ""),
                "status": "confirmed",
            }
        )
        self.next_id += 1
        self.events.append(event)
        self.log.append({"op": "create", "id": event["event_id"], "title": event["title"]})
        self._notify("invitation", event, list(event["attendees"]))
        return event

    def h_update_event(self, p: dict[str, Any]) -> dict[str, Any]:
        event = self._find(p["event_id"])
        if "status" in p and p["status"] not in self.STATUSES:
            raise ApiError(422, f"status must be one of {list(self.STATUSES)}, got {p['status']!r}.")
        changes = {k: v for k, v in p.items() if k != "event_id" and event.get(k) != v}
        if "start" in changes or "end" in changes:
            self._check_times(changes.get("start", event["start"]), changes.get("end", event["end"]))
        before = event
        if changes:
            event = _replace(self.events, event, changes)
            self.log.append({"op": "update", "id": event["event_id"], "fields": sorted(changes)})
        was_active, active = before["status"] != "cancelled", event["status"] != "cancelled"
        if was_active and not active:
            self._notify("cancellation", event, list(before["attendees"]))
        elif active:
            invited = before["attendees"] if was_active else []
            self._notify("invitation", event, [a for a in event["attendees"] if a not in invited])
            if was_active:
                kept = [a for a in before["attendees"] if a in event["attendees"]]
                self._notify("cancellation", event, [a for a in before["attendees"] if a not in kept])
                if NOTIFYING_FIELDS.intersection(changes):
                    self._notify("update", event, kept)
        return event

    def h_delete_event(self, p: dict[str, Any]) -> dict[str, Any]:
        event = self._find(p["event_id"])
        self.events.remove(event)
        self.log.append({"op": "delete", "id": event["event_id"]})
        if event["status"] != "cancelled":
            self._notify("cancellation", event, list(event["attendees"]))
        return {"deleted": True, "event_id": event["event_id"]}


CONTACT_SHAPE = {"contact_id": "str", "name": "str", "email": "str", "company": "str", "status": "str"}


class CrmApi(Api):
    name = "crm"
    ENDPOINTS = (
        (
            "search_contacts",
            {
                "contact_id": "str",
                "email": "str",
                "name": "str",
                "company": "str",
                "status": "str",
                "limit": "int",
            },
            [],
            {"contacts": "list", "total": "int"},
            (400, 429),
        ),
        ("get_contact", {"contact_id": "str"}, ["contact_id"], CONTACT_SHAPE, (400, 404, 429)),
        (
            "create_contact",
            {"email": "str", "name": "str", "company": "str"},
            ["email", "name"],
            CONTACT_SHAPE,
            (400, 422, 429),
        ),
        (
            "update_contact",
            {"contact_id": "str", "name": "str", "email": "str", "company": "str", "status": "str"},
            ["contact_id"],
            CONTACT_SHAPE,
            (400, 404, 422, 429),
        ),
    )
    LIST_KEYS = {"search_contacts": "contacts"}
    RECORD_FIELDS = frozenset({"contact_id", "name", "email", "company", "status"})

    def load(self, data: dict[str, Any]) -> None:
        self.contacts = _records(data, "contacts")
        self.next_id = len(self.contacts) + 1
        self.log: list[dict[str, Any]] = []

    def _find(self, contact_id: str) -> dict[str, Any]:
        for contact in self.contacts:
            if contact["contact_id"] == contact_id:
                return contact
        raise ApiError(404, f"Contact {contact_id!r} not found.")

    def h_search_contacts(self, p: dict[str, Any]) -> dict[str, Any]:
        hits = self.contacts
        for key in ("contact_id", "email", "company", "status"):
            if key in p:
                wanted = str(p[key]).lower()
                hits = [c for c in hits if str(c[key]).lower() == wanted]
        if "name" in p:
            wanted = str(p["name"]).lower()
            hits = [c for c in hits if wanted in c["name"].lower()]
        limit = p.get("limit", PAGE)
        return {"contacts": hits[: max(0, limit)], "total": len(hits)}

    def h_get_contact(self, p: dict[str, Any]) -> dict[str, Any]:
        return self._find(p["contact_id"])

    def h_create_contact(self, p: dict[str, Any]) -> dict[str, Any]:
        if "@" not in p["email"]:
            raise ApiError(422, f"Invalid email {p['email']!r}.")
        contact = FrozenDict(
            contact_id=f"c_{self.next_id}",
            name=p["name"],
            email=p["email"],
            company=p.get("company", ""),
            status="active",
        )
        self.next_id += 1
        self.contacts.append(contact)
        self.log.append({"op": "create", "id": contact["contact_id"]})
        return contact

    def h_update_contact(self, p: dict[str, Any]) -> dict[str, Any]:
        contact = self._find(p["contact_id"])
        changes = {k: v for k, v in p.items() if k != "contact_id" and contact.get(k) != v}
        if changes:
            contact = _replace(self.contacts, contact, changes)
            self.log.append({"op": "update", "id": contact["contact_id"], "fields": sorted(changes)})
        return contact


API_CLASSES: dict[str, type[Api]] = {cls.name: cls for cls in (MailApi, CalendarApi, CrmApi)}
#: endpoints whose successful calls change the world
WRITE_ENDPOINTS = frozenset(
    {
        ("mail", "send_message"),
        ("calendar", "create_event"),
        ("calendar", "update_event"),
        ("calendar", "delete_event"),
        ("crm", "create_contact"),
        ("crm", "update_contact"),
    }
)
