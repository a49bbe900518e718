"""The `legacy` ruleset: the original SchemaShift, quirks included, to reproduce its numbers.

Every rule here follows `spec/legacy-schemashift.md` sections 3-8 literally: drift applied
before dispatch, dense shaping computed before detection marking and added after gating, a
strict gate only on the terminal step, adaptation scored on the first call strictly after the
drift step, exact-count ground truth and sticky progress flags. The seed is accepted and ignored.
"""

from __future__ import annotations

from typing import Any

from schemashift.env.actions import (
    CALL_TOOL,
    INSPECT_SCHEMA,
    REPORT_DRIFT,
    RETRY_WITH_VARIANT,
    TOOL_CALL_TYPES,
    Action,
)
from schemashift.env.arms import DEFAULT_ARM, DRIFT
from schemashift.env.episode import DriftEvent, DriftSpec, Episode, ScenarioInfo, Task
from schemashift.env.frozen import EMPTY_LIST, FrozenDict, FrozenList, freeze
from schemashift.env.rulesets.base import (
    RUBRIC_COLUMNS,
    Response,
    Ruleset,
    UnknownScenario,
    action_counts,
    drift_counts,
    drift_row,
    weighted_rubric,
)
from schemashift.env.rulesets.legacy.scenarios import SCENARIOS
from schemashift.env.rulesets.legacy.tools import TOOL_CLASSES
from schemashift.env.rulesets.legacy.tools.base import Tool, fail, ok

INSPECT_AFTER_FAILURE = 0.10
CORRECT_REPORT = 0.15
RETRY_AFTER_FAILURE = 0.20
REPEATED_FAILED_CALL = -0.05

#: (subject keyword, progress flag set when a sent mail's subject contains it; sticky)
SUBJECT_FLAGS = (
    ("welcome", "mail.last_subject_contains_welcome"),
    ("all-hands", "mail.last_subject_contains_allhands"),
    ("all hands", "mail.last_subject_contains_allhands"),
    ("priority support", "mail.last_subject_contains_priority_support"),
    ("weekly", "mail.last_subject_contains_weekly"),
    ("calendar updated", "mail.last_subject_contains_calendar_updated"),
)
ALL_HANDS_RECIPIENTS = frozenset({"alex@company.com", "jordan@company.com", "sam@company.com"})
#: attendee pairs that set a calendar flag; the original shares one key between two pairs
ATTENDEE_PAIR_FLAGS = (
    (("priya@company.com", "alex@company.com"), "calendar.last_event_has_both_attendees"),
    (("bob@customer.com", "alex@company.com"), "calendar.last_event_has_both_attendees"),
    (("sarah@company.com", "mike@company.com"), "calendar.last_event_has_both_sales_leads"),
)
WRAP_UP_TITLE = "friday wrap-up"
#: ground-truth key -> names any of which the completion summary must mention
SUMMARY_MENTIONS = {"complete_summary_mentions_company": ("globex", "acme", "initech")}
SEND_ENDPOINTS = frozenset({"send_message", "messages.send"})
CONTACT_UPDATE_ENDPOINTS = frozenset({"update_contact", "contacts.patch"})
HISTORY_WINDOW = 5
#: how many drifted documentations a ruleset instance keeps (a scenario has a handful)
DRIFTED_DOCS_KEPT = 256


