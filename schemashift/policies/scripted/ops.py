"""The plan's calls: an `Op` is one read or write of a task's plan, and the builders below make
the ones the v1 families need (a message, an event, the inbox, a contact by address, a status
update, the events of some days, a cancellation). A write's values may wait for facts a read
stores; params of None mean a value is missing, and the write is dropped, never guessed."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import date
from typing import Any

from schemashift.policies.scripted.wording import day_range, parse_slot


class Op:
    """One call of the plan: a read that stores facts, or a write built from the text and facts."""

    def __init__(
        self,
        tool: str,
        endpoint: str,
        params: Callable[[], dict[str, Any] | None] | dict[str, Any],
        *,
        write: bool,
        needs: tuple[Op, ...] = (),
        on_ok: Callable[[Any], None] | None = None,
        done_text: str = "",
    ) -> None:
        self.tool, self.endpoint, self.write = tool, endpoint, write
        self._params = params
        self.needs = needs
        self.on_ok = on_ok
        self.done_text = done_text
        self.state = "todo"  # todo, done, dropped
        self.attempts = 0
        self.last_call: tuple[str, dict[str, Any]] | None = None
        self.failed: list[tuple[str, dict[str, Any]]] = []  # calls that failed or did not take
        #: documented parameter -> (documented value, value as sent) of the last call, ids aside
        self.sent: dict[str, tuple[Any, Any]] = {}
        #: another endpoint the same write can go through (a cancellation: delete or status update)
        self.alt: str | None = None

    def take_alt(self) -> bool:
        """Go on through the other endpoint, with fresh attempts, if the write has one (True);
        else drop the op (False)."""
        if self.alt is None:
            self.state = "dropped"
            return False
        self.endpoint, self.alt = self.alt, None
        self.failed.clear()
        self.attempts = 0
        return True

    def params(self) -> dict[str, Any] | None:
        params = self._params() if callable(self._params) else dict(self._params)
        if (
            params is not None
            and self.endpoint == "update_event"
            and self.alt is None
            and "status" not in params
        ):
            params["status"] = "cancelled"  # a cancellation routed through a status update
        return params


def send_message(to: Callable[[], str | None] | str, subject, body, needs=(), done_text="") -> Op:
    def params() -> dict[str, Any] | None:
        values = [v() if callable(v) else v for v in (to, subject, body)]
        if any(v is None for v in values):
            return None
        return {"to": values[0], "subject": values[1], "body": values[2]}

    return Op("mail", "send_message", params, write=True, needs=tuple(needs), done_text=done_text)


def create_event(title, label: str, minutes: int, attendees, needs=(), done_text="") -> Op:
    start, end = parse_slot(label, minutes)

    def params() -> dict[str, Any] | None:
        name = title() if callable(title) else title
        people = attendees() if callable(attendees) else attendees
        if name is None or people is None or any(p is None for p in people):
            return None
        return {"title": name, "start": start, "end": end, "attendees": list(people)}

    return Op("calendar", "create_event", params, write=True, needs=tuple(needs), done_text=done_text)


def read_inbox(on_ok: Callable[[Any], None]) -> Op:
    return Op("mail", "list_messages", {"folder": "inbox"}, write=False, on_ok=on_ok)


def search_contact(email: str, facts: dict[str, Any], key: str) -> Op:
    def found(rows: Any) -> None:
        rows = list(dict_rows(rows))
        hits = [r for r in rows if str(r.get("email", "")).lower() == email.lower()]
        if not hits and len(rows) == 1:
            hits = rows
        if len(hits) == 1:
            facts[key] = hits[0]

    return Op("crm", "search_contacts", {"email": email}, write=False, on_ok=found)


def update_status(key: str, status: str, facts: dict[str, Any], needs: tuple[Op, ...]) -> Op:
    def params() -> dict[str, Any] | None:
        contact = facts.get(key)
        if not contact or not contact.get("contact_id"):
            return None
        return {"contact_id": contact["contact_id"], "status": status}

    return Op(
        "crm", "update_contact", params, write=True, needs=needs, done_text=f"set the status to {status}"
    )


def list_events(first: date, last: date, on_ok: Callable[[Any], None]) -> Op:
    date_from, date_to = day_range(first, last)
    return Op(
        "calendar", "list_events", {"date_from": date_from, "date_to": date_to}, write=False, on_ok=on_ok
    )


def cancel_event(title: str, facts: dict[str, Any], needs: tuple[Op, ...]) -> Op:
    def params() -> dict[str, Any] | None:
        event_id = facts.get(("event", title.lower()))
        return None if event_id is None else {"event_id": event_id}

    op = Op("calendar", "delete_event", params, write=True, needs=needs, done_text=f"cancelled {title}")
    op.alt = "update_event"
    return op


def find_events(titles: list[str], facts: dict[str, Any]) -> Callable[[Any], None]:
    def found(rows: Any) -> None:
        for title in titles:
            hits = [
                r
                for r in dict_rows(rows)
                if str(r.get("title", "")).lower() == title.lower()
                and r.get("status", "confirmed") != "cancelled"
            ]
            if len(hits) == 1 and hits[0].get("event_id"):
                facts[("event", title.lower())] = hits[0]["event_id"]

    return found


def dict_rows(rows: Any) -> Iterator[dict[str, Any]]:
    """The records of a read's response that are objects (anything else is passed over)."""
    return (row for row in rows if isinstance(row, dict))
