"""The scripted v1 baseline: a hand-written expert for the v1 task families that sees only what an
agent is shown.

It is the proof that v1 tasks are solvable from the observation alone. `act` reads nothing but
the (JSON round-tripped) observation: the task text, the start-of-episode documentation
(`tool_schemas`), the last response and `known_state`. It never calls the ruleset.

- Task text: the six family templates and the composition parts ("Do all of the following...:
  part; part") are parsed with the patterns below into a plan of reads (the lookups every task
  needs: the inbox for HR's 'New starter' message or a team roster and out-of-office replies,
  the CRM by e-mail or by company and status, the calendar over a day or a week) and writes
  whose values come from the text and from those responses. A write whose values no response
  gave is dropped, never guessed.
- Drift: after a failed call it inspects the tool and compares the live schema with the
  documentation (renamed parameters are paired by position and type, required additions are
  recognised by their notes, retyped parameters converted as their notes say), then renders the
  call under the live contract and retries. Replacements and fallbacks are followed (from the
  schema, the Deprecation/Link headers or a 410/404 message); rate limits (429 with Retry-After,
  or a rate_limit in the schema) are waited out with other work, pending reports or an
  inspection. Responses are unwrapped whatever their envelope, and record fields renamed by
  drift are mapped back.
- Reports: each drift with evidence (a failed call on the tool, an inspection of it, or a
  response that shows the change) is reported once, keyed by tool, kind and endpoint. Reports
  wait for steps the agent would lose anyway (a rate limit blocking every remaining call) or for
  the end; before completing it inspects each tool it called since that tool's last inspection
  and has no tool-wide drift known on (a tool carries one at most), catching error-code remaps
  and rate limits that never got in its way, when the step budget leaves room for the
  inspection, what it may find and the completion. Measured over 1,600 episodes (8 scenarios,
  seeds 0-99 and 10000-10099): detection 1.000 with these inspections, 0.954 without, at the
  same mean score (0.909 vs 0.910): the steps cost what the reports earn.
- Safety: one message per recipient, one event per title, writes only to records a lookup
  identified, and a write is retried only after a response that says it did not happen (an
  unclear one is checked against `known_state` first).

On another ruleset (legacy) it plays the policy-aware heuristic, so that a configuration that
lists it among the baselines of every ruleset still plays the legacy cells (the embedded default
lists it for v1 only, under `evaluation.v1.baselines`).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from schemashift.policies.base import (
    EMAIL_PATTERN,
    ActionDict,
    Observation,
    call_tool,
    complete_task,
    inspect_schema,
    report_drift,
)

if TYPE_CHECKING:
    from schemashift.env.rulesets.base import Ruleset

EMAIL = EMAIL_PATTERN
MONTHS = (
    "", "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip

DAY = r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday) [A-Z][a-z]+ \d{1,2}, \d{4}"
SLOT = DAY + r" at \d{2}:\d{2} UTC"
ENUM = re.compile(r"one of \[([^\]]*)\]")
#: the status an error label stands for when no drift remapped it
LABEL_STATUS = {
    "bad_request": 400,
    "not_found": 404,
    "gone": 410,
    "validation_error": 422,
    "rate_limited": 429,
    "endpoint_retired": 410,
    "endpoint_removed": 404,
    "unknown_endpoint": 404,
}
CONTACT_FIELDS = ("contact_id", "name", "email", "company", "status")
MAX_ATTEMPTS = 4
TOOL_WIDE = ("error_code_remap", "rate_limit_tightening")


class TaskNotUnderstood(ValueError):
    """The task text matches none of the v1 templates."""


# -- dates ----------------------------------------------------------------------------------------
def parse_day(label: str) -> date:
    """'Monday April 27, 2026' -> date(2026, 4, 27)."""
    match = re.search(r"([A-Z][a-z]+) (\d{1,2}), (\d{4})", label)
    return date(int(match[3]), MONTHS.index(match[1]), int(match[2]))


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_slot(label: str, minutes: int) -> tuple[str, str]:
    """'Monday April 27, 2026 at 10:00 UTC', 30 -> ('2026-04-27T10:00:00Z', '2026-04-27T10:30:00Z')."""
    day = parse_day(label)
    hour, minute = re.search(r"at (\d{2}):(\d{2}) UTC", label).groups()
    start = datetime(day.year, day.month, day.day, int(hour), int(minute), tzinfo=UTC)
    return iso(start), iso(start + timedelta(minutes=minutes))


def day_range(first: date, last: date) -> tuple[str, str]:
    return f"{first.isoformat()}T00:00:00Z", f"{last.isoformat()}T23:59:59Z"


# -- the live contract ----------------------------------------------------------------------------
def _note(entry: dict[str, Any], param: str) -> str:
    return (entry.get("notes") or {}).get(param, "")


def _is_addition(param: str, entry: dict[str, Any]) -> bool:
    """A required parameter whose note asks for a value (not one describing a conversion)."""
    note = _note(entry, param)
    return param in entry.get("required", ()) and ("non-empty" in note or "one of [" in note)


def rename_pairs(doc: dict[str, Any], entry: dict[str, Any]) -> dict[str, str]:
    """Documented parameter -> its live name, for the documented parameters the live contract
    no longer has. A rename keeps the parameter's place; additions come after the documented
    ones and carry a note asking for a value; what is left pairs by type, then in order."""
    dp, lp = doc["params"], entry["params"]
    live_names = list(lp)
    pairs: dict[str, str] = {}
    taken: set[str] = set()
    for i, name in enumerate(dp):
        if name in lp:
            continue
        if i < len(live_names):
            cand = live_names[i]
            if cand not in dp and not _is_addition(cand, entry):
                pairs[name], _ = cand, taken.add(cand)
    gone = [p for p in dp if p not in lp and p not in pairs]
    new = [p for p in live_names if p not in dp and p not in taken and not _is_addition(p, entry)]
    for name in gone:
        match = next((n for n in new if lp[n] == dp[name]), None) or (new[0] if new else None)
        if match is not None:
            pairs[name] = match
            new.remove(match)
    return pairs


def additions(doc: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """Live required parameters that are neither documented nor renamed documented ones."""
    renamed = set(rename_pairs(doc, entry).values())
    return [p for p in entry.get("required", ()) if p not in doc["params"] and p not in renamed]


def contract_changes(doc: dict[str, Any], entry: dict[str, Any]) -> list[str]:
    """The drift kinds that turn one documented endpoint contract into the live one."""
    kinds = []
    dp, lp = doc["params"], entry["params"]
    pairs = rename_pairs(doc, entry)
    if any(p not in lp for p in dp):
        kinds.append("field_rename")
    if additions(doc, entry):
        kinds.append("new_required_param")
    if any(pairs.get(p, p) in lp and lp[pairs.get(p, p)] != dp[p] for p in dp):
        kinds.append("type_change")
    shape, doc_shape = entry.get("response_shape") or {}, doc.get("response_shape") or {}
    if "meta" in shape and "meta" not in doc_shape:
        kinds.append("response_restructure")
    return kinds


def _epoch(value: str) -> int:
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())


def convert(value: Any, doc_type: str | None, live_type: str, note: str) -> Any:
    """A documented value in the live type, as the parameter's note describes it."""
    if doc_type is None or doc_type == live_type:
        return value
    if live_type == "int" and isinstance(value, str):
        if re.match(r"\d{4}-\d{2}-\d{2}T", value):
            seconds = _epoch(value)
            return seconds * 1000 if "milli" in note else seconds
        digits = re.search(r"(\d+)$", value)
        return int(digits[1]) if digits else value
    if live_type == "list[object]":
        key = re.search(r"\{'(\w+)'", note)
        key = key[1] if key else "email"
        items = value if isinstance(value, list) else [value]
        return [{key: item} for item in items]
    if live_type == "object":
        key = re.search(r"\{'(\w+)'", note)
        return {key[1] if key else "value": value}
    if live_type == "list[str]" and isinstance(value, str):
        return [value]
    if live_type == "str" and isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def records(body: Any) -> list[dict[str, Any]]:
    """The records of a list response, whatever envelope holds them."""
    queue = [body]
    while queue:
        item = queue.pop(0)
        if isinstance(item, list) and all(isinstance(x, dict) for x in item):
            return item
        if isinstance(item, dict):
            queue.extend(v for k, v in item.items() if k != "meta")
    return []


