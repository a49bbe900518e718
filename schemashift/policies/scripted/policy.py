"""The scripted policy: it plays a task's plan call by call under the live contract, reads each
response for facts and for drift, retries after what a failed call shows, and reports and
completes (the package docstring tells the whole strategy).

`handles_drift=False` switches every piece of drift handling off and nothing else: the
drift-oblivious variant (`scripted_oblivious`). It never inspects a schema, never reads a
response for drift (headers, envelopes, error statuses, retirement messages) and so learns no
route, rate limit or report; it reads a list response under its documented key and field names,
renders every call under the documentation (its live contract is never replaced) and loses a
write that is refused instead of looking into it, retrying it another way or taking its other
route. The plan, the lookups, the writes and the completion are the same code."""

from __future__ import annotations

import copy
import re
from typing import TYPE_CHECKING, Any

from schemashift.policies import base
from schemashift.policies.base import ActionDict, Observation
from schemashift.policies.scripted.contract import (
    LABEL_STATUS,
    TRANSIENT_CODES,
    contract_changes,
    convert,
    documented_contacts,
    documented_records,
    note_of,
    records,
    rename_pairs,
    requested_value,
    successors,
)
from schemashift.policies.scripted.ops import Op
from schemashift.policies.scripted.plans import plan_task
from schemashift.policies.scripted.wording import TaskNotUnderstood

if TYPE_CHECKING:
    from schemashift.env.rulesets.base import Ruleset

MAX_ATTEMPTS = 4
#: the registry's name of the drift-oblivious configuration
OBLIVIOUS = "scripted_oblivious"
TOOL_WIDE = ("error_code_remap", "rate_limit_tightening", "transient_fault")
#: the write and the read whose answers show whether a call took: the record written, the
#: contacts found (the parameters a silent change may drop are theirs)
CHECKED = ("update_contact", "update_event", "search_contacts")
#: identifiers: what a write names, not what it changes
IDENTIFIERS = frozenset({"contact_id", "event_id"})


