"""Every clause of a v1 task text, and the check that grades it (docs/rulesets.md, "Clauses").

`CLAUSES[family]` lists, per family (and per composition part), each clause of the task text as
the family words it, keyed by a stable id, with the check (`grading.CHECKS`) that fails an
episode where the clause's subject is wrong. The tests perturb each clause's subject in an
honest solution (another company, an inactive contact, another day, an extra recipient, ...) and
require failure; a clause added here without a perturbation in the tests fails them.
"""

from __future__ import annotations

from typing import NamedTuple


class Clause(NamedTuple):
    key: str
    text: str
    check: str


def _c(*rows: tuple[str, str, str]) -> tuple[Clause, ...]:
    return tuple(Clause(*row) for row in rows)


_MESSAGE_ALONE = ("to_alone", "one e-mail (to them / that address alone)", "message.alone")
_MESSAGE_ONCE = ("one_message", "one message", "message.once")

CLAUSES: dict[str, tuple[Clause, ...]] = {
    "onboard_new_hire": _c(
        ("welcome_recipient", "Send <first> one welcome e-mail", "message.to"),
        _MESSAGE_ALONE,
        _MESSAGE_ONCE,
        ("welcome_subject", "with 'Welcome' in the subject", "message.subject_has"),
        ("orientation_time", "that gives the time of their orientation (clock time)", "message.body_has"),
        ("orientation_day", "that gives the time of their orientation (the start day)", "message.body_any"),
        ("event_title", "schedule '<title>'", "event.title"),
        ("event_start", "on <day> at <time>", "event.start"),
        ("event_length", "for <minutes> minutes", "event.end"),
        ("event_attendees", "with exactly <first> and their manager", "event.attendees"),
    ),
    "meeting_invite_blast": _c(
        ("each_member", "to each member of the <team> team", "message.to"),
        _MESSAGE_ALONE,
        ("one_per_person", "one message per person", "message.once"),
        ("meeting_subject", "the subject must contain '<meeting>'", "message.subject_has"),
        ("time_and_agenda", "the body must state the time and the agenda", "message.body_has"),
        ("not_on_leave", "do not e-mail anyone on leave", "damage.mail"),
        ("team_only", "members of the <team> team (not another team)", "damage.mail"),
    ),
    "customer_lookup": _c(
        ("status", "set their status to '<status>'", "contact_status"),
        ("by_address", "look them up by that address (that contact, no other)", "damage.crm"),
        ("name_company", "name their company", "summary.has"),
        ("no_other_company", "and no other company", "summary.lacks"),
    ),
    "customer_escalation": _c(
        ("status", "set their status to '<status>'", "contact_status"),
        ("customer_recipient", "send them one retention e-mail", "message.to"),
        _MESSAGE_ALONE,
        _MESSAGE_ONCE,
        (
            "subject_name",
            "with the subject 'Priority Support \u2014 <their full name>'",
            "message.subject_has",
        ),
        ("event_title", "titled 'Check-in call: <their full name>'", "event.title"),
        ("event_start", "on <day> at <time>", "event.start"),
        ("event_length", "a 30-minute event", "event.end"),
        ("event_attendees", "with exactly the customer and the account manager", "event.attendees"),
    ),
    "weekly_report": _c(
        ("report_recipient", "e-mail <address> one message", "message.to"),
        _MESSAGE_ALONE,
        _MESSAGE_ONCE,
        ("subject_words", "a subject containing 'Weekly' and '<company>'", "message.subject_has"),
        ("all_active", "lists the full names of the active contacts", "message.body_has"),
        ("company_filter", "the <company> contacts (no other company's)", "message.lacks"),
        ("active_only", "whose status is active ... the active contacts only", "message.lacks"),
        ("event_title", "schedule '<title>'", "event.title"),
        ("event_start", "on <day> at <time>", "event.start"),
        ("event_length", "for <minutes> minutes", "event.end"),
        ("event_attendees", "with exactly the sales leads", "event.attendees"),
    ),
    "event_cleanup": _c(
        ("cancel_both", "cancel (or delete) the two named events", "event_cancelled"),
        ("keep_others", "leaving every other event as it is", "damage.calendar"),
        ("event_title", "Create '<wrap title>'", "event.title"),
        ("event_start", "on <day> at <time>", "event.start"),
        ("event_length", "for <minutes> minutes", "event.end"),
        ("event_attendees", "with exactly the team lead", "event.attendees"),
        ("notify_recipient", "e-mail <address> one message", "message.to"),
        _MESSAGE_ALONE,
        _MESSAGE_ONCE,
        ("notify_subject", "a subject containing 'Calendar Updated'", "message.subject_has"),
        ("names_cancelled", "that names both cancelled events", "message.body_has"),
    ),
    # composition parts: a composed task's clauses are those of its parts
    "part:status": _c(
        ("status", "set the CRM status of the contact with e-mail <address>", "contact_status")
    ),
    "part:notice": _c(
        ("notice_recipient", "e-mail <name> (<address>) one message", "message.to"),
        _MESSAGE_ALONE,
        _MESSAGE_ONCE,
        ("notice_subject", "with '<topic>' in the subject", "message.subject_has"),
    ),
    "part:meeting": _c(
        ("event_title", "schedule '<title>'", "event.title"),
        ("event_start", "on <day> at <time>", "event.start"),
        ("event_length", "for <minutes> minutes", "event.end"),
        ("event_attendees", "with exactly <a> and <b>", "event.attendees"),
    ),
    "part:cancel": _c(
        ("cancel_named", "cancel the '<title>' event on <day>", "event_cancelled"),
        ("keep_lookalike", "touching nothing else (its look-alike stays)", "damage.calendar"),
    ),
}