def text_of(record: dict[str, Any]) -> str:
    return " ".join(str(v) for v in record.values() if isinstance(v, (str, int)))


# -- the plan -------------------------------------------------------------------------------------
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
        self.failed: list[tuple[str, dict[str, Any]]] = []  # calls answered with an error (not 429)
        #: another endpoint the same write can go through (a cancellation: delete or status update)
        self.alt: str | None = None

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


class ScriptedPolicy:
    """The scripted v1 baseline (see the module docstring)."""

    name = "scripted"

    def __init__(self, ruleset: str = "v1") -> None:
        self.ruleset = ruleset
        self._fallback = None
        if ruleset != "v1":
            from schemashift.policies.policy_aware import PolicyAwareHeuristic

            self._fallback = PolicyAwareHeuristic()
        self.reset()

    # -- Policy surface ----------------------------------------------------------------------------
    def reset(self) -> None:
        if self._fallback is not None:
            self._fallback.reset()
        self.ops: list[Op] | None = None
        self.summary = ""
        self.docs: dict[str, dict[str, Any]] = {}
        self.live: dict[str, dict[str, Any]] = {}
        self.facts: dict[str, Any] = {}
        self.route: dict[tuple[str, str], str] = {}  # (tool, canonical) -> live name learned from responses
        self.reports: list[tuple[str, str, str | None]] = []
        self.reported: set[tuple[str, str, str | None]] = set()
        self.awaiting: tuple[str, Any] | None = None
        self.inspect_next: list[str] = []
        self.inspected: dict[str, int] = {}
        self.last_call: dict[str, int] = {}
        self.accepted: dict[str, list[int]] = {}
        self.wait_until: dict[str, int] = {}
        self.rate: dict[str, tuple[int, int]] = {}
        self.counter = 0
        self.known_before: int = 0
        self.max_steps = 0

    def act(self, observation: Observation) -> ActionDict:
        if self._fallback is not None:
            return self._fallback.act(observation)
        if self.ops is None:
            self._start(observation)
        self._read(observation)
        return self._decide(observation)

    # -- start ------------------------------------------------------------------------------------
    def _start(self, observation: Observation) -> None:
        self.docs = copy.deepcopy(observation.get("tool_schemas") or {})
        self.live = copy.deepcopy(self.docs)
        self.max_steps = int(observation.get("max_steps") or 0)
        text = observation.get("task_description", "")
        try:
            self.ops, self.summary = plan_task(text, self.facts)
        except TaskNotUnderstood:
            self.ops, self.summary = [], "Could not read the task."
        self.ops[:] = [op for op in self.ops if op.tool in self.docs]

    # -- reading responses ------------------------------------------------------------------------
    def _read(self, observation: Observation) -> None:
        awaiting, self.awaiting = self.awaiting, None
        if awaiting is None:
            return
        step = int(observation.get("step") or 0)
        response = observation.get("last_response")
        kind, what = awaiting
        if kind == "inspect":
            if isinstance(response, dict) and response.get("ok"):
                body = response.get("body") or {}
                if isinstance(body.get("schema"), dict):
                    self.live[what] = body["schema"]
                    self.inspected[what] = step
                    self._diff(what)
            return
        if kind == "call":
            op, canonical = what
            self._call_result(op, canonical, response, step, observation)

    def _queue_report(self, tool: str, kind: str, endpoint: str | None) -> None:
        key = (tool, kind, None if kind in TOOL_WIDE else endpoint)
        if key not in self.reported:
            self.reported.add(key)
            self.reports.append(key)

    def _call_result(
        self, op: Op, canonical: str, response: Any, step: int, observation: Observation
    ) -> None:
        tool = op.tool
        self.last_call[tool] = step
        if not isinstance(response, dict) or "ok" not in response:
            # No readable answer: a write counts as done only if the known state moved.
            if op.write and _known_total(observation) > self.known_before:
                op.state = "done"
            else:
                op.attempts += 1
            return
        headers = response.get("headers") or {}
        body = response.get("body")
        if response["ok"]:
            self.accepted.setdefault(tool, []).append(step)
            if "Deprecation" in headers:
                link = re.search(r"<([^>]+)>", headers.get("Link", ""))
                if link:
                    self.route[(tool, canonical)] = link[1]
                self._queue_report(tool, "endpoint_deprecation", canonical)
            doc = self.docs[tool].get(canonical, {})
            if isinstance(body, dict) and "meta" in body and "meta" not in doc.get("response_shape", {}):
                self._queue_report(tool, "response_restructure", canonical)
            op.state = "done"
            if op.on_ok is not None:
                op.on_ok(self._unwrap(tool, canonical, body))
            return
        code = body.get("code") if isinstance(body, dict) else None
        message = str((body or {}).get("message", "")) if isinstance(body, dict) else ""
        expected = LABEL_STATUS.get(code)
        if expected is not None and response.get("status") != expected:
            self._queue_report(tool, "error_code_remap", None)
        if code == "rate_limited" or "Retry-After" in headers:
            try:
                wait = int(headers.get("Retry-After", 1))
            except ValueError:
                wait = 1
            self.wait_until[tool] = step + max(1, wait)
            limit = re.search(r"at most (\d+) call\(s\) per (\d+) steps", message)
            if limit:
                self.rate[tool] = (int(limit[1]), int(limit[2]))
            self._queue_report(tool, "rate_limit_tightening", None)
            return
        self.accepted.setdefault(tool, []).append(step)
        op.attempts += 1
        if op.last_call is not None:
            op.failed.append(op.last_call)
        if code == "endpoint_retired":
            self._queue_report(tool, "endpoint_deprecation", canonical)
            use = re.search(rf"use {re.escape(tool)}\.(\S+?) \(same parameters\)", message)
            if use:
                self.route[(tool, canonical)] = use[1]
                return
        if code == "endpoint_removed":
            self._queue_report(tool, "tool_removal", canonical)
        if op.attempts >= MAX_ATTEMPTS:
            if op.alt is not None:
                op.endpoint, op.alt = op.alt, None
                op.failed.clear()
                op.attempts = 0
            else:
                op.state = "dropped"
                return
        if tool not in self.inspect_next:
            self.inspect_next.append(tool)

    def _unwrap(self, tool: str, canonical: str, body: Any) -> Any:
        """A list response's records with their documented field names (search results only are
        ever renamed); other bodies as they came."""
        if canonical not in ("search_contacts", "list_messages", "list_events"):
            return body
        found = records(body)
        if canonical != "search_contacts":
            return found
        doc = self.docs[tool].get(canonical)
        entry = self.live[tool].get(self.route.get((tool, canonical), canonical)) or {}
        inverse = {}
        if doc and "params" in entry:
            inverse = {live: name for name, live in rename_pairs(doc, entry).items()}
        out = []
        renamed = False
        for record in found:
            canon = {inverse.get(k, k): v for k, v in record.items()}
            unknown = [k for k in canon if k not in CONTACT_FIELDS]
            if unknown:
                renamed = True
                for key in unknown:
                    value = canon[key]
                    if "email" not in canon and isinstance(value, str) and "@" in value:
                        canon["email"] = canon.pop(key)
                for key in [k for k in canon if k not in CONTACT_FIELDS]:
                    if "name" not in canon and isinstance(canon[key], str):
                        canon["name"] = canon.pop(key)
            if isinstance(canon.get("contact_id"), int):
                canon["contact_id"] = f"c_{canon['contact_id']}"
            out.append(canon)
        if renamed or inverse:
            self._queue_report(tool, "field_rename", canonical)
        return out

    # -- what changed -----------------------------------------------------------------------------
    def _diff(self, tool: str) -> None:
        """Compare the live schema of `tool` with the documentation and queue what changed."""
        docs, live = self.docs[tool], self.live[tool]
        remapped = False
        for name, doc in docs.items():
            entry = live.get(name)
            if not isinstance(entry, dict):
                continue
            status = entry.get("status", "active")
            if status in ("deprecated", "retired"):
                self._queue_report(tool, "endpoint_deprecation", name)
                continue
            if status == "removed":
                self._queue_report(tool, "tool_removal", name)
                continue
            if "params" not in entry:
                continue
            for kind in contract_changes(doc, entry):
                self._queue_report(tool, kind, name)
            if entry.get("error_codes") != doc.get("error_codes"):
                remapped = True
        if remapped:
            self._queue_report(tool, "error_code_remap", None)
        limit = next(
            (e["rate_limit"] for e in live.values() if isinstance(e, dict) and "rate_limit" in e), None
        )
        if limit:
            self.rate[tool] = (int(limit["calls"]), int(limit["per_steps"]))
            self._queue_report(tool, "rate_limit_tightening", None)

    # -- writing calls under the live contract ----------------------------------------------------
    def _render(self, tool: str, endpoint: str, params: dict[str, Any]) -> tuple[str, str, dict[str, Any]]:
        """(live endpoint, canonical endpoint, live params) of a documented call."""
        live = self.live[tool]
        canonical = endpoint
        entry = live.get(endpoint)
        fallback = None
        if isinstance(entry, dict) and entry.get("status") == "removed":
            fallback = entry.get("fallback")
        if fallback and fallback.get("endpoint") in self.docs[tool]:
            canonical = fallback["endpoint"]
            params = {**params, **(fallback.get("params") or {})}
            entry = live.get(canonical)
        name = self.route.get((tool, canonical), canonical)
        if isinstance(entry, dict):
            if entry.get("status") == "deprecated":
                name = entry.get("deprecation", {}).get("replacement", name)
            elif entry.get("status") == "retired":
                name = entry.get("replacement", name)
        doc = self.docs[tool][canonical]
        contract = live.get(name)
        if not isinstance(contract, dict) or "params" not in contract:
            contract = entry if isinstance(entry, dict) and "params" in entry else doc
        pairs = rename_pairs(doc, contract)
        lp = contract["params"]
        out: dict[str, Any] = {}
        for key, value in params.items():
            live_name = pairs.get(key, key)
            if live_name not in lp:
                continue
            out[live_name] = convert(value, doc["params"].get(key), lp[live_name], _note(contract, live_name))
        for key in contract.get("required", ()):
            if key not in out:
                out[key] = self._supply(_note(contract, key))
        return name, canonical, out

    def _supply(self, note: str) -> str:
        """A value for a parameter the live contract added, as its note asks."""
        match = ENUM.search(note)
        if match:
            values = [v.strip().strip("'\"") for v in match[1].split(",") if v.strip()]
            if values:
                return values[0]
        if "e-mail" in note or "email" in note:
            return "me@company.com"
        self.counter += 1
        return f"scripted-{self.counter:04d}"

    # -- deciding ---------------------------------------------------------------------------------
    def _blocked(self, tool: str, step: int) -> bool:
        """Whether a call on `tool` at `step` would meet a known rate limit."""
        if self.wait_until.get(tool, 0) > step:
            return True
        rate = self.rate.get(tool)
        if rate is None:
            return False
        calls, per = rate
        return sum(1 for s in self.accepted.get(tool, ()) if s > step - per) >= calls

    def _ready(self, op: Op) -> bool | None:
        """True: callable now; False: waits for a read; None: can never run (drop it)."""
        for need in op.needs:
            if need.state == "dropped":
                return None
            if need.state != "done":
                return False
        return True

    def _decide(self, observation: Observation) -> ActionDict:
        done_steps = int(observation.get("step") or 0)
        step = done_steps + 1
        left = (self.max_steps - done_steps) if self.max_steps else 99
        if left <= 1:
            return self._complete()
        if self.inspect_next:
            tool = self.inspect_next.pop(0)
            return self._inspect(tool)
        for op in self.ops:
            if op.state != "todo":
                continue
            ready = self._ready(op)
            if ready is None:
                op.state = "dropped"
                continue
            if not ready:
                continue
            if self._blocked(op.tool, step):
                continue
            params = op.params()
            if params is None:
                op.state = "dropped"
                continue
            return self._call(op, params, observation)
        if any(op.state == "todo" for op in self.ops):
            # Every remaining call waits for a rate limit: spend the step on a report or a look.
            if self.reports:
                return self._report()
            blocked = next((op.tool for op in self.ops if op.state == "todo"), None)
            return self._inspect(blocked)
        # Wrap up: inspect tools called since their last inspection, report, complete.
        spare = left - 1 - len(self.reports)
        if spare >= 2:
            for tool in self.last_call:
                # A tool carries one tool-wide drift at most: once one is known, nothing else on
                # it can stay hidden (drift on an endpoint shows in the calls to it).
                if self.last_call[tool] > self.inspected.get(tool, -1) and not any(
                    key[0] == tool and key[1] in TOOL_WIDE for key in self.reported
                ):
                    return self._inspect(tool)
        if self.reports and left >= 2:
            return self._report()
        return self._complete()

    def _call(self, op: Op, params: dict[str, Any], observation: Observation) -> ActionDict:
        name, canonical, live_params = self._render(op.tool, op.endpoint, params)
        if (name, live_params) in op.failed:
            # The live contract as this agent reads it gives the call that already failed: it
            # cannot write this one. Take the other route if the write has one, else give up.
            if op.alt is not None:
                op.endpoint, op.alt = op.alt, None
                op.failed.clear()
                op.attempts = 0
            else:
                op.state = "dropped"
            return self._decide(observation)
        op.last_call = (name, live_params)
        self.known_before = _known_total(observation)
        self.awaiting = ("call", (op, canonical))
        return call_tool(op.tool, name, live_params)

    def _inspect(self, tool: str) -> ActionDict:
        self.awaiting = ("inspect", tool)
        return inspect_schema(tool)

    def _report(self) -> ActionDict:
        tool, kind, endpoint = self.reports.pop(0)
        where = f"{tool}.{endpoint}" if endpoint else tool
        return report_drift(tool, kind, f"{kind} on {where}")

    def _complete(self) -> ActionDict:
        done = [op.done_text for op in (self.ops or []) if op.state == "done" and op.done_text]
        summary = self.summary() if callable(self.summary) else self.summary
        return complete_task(summary or ("Done: " + "; ".join(done) + "." if done else "Done."))


