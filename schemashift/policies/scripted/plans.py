"""Reading the task: the six v1 family templates and the composition parts ("Do all of the
following...: part; part") are matched by the patterns below, and each family's planner turns
its match into a plan of reads (the lookups every task needs: the inbox for HR's 'New starter'
message or a team roster and out-of-office replies, the CRM by e-mail or by company and status,
the calendar over a day or a week) and writes whose values come from the text and from those
responses."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from schemashift.policies.scripted.ops import (
    Op,
    cancel_event,
    create_event,
    dict_rows,
    find_events,
    list_events,
    read_inbox,
    search_contact,
    send_message,
    update_status,
)
from schemashift.policies.scripted.wording import TaskNotUnderstood, need, parse_day, rx

#: a task's ops and its completion summary (text, or a function of the facts)
Plan = tuple[list[Op], Any]


def plan_task(text: str, facts: dict[str, Any]) -> Plan:
    """The plan (ops) and the completion summary (text, or a function of the facts) of a task."""
    body = re.sub(rx(r"^Today is {DAY}\. "), "", text.strip())
    for marker, pattern, planner in PLANNERS:
        if re.search(marker, body):
            return planner(need(pattern, body), facts)
    raise TaskNotUnderstood(text)


def text_of(record: dict[str, Any]) -> str:
    return " ".join(str(v) for v in record.values() if isinstance(v, (str, int)))


def _onboard(m: re.Match[str], facts: dict[str, Any]) -> Plan:
    name, first, title, label = m["name"], m["first"], m["title"], m["label"]

    def found(rows: Any) -> None:
        for row in dict_rows(rows):
            words = text_of(row)
            if f"New starter: {name}" not in words:
                continue
            address = re.search(rx(r"Work address: ({EMAIL})"), words)
            manager = re.search(rx(r"Manager: (.+?) \(({EMAIL})\)"), words)
            if address and manager:
                facts["hire"], facts["manager"] = address[1], manager[2]

    read = read_inbox(found)
    welcome = send_message(
        lambda: facts.get("hire"),
        f"Welcome to the team, {first}!",
        f"Hi {first}, welcome aboard! Your {title} is on {label}.",
        needs=(read,),
    )
    event = create_event(
        title, label, int(m["minutes"]), lambda: [facts.get("hire"), facts.get("manager")], needs=(read,)
    )
    return [read, welcome, event], f"Welcomed {name} and scheduled '{title}' with their manager."


def _invite_blast(m: re.Match[str], facts: dict[str, Any]) -> Plan:
    meeting, label, team, agenda = m["meeting"], m["label"], m["team"], m["agenda"]
    ops: list[Op] = []

    def found(rows: Any) -> None:
        members: list[tuple[str, str]] = []
        away: set[str] = set()
        for row in dict_rows(rows):
            subject = str(row.get("subject", ""))
            words = text_of(row)
            if subject.startswith("Out of office"):
                sender = row.get("from")
                if isinstance(sender, str):
                    away.add(sender.lower())
                away.add(subject.split(":", 1)[-1].strip().lower())
            listing = re.search(r"Current members of the " + re.escape(team) + r" team: (.*)", words)
            if listing:
                members = re.findall(rx(r"([^;<>]+?) <({EMAIL})>"), listing[1])
        invited = [
            (n.strip(), e) for n, e in members if e.lower() not in away and n.strip().lower() not in away
        ]
        facts["invited"] = invited
        for person, email in invited:
            given = person.split()[0]
            ops.append(
                send_message(
                    email,
                    f"{meeting}: {label}",
                    f"Hi {given}, the {meeting} is on {label}. Agenda: {agenda}.",
                    done_text=f"invited {given}",
                )
            )

    ops.append(read_inbox(found))
    return (
        ops,
        lambda: f"Sent the {meeting} invitation to {len(facts.get('invited', []))} {team} team members.",
    )


def _lookup(m: re.Match[str], facts: dict[str, Any]) -> Plan:
    email, status = m["email"], m["status"]
    read = search_contact(email, facts, "customer")
    update = update_status("customer", status, facts, (read,))

    def summary() -> str:
        company = (facts.get("customer") or {}).get("company")
        if not company:
            return f"Set the contact's status to {status}; the customer was not found in the CRM."
        return f"Set the status of the contact with {email} to {status}. Company: {company}."

    return [read, update], summary


def _escalation(m: re.Match[str], facts: dict[str, Any]) -> Plan:
    email, status, manager = m["email"], m["status"], m["manager"]
    read = search_contact(email, facts, "customer")
    update = update_status("customer", status, facts, (read,))

    def full_name() -> str | None:
        name = (facts.get("customer") or {}).get("name")
        return name if isinstance(name, str) and name else None

    def subject() -> str | None:
        name = full_name()
        return None if name is None else f"Priority Support \u2014 {name}"

    def body() -> str | None:
        name = full_name()
        if name is None:
            return None
        return (
            f"Hi {name.split()[0]}, we value you as a customer and want to make this right. "
            f"Let's talk on {m['label']}."
        )

    def title() -> str | None:
        name = full_name()
        return None if name is None else f"Check-in call: {name}"

    send = send_message(email, subject, body, needs=(read,))
    event = create_event(title, m["label"], int(m["minutes"]), [email, manager], needs=(read,))
    summary = f"Escalated the customer ({status}), sent the retention e-mail and booked the call."
    return [read, update, send, event], summary


def _weekly_report(m: re.Match[str], facts: dict[str, Any]) -> Plan:
    company = m["company"]

    def found(rows: Any) -> None:
        names = [
            r["name"]
            for r in dict_rows(rows)
            if isinstance(r.get("name"), str)
            and str(r.get("company", company)).lower() == company.lower()
            and str(r.get("status", "active")).lower() == "active"
        ]
        facts["active"] = names

    read = Op("crm", "search_contacts", {"company": company, "status": "active"}, write=False, on_ok=found)

    def body() -> str | None:
        names = facts.get("active")
        if not names:
            return None
        return f"Active {company} contacts this week: {', '.join(names)}."

    send = send_message(m["to"], f"Weekly Active Contacts Report \u2014 {company}", body, needs=(read,))
    event = create_event(m["title"], m["label"], int(m["minutes"]), [m["a"], m["b"]])
    return (
        [read, send, event],
        lambda: (
            f"Sent the {company} weekly report ({len(facts.get('active') or [])} active) "
            f"and booked '{m['title']}'."
        ),
    )


def _cleanup(m: re.Match[str], facts: dict[str, Any]) -> Plan:
    monday = parse_day(m["monday"])
    targets = [m["a"], m["b"]]
    read = list_events(monday, monday + timedelta(days=4), find_events(targets, facts))
    cancels = [cancel_event(title, facts, (read,)) for title in targets]
    wrap = create_event(m["wrap"], m["label"], int(m["minutes"]), [m["lead"]])
    send = send_message(
        m["notify"],
        f"Calendar Updated \u2014 {m['wrap']} Added",
        f"Cancelled {targets[0]} and {targets[1]}; added {m['wrap']} on {m['label']}.",
    )
    return [read, *cancels, wrap, send], (
        f"Cancelled {targets[0]} and {targets[1]}, added {m['wrap']}, notified {m['notify']}."
    )


def _composition(m: re.Match[str], facts: dict[str, Any]) -> Plan:
    listing = m[1]
    listing = listing[:-1] if listing.endswith(".") else listing
    reads: list[Op] = []
    writes: list[Op] = []
    summary: list[str] = []
    for i, part in enumerate(p.strip() for p in listing.split("; ")):
        if m := re.fullmatch(
            rx(r"set the CRM status of the contact with e-mail ({EMAIL}) to '([^']+)'"), part
        ):
            key = f"contact{i}"
            read = search_contact(m[1], facts, key)
            reads.append(read)
            writes.append(update_status(key, m[2], facts, (read,)))
            summary.append(f"updated the contact's status to {m[2]}")
        elif m := re.fullmatch(
            rx(r"e-mail (.+?) \(({EMAIL})\) one message, to them alone, with '(.+?)' in the subject"), part
        ):
            first = m[1].split()[0]
            body = f"Hi {first}, a note about {m[3].lower()}."
            writes.append(send_message(m[2], f"{m[3]}: please read", body))
            summary.append(f"notified {first}")
        elif m := re.fullmatch(
            rx(r"schedule '(.+?)' on ({SLOT}) for (\d+) minutes with exactly ({EMAIL}) and ({EMAIL})"),
            part,
        ):
            writes.append(create_event(m[1], m[2], int(m[3]), [m[4], m[5]]))
            summary.append(f"booked {m[1]}")
        elif m := re.fullmatch(rx(r"cancel the '(.+?)' event on ({DAY})"), part):
            day = parse_day(m[2])
            read = list_events(day, day, find_events([m[1]], facts))
            reads.append(read)
            writes.append(cancel_event(m[1], facts, (read,)))
            summary.append(f"cancelled {m[1]}")
        else:
            raise TaskNotUnderstood(part)
    return reads + writes, "; ".join(summary).capitalize() + "."


#: (a pattern that marks the template, the pattern its planner reads, the planner), tried in order
PLANNERS: tuple[tuple[str, str, Callable[[re.Match[str], dict[str, Any]], Plan]], ...] = (
    ("^Do all of the following", r"^Do all of the following[^:]*: (.*)$", _composition),
    (
        "'New starter' e-mail",
        r"^(?P<name>.+?) starts on {DAY}; HR's 'New starter' e-mail.*?Send (?P<first>.+?) one welcome "
        r"e-mail.*?schedule '(?P<title>.+?)' on (?P<label>{SLOT}) for (?P<minutes>\d+) minutes",
        _onboard,
    ),
    (
        "Send an invitation e-mail for the",
        r"invitation e-mail for the (?P<meeting>.+?) on (?P<label>{SLOT}) to each member of the "
        r"(?P<team>.+?) team, .*?the agenda \((?P<agenda>.+?)\)\. Anyone",
        _invite_blast,
    ),
    (
        "has escalated",
        r"The VIP customer (?P<email>{EMAIL}) has escalated.*?set their status to '(?P<status>[^']+)'.*?"
        r"a (?P<minutes>\d+)-minute event titled 'Check-in call: <their full name>' on (?P<label>{SLOT}) "
        r"with exactly the customer and the account manager .+? \((?P<manager>{EMAIL})\)",
        _escalation,
    ),
    (
        "Prepare the weekly report for",
        r"Prepare the weekly report for (?P<company>.+?): pull the .*? e-mail (?P<to>{EMAIL}) one message"
        r".*?Then schedule '(?P<title>.+?)' on (?P<label>{SLOT}) for (?P<minutes>\d+) minutes with exactly "
        r"the sales leads .+? \((?P<a>{EMAIL})\) and .+? \((?P<b>{EMAIL})\)",
        _weekly_report,
    ),
    (
        "Calendar cleanup for the week of",
        r"Calendar cleanup for the week of (?P<monday>{DAY}): find and cancel \(or delete\) the "
        r"'(?P<a>.+?)' and '(?P<b>.+?)' events, leaving.*?Create '(?P<wrap>.+?)' on (?P<label>{SLOT}) for "
        r"(?P<minutes>\d+) minutes with exactly the team lead .+? \((?P<lead>{EMAIL})\)\. Then e-mail "
        r"(?P<notify>{EMAIL}) one message",
        _cleanup,
    ),
    # both wordings of the lookup: "...from <address>. Look them up in the CRM..., set their status
    # to '<status>'" and "...from <address>: find this contact in the CRM..., change the status to"
    ("in the CRM", r"(?s)from (?P<email>{EMAIL}).*?status to '(?P<status>[^']+)'", _lookup),
)
