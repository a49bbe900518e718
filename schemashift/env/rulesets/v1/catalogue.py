"""The v1 drift catalogue: for each tool and endpoint, which drift kinds apply and their variants.

`CATALOGUE[(tool, endpoint)][kind]` lists the concrete variants a seed chooses among (what a
field becomes, which endpoint replaces another, which parameter becomes required...).
Tool-wide kinds (`rate_limit_tightening`, `error_code_remap`) have their variants in
`TOOL_WIDE`. `HELD_OUT` names the (tool, kind) pairs and kinds that only the test split draws.
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
)
TOOL_WIDE_KINDS = frozenset({"error_code_remap", "rate_limit_tightening"})


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
_REASON = _required(
    "change_reason", "a non-empty free-text reason recorded in the audit log", "requested by task"
)

CATALOGUE: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {
    ("mail", "send_message"): {
        "field_rename": _renames("to", "recipient", "to_address", "recipient_email", "mail_to")
        + _renames("subject", "subject_line", "title", "topic")
        + _renames("body", "content", "text", "message_body"),
        "endpoint_deprecation": _replacements("send_message", "messages.send", "mail.send"),
        "new_required_param": [
            _IDEMPOTENCY,
            *_choice("priority", "delivery priority", ("normal", "high"), ("standard", "urgent"), ("low", "normal")),
        ],
        "type_change": [{"param": "to", "converter": "recipient_as_list"}],
        "response_restructure": [{}],
    },
    ("mail", "list_messages"): {
        "field_rename": _renames("folder", "mailbox", "label", "box"),
        "endpoint_deprecation": _replacements("list_messages", "messages.list"),
        "response_restructure": [{}],
    },
    ("calendar", "list_events"): {
        "field_rename": _renames("date_from", "start_date", "from_date") + _renames("date_to", "end_date"),
        "endpoint_deprecation": _replacements("list_events", "events.list"),
        "new_required_param": _TIMEZONE,
        "type_change": [{"param": "date_from", "converter": "iso_as_epoch"}],
        "response_restructure": [{}],
    },
    ("calendar", "create_event"): {
        "field_rename": _renames("attendees", "participants", "invitees", "guests", "people")
        + _renames("title", "summary", "name", "event_title")
        + _renames("start", "start_time", "starts_at")
        + _renames("end", "end_time", "ends_at"),
        "endpoint_deprecation": _replacements("create_event", "events.create", "calendar.events.insert"),
        "new_required_param": [
            *_TIMEZONE,
            *_choice("calendar_id", "the calendar to write to", ("primary",), ("team", "primary")),
            _required("organizer", "a non-empty e-mail address of the organiser", "me@company.com"),
        ],
        "type_change": [
            {"param": "attendees", "converter": "emails_as_objects"},
            {"param": "start", "converter": "iso_as_epoch"},
        ],
        "response_restructure": [{}],
    },
    ("calendar", "update_event"): {
        "field_rename": _renames("status", "state", "event_status"),
        "endpoint_deprecation": _replacements("update_event", "events.update", "events.patch"),
        "new_required_param": [_REASON],
    },
    ("calendar", "delete_event"): {
        "endpoint_deprecation": _replacements("delete_event", "events.delete"),
        "new_required_param": [_REASON],
        "tool_removal": [
            {
                "fallback": {"endpoint": "update_event", "params": {"status": "cancelled"}},
                "note": "Events are now cancelled instead of deleted.",
            }
        ],
    },
    ("crm", "search_contacts"): {
        "field_rename": _renames("email", "email_address", "primary_email", "contact_email")
        + _renames("name", "full_name", "display_name"),
        "endpoint_deprecation": _replacements("search_contacts", "contacts.search"),
        "response_restructure": [{}],
    },
    ("crm", "get_contact"): {
        "endpoint_deprecation": _replacements("get_contact", "contacts.get"),
        "type_change": [{"param": "contact_id", "converter": "contact_id_as_int"}],
        "response_restructure": [{}],
        "tool_removal": [
            {
                "fallback": {"endpoint": "search_contacts", "params": {}},
                "note": "search_contacts(contact_id=...) returns the full record.",
            }
        ],
    },
    ("crm", "update_contact"): {
        "field_rename": _renames("status", "lifecycle_status", "state", "stage", "contact_status")
        + _renames("contact_id", "id", "contact_ref", "record_id"),
        "endpoint_deprecation": _replacements("update_contact", "contacts.patch"),
        "new_required_param": [
            _REASON,
            _required("updated_by", "a non-empty name of the person making the change", "support agent"),
            *_choice("source", "where the change comes from", ("support",), ("support", "sales"), ("api", "ui")),
        ],
        "type_change": [{"param": "contact_id", "converter": "contact_id_as_int"}],
    },
}

TOOL_WIDE: dict[str, list[dict[str, Any]]] = {
    "rate_limit_tightening": [
        {"calls": calls, "per_steps": steps} for calls, steps in ((1, 2), (1, 3), (1, 4), (2, 4), (2, 5), (3, 6))
    ],
    "error_code_remap": [
        {"remap": {"400": 422, "422": 400}},
        {"remap": {"400": 409, "404": 400, "410": 404}},
        {"remap": {"400": 422, "404": 410, "429": 503}},
        {"remap": {"422": 400, "429": 503}},
        {"remap": {"400": 409, "422": 409}},
    ],
}

#: kinds that make the documented call fail when it meets them (a renamed or retyped parameter the
#: call passes, a new required parameter): every episode's crux drift is one of these on a write
BREAKING_KINDS = ("field_rename", "new_required_param", "type_change")

#: drift kinds, and (tool, kind) pairs, that only the test split draws
HELD_OUT_KINDS = frozenset({"error_code_remap"})
HELD_OUT_PAIRS = frozenset(
    {("mail", "new_required_param"), ("calendar", "type_change"), ("crm", "response_restructure")}
)