def _known_total(observation: Observation) -> int:
    known = observation.get("known_state") or {}
    return sum(v for v in known.values() if isinstance(v, int))


# -- task parsing: one planner per family ---------------------------------------------------------
def plan_task(text: str, facts: dict[str, Any]) -> tuple[list[Op], Any]:
    """The plan (ops) and the completion summary (text, or a function of the facts) of a task."""
    body = re.sub(_rx(r"^Today is {DAY}\. "), "", text.strip())
    if body.startswith("Do all of the following"):
        return _composition(body, facts)
    for marker, planner in (
        ("'New starter' e-mail", _onboard),
        ("Send an invitation e-mail for the", _invite_blast),
        ("has escalated", _escalation),
        ("Prepare the weekly report for", _weekly_report),
        ("Calendar cleanup for the week of", _cleanup),
        ("in the CRM", _lookup),
        ("find this contact in the CRM", _lookup),
    ):
        if marker in body:
            return planner(body, facts)
    raise TaskNotUnderstood(text)


def _rx(pattern: str) -> str:
    """A pattern with the {EMAIL}, {SLOT} and {DAY} placeholders filled in."""
    return pattern.replace("{EMAIL}", EMAIL).replace("{SLOT}", SLOT).replace("{DAY}", DAY)


def _need(pattern: str, text: str) -> re.Match[str]:
    match = re.search(_rx(pattern), text)
    if match is None:
        raise TaskNotUnderstood(f"{pattern!r} not in {text!r}")
    return match


