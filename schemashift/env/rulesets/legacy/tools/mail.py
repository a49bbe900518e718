"""The simulated mail API: list, send and fetch messages."""

from __future__ import annotations

from typing import Any

from schemashift.env.frozen import FrozenDict
from schemashift.env.rulesets.legacy.tools.base import (
    EndpointSchema,
    Response,
    Tool,
    UnsupportedDrift,
    copy_records,
    fail,
    ok,
)

SENT_AT = "2026-04-25T10:00:00Z"
PAGE_SIZE = 10


class MailTool(Tool):
    name = "mail"

    @classmethod
    def baseline_schemas(cls) -> list[EndpointSchema]:
        return [
            EndpointSchema(
                "list_messages",
                {"folder": "str", "limit": "int", "page_token": "str"},
                ["folder"],
                {"messages": "list", "next_page_token": "str"},
                {200: "ok", 400: "bad_request", 429: "rate_limit"},
            ),
            EndpointSchema(
                "send_message",
                {"to": "str", "subject": "str", "body": "str"},
                ["to", "subject", "body"],
                {"message_id": "str", "sent_at": "str"},
                {200: "ok", 400: "bad_request", 422: "validation"},
            ),
            EndpointSchema(
                "get_message",
                {"message_id": "str"},
                ["message_id"],
                {"id": "str", "from": "str", "subject": "str", "body": "str"},
                {200: "ok", 404: "not_found"},
            ),
        ]

    def load(self, seed_data: dict[str, Any]) -> None:
        self.mailbox: list[dict[str, Any]] = copy_records(seed_data.get("messages", []))
        self.sent_messages: list[dict[str, Any]] = []

    def drift_handlers(self):
        return {
            ("field_rename", "list_messages"): self._rename_list_fields,
            ("endpoint_deprecation", "send_message"): self._deprecate_send,
            ("new_required_param", "send_message"): self._require_idempotency_key,
        }

    # -- handlers -----------------------------------------------------------------------------
    def list_messages(self, params: dict[str, Any]) -> Response:
        folder = params.get("folder")
        matching = [m for m in self.mailbox if m.get("folder") == folder]
        page = [dict(m) for m in matching[:PAGE_SIZE]]
        more = len(matching) > PAGE_SIZE
        shape = self.schemas["list_messages"].response_shape
        if "items" in shape and "next_cursor" in shape:
            return ok({"items": page, "next_cursor": "cur_abc123" if more else None})
        return ok({"messages": page, "next_page_token": "tok_xyz" if more else None})

    def send_message(self, params: dict[str, Any]) -> Response:
        message_id = f"msg_{len(self.sent_messages) + len(self.mailbox) + 1}"
        self.sent_messages.append({"id": message_id, **params})
        return ok(FrozenDict(message_id=message_id, sent_at=SENT_AT))

    def get_message(self, params: dict[str, Any]) -> Response:
        wanted = params.get("message_id")
        for message in self.mailbox + self.sent_messages:
            if message.get("id") == wanted:
                return ok(dict(message))
        return fail(404, "message not found")

    # -- drift -----------------------------------------------------------------------------------
    def _rename_list_fields(self, details: dict[str, Any]) -> None:
        self.edit_schema("list_messages", "cursor_paging", _page_by_cursor)

    def _deprecate_send(self, details: dict[str, Any]) -> None:
        replacement = details.get("replacement", "messages.send")
        self.remove_endpoint("send_message")
        self.add_endpoint(self.baseline_schema("send_message", replacement), self.send_message)

    def _require_idempotency_key(self, details: dict[str, Any]) -> None:
        if "send_message" not in self.schemas:
            raise UnsupportedDrift("mail.send_message is deprecated; cannot add a required param to it")
        self.edit_schema("send_message", "idempotency_key", _add_idempotency_key)


def _page_by_cursor(schema: EndpointSchema) -> None:
    schema.response_shape = {"items": "list", "next_cursor": "str"}


def _add_idempotency_key(schema: EndpointSchema) -> None:
    schema.params["idempotency_key"] = "str"
    schema.required.append("idempotency_key")
