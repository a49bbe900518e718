"""A scripted agent that copes with v1 drift using only what observations and errors reveal.

It is a Policy: `act` receives the serialised observation (the tests pass it through a JSON
round trip) and nothing else. It is given the task's plan as written against the documentation
published at the start of the episode (`ruleset.documented_plan`), which carries no drift
knowledge: the calls a competent agent would make from the task text and the docs. Everything
about drift it learns from responses (errors, status codes, headers, body layouts) and from
`inspect_schema`, by comparing the live schema with the start-of-episode documentation:

- an endpoint marked deprecated or retired -> endpoint_deprecation (use the named replacement)
- an endpoint marked removed -> tool_removal (call the documented fallback)
- a documented parameter gone and a new one of the same type -> field_rename
- a new required parameter -> new_required_param (its note names the allowed values)
- a parameter with another type -> type_change (its note says how to convert)
- a response layout of `data`/`meta` -> response_restructure
- error statuses that differ from the documented ones -> error_code_remap
- a rate limit in the live schema, or a 429 with Retry-After -> rate_limit_tightening (wait)

Before completing it inspects every tool it used once more, so that drift which never got in
its way is reported too.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

ENUM = re.compile(r"one of \[([^\]]*)\]")


class ScriptedAgent:
    name = "scripted"

    def __init__(self, plan: list[dict[str, Any]], summary: str) -> None:
        self.plan = [a["tool_call"] for a in plan]
        self.summary = summary
        self.reset()

    def reset(self) -> None:
        self.queue = list(self.plan)
        self.docs: dict[str, Any] | None = None
        self.live: dict[str, Any] = {}
        self.reported: set[tuple[str, str, str | None]] = set()
        self.pending: list[dict[str, Any]] = []  # actions to take before the next call
        self.awaiting: tuple[str, Any] | None = None
        self.wait_until: dict[str, int] = {}
        self.accepted: dict[str, list[int]] = {}  # steps of this agent's calls the limiter let through
        self.attempts = 0
        self.swept: list[str] | None = None
        self.used: list[str] = []
        self.suspect: set[str] = set()

    # -- the Policy surface ------------------------------------------------------------------------
    def act(self, observation: dict[str, Any]) -> dict[str, Any]:
        if self.docs is None:
            self.docs = observation["tool_schemas"]
            self.live = {tool: view for tool, view in self.docs.items()}
        self._read(observation)
        if self.pending:
            return self._take(self.pending.pop(0))
        step = observation["step"] + 1
        if self.queue:
            call = self.queue[0]
            tool = call["tool"]
            if self._blocked(tool, step):
                other = next((c for c in self.queue if not self._blocked(c["tool"], step)), None)
                if other is None:
                    return self._take({"type": "inspect_schema", "inspect": {"tool": tool}})
                call = other
            endpoint, params = self._render(call)
            self.awaiting = ("call", call)
            if call["tool"] not in self.used:
                self.used.append(call["tool"])
            return {
                "type": "call_tool",
                "tool_call": {"tool": call["tool"], "endpoint": endpoint, "params": params},
            }
        if self.swept is None:
            self.swept = list(self.used)
        if self.swept:
            return self._take({"type": "inspect_schema", "inspect": {"tool": self.swept.pop(0)}})
        return {"type": "complete_task", "complete": {"summary": self.summary}}

    def _blocked(self, tool: str, step: int) -> bool:
        """Whether a call now would exceed a known rate limit (or come before a Retry-After)."""
        if self.wait_until.get(tool, 0) > step:
            return True
        limit = next((e["rate_limit"] for e in self.live[tool].values() if "rate_limit" in e), None)
        if limit is None:
            return False
        recent = [s for s in self.accepted.get(tool, ()) if s > step - limit["per_steps"]]
        return len(recent) >= limit["calls"]

    def _take(self, action: dict[str, Any]) -> dict[str, Any]:
        if action["type"] == "inspect_schema":
            self.awaiting = ("inspect", action["inspect"]["tool"])
        else:
            self.awaiting = None
        return action

    # -- reading responses -------------------------------------------------------------------------
    def _read(self, observation: dict[str, Any]) -> None:
        awaiting, self.awaiting = self.awaiting, None
        response = observation["last_response"]
        if awaiting is None or response is None:
            return
        kind, what = awaiting
        if kind == "inspect":
            if response["ok"]:
                self.live[what] = response["body"]["schema"]
                self._diff(what)
            return
        call = what
        tool = call["tool"]
        headers = response.get("headers") or {}
        if response["status"] != 429 and "Retry-After" not in headers:
            self.accepted.setdefault(tool, []).append(observation["step"])
        if response["ok"]:
            self.attempts = 0
            self.queue.remove(call)
            known = self.live[tool].get(response_endpoint(observation), {}).get("response_shape", {})
            layout_changed = (
                isinstance(response["body"], dict) and "data" in response["body"] and "data" not in known
            )
            deprecated = (
                "Deprecation" in headers
                and (tool, "endpoint_deprecation", call["endpoint"]) not in self.reported
            )
            if deprecated or layout_changed:
                self.pending.append({"type": "inspect_schema", "inspect": {"tool": tool}})
            return
        self.attempts += 1
        if self.attempts > 4:
            self.queue.remove(call)  # give up on this call
            self.attempts = 0
            return
        if "Retry-After" in headers:
            self.wait_until[tool] = observation["step"] + int(headers["Retry-After"])
        self.pending.append({"type": "inspect_schema", "inspect": {"tool": tool}})

    # -- what changed ------------------------------------------------------------------------------
    def _diff(self, tool: str) -> None:
        """Compare the live schema of `tool` with the documentation and report what changed."""
        docs, live = self.docs[tool], self.live[tool]
        found: list[tuple[str, str | None]] = []
        remapped = False
        limited = any("rate_limit" in entry for entry in live.values())
        for name, doc in docs.items():
            entry = live.get(name)
            status = entry.get("status") if entry else "retired"
            if status in ("deprecated", "retired"):
                found.append(("endpoint_deprecation", name))
                continue
            if status == "removed":
                found.append(("tool_removal", name))
                continue
            change = self._contract_change(doc, entry)
            found.extend((kind, name) for kind in change)
            if entry["error_codes"] != doc["error_codes"]:
                remapped = True
        if remapped:
            found.append(("error_code_remap", None))
        if limited:
            found.append(("rate_limit_tightening", None))
        for kind, endpoint in found:
            key = (tool, kind, endpoint)
            if key not in self.reported:
                self.reported.add(key)
                where = f"{tool}.{endpoint}" if endpoint else tool
                self.pending.append(
                    {
                        "type": "report_drift",
                        "report": {"tool": tool, "drift_kind": kind, "description": f"{kind} on {where}"},
                    }
                )

    @staticmethod
    def _contract_change(doc: dict[str, Any], entry: dict[str, Any]) -> list[str]:
        kinds = []
        dp, lp = doc["params"], entry["params"]
        gone = [p for p in dp if p not in lp]
        new = [p for p in lp if p not in dp]
        if gone:
            kinds.append("field_rename")
        extra_required = [p for p in new if p in entry["required"] and p not in _renamed_to(dp, lp, entry)]
        if extra_required:
            kinds.append("new_required_param")
        if any(lp[p] != dp[p] for p in dp if p in lp) or _renamed_retyped(dp, lp, entry):
            kinds.append("type_change")
        if "data" in entry["response_shape"] and "data" not in doc["response_shape"]:
            kinds.append("response_restructure")
        return kinds

    # -- writing calls under the live contract -----------------------------------------------------
    def _render(self, call: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The call under the live contract: fallbacks and replacements, then parameters."""
        tool, endpoint, params = call["tool"], call["endpoint"], dict(call["params"])
        live = self.live[tool]
        doc = self.docs[tool][endpoint]
        entry = live.get(endpoint)
        if entry is not None and entry.get("status") == "removed":
            fallback = entry["fallback"]
            endpoint = fallback["endpoint"]
            params = {**params, **fallback["params"]}
            doc = self.docs[tool][endpoint]
            entry = live.get(endpoint)
        if entry is not None and entry.get("status") == "retired":
            endpoint = entry["replacement"]
        elif entry is not None and entry.get("status") == "deprecated":
            endpoint = entry["deprecation"]["replacement"]
        entry = live.get(endpoint)
        if entry is None or "params" not in entry:
            return endpoint, params
        return endpoint, _translate(params, doc, entry)