def _send(to: Callable[[], str | None] | str, subject, body, needs=(), done_text="") -> Op:
    def params() -> dict[str, Any] | None:
        values = [v() if callable(v) else v for v in (to, subject, body)]
        if any(v is None for v in values):
            return None
        return {"to": values[0], "subject": values[1], "body": values[2]}

    return Op("mail", "send_message", params, write=True, needs=tuple(needs), done_text=done_text)


def _event(title, label: str, minutes: int, attendees, needs=(), done_text="") -> Op:
    start, end = parse_slot(label, minutes)

    def params() -> dict[str, Any] | None:
        name = title() if callable(title) else title
        people = attendees() if callable(attendees) else attendees
        if name is None or people is None or any(p is None for p in people):
            return None
        return {"title": name, "start": start, "end": end, "attendees": list(people)}

    return Op("calendar", "create_event", params, write=True, needs=tuple(needs), done_text=done_text)


def _inbox(on_ok: Callable[[Any], None]) -> Op:
    return Op("mail", "list_messages", {"folder": "inbox"}, write=False, on_ok=on_ok)


def _contact_by_email(email: str, facts: dict[str, Any], key: str) -> Op:
    def found(rows: Any) -> None:
        rows = [r for r in rows if isinstance(r, dict)]
        hits = [r for r in rows if str(r.get("email", "")).lower() == email.lower()]
        if not hits and len(rows) == 1:
            hits = rows
        if len(hits) == 1:
            facts[key] = hits[0]

    return Op("crm", "search_contacts", {"email": email}, write=False, on_ok=found)


