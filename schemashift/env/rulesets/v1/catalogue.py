"""The v1 drift catalogue: for each tool and endpoint, which drift kinds apply and their variants.

`CATALOGUE[(tool, endpoint)][kind]` lists the concrete variants a seed chooses among (what a
field becomes, which endpoint replaces another, which parameter becomes required...).
Tool-wide kinds (`rate_limit_tightening`, `error_code_remap`, `transient_fault`) have their
variants in `TOOL_WIDE`. `HELD_OUT` names the (tool, kind) pairs and kinds that only the test
split draws.

Two kinds keep answering 200 or are not changes of the contract at all:
- `silent_change`: the endpoint accepts the documented call and answers 200, but a parameter it
  passes now means something else: it is silently ignored (its successor carries the meaning) or
  its values follow a new vocabulary and a documented value outside it is silently ignored. The
  live schema's notes say so and the response shows the write did not take; grading reads the
  final state, so only an agent that checks what its write did and adapts finishes the task.
- `transient_fault`: one call on the tool meets a 503 or 504 with a Retry-After hint and is not
  applied; the service is back once the hint has passed. The right move is to wait out the hint
  and make the call once more, not to give up or to send the write twice.
"""

from __future__ import annotations

from typing import Any

DRIFT_KINDS = (
    "field_rename",
    "endpoint_deprecation",
    "new_required_param",
    "type_change",
    "response_restructure",
    "error_code_remap",
    "tool_removal",
    "rate_limit_tightening",
    "silent_change",
    "transient_fault",
)
TOOL_WIDE_KINDS = frozenset({"error_code_remap", "rate_limit_tightening", "transient_fault"})


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def _renames(field: str, *targets: str) -> list[dict[str, Any]]:
    """Each target in snake_case and, where it has several words, in camelCase too."""
    names = [*targets, *(_camel(t) for t in targets if "_" in t)]
    return [{"from": field, "to": target} for target in names]


def _replacements(endpoint: str, *names: str) -> list[dict[str, Any]]:
    """Named successors, plus versioned ones (`<endpoint>_v2` .. `_v4`)."""
    versioned = [f"{endpoint}_v{n}" for n in (2, 3, 4)]
    return [{"replacement": name} for name in [*names, *versioned]]


def _required(param: str, note: str, example: str, enum: list[str] | None = None) -> dict[str, Any]:
    return {"param": param, "note": note, "example": example, "enum": enum}


def _choice(param: str, what: str, *options: tuple[str, ...]) -> list[dict[str, Any]]:
    """A new required parameter with an enumerated value, one variant per allowed-value list."""
    return [_required(param, f"{what}; one of {list(values)}", values[0], list(values)) for values in options]


_IDEMPOTENCY = _required(
    "idempotency_key",
    "a non-empty string, unique per message, that lets the server drop duplicates",
    "send-0001",
)
_TIMEZONE = _choice("timezone", "the IANA time zone of start and end", ("UTC",), ("Etc/UTC", "UTC"))


def _successors(param: str, *names: str) -> list[dict[str, Any]]:
    """A silently ignored parameter and the successor that now carries its meaning."""
    return [{"effect": "successor", "param": param, "successor": name} for name in names]


def _vocabularies(param: str, *names: str) -> list[dict[str, Any]]:
    """A parameter whose values follow a new vocabulary (`api.VOCABULARIES`)."""
    return [{"effect": "vocabulary", "param": param, "vocabulary": name} for name in names]