def response_endpoint(observation: dict[str, Any]) -> str:
    """The endpoint the last call went to, as the observation's history records it."""
    return observation["history"][-1]["action"]["tool_call"]["endpoint"]


def _renamed_to(dp: dict[str, str], lp: dict[str, str], entry: dict[str, Any]) -> dict[str, str]:
    """Live names of renamed documented parameters: gone and new paired by type, then by order."""
    gone = [p for p in dp if p not in lp]
    new = [
        p
        for p in lp
        if p not in dp and not (p in entry["required"] and "one of" in entry.get("notes", {}).get(p, ""))
    ]
    new = [p for p in new if not _looks_extra(p, entry)]
    pairs: dict[str, str] = {}
    for old in gone:
        match = next((n for n in new if lp[n] == dp[old] and n not in pairs.values()), None)
        if match is None:
            match = next((n for n in new if n not in pairs.values()), None)
        if match is not None:
            pairs[match] = old
    return pairs


def _looks_extra(param: str, entry: dict[str, Any]) -> bool:
    """A new parameter whose note describes a value to supply (not a conversion): an added one."""
    note = entry.get("notes", {}).get(param, "")
    return (
        param in entry["required"]
        and note != ""
        and "instead of" not in note
        and "'c_12'" not in note
        and ("non-empty" in note or "one of" in note)
    )


def _renamed_retyped(dp, lp, entry) -> bool:
    return any(lp[new] != dp[old] for new, old in _renamed_to(dp, lp, entry).items())


def _translate(params: dict[str, Any], doc: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    dp, lp = doc["params"], entry["params"]
    renamed = {old: new for new, old in _renamed_to(dp, lp, entry).items()}
    out: dict[str, Any] = {}
    for name, value in params.items():
        live_name = renamed.get(name, name)
        if live_name not in lp:
            continue
        out[live_name] = _convert(
            value, dp.get(name, lp[live_name]), lp[live_name], entry.get("notes", {}).get(live_name, "")
        )
    for name in entry["required"]:
        if name not in out and _looks_extra(name, entry):
            note = entry["notes"][name]
            match = ENUM.search(note)
            if match:
                out[name] = match.group(1).split(",")[0].strip().strip("'")
            elif "e-mail" in note:
                out[name] = "agent@company.com"
            else:
                out[name] = "scripted agent"
    return out


def _convert(value: Any, doc_type: str, live_type: str, note: str) -> Any:
    if doc_type == live_type:
        return value
    if live_type == "list[object]":
        return [{"email": v} for v in value]
    if live_type == "list[str]" and isinstance(value, str):
        return [value]
    if live_type == "int" and isinstance(value, str):
        if "unix seconds" in note:
            return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp())
        return int(value.rsplit("_", 1)[-1])
    return value