def _set_status(key: str, status: str, facts: dict[str, Any], needs: tuple[Op, ...]) -> Op:
    def params() -> dict[str, Any] | None:
        contact = facts.get(key)
        if not contact or not contact.get("contact_id"):
            return None
        return {"contact_id": contact["contact_id"], "status": status}

    return Op(
        "crm", "update_contact", params, write=True, needs=needs, done_text=f"set the status to {status}"
    )


def _events_between(first: date, last: date, on_ok: Callable[[Any], None]) -> Op:
    date_from, date_to = day_range(first, last)
    return Op(
        "calendar", "list_events", {"date_from": date_from, "date_to": date_to}, write=False, on_ok=on_ok
    )


def _cancel(title: str, facts: dict[str, Any], needs: tuple[Op, ...]) -> Op:
    def params() -> dict[str, Any] | None:
        event_id = facts.get(("event", title.lower()))
        return None if event_id is None else {"event_id": event_id}

    op = Op("calendar", "delete_event", params, write=True, needs=needs, done_text=f"cancelled {title}")
    op.alt = "update_event"
    return op


def _find_events(titles: list[str], facts: dict[str, Any]) -> Callable[[Any], None]:
    def found(rows: Any) -> None:
        for title in titles:
            hits = [
                r
                for r in rows
                if isinstance(r, dict)
                and str(r.get("title", "")).lower() == title.lower()
                and r.get("status", "confirmed") != "cancelled"
            ]
            if len(hits) == 1 and hits[0].get("event_id"):
                facts[("event", title.lower())] = hits[0]["event_id"]

    return found