_REASON = _required(
    "change_reason", "a non-empty free-text reason recorded in the audit log", "requested by task"
)
#: response envelopes: the body moves under `envelope` (a list response's records under `items`)
_RESTRUCTURES = [
    {"envelope": envelope, "items": items}
    for envelope in ("data", "result", "payload")
    for items in ("items", "records", "results")
]
#: required parameters any endpoint may start to demand (API-wide conventions)
_COMMON = [
    _required("request_id", "a non-empty string identifying this request, for tracing", "req-0001"),
    *_choice("client", "the calling application", ("assistant",), ("assistant", "web"), ("agent", "cli")),
    *_choice(
        "api_version", "the API version the call is written for", ("2026-05-01",), ("v2",), ("2.1", "2.0")
    ),
    *_choice("locale", "the language of generated text", ("en-US",), ("en-GB", "en-US")),
    *_choice("tenant", "the workspace the call acts in", ("main",), ("main", "sandbox"), ("prod",)),
    _required("trace_id", "a non-empty string that groups the calls of one task in the logs", "trace-0001"),
]

CATALOGUE: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {
    ("mail", "send_message"): {
        "field_rename": _renames(
            "to", "recipient", "to_address", "recipient_email", "mail_to", "send_to", "destination"
        )
        + _renames("subject", "subject_line", "title", "topic", "headline", "mail_subject")
        + _renames("body", "content", "text", "message_body", "body_text", "message"),
        "endpoint_deprecation": _replacements("send_message", "messages.send", "mail.send"),
        "new_required_param": [
            *_COMMON,
            _IDEMPOTENCY,
            *_choice(
                "priority", "delivery priority", ("normal", "high"), ("standard", "urgent"), ("low", "normal")
            ),
        ],
        "type_change": [
            {"param": "to", "converter": "recipient_as_list"},
            {"param": "to", "converter": "recipient_as_objects"},
        ],
        "response_restructure": _RESTRUCTURES,
    },
    ("mail", "list_messages"): {
        "new_required_param": list(_COMMON),
        "field_rename": _renames("folder", "mailbox", "label", "box", "mail_folder", "folder_name"),
        "endpoint_deprecation": _replacements("list_messages", "messages.list"),
        "response_restructure": _RESTRUCTURES,
    },
    ("calendar", "list_events"): {
        "field_rename": _renames("date_from", "start_date", "from_date", "range_start", "time_min")
        + _renames("date_to", "end_date", "to_date", "range_end", "time_max"),
        "endpoint_deprecation": _replacements("list_events", "events.list"),
        "new_required_param": [*_COMMON, *_TIMEZONE],
        "type_change": [
            {"param": param, "converter": converter}
            for param in ("date_from", "date_to")
            for converter in ("iso_as_epoch", "iso_as_epoch_ms")
        ],
        "response_restructure": _RESTRUCTURES,
    },
    ("calendar", "create_event"): {
        "field_rename": _renames(
            "attendees", "participants", "invitees", "guests", "people", "attendee_emails"
        )
        + _renames("title", "summary", "name", "event_title", "event_name")
        + _renames("start", "start_time", "starts_at", "begin", "start_at")
        + _renames("end", "end_time", "ends_at", "finish", "end_at"),
        "endpoint_deprecation": _replacements("create_event", "events.create", "calendar.events.insert"),
        "new_required_param": [
            *_COMMON,
            *_TIMEZONE,
            *_choice("calendar_id", "the calendar to write to", ("primary",), ("team", "primary")),
            _required("organizer", "a non-empty e-mail address of the organiser", "me@company.com"),
        ],
        "type_change": [
            {"param": "attendees", "converter": "emails_as_objects"},
            {"param": "attendees", "converter": "emails_as_address_objects"},
            *(
                {"param": param, "converter": converter}
                for param in ("start", "end")
                for converter in ("iso_as_epoch", "iso_as_epoch_ms")
            ),
        ],
        "response_restructure": _RESTRUCTURES,
    },
    ("calendar", "update_event"): {
        "field_rename": _renames("status", "state", "event_status", "event_state")
        + _renames("event_id", "id", "event_ref", "event_key"),
        "endpoint_deprecation": _replacements("update_event", "events.update", "events.patch"),
        "new_required_param": [*_COMMON, _REASON],
        "silent_change": _successors("status", "event_status", "state", "eventStatus")
        + _vocabularies("status", "upper", "us_spelling"),
    },
    ("calendar", "delete_event"): {
        "endpoint_deprecation": _replacements("delete_event", "events.delete"),
        "new_required_param": [*_COMMON, _REASON],
        "tool_removal": [
            {
                "fallback": {"endpoint": "update_event", "params": {"status": "cancelled"}},
                "note": "Events are now cancelled instead of deleted.",
            }
        ],
    },
    ("crm", "search_contacts"): {
        "new_required_param": list(_COMMON),
        "field_rename": _renames(
            "email", "email_address", "primary_email", "contact_email", "mail", "work_email"
        )
        + _renames("name", "full_name", "display_name", "contact_name"),
        "endpoint_deprecation": _replacements("search_contacts", "contacts.search"),
        "response_restructure": _RESTRUCTURES,
        "silent_change": _successors("email", "email_exact", "primary_email", "emailAddress")
        + _successors("company", "company_name", "account", "organization")
        + _successors("status", "lifecycle_status", "contact_status"),
    },
    ("crm", "get_contact"): {
        "new_required_param": list(_COMMON),
        "endpoint_deprecation": _replacements("get_contact", "contacts.get"),
        "type_change": [{"param": "contact_id", "converter": "contact_id_as_int"}],
        "response_restructure": _RESTRUCTURES,
        "tool_removal": [
            {
                "fallback": {"endpoint": "search_contacts", "params": {}},
                "note": "search_contacts(contact_id=...) returns the full record.",
            }
        ],
    },
    ("crm", "update_contact"): {
        "field_rename": _renames(
            "status", "lifecycle_status", "state", "stage", "contact_status", "status_code", "crm_status"
        )
        + _renames("contact_id", "id", "contact_ref", "record_id", "contact_key", "uid"),
        "endpoint_deprecation": _replacements("update_contact", "contacts.patch"),
        "new_required_param": [
            *_COMMON,
            _REASON,
            _required("updated_by", "a non-empty name of the person making the change", "support agent"),
            *_choice(
                "source", "where the change comes from", ("support",), ("support", "sales"), ("api", "ui")
            ),
        ],
        "type_change": [
            {"param": "contact_id", "converter": "contact_id_as_int"},
            {"param": "status", "converter": "status_as_value_object"},
            {"param": "status", "converter": "status_as_code_object"},
        ],
        "silent_change": _successors("status", "lifecycle_status", "contact_status", "crmStatus")
        + _vocabularies("status", "upper", "status_prefix"),
    },
}

