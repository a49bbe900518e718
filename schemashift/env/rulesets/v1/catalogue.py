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


def _renames(field: str, *targets: str) -> list[dict[str, Any]]:
    return [{"from": field, "to": target} for target in targets]


def _replacements(*names: str) -> list[dict[str, Any]]:
    return [{"replacement": name} for name in names]


def _required(param: str, note: str, example: str, enum: list[str] | None = None) -> dict[str, Any]:
    return {"param": param, "note": note, "example": example, "enum": enum}


_IDEMPOTENCY = _required(
    "idempotency_key",
    "a non-empty string, unique per message, that lets the server drop duplicates",
    "send-0001",
)
_TIMEZONE = _required("timezone", "the IANA time zone of start and end; one of ['UTC']", "UTC", ["UTC"])
_REASON = _required(
    "change_reason", "a non-empty free-text reason recorded in the audit log", "requested by task"
)

CATALOGUE: dict[tuple[str, str], dict[str, list[dict[str, Any]]]] = {
    ("mail", "send_message"): {
        "field_rename": _renames("to", "recipient", "to_address", "recipient_email", "mail_to")
        + _renames("subject", "subject_line", "title", "topic")
        + _renames("body", "content", "text", "message_body"),
        "endpoint_deprecation": _replacements("messages.send", "send_message_v2", "mail.send"),
        "new_required_param": [
            _IDEMPOTENCY,
            _required(
                "priority", "delivery priority; one of ['normal', 'high']", "normal", ["normal", "high"]
            ),
        ],
        "type_change": [{"param": "to", "converter": "recipient_as_list"}],
        "response_restructure": [{}],
    },
    ("mail", "list_messages"): {
        "field_rename": _renames("folder", "mailbox", "label", "box"),
        "endpoint_deprecation": _replacements("messages.list", "list_messages_v2"),
        "response_restructure": [{}],
    },
    ("calendar", "list_events"): {
        "field_rename": _renames("date_from", "start_date", "from_date") + _renames("date_to", "end_date"),
        "endpoint_deprecation": _replacements("events.list", "list_events_v2"),
        "new_required_param": [_TIMEZONE],
        "type_change": [{"param": "date_from", "converter": "iso_as_epoch"}],
        "response_restructure": [{}],
    },
    ("calendar", "create_event"): {
        "field_rename": _renames("attendees", "participants", "invitees", "guests", "people")
        + _renames("title", "summary", "name", "event_title")
        + _renames("start", "start_time", "starts_at")
        + _renames("end", "end_time", "ends_at"),
        "endpoint_deprecation": _replacements("events.create", "create_event_v2", "calendar.events.insert"),
        "new_required_param": [
            _TIMEZONE,
            _required("calendar_id", "the calendar to write to; one of ['primary']", "primary", ["primary"]),
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
        "endpoint_deprecation": _replacements("events.update", "events.patch"),
        "new_required_param": [_REASON],
    },
    ("calendar", "delete_event"): {
        "endpoint_deprecation": _replacements("events.delete"),
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
        "endpoint_deprecation": _replacements("contacts.search", "search_contacts_v2"),
        "response_restructure": [{}],
    },
    ("crm", "get_contact"): {
        "endpoint_deprecation": _replacements("contacts.get"),
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
        "field_rename": _renames("status", "lifecycle_status", "state", "stage"),
        "endpoint_deprecation": _replacements("contacts.patch", "update_contact_v2"),
        "new_required_param": [
            _REASON,
            _required("updated_by", "a non-empty name of the person making the change", "support agent"),
        ],
        "type_change": [{"param": "contact_id", "converter": "contact_id_as_int"}],
    },
}

TOOL_WIDE: dict[str, list[dict[str, Any]]] = {
    "rate_limit_tightening": [
        {"calls": 1, "per_steps": 2},
        {"calls": 1, "per_steps": 3},
        {"calls": 1, "per_steps": 4},
        {"calls": 2, "per_steps": 4},
        {"calls": 2, "per_steps": 5},
    ],
    "error_code_remap": [
        {"remap": {"400": 422, "422": 400}},
        {"remap": {"400": 409, "404": 400, "410": 404}},
        {"remap": {"400": 422, "404": 410, "429": 503}},
    ],
}

#: drift kinds, and (tool, kind) pairs, that only the test split draws
HELD_OUT_KINDS = frozenset({"error_code_remap"})
HELD_OUT_PAIRS = frozenset(
    {("mail", "new_required_param"), ("calendar", "type_change"), ("crm", "response_restructure")}
)