def _onboard(text: str, facts: dict[str, Any]) -> tuple[list[Op], Any]:
    m = _need(
        r"^(?P<name>.+?) starts on {DAY}; HR's 'New starter' e-mail.*?Send (?P<first>.+?) one welcome "
        r"e-mail.*?schedule '(?P<title>.+?)' on (?P<label>{SLOT}) for (?P<minutes>\d+) minutes",
        text,
    )
    name, first, title, label = m["name"], m["first"], m["title"], m["label"]

    def found(rows: Any) -> None:
        for row in rows:
            if not isinstance(row, dict):
                continue
            words = text_of(row)
            if f"New starter: {name}" not in words:
                continue
            address = re.search(_rx(r"Work address: ({EMAIL})"), words)
            manager = re.search(_rx(r"Manager: (.+?) \(({EMAIL})\)"), words)
            if address and manager:
                facts["hire"], facts["manager"] = address[1], manager[2]

    read = _inbox(found)
    welcome = _send(
        lambda: facts.get("hire"),
        f"Welcome to the team, {first}!",
        f"Hi {first}, welcome aboard! Your {title} is on {label}.",
        needs=(read,),
    )
    event = _event(
        title, label, int(m["minutes"]), lambda: [facts.get("hire"), facts.get("manager")], needs=(read,)
    )
    return [read, welcome, event], f"Welcomed {name} and scheduled '{title}' with their manager."


