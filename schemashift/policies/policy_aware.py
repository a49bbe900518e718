"""The original rule-based baseline (spec 9.2): keyword dispatch plus inspect -> report -> retry.

Reproduced literally, scenario-tuned quirks included (hard-coded attendees, the first e-mail
address in the text as recipient, inspect/report/retry at most once per tool per episode).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from schemashift.env.frozen import FrozenDict, FrozenList, freeze
from schemashift.policies import base
from schemashift.policies.base import EMAIL_PATTERN, ActionDict, Observation

if TYPE_CHECKING:
    from schemashift.env.rulesets.base import Ruleset

EMAIL = re.compile(f"({EMAIL_PATTERN})")
QUOTED_WORD = re.compile(r"'([\w_]+)'")
#: a run of an address's local-part characters, and how far before an "@" `first_email` looks
ADDRESS_RUN = re.compile(r"[\w.+-]+")
LOOK_BACK = 32
RENAMED_ENDPOINTS = {("mail", "send_message"): "messages.send", ("crm", "update_contact"): "contacts.patch"}
DEFAULT_ATTENDEES = ["priya@company.com", "alex@company.com"]
EVENT_START, EVENT_END = "2026-04-27T10:00:00Z", "2026-04-27T11:00:00Z"


def first_email(text: str) -> str | None:
    """The first address in `text`: `EMAIL.search(text)`'s, searched from shortly before the first
    "@" instead of the start (a scan of a v1 task text from its start tried every word, 2-15 us).

    Exact: a match's local part is the run of address characters just before its "@" and holds
    none, so no match starts before the run that ends at the first "@"; where that run reaches
    back past the search's start, the whole text is searched."""
    at = text.find("@")
    if at < 0:
        return None
    start = at - LOOK_BACK if at > LOOK_BACK else 0
    if start and ADDRESS_RUN.fullmatch(text, start - 1, at):
        start = 0
    email = EMAIL.search(text, start)
    return email.group(1) if email else None


class TaskReading:
    """The keyword and pattern matches the dispatch rules take from a task description."""

    def __init__(self, text: str) -> None:
        self.desc = desc = text.lower()
        quoted = QUOTED_WORD.search(text)
        self.first_email = first_email(text)
        self.quoted_word = quoted.group(1) if quoted else None
        self.wants_mail = "email" in desc or "send" in desc
        self.wants_calendar = any(word in desc for word in ("calendar", "event", "orientation"))
        self.wants_crm = any(word in desc for word in ("customer", "crm", "contact", "lookup"))
        self.wants_update = "update" in desc
        self.title = "New Hire Orientation" if "orientation" in desc else "Event"
        if "welcome" in desc:
            self.subject = "Welcome!"
        elif "all-hands" in desc or "all hands" in desc:
            self.subject = "All-Hands: Friday 3pm"
        else:
            self.subject = "Update"
        # The parameters of the calls the text decides, built once per text and frozen: the
        # Environment keeps frozen parameters as they are (it copies any others), and sharing
        # them between episodes is safe because nothing can change them.
        self.send_params = FrozenDict(
            to=self.first_email or "recipient@company.com", subject=self.subject, body="Automated message."
        )
        self.event_params = FrozenDict(
            title=self.title, start=EVENT_START, end=EVENT_END, attendees=FrozenList(DEFAULT_ATTENDEES)
        )
        self.search_params = FrozenDict(customer_email=self.first_email or "bob@customer.com")

        #: endpoint -> the frozen call the text decides, built when first sent (`call`)
        self.calls: dict[str, ActionDict] = {}

    def call(self, tool: str, endpoint: str, params: FrozenDict) -> ActionDict:
        """The call to `endpoint` the text decides, frozen too, so the Environment validates it once
        (it cannot change); built when first sent, as many texts (v1's, one per seed) never send some."""
        action = self.calls.get(endpoint)
        if action is None:
            action = self.calls[endpoint] = freeze(base.call_tool(tool, endpoint, params))
        return action


#: readings of recently seen task texts; tasks repeat across episodes
_READINGS: dict[str, TaskReading] = {}
_READINGS_KEPT = 64


