"""The simulated CRM API: search, fetch, create and update contacts, behind a rate limiter."""

from __future__ import annotations

from typing import Any

from schemashift.env.frozen import FrozenDict, FrozenList, freeze
from schemashift.env.rulesets.legacy.tools.base import (
    EndpointSchema,
    Response,
    Tool,
    copy_records,
    fail,
    find_record,
    ok,
)

STORED_EMAIL = "customer_email"
RENAMED_EMAIL = "email_address"
_UPDATABLE = ("customer_email", "name", "company", "status")
_CONTACT_ENDPOINTS = ("search_contacts", "get_contact", "create_contact", "update_contact", "contacts.patch")


class CrmTool(Tool):
    name = "crm"
    rate_limit = 2

    @classmethod
    def baseline_schemas(cls) -> list[EndpointSchema]:
        codes = {200: "ok", 400: "bad_request", 404: "not_found", 422: "validation", 429: "rate_limit"}

        def pick(*statuses: int) -> dict[int, str]:
            return {s: codes[s] for s in statuses}

        return [
            EndpointSchema(
                "search_contacts",
                {"customer_email": "str", "name": "str", "limit": "int"},
                [],
                {"contacts": "list", "total": "int"},
                pick(200, 400, 429),
            ),
            EndpointSchema(
                "get_contact",
                {"contact_id": "str"},
                ["contact_id"],
                {
                    "contact_id": "str",
                    "name": "str",
                    "customer_email": "str",
                    "company": "str",
                    "status": "str",
                },
                pick(200, 404, 429),
            ),
            EndpointSchema(
                "create_contact",
                {"customer_email": "str", "name": "str", "company": "str"},
                ["customer_email", "name"],
                {"contact_id": "str", "name": "str", "customer_email": "str", "status": "str"},
                pick(200, 400, 422, 429),
            ),
            EndpointSchema(
                "update_contact",
                {
                    "contact_id": "str",
                    "customer_email": "str",
                    "name": "str",
                    "company": "str",
                    "status": "str",
                },
                ["contact_id"],
                {"contact_id": "str", "status": "str"},
                pick(200, 404, 422, 429),
            ),
        ]

    def load(self, seed_data: dict[str, Any]) -> None:
        self.contacts: list[dict[str, Any]] = copy_records(seed_data.get("contacts", []))
        self.next_id = len(self.contacts) + 1
        self.calls = 0
        self.rate_limit_active = False
        self.email_renamed = False

    def drift_handlers(self):
        return {
            ("field_rename", None): self._rename_email,
            ("rate_limit_tightening", None): self._tighten_rate_limit,
            ("endpoint_deprecation", "update_contact"): self._deprecate_update,
        }

    def changed(self) -> None:
        super().changed()
        self.email_renamed = any(
            RENAMED_EMAIL in s.params or RENAMED_EMAIL in s.response_shape for s in self.schemas.values()
        )

    def call(self, endpoint: str, params: dict[str, Any]) -> Response:
        """Every CRM call counts against the limiter, before any validation."""
        self.calls += 1
        if self.rate_limit_active and self.calls > self.rate_limit:
            return fail(429, "Rate limit exceeded")
        return Tool.call(self, endpoint, params)

    # -- representation ------------------------------------------------------------------------
    def _project(self, contact: dict[str, Any]) -> FrozenDict:
        """A contact as responses show it, frozen (its values may be world data: they are copied)."""
        if self.email_renamed and STORED_EMAIL in contact:
            contact = dict(contact)
            contact[RENAMED_EMAIL] = contact.pop(STORED_EMAIL)
        return freeze(contact)

    def _find(self, params: dict[str, Any]) -> dict[str, Any]:
        return find_record(self.contacts, "contact_id", params.get("contact_id"), "contact")

    # -- handlers -----------------------------------------------------------------------------
    def search_contacts(self, params: dict[str, Any]) -> Response:
        email = params.get(RENAMED_EMAIL) or params.get(STORED_EMAIL)
        name = params.get("name")
        if not email and not name:
            hits = self.contacts
        else:
            email_lc = str(email).lower() if email else None
            name_lc = str(name).lower() if name else None
            hits = [
                c
                for c in self.contacts
                if (email_lc is not None and str(c.get(STORED_EMAIL, "")).lower() == email_lc)
                or (name_lc is not None and name_lc in str(c.get("name", "")).lower())
            ]
        return ok(FrozenDict(contacts=FrozenList([self._project(c) for c in hits]), total=len(hits)))

    def get_contact(self, params: dict[str, Any]) -> Response:
        contact = self._find(params)
        return ok(self._project(contact))

    def create_contact(self, params: dict[str, Any]) -> Response:
        contact = {
            "contact_id": f"c_{self.next_id}",
            STORED_EMAIL: params.get(RENAMED_EMAIL, params.get(STORED_EMAIL)),
            "name": params.get("name"),
            "company": params.get("company", ""),
            "status": "active",
        }
        self.next_id += 1
        self.contacts.append(contact)
        return ok(self._project(contact))

    def update_contact(self, params: dict[str, Any]) -> Response:
        contact = self._find(params)
        if RENAMED_EMAIL in params:
            params = {**params, STORED_EMAIL: params[RENAMED_EMAIL]}
        for key in _UPDATABLE:
            if key in params:
                contact[key] = params[key]
        return ok(self._project(contact))

    # -- drift -----------------------------------------------------------------------------------
    def _rename_email(self, details: dict[str, Any]) -> None:
        for endpoint in _CONTACT_ENDPOINTS:
            if endpoint in self.schemas:
                self.edit_schema(endpoint, RENAMED_EMAIL, _rename_email_field)

    def _tighten_rate_limit(self, details: dict[str, Any]) -> None:
        self.rate_limit_active = True
        self.calls = 0

    def _deprecate_update(self, details: dict[str, Any]) -> None:
        replacement = details.get("replacement", "contacts.patch")
        schema = self.baseline_schema("update_contact", replacement)
        if self.email_renamed:
            _rename_field(schema, STORED_EMAIL, RENAMED_EMAIL)
        self.remove_endpoint("update_contact")
        self.add_endpoint(schema, self.update_contact)


def _rename_field(schema: EndpointSchema, old: str, new: str) -> None:
    """Rename a field in params (appended), required (in place) and response shape (appended)."""
    if old in schema.params:
        schema.params[new] = schema.params.pop(old)
    schema.required = [new if p == old else p for p in schema.required]
    if old in schema.response_shape:
        schema.response_shape[new] = schema.response_shape.pop(old)


def _rename_email_field(schema: EndpointSchema) -> None:
    _rename_field(schema, STORED_EMAIL, RENAMED_EMAIL)