def _invite_blast(text: str, facts: dict[str, Any]) -> tuple[list[Op], Any]:
    m = _need(
        r"invitation e-mail for the (?P<meeting>.+?) on (?P<label>{SLOT}) to each member of the "
        r"(?P<team>.+?) team, .*?the agenda \((?P<agenda>.+?)\)\. Anyone",
        text,
    )
    meeting, label, team, agenda = m["meeting"], m["label"], m["team"], m["agenda"]
    ops: list[Op] = []

    def found(rows: Any) -> None:
        members: list[tuple[str, str]] = []
        away: set[str] = set()
        for row in rows:
            if not isinstance(row, dict):
                continue
            subject = str(row.get("subject", ""))
            words = text_of(row)
            if subject.startswith("Out of office"):
                sender = row.get("from")
                if isinstance(sender, str):
                    away.add(sender.lower())
                away.add(subject.split(":", 1)[-1].strip().lower())
            listing = re.search(r"Current members of the " + re.escape(team) + r" team: (.*)", words)
            if listing:
                members = re.findall(_rx(r"([^;<>]+?) <({EMAIL})>"), listing[1])
        invited = [
            (n.strip(), e) for n, e in members if e.lower() not in away and n.strip().lower() not in away
        ]
        facts["invited"] = invited
        for person, email in invited:
            given = person.split()[0]
            ops.append(
                _send(
                    email,
                    f"{meeting}: {label}",
                    f"Hi {given}, the {meeting} is on {label}. Agenda: {agenda}.",
                    done_text=f"invited {given}",
                )
            )

    ops.append(_inbox(found))
    return (
        ops,
        lambda: f"Sent the {meeting} invitation to {len(facts.get('invited', []))} {team} team members.",
    )


def _lookup(text: str, facts: dict[str, Any]) -> tuple[list[Op], Any]:
    email = _need(r"from ({EMAIL})", text)[1]
    status = _need(r"status to '([^']+)'", text)[1]
    read = _contact_by_email(email, facts, "customer")
    update = _set_status("customer", status, facts, (read,))

    def summary() -> str:
        company = (facts.get("customer") or {}).get("company")
        if not company:
            return f"Set the contact's status to {status}; the customer was not found in the CRM."
        return f"Set the status of the contact with {email} to {status}. Company: {company}."

    return [read, update], summary


def _escalation(text: str, facts: dict[str, Any]) -> tuple[list[Op], Any]:
    m = _need(
        r"The VIP customer (?P<email>{EMAIL}) has escalated.*?set their status to '(?P<status>[^']+)'.*?"
        r"a (?P<minutes>\d+)-minute event titled 'Check-in call: <their full name>' on (?P<label>{SLOT}) "
        r"with exactly the customer and the account manager .+? \((?P<manager>{EMAIL})\)",
        text,
    )
    email, status, manager = m["email"], m["status"], m["manager"]
    read = _contact_by_email(email, facts, "customer")
    update = _set_status("customer", status, facts, (read,))

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

    send = _send(email, subject, body, needs=(read,))
    event = _event(title, m["label"], int(m["minutes"]), [email, manager], needs=(read,))
    summary = f"Escalated the customer ({status}), sent the retention e-mail and booked the call."
    return [read, update, send, event], summary