class ScriptedPolicy:
    """The scripted v1 baseline (see the package docstring)."""

    name = "scripted"

    def __init__(self, ruleset: str = "v1", *, handles_drift: bool = True) -> None:
        self.ruleset = ruleset
        self.handles_drift = handles_drift
        if not handles_drift:
            self.name = OBLIVIOUS
        self._fallback = None
        if ruleset != "v1" and not handles_drift:
            # The fallback plays legacy with drift handling (policy-aware inspects, reports and
            # retries), and legacy has no control arm for an oblivious agent to be measured on.
            raise ValueError(f"{OBLIVIOUS} plays v1 only (ruleset {ruleset!r} has no control arm)")
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
            if self.handles_drift:
                self._drift_in_answer(tool, canonical, headers, body)
                if not self._took(op, tool, canonical, body):
                    # A 200 that did not do what was asked: a silent change. Look at the live
                    # schema and make the call again as it says (never the same call twice).
                    op.attempts += 1
                    op.failed.append(op.last_call)
                    if op.attempts >= MAX_ATTEMPTS:
                        op.state = "dropped"
                    elif tool not in self.inspect_next:
                        self.inspect_next.append(tool)
                    return
            op.state = "done"
            if op.on_ok is not None:
                op.on_ok(self._unwrap(tool, canonical, body))
            return
        code = body.get("code") if isinstance(body, dict) else None
        message = str((body or {}).get("message", "")) if isinstance(body, dict) else ""
        if self.handles_drift and self._waits(tool, code, response, message, step):
            return
        self.accepted.setdefault(tool, []).append(step)
        op.attempts += 1
        if op.last_call is not None:
            op.failed.append(op.last_call)
        if not self.handles_drift:
            # Drift-oblivious: a refused write is not looked into, varied or sent the other way.
            op.state = "dropped"
            return
        if self._rerouted(op, tool, canonical, code, message):
            return
        if op.attempts >= MAX_ATTEMPTS and not op.take_alt():
            return
        if tool not in self.inspect_next:
            self.inspect_next.append(tool)

    def _drift_in_answer(self, tool: str, canonical: str, headers: dict[str, Any], body: Any) -> None:
        """What an accepted call shows of drift: a deprecation (and its successor from the Link
        header) or an envelope the documentation does not have."""
        if "Deprecation" in headers:
            link = re.search(r"<([^>]+)>", headers.get("Link", ""))
            if link:
                self.route[(tool, canonical)] = link[1]
            self._queue_report(tool, "endpoint_deprecation", canonical)
        doc = self.docs[tool].get(canonical, {})
        if isinstance(body, dict) and "meta" in body and "meta" not in doc.get("response_shape", {}):
            self._queue_report(tool, "response_restructure", canonical)

    def _took(self, op: Op, tool: str, canonical: str, body: Any) -> bool:
        """Whether an accepted call did what it asked: the record a write returns holds every
        value it set, every contact a search returns matches every filter it passed."""
        if canonical not in CHECKED or not op.sent:
            return True
        if canonical == "search_contacts":
            found = self._unwrap(tool, canonical, body)
            return all(
                str(contact.get(key, "")).lower() == str(value).lower()
                for contact in found
                for key, (value, _) in op.sent.items()
                if key in ("email", "company", "status")
            )
        record = body
        if isinstance(body, dict) and "meta" in body:
            record = next((v for k, v in body.items() if k != "meta" and isinstance(v, dict)), body)
        if not isinstance(record, dict):
            return True
        values = list(record.values())
        return all(live in values for _, live in op.sent.values())

    def _waits(self, tool: str, code: Any, response: dict[str, Any], message: str, step: int) -> bool:
        """What a refused call's status shows of drift (an error code under another status, a
        rate limit, a transient fault); True: the call waits out the Retry-After and is made again
        as it was."""
        headers = response.get("headers") or {}
        expected = LABEL_STATUS.get(code)
        if expected is not None and response.get("status") != expected:
            self._queue_report(tool, "error_code_remap", None)
        if code != "rate_limited" and "Retry-After" not in headers:
            return False
        try:
            wait = int(headers.get("Retry-After", 1))
        except ValueError:
            wait = 1
        self.wait_until[tool] = step + max(1, wait)
        if code in TRANSIENT_CODES:
            self._queue_report(tool, "transient_fault", None)
            return True
        limit = re.search(r"at most (\d+) call\(s\) per (\d+) steps", message)
        if limit:
            self.rate[tool] = (int(limit[1]), int(limit[2]))
        self._queue_report(tool, "rate_limit_tightening", None)
        return True

    def _rerouted(self, op: Op, tool: str, canonical: str, code: Any, message: str) -> bool:
        """What a refused call's error shows of a retired or removed endpoint; True: the message
        names the successor, which the next call takes."""
        if code == "endpoint_retired":
            self._queue_report(tool, "endpoint_deprecation", canonical)
            use = re.search(rf"use {re.escape(tool)}\.(\S+?) \(same parameters\)", message)
            if use:
                self.route[(tool, canonical)] = use[1]
                return True
        if code == "endpoint_removed":
            self._queue_report(tool, "tool_removal", canonical)
        return False

    def _unwrap(self, tool: str, canonical: str, body: Any) -> Any:
        """A list response's records with their documented field names (search results only are
        ever renamed); other bodies as they came. Drift-oblivious: the records under the
        documented key, fields as they came."""
        if canonical not in ("search_contacts", "list_messages", "list_events"):
            return body
        if not self.handles_drift:
            return documented_records(self.docs[tool][canonical], body)
        found = records(body)
        if canonical != "search_contacts":
            return found
        doc = self.docs[tool].get(canonical)
        entry = self.live[tool].get(self.route.get((tool, canonical), canonical)) or {}
        inverse = {}
        if doc and "params" in entry:
            inverse = {live: name for name, live in rename_pairs(doc, entry).items()}
        out, renamed = documented_contacts(found, inverse)
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
    def _render(
        self, tool: str, endpoint: str, params: dict[str, Any]
    ) -> tuple[str, str, dict[str, Any], dict[str, tuple[Any, Any]]]:
        """(live endpoint, canonical endpoint, live params, what it sets) of a documented call:
        the last maps each documented parameter but identifiers to its documented value and the
        value sent. Drift-oblivious, the live contract stays the documentation and no route is
        learned: the documented call."""
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
        moved = successors(contract)
        lp = contract["params"]
        out: dict[str, Any] = {}
        sent: dict[str, tuple[Any, Any]] = {}
        for key, value in params.items():
            live_name = pairs.get(key, key)
            live_name = moved.get(live_name, live_name)
            if live_name not in lp:
                continue
            note = note_of(contract, live_name)
            out[live_name] = convert(value, doc["params"].get(key), lp[live_name], note)
            if key not in IDENTIFIERS:
                sent[key] = (value, out[live_name])

        for key in contract.get("required", ()):
            if key not in out:
                out[key] = self._supply(note_of(contract, key))
        return name, canonical, out, sent

    def _supply(self, note: str) -> str:
        """A value for a parameter the live contract added, as its note asks (a numbered one where
        it names none)."""
        value = requested_value(note)
        if value is not None:
            return value
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
        if self.handles_drift and any(op.state == "todo" for op in self.ops):
            # Every remaining call waits for a rate limit: spend the step on a report or a look.
            if self.reports:
                return self._report()
            blocked = next((op.tool for op in self.ops if op.state == "todo"), None)
            return self._inspect(blocked)
        # Wrap up: inspect tools called since their last inspection, report, complete.
        spare = left - 1 - len(self.reports)
        if self.handles_drift and spare >= 2:
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
        name, canonical, live_params, sent = self._render(op.tool, op.endpoint, params)
        if (name, live_params) in op.failed:
            # The live contract as this agent reads it gives the call that already failed: it
            # cannot write this one. Take the other route if the write has one, else give up.
            op.take_alt()
            return self._decide(observation)
        op.last_call, op.sent = (name, live_params), sent
        self.known_before = _known_total(observation)
        self.awaiting = ("call", (op, canonical))
        return base.call_tool(op.tool, name, live_params)

    def _inspect(self, tool: str) -> ActionDict:
        self.awaiting = ("inspect", tool)
        return base.inspect_schema(tool)

    def _report(self) -> ActionDict:
        tool, kind, endpoint = self.reports.pop(0)
        where = f"{tool}.{endpoint}" if endpoint else tool
        return base.report_drift(tool, kind, f"{kind} on {where}")

    def _complete(self) -> ActionDict:
        done = [op.done_text for op in (self.ops or []) if op.state == "done" and op.done_text]
        summary = self.summary() if callable(self.summary) else self.summary
        return base.complete_task(summary or ("Done: " + "; ".join(done) + "." if done else "Done."))


def _known_total(observation: Observation) -> int:
    known = observation.get("known_state") or {}
    return sum(v for v in known.values() if isinstance(v, int))


def make(ruleset: Ruleset) -> ScriptedPolicy:
    """The factory `schemashift.policies.BUILTIN` names for this policy."""
    return ScriptedPolicy(ruleset.name)


def make_oblivious(ruleset: Ruleset) -> ScriptedPolicy:
    """The factory `schemashift.policies.BUILTIN` names for `scripted_oblivious`: this policy with
    its drift handling switched off (v1 only)."""
    return ScriptedPolicy(ruleset.name, handles_drift=False)
