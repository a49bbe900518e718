"""The simulated calendar API: list, create, update and delete events."""

from __future__ import annotations

from typing import Any

from schemashift.env.rulesets.legacy.tools.base import (
    EndpointSchema,
    Response,
    Tool,
    copy_records,
    find_record,
    ok,
)

PAGE_SIZE = 10
_UPDATABLE = ("title", "start", "end", "attendees", "participants", "location", "status")


class CalendarTool(Tool):
    name = "calendar"

    @classmethod
    def baseline_schemas(cls) -> list[EndpointSchema]:
        return [
            EndpointSchema(
                "list_events",
                {"date_from": "str", "date_to": "str", "limit": "int"},
                ["date_from", "date_to"],
                {"events": "list"},
                {200: "ok", 400: "bad_request"},
            ),
            EndpointSchema(
                "create_event",
                {"title": "str", "start": "str", "end": "str", "attendees": "list", "location": "str"},
                ["title", "start", "end", "attendees"],
                {
                    "event_id": "str",
                    "title": "str",
                    "start": "str",
                    "end": "str",
                    "attendees": "list",
                    "status": "str",
                },
                {200: "ok", 400: "bad_request", 422: "validation"},
            ),
            EndpointSchema(
                "update_event",
                {
                    "event_id": "str",
                    "title": "str",
                    "start": "str",
                    "end": "str",
                    "attendees": "list",
                    "location": "str",
                    "status": "str",
                },
                ["event_id"],
                {"event_id": "str", "status": "str", "title": "str"},
                {200: "ok", 404: "not_found"},
            ),
            EndpointSchema(
                "delete_event",
                {"event_id": "str"},
                ["event_id"],
                {"deleted": "bool", "event_id": "str"},
                {200: "ok", 404: "not_found"},
            ),
        ]

    def load(self, seed_data: dict[str, Any]) -> None:
        self.events: list[dict[str, Any]] = copy_records(seed_data.get("events", []))
        self.next_id = len(self.events) + 1

    def drift_handlers(self):
        return {
            ("field_rename", "create_event"): self._rename_attendees,
            ("tool_removal", "delete_event"): self._remove_delete,
        }

    def _find(self, params: dict[str, Any]) -> dict[str, Any]:
        return find_record(self.events, "event_id", params.get("event_id"), "event")

    # -- handlers -----------------------------------------------------------------------------
    def list_events(self, params: dict[str, Any]) -> Response:
        date_from, date_to = str(params.get("date_from")), str(params.get("date_to"))
        hits = [
            dict(e)
            for e in self.events
            if str(e.get("start", "")) <= date_to and str(e.get("end", "")) >= date_from
        ]
        return ok({"events": hits[:PAGE_SIZE]})

    def create_event(self, params: dict[str, Any]) -> Response:
        event_id = f"evt_{self.next_id}"
        self.next_id += 1
        event: dict[str, Any] = {
            "event_id": event_id,
            "title": params.get("title", ""),
            "start": params.get("start", ""),
            "end": params.get("end", ""),
            "location": params.get("location", ""),
            "status": "confirmed",
        }
        if "participants" in self.schemas["create_event"].response_shape:
            participants = _as_list(params.get("participants"))
            if "attendees" in params:
                participants = [{"email": e, "role": "required"} for e in _as_list(params["attendees"])]
            event["participants"] = participants
        else:
            event["attendees"] = _as_list(params.get("attendees"))
        self.events.append(event)
        return ok(dict(event))

    def update_event(self, params: dict[str, Any]) -> Response:
        event = self._find(params)
        for key in _UPDATABLE:
            if key in params:
                event[key] = params[key]
        return ok(dict(event))

    def delete_event(self, params: dict[str, Any]) -> Response:
        event = self._find(params)
        self.events.remove(event)
        return ok({"deleted": True, "event_id": params.get("event_id")})

    # -- drift -----------------------------------------------------------------------------------
    def _rename_attendees(self, details: dict[str, Any]) -> None:
        old, new = details.get("from", "attendees"), details.get("to", "participants")

        def rename(schema: EndpointSchema) -> None:
            schema.params[new] = schema.params.pop(old, "list")
            schema.required = [new if p == old else p for p in schema.required]
            schema.response_shape[new] = schema.response_shape.pop(old, "list")

        self.edit_schema("create_event", ("rename", old, new), rename)

    def _remove_delete(self, details: dict[str, Any]) -> None:
        self.remove_endpoint("delete_event")


def _as_list(value: Any) -> list[Any]:
    """list(value) as the original did, without crashing on values that are not iterable."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return list(value)
    if isinstance(value, (str, dict)):
        return list(value)
    return [value]