def _weekly_report(text: str, facts: dict[str, Any]) -> tuple[list[Op], Any]:
    m = _need(
        r"Prepare the weekly report for (?P<company>.+?): pull the .*? e-mail (?P<to>{EMAIL}) one message"
        r".*?Then schedule '(?P<title>.+?)' on (?P<label>{SLOT}) for (?P<minutes>\d+) minutes with exactly "
        r"the sales leads .+? \((?P<a>{EMAIL})\) and .+? \((?P<b>{EMAIL})\)",
        text,
    )
    company = m["company"]

    def found(rows: Any) -> None:
        names = [
            r["name"]
            for r in rows
            if isinstance(r, dict)
            and isinstance(r.get("name"), str)
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

    send = _send(m["to"], f"Weekly Active Contacts Report \u2014 {company}", body, needs=(read,))
    event = _event(m["title"], m["label"], int(m["minutes"]), [m["a"], m["b"]])
    return (
        [read, send, event],
        lambda: (
            f"Sent the {company} weekly report ({len(facts.get('active') or [])} active) "
            f"and booked '{m['title']}'."
        ),
    )


def _cleanup(text: str, facts: dict[str, Any]) -> tuple[list[Op], Any]:
    m = _need(
        r"Calendar cleanup for the week of (?P<monday>{DAY}): find and cancel \(or delete\) the "
        r"'(?P<a>.+?)' and '(?P<b>.+?)' events, leaving.*?Create '(?P<wrap>.+?)' on (?P<label>{SLOT}) for "
        r"(?P<minutes>\d+) minutes with exactly the team lead .+? \((?P<lead>{EMAIL})\)\. Then e-mail "
        r"(?P<notify>{EMAIL}) one message",
        text,
    )
    monday = parse_day(m["monday"])
    targets = [m["a"], m["b"]]
    read = _events_between(monday, monday + timedelta(days=4), _find_events(targets, facts))
    cancels = [_cancel(title, facts, (read,)) for title in targets]
    wrap = _event(m["wrap"], m["label"], int(m["minutes"]), [m["lead"]])
    send = _send(
        m["notify"],
        f"Calendar Updated \u2014 {m['wrap']} Added",
        f"Cancelled {targets[0]} and {targets[1]}; added {m['wrap']} on {m['label']}.",
    )
    return [read, *cancels, wrap, send], (
        f"Cancelled {targets[0]} and {targets[1]}, added {m['wrap']}, notified {m['notify']}."
    )


def _composition(text: str, facts: dict[str, Any]) -> tuple[list[Op], Any]:
    listing = _need(r"^Do all of the following[^:]*: (.*)$", text)[1]
    listing = listing[:-1] if listing.endswith(".") else listing
    reads: list[Op] = []
    writes: list[Op] = []
    summary: list[str] = []
    for i, part in enumerate(p.strip() for p in listing.split("; ")):
        if m := re.fullmatch(
            _rx(r"set the CRM status of the contact with e-mail ({EMAIL}) to '([^']+)'"), part
        ):
            key = f"contact{i}"
            read = _contact_by_email(m[1], facts, key)
            reads.append(read)
            writes.append(_set_status(key, m[2], facts, (read,)))
            summary.append(f"updated the contact's status to {m[2]}")
        elif m := re.fullmatch(
            _rx(r"e-mail (.+?) \(({EMAIL})\) one message, to them alone, with '(.+?)' in the subject"), part
        ):
            first = m[1].split()[0]
            writes.append(_send(m[2], f"{m[3]}: please read", f"Hi {first}, a note about {m[3].lower()}."))
            summary.append(f"notified {first}")
        elif m := re.fullmatch(
            _rx(r"schedule '(.+?)' on ({SLOT}) for (\d+) minutes with exactly ({EMAIL}) and ({EMAIL})"),
            part,
        ):
            writes.append(_event(m[1], m[2], int(m[3]), [m[4], m[5]]))
            summary.append(f"booked {m[1]}")
        elif m := re.fullmatch(_rx(r"cancel the '(.+?)' event on ({DAY})"), part):
            day = parse_day(m[2])
            read = _events_between(day, day, _find_events([m[1]], facts))
            reads.append(read)
            writes.append(_cancel(m[1], facts, (read,)))
            summary.append(f"cancelled {m[1]}")
        else:
            raise TaskNotUnderstood(part)
    return reads + writes, "; ".join(summary).capitalize() + "."


def make(ruleset: Ruleset) -> ScriptedPolicy:
    """The factory `schemashift.policies.BUILTIN` names for this policy."""
    return ScriptedPolicy(ruleset.name)