TOOL_WIDE: dict[str, list[dict[str, Any]]] = {
    "rate_limit_tightening": [
        {"calls": calls, "per_steps": steps}
        for calls, steps in ((1, 2), (1, 3), (1, 4), (2, 4), (2, 5), (3, 6))
    ],
    "error_code_remap": [
        {"remap": {"400": 422, "422": 400}},
        {"remap": {"400": 409, "404": 400, "410": 404}},
        {"remap": {"400": 422, "422": 400, "404": 410, "410": 404, "429": 503}},
        {"remap": {"429": 503, "404": 400, "400": 404}},
        {"remap": {"400": 409, "422": 412, "404": 410, "410": 404}},
    ],
    "transient_fault": [
        {"status": status, "code": code, "retry_after": wait}
        for status, code in ((503, "service_unavailable"), (504, "gateway_timeout"))
        for wait in (1, 2)
    ],
}

#: the error codes a transient fault answers with
TRANSIENT_CODES = frozenset(variant["code"] for variant in TOOL_WIDE["transient_fault"])

#: kinds that make the documented call fail when it meets them (a renamed or retyped parameter the
#: call passes, a new required parameter): every episode's crux drift is one of these on a write
BREAKING_KINDS = ("field_rename", "new_required_param", "type_change")

#: drift kinds, and (tool, kind) pairs, that only the test split draws
HELD_OUT_KINDS = frozenset({"error_code_remap", "transient_fault"})
HELD_OUT_PAIRS = frozenset(
    {("mail", "new_required_param"), ("calendar", "type_change"), ("crm", "response_restructure")}
)