class LegacyRuleset(Ruleset):
    name = "legacy"
    version = "1"
    tool_names = ("mail", "calendar", "crm", "chat", "docs")
    drift_kinds = (
        "field_rename",
        "endpoint_deprecation",
        "response_restructure",
        "new_required_param",
        "error_code_remap",
        "tool_removal",
        "rate_limit_tightening",
    )
    invalid_actions_consume_step = False
    charges_tokens = False
    #: the original has no control arm, and its published solutions are written for the drifted schemas
    arms = (DRIFT,)
    seeds_vary_task = False
    #: observe builds every part of a view frozen (tests/env/test_observation_snapshots.py)
    frozen_views = True

    def __init__(self) -> None:
        self._infos = [
            ScenarioInfo(sid, s["tier"], sid, s["tools"], s["max_steps"], s["description"])
            for sid, s in SCENARIOS.items()
        ]
        #: each scenario's fields of a view, in the spec's key order; `new_episode` copies one
        self._view_bases = {sid: _view_base(self.name, sid, s) for sid, s in SCENARIOS.items()}
        #: each scenario's completion in the empty agent state, where every episode starts
        self._start_completions = {sid: _completion(s["ground_truth"], {}) for sid, s in SCENARIOS.items()}
        #: the documentation by tools and the drift specs applied (see `documentation`)
        self._drifted_docs: dict[tuple[Any, ...], tuple[tuple[DriftSpec, ...], dict[str, Any]]] = {}

    def scenarios(self) -> list[ScenarioInfo]:
        return list(self._infos)

    def build_task(self, scenario: str, seed: int) -> Task:
        spec = SCENARIOS.get(scenario)
        if spec is None:
            raise UnknownScenario(
                f"Unknown scenario {scenario!r} for ruleset 'legacy'. Available: {list(SCENARIOS)}"
            )
        # Positional: a reset builds one, and keyword arguments cost a name match each.
        return Task(
            scenario,
            seed,
            spec["tier"],
            scenario,
            spec["max_steps"],
            spec["token_budget"],
            spec["tools"],
            spec["seed_data"],
            spec["description"],
            spec["success_criteria"],
            spec["drift_plan"],
            spec["ground_truth"],
        )

    def make_tools(self, task: Task) -> dict[str, Tool]:
        return {name: TOOL_CLASSES[name](task.seed_data.get(name)) for name in task.tools}

    def new_episode(
        self, scenario: str, seed: int, episode_id: str | None = None, *, arm: str = DEFAULT_ARM
    ) -> Episode:
        ep = super().new_episode(scenario, seed, episode_id, arm=arm)
        task = ep.task
        # The view's fields of the scenario, with this episode's own: a copy of a dict built once.
        base = self._view_bases[task.scenario].copy()
        base["episode_id"] = ep.episode_id
        base["seed"] = task.seed
        ep.extra["observation_base"] = base
        # Parts of views are frozen where they are made (see schemashift.env.frozen), and
        # those every episode starts with, the documentation included, are shared between
        # episodes.
        ep.extra["applied"] = ()  # the drift specs applied so far, in order (`documentation`)
        self.documentation(ep)  # the start documentation, kept with the drifted ones (shared)
        ep.extra["visible_drifts"] = EMPTY_LIST
        # Every episode starts from the empty agent state: its completion and its snapshot are the
        # scenario's own, not worked out again at every reset.
        ep.extra["completion"] = self._start_completions[task.scenario]
        ep.extra["known_state"] = EMPTY_STATE
        ep.extra["drift_tally"] = DriftTally(ep)
        return ep

    def solution(self, task: Task) -> list[dict[str, Any]]:
        return list(SCENARIOS[task.scenario]["solution"])

    # -- drift and dispatch (spec 3.2-3.3) ------------------------------------------------------------
    def fire_drifts(self, ep: Episode, action: Action | None = None) -> list[DriftEvent]:
        """Apply the drifts scheduled for the current step, in plan order, before dispatch."""
        due = ep.drifts_by_step.get(ep.step)
        if not due:
            return []
        fired = []
        for drift in due:
            if not drift.fired:
                spec = drift.spec
                ep.tools[spec.tool].apply_drift(spec.kind, spec.endpoint, spec.details)
                drift.fired = True
                drift.fired_step = ep.step
                fired.append(drift)
                ep.extra["applied"] += (spec,)
        ep.docs = None
        return fired

    def call_tool(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        verb = "Called" if action.type == CALL_TOOL else "Retried"
        if not action.present:
            if action.type == CALL_TOOL:
                return None, "Invalid call_tool: missing tool_call params."
            return fail(404, "Retry target unavailable."), "Retry target missing."
        tool = ep.tools.get(action.tool)
        if tool is None:
            if action.type == CALL_TOOL:
                return fail(
                    404, f"Tool '{action.tool}' not available in this scenario."
                ), "Tool not available."
            return fail(404, "Retry target unavailable."), "Retry target missing."
        response = tool.call(action.endpoint, action.params)
        return response, f"{verb} {action.tool}.{action.endpoint}: status={response['status']}"

    def inspect(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        """Answer an inspection with the live schema of the tool: its entry of the documentation,
        which episodes with the same drifts share (so it is not rebuilt in every episode)."""
        if not action.present or action.tool not in ep.tools:
            return fail(404, "Tool unavailable for inspection."), "Inspect target missing."
        docs = ep.docs if ep.docs is not None else self.documentation(ep)
        return ok(FrozenDict(schema=docs[action.tool])), f"Inspected {action.tool} schema."

    def report(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        if not action.present:
            return None, "Invalid report_drift: missing report params."
        drift = _matching_drift(ep, action)
        if drift is None:
            return None, "Drift report did not match any undetected fired drift."
        spec = drift.spec
        return None, f"Drift correctly reported: {spec.kind} on {spec.tool} at step {spec.fires_at_step}."

    def complete(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        summary = action.summary if action.present else ""
        ep.agent_state["_completion_summary"] = summary
        ep.extra["completion"] = ep.extra["known_state"] = None
        summary_lc = summary.lower()
        for key, names in SUMMARY_MENTIONS.items():
            if key in ep.task.ground_truth and any(name in summary_lc for name in names):
                ep.agent_state[key] = True
        return None, f"Episode marked complete. Summary: {summary[:80]}"

    # -- shaping, effects, grading (spec 7-8) ---------------------------------------------------------
    def before_effects(self, ep: Episode, action: Action | None, response: Response | None) -> float:
        """Dense step shaping, computed against the history before this step."""
        previous = ep.history[-1] if ep.history else None
        prev_response = previous["response"] if previous else None
        prev_failed = prev_response is not None and not prev_response["ok"]
        kind = action.type
        if kind == INSPECT_SCHEMA:
            return INSPECT_AFTER_FAILURE if prev_failed else 0.0
        if kind == REPORT_DRIFT:
            return CORRECT_REPORT if action.present and _matching_drift(ep, action) else 0.0
        if kind == RETRY_WITH_VARIANT:
            return RETRY_AFTER_FAILURE if prev_failed and response is not None and response["ok"] else 0.0
        if kind == CALL_TOOL and prev_failed and action.present:
            prev_action = previous["action"]
            prev_call = prev_action.get("tool_call") if prev_action["type"] == CALL_TOOL else None
            if prev_call and prev_call["tool"] == action.tool and prev_call["endpoint"] == action.endpoint:
                return REPEATED_FAILED_CALL
        return 0.0

    def apply_effects(self, ep: Episode, action: Action | None, response: Response | None) -> None:
        if action.type == REPORT_DRIFT and action.present:
            drift = _matching_drift(ep, action)
            if drift is not None:
                drift.detected = True
                drift.reported_step = ep.step
                ep.extra["drift_tally"].detected += 1
                spec = drift.spec
                ep.extra["visible_drifts"] = freeze(
                    [
                        *ep.extra["visible_drifts"],
                        {
                            "tool": spec.tool,
                            "kind": spec.kind,
                            "endpoint": spec.endpoint,
                            "fires_at_step": spec.fires_at_step,
                        },
                    ]
                )
        elif action.type in TOOL_CALL_TYPES and response is not None and response["ok"]:
            if _track_progress(ep.agent_state, action.tool, action.endpoint, action.params, response["body"]):
                ep.extra["completion"] = ep.extra["known_state"] = None

    def reward(
        self, ep: Episode, action: Action | None, response: Response | None, pre: float
    ) -> dict[str, Any]:
        extra = ep.extra
        cached = extra["completion"]
        if cached is None:
            cached = extra["completion"] = _completion(ep.task.ground_truth, ep.agent_state)
        completion, all_met = cached
        drift_detection, adaptation = extra["drift_tally"].scores_after(ep, action, response)
        task = ep.task
        steps_left = 1.0 - ep.step / task.max_steps  # `max(0.0, ...)` in the spec, without the call
        efficiency = 0.5 * (steps_left if steps_left > 0.0 else 0.0) + 0.5 * (
            ep.tokens_remaining / (task.token_budget if task.token_budget > 1 else 1)
        )
        weighted = weighted_rubric(completion, drift_detection, adaptation, efficiency)
        catastrophe = self.catastrophe(ep)
        catastrophic_gate = 0.0 if catastrophe else 1.0
        if catastrophe:
            final_gate = 0.0
        elif not ep.done:
            final_gate = 1.0
        else:
            final_gate = 1.0 if all_met else 0.0
        gates = catastrophic_gate * final_gate
        shaped_total = weighted * catastrophic_gate * final_gate + pre
        binary = 1.0 if completion >= 0.95 and gates >= 1.0 else 0.0
        ep.cumulative_reward += shaped_total
        # Built frozen, so the Environment hands it out without copying it again.
        return FrozenDict(
            completion=completion,
            drift_detection=drift_detection,
            adaptation=adaptation,
            efficiency=efficiency,
            catastrophic_gate=catastrophic_gate,
            correct_final_gate=final_gate,
            step_shaping=pre,
            shaped_total=shaped_total,
            binary=binary,
            cumulative_reward=ep.cumulative_reward,
            success=binary == 1.0,
            score=shaped_total,
            steps=ep.step,
            done=ep.done,
        )

    def catastrophe(self, ep: Episode) -> bool:
        """The original's catastrophe flag, which nothing in its world ever sets."""
        return bool(ep.agent_state.get("catastrophe"))

    def decorate_feedback(self, ep: Episode, feedback: str, fired: list[DriftEvent]) -> str:
        return f"{feedback} [DRIFT FIRED: {len(fired)} drift event(s) on step {ep.step}.]"

    # -- what the agent sees (spec 2.5) ------------------------------------------------------------------
    def documentation(self, ep: Episode) -> dict[str, dict[str, Any]]:
        """The live schema of every tool, rebuilt after drift.

        A tool's schemas are a function of its class and the drift specs applied to it, in order,
        and a scenario's episodes apply the same specs: so the documentation is kept by tools
        and the identities of the applied specs, and shared between episodes (it is frozen). The
        entry holds the specs themselves, so no other object can take one of their ids while it
        is kept: an equal key means the same specs.
        """
        docs = ep.docs
        if docs is None:
            applied = ep.extra["applied"]
            key = (ep.task.tools, *map(id, applied))
            kept = self._drifted_docs.get(key)
            if kept is not None:
                docs = kept[1]
            else:
                docs = FrozenDict({name: tool.schema_view() for name, tool in ep.tools.items()})
                if len(self._drifted_docs) >= DRIFTED_DOCS_KEPT:
                    self._drifted_docs.clear()
                self._drifted_docs[key] = (applied, docs)
            ep.docs = docs
        return docs

    def visible_step(self, record: dict[str, Any]) -> dict[str, Any]:
        # The record's parts are frozen already, so this is frozen as built.
        return FrozenDict(
            step=record["step"],
            action=record["action"],
            response=record["response"],
            reward_breakdown=record["reward"],
        )

    def observe(self, ep: Episode, feedback: str) -> dict[str, Any]:
        observation = ep.extra["observation_base"].copy()
        observation["step"] = ep.step
        observation["token_budget_remaining"] = ep.tokens_remaining
        observation["tool_schemas"] = ep.docs if ep.docs is not None else self.documentation(ep)
        known = ep.extra["known_state"]
        if known is None:
            # The agent state changed since the last observation: snapshot it again.
            known = ep.extra["known_state"] = freeze(ep.agent_state)
        observation["known_state"] = known
        history = ep.visible_history
        # The window is a frozen copy of the history's end: all of it while it fits (a slice
        # would be one more list to make).
        if not history:
            observation["history"] = EMPTY_LIST
        elif len(history) <= HISTORY_WINDOW:
            observation["history"] = FrozenList(history)
        else:
            observation["history"] = FrozenList(history[-HISTORY_WINDOW:])
        observation["last_response"] = ep.history[-1]["response"] if ep.history else None
        observation["drift_events_visible"] = ep.extra["visible_drifts"]
        observation["done"] = ep.done
        observation["feedback"] = feedback
        return observation

    # -- records ----------------------------------------------------------------------------------------
    def summary(self, ep: Episode) -> dict[str, Any]:
        last = ep.history[-1]["reward"] if ep.history else None
        row = {key: (last[key] if last else None) for key in RUBRIC_COLUMNS}
        row.update(
            cumulative_reward=ep.cumulative_reward,
            success=bool(last and last["binary"] == 1.0),
            score=last["shaped_total"] if last else None,
            training_reward=None,
            schedule_hash=ep.task.schedule_hash(),
            catastrophe=self.catastrophe(ep),
            invalid_actions=0,
            **drift_counts(ep.drifts, self.drift_outcomes(ep)),
            **action_counts(ep),
        )
        return row

    def drift_outcomes(self, ep: Episode) -> list[dict[str, Any]]:
        """One row per planned drift, from the step history.

        Discovered: the first step at or after firing with evidence on the drifted tool (a failed
        call, or an inspection of it). Recovered: the first successful call on that tool after
        the first failed call on it at or after firing.
        """
        rows = []
        for drift in ep.drifts:
            spec = drift.spec
            discovered = failed_at = recovered = None
            if drift.fired_step is not None:
                for record in ep.history:
                    if record["step"] < drift.fired_step:
                        continue
                    action = record["action"]
                    sub = action.get("tool_call") or action.get("retry") or action.get("inspect")
                    if not sub or sub.get("tool") != spec.tool:
                        continue
                    response = record["response"]
                    if action["type"] == INSPECT_SCHEMA:
                        if discovered is None and response and response["ok"]:
                            discovered = record["step"]
                        continue
                    if response is None:
                        continue
                    if not response["ok"]:
                        if failed_at is None:
                            failed_at = record["step"]
                        if discovered is None:
                            discovered = record["step"]
                    elif failed_at is not None:
                        recovered = record["step"]
                        break
            rows.append(drift_row(drift, discovered=discovered, failed=failed_at, recovered=recovered))
        return rows


def _matching_drift(ep: Episode, action: Action) -> DriftEvent | None:
    """The first undetected drift with the report's tool and kind whose step has come."""
    for drift in ep.drifts:
        spec = drift.spec
        if (
            not drift.detected
            and spec.tool == action.tool
            and spec.kind == action.drift_kind
            and spec.fires_at_step <= ep.step
        ):
            return drift
    return None


def _track_progress(
    state: dict[str, Any], tool: str, endpoint: str, params: dict[str, Any], body: Any
) -> bool:
    """Progress flags from a successful call (spec 7): values come from the request params,
    except calendar attendees, which come from the response body. Flags never revert. Whether
    the call may have changed the state (a call that tracks nothing, a search, leaves it as it
    was, and what the state decides need not be worked out again)."""
    if tool == "mail" and endpoint in SEND_ENDPOINTS:
        state["mail.sent_count"] = state.get("mail.sent_count", 0) + 1
        to = params.get("to", "")
        state["mail.last_sent_to"] = to
        subject_lc = str(params.get("subject", "")).lower()
        for keyword, flag in SUBJECT_FLAGS:
            if keyword in subject_lc:
                state[flag] = True
        recipients = state.get("mail.all_recipients", EMPTY_LIST)
        if to and to not in recipients:
            # Frozen here, so snapshots of the state share it instead of copying it.
            recipients = FrozenList([*recipients, to])
        state["mail.all_recipients"] = recipients
        if ALL_HANDS_RECIPIENTS.issubset(r for r in recipients if isinstance(r, str)):
            state["mail.sent_to_all_three_recipients"] = True
    elif tool == "calendar" and endpoint == "create_event":
        state["calendar.events_count"] = state.get("calendar.events_count", 0) + 1
        body = body if isinstance(body, dict) else {}
        people = body.get("attendees") or body.get("participants") or []
        emails = [p.get("email") if isinstance(p, dict) else p for p in people]
        state["calendar.last_event_attendees"] = FrozenList(emails)
        for (first, second), flag in ATTENDEE_PAIR_FLAGS:
            if first in emails and second in emails:
                state[flag] = True
        title = body.get("title") or params.get("title") or ""
        if WRAP_UP_TITLE in str(title).lower():
            key = "calendar.events_count_new_friday_wrapup"
            state[key] = state.get(key, 0) + 1
    elif tool == "calendar" and endpoint == "update_event":
        if "event_id" not in params or "status" not in params:
            return False
        state[f"calendar.{params['event_id']}_status"] = params["status"]
    elif tool == "crm" and endpoint in CONTACT_UPDATE_ENDPOINTS:
        if "contact_id" not in params or "status" not in params:
            return False
        state[f"crm.contact_{params['contact_id']}_status"] = params["status"]
    else:
        return False
    return True


def _view_base(ruleset: str, scenario: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A scenario's fields of a view: those that never change within an episode (the episode's id
    and seed are filled in at reset), then those `observe` sets at every view, present already so
    that a view's copy of this dict has room for them (adding them would grow it at every step)."""
    return {
        "episode_id": None,
        "ruleset": ruleset,
        "task_id": scenario,
        "seed": None,
        "difficulty": spec["tier"],
        "step": 0,
        "max_steps": spec["max_steps"],
        "token_budget_remaining": spec["token_budget"],
        "task_description": spec["description"],
        "success_criteria": FrozenList(spec["success_criteria"]),
        "tool_schemas": None,
        "known_state": None,
        "history": EMPTY_LIST,
        "last_response": None,
        "drift_events_visible": EMPTY_LIST,
        "done": False,
        "feedback": "",
    }


#: the agent state every episode starts with, as views show it
EMPTY_STATE = FrozenDict()


def _completion(truth: dict[str, Any], state: dict[str, Any]) -> tuple[float, bool]:
    """(fraction of ground-truth keys met, all met); the caller caches it until the state changes."""
    met = 0
    for key, expected in truth.items():
        actual = state.get(key)
        if isinstance(expected, list):
            if isinstance(actual, list) and all(item in actual for item in expected):
                met += 1
        elif actual == expected:
            met += 1
    return (met / len(truth) if truth else 0.0), met == len(truth)


class DriftTally:
    """Running counts behind the detection and adaptation rubrics, updated once per step.

    A drift counts as fired from the step it is planned for (`fires_at_step <= step`, whether
    or not it was applied). Its adaptation opportunity is the first call on its tool strictly
    after that step; `pending` holds the fired drifts still waiting for one.
    """

    __slots__ = ("fired", "detected", "opportunities", "adapted", "pending")

    def __init__(self, ep: Episode) -> None:
        self.pending = [d for d in ep.drifts if d.spec.fires_at_step <= 0]
        self.fired = len(self.pending)
        self.detected = self.opportunities = self.adapted = 0

    def scores_after(self, ep: Episode, action: Action, response: Response | None) -> tuple[float, float]:
        """(detection, adaptation) once this step's drifts and call are counted."""
        due = ep.drifts_by_step.get(ep.step)
        if due:
            self.fired += len(due)
            self.pending.extend(due)
        if self.pending and action.present and action.type in TOOL_CALL_TYPES:
            for drift in list(self.pending):
                if drift.spec.tool == action.tool and drift.spec.fires_at_step < ep.step:
                    self.pending.remove(drift)
                    self.opportunities += 1
                    if response is not None and response["ok"]:
                        self.adapted += 1
        if self.fired == 0:
            return 0.0, 0.0
        return self.detected / self.fired, (self.adapted / self.opportunities if self.opportunities else 0.0)