class PolicyAwareHeuristic:
    name = "policy_aware_heuristic"

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.last_action_was_call = False
        self.last_tool: str | None = None
        self.last_endpoint: str | None = None
        self.last_params: dict[str, Any] | None = None
        # The tools inspected, reported and retried: at most once each per episode.
        self.inspected: set[str] = set()
        self.reported: set[str] = set()
        self.retried: set[str] = set()
        self.contact_id_seen: Any = None
        self.company_seen: Any = None
        self.attempted_update = False
        self._text: str | None = None

    def _read_task(self, text: str) -> None:
        """What the dispatch rules need from the task text, worked out once per distinct text."""
        self._text = text
        reading = _READINGS.get(text)
        if reading is None:
            if len(_READINGS) >= _READINGS_KEPT:
                _READINGS.clear()
            reading = _READINGS[text] = TaskReading(text)
        self.task = reading

    def _called(self, tool: str, endpoint: str, params: dict[str, Any]) -> None:
        self.last_action_was_call = True
        self.last_tool, self.last_endpoint, self.last_params = tool, endpoint, params

    def act(self, observation: Observation) -> ActionDict:
        # The fields every view of the rulesets it plays has (the original read them as attributes).
        schemas: dict[str, Any] = observation["tool_schemas"] or {}
        last = observation["last_response"]
        last_ok = bool(last and last.get("ok"))
        tool = self.last_tool

        if tool == "crm" and last_ok:
            contacts = (last.get("body") or {}).get("contacts")
            if contacts:
                self.contact_id_seen = contacts[0].get("contact_id")
                self.company_seen = contacts[0].get("company")

        if self.last_action_was_call and last is not None and not last_ok and tool not in self.inspected:
            self.inspected.add(tool)
            self.last_action_was_call = False
            return base.inspect_schema(tool)
        if tool in self.inspected and tool not in self.reported:
            self.reported.add(tool)
            kind = _guess_drift_kind(tool, schemas)
            return base.report_drift(tool, kind, f"Detected {kind} on {tool}")
        if tool in self.reported and tool not in self.retried and self.last_endpoint:
            endpoint, params = _adapt(tool, self.last_endpoint, self.last_params or {}, schemas)
            self.retried.add(tool)
            self._called(tool, endpoint, params)
            return base.retry_with_variant(tool, endpoint, params)

        if observation["step"] >= observation["max_steps"] - 1:
            return base.complete_task(self._summary())
        return self._dispatch(observation, schemas)

    def _dispatch(self, observation: Observation, schemas: dict[str, Any]) -> ActionDict:
        text = observation["task_description"]
        if text != self._text:
            self._read_task(text)
        task = self.task
        known = observation["known_state"] or {}
        if "mail" in schemas and task.wants_mail and not known.get("mail.sent_count", 0) > 0:
            params = task.send_params
            self._called("mail", "send_message", params)
            return task.call("mail", "send_message", params)
        if "calendar" in schemas and task.wants_calendar and not known.get("calendar.events_count", 0) > 0:
            params = task.event_params
            self._called("calendar", "create_event", params)
            return task.call("calendar", "create_event", params)
        if "crm" in schemas and task.wants_crm:
            if self.contact_id_seen is None:
                params = task.search_params
                self._called("crm", "search_contacts", params)
                return task.call("crm", "search_contacts", params)
            status_known = any(k.startswith("crm.contact_") and k.endswith("_status") for k in known)
            if task.wants_update and not status_known and not self.attempted_update:
                params = {"contact_id": self.contact_id_seen, "status": task.quoted_word or "updated"}
                self.attempted_update = True
                self._called("crm", "update_contact", params)
                return base.call_tool("crm", "update_contact", params)
        return base.complete_task(self._summary())

    def _summary(self) -> str:
        if self.company_seen:
            return f"Task complete. Contact's company: {self.company_seen}."
        return "Policy-aware agent completed."


def _guess_drift_kind(tool: str, schemas: dict[str, Any]) -> str:
    endpoints = schemas.get(tool) or {}
    if tool == "calendar" and "participants" in _params_of(endpoints, "create_event"):
        return "field_rename"
    if tool == "mail" and "messages.send" in endpoints and "send_message" not in endpoints:
        return "endpoint_deprecation"
    if tool == "crm" and "email_address" in _params_of(endpoints, "search_contacts"):
        return "field_rename"
    return "field_rename"


def _params_of(endpoints: dict[str, Any], endpoint: str) -> dict[str, Any]:
    return (endpoints.get(endpoint) or {}).get("params") or {}


def _adapt(
    tool: str, endpoint: str, params: dict[str, Any], schemas: dict[str, Any]
) -> tuple[str, dict[str, Any]]:
    """The retry variant: follow a known endpoint rename, then map renamed fields and drop
    parameters the current schema no longer declares."""
    endpoints = schemas.get(tool) or {}
    if endpoint not in endpoints:
        endpoint = RENAMED_ENDPOINTS.get((tool, endpoint), endpoint)
    schema = endpoints.get(endpoint)
    if schema is None:
        return endpoint, dict(params)
    declared = schema.get("params") or {}
    adapted = dict(params)
    if (
        tool == "calendar"
        and endpoint == "create_event"
        and "participants" in declared
        and "attendees" in adapted
    ):
        adapted["participants"] = [{"email": e, "role": "required"} for e in adapted.pop("attendees")]
    if tool == "crm" and "email_address" in declared and "customer_email" in adapted:
        adapted["email_address"] = adapted.pop("customer_email")
    return endpoint, {k: v for k, v in adapted.items() if k in declared}


def make(_ruleset: Ruleset) -> PolicyAwareHeuristic:
    """The factory `schemashift.policies.BUILTIN` names for this policy."""
    return PolicyAwareHeuristic()
