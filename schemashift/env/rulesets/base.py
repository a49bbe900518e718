"""The Ruleset interface: everything that differs between benchmark versions.

A ruleset owns the scenario catalogue, draws a task instance (world, drift plan, ground truth)
from (scenario, seed), decides what the agent is shown (documentation at the start versus the
live schema returned by inspection), dispatches actions to tools, tracks progress, grades and
shapes. The Environment runs the same step pipeline for every ruleset and calls these hooks:

    fire_drifts(action) -> dispatch -> before_effects -> apply_effects -> (history) -> is_terminal
    -> reward -> observe

`before_effects` sees the state before the step's bookkeeping (legacy computes its dense
shaping there; a potential-based ruleset reads Phi(s) there), `reward` sees the state after it.
"""

from __future__ import annotations

import os
from typing import Any

from schemashift.env.actions import (
    CALL_TOOL,
    COMPLETE_TASK,
    INSPECT_SCHEMA,
    REPORT_DRIFT,
    RETRY_WITH_VARIANT,
    TOOL_CALL_TYPES,
    Action,
    InvalidAction,
)
from schemashift.env.episode import DriftEvent, Episode, ScenarioInfo, Task
from schemashift.env.frozen import freeze
from schemashift.env.tools import TOOL_CLASSES
from schemashift.env.tools.base import Tool, fail, ok

Response = dict[str, Any]


class UnknownScenario(KeyError):
    """A scenario id the ruleset does not define."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown scenario"


class Ruleset:
    """Base class with the behaviour shared by rulesets; subclasses override the hooks."""

    name: str = ""
    version: str = ""
    #: tool names an action may mention (tools outside a scenario answer 404)
    tool_names: tuple[str, ...] = ()
    #: drift kinds a report may name
    drift_kinds: tuple[str, ...] = ()
    #: False: an invalid action is rejected with InvalidAction and no step is taken.
    #: True: it is recorded as a wasted step (`invalid_step`).
    invalid_actions_consume_step: bool = False
    #: whether callers charge the policy's tokens against the budget (the legacy harness sent 0)
    charges_tokens: bool = True

    # -- catalogue ------------------------------------------------------------------------------
    def scenarios(self) -> list[ScenarioInfo]:
        raise NotImplementedError

    def scenario_ids(self) -> list[str]:
        return [info.id for info in self.scenarios()]

    def compositions(self) -> list[ScenarioInfo]:
        """Generated scenarios that runs include only when asked for (none by default)."""
        return []

    def scenario_info(self, scenario: str) -> ScenarioInfo:
        for info in self.scenarios():
            if info.id == scenario:
                return info
        raise UnknownScenario(
            f"Unknown scenario {scenario!r} for ruleset {self.name!r}. Available: {self.scenario_ids()}"
        )

    def splits(self) -> dict[str, tuple[int, int | None]]:
        """Split name -> (first seed, last seed or None for open-ended). Empty: no splits."""
        return {}

    def split_of(self, seed: int) -> str | None:
        for split, (first, last) in self.splits().items():
            if seed >= first and (last is None or seed <= last):
                return split
        return None

    # -- episode construction ----------------------------------------------------------------------
    def build_task(self, scenario: str, seed: int) -> Task:
        """Draw the task instance for (scenario, seed); raises UnknownScenario."""
        raise NotImplementedError

    def make_tools(self, task: Task) -> dict[str, Tool]:
        return {name: TOOL_CLASSES[name](task.seed_data.get(name)) for name in task.tools}

    def new_episode(self, scenario: str, seed: int, episode_id: str | None = None) -> Episode:
        task = self.build_task(scenario, seed)
        return Episode(task, episode_id or os.urandom(16).hex(), self.make_tools(task))

    # -- step pipeline ------------------------------------------------------------------------------
    def fire_drifts(self, ep: Episode, action: Action | None = None) -> list[DriftEvent]:
        """Apply the drifts due before `action` is dispatched (here: those scheduled for the
        current step, in plan order; a ruleset may fire drifts on the action itself)."""
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
        ep.docs = None
        return fired

    def dispatch(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        kind = action.type
        if kind in TOOL_CALL_TYPES:
            return self.call_tool(ep, action)
        if kind == INSPECT_SCHEMA:
            return self.inspect(ep, action)
        if kind == REPORT_DRIFT:
            return self.report(ep, action)
        return self.complete(ep, action)

    def call_tool(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        raise NotImplementedError

    def inspect(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        """Answer an inspection with the live schema of the tool."""
        tool = ep.tools.get(action.tool) if action.present else None
        if tool is None:
            return fail(404, "Tool unavailable for inspection."), "Inspect target missing."
        return ok({"schema": tool.schema_view()}), f"Inspected {action.tool} schema."

    def report(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        raise NotImplementedError

    def complete(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        raise NotImplementedError

    def invalid_step(self, ep: Episode, raw: Any, error: InvalidAction) -> tuple[Response | None, str]:
        """Dispatch of an action that failed validation, for rulesets that consume such steps."""
        return fail(400, f"Invalid action: {error}"), f"Invalid action: {error}"

    def before_effects(self, ep: Episode, action: Action | None, response: Response | None) -> Any:
        return None

    def apply_effects(self, ep: Episode, action: Action | None, response: Response | None) -> None:
        """Update progress tracking (detection, agent state, catastrophe) after dispatch."""

    def is_terminal(self, ep: Episode, action: Action | None) -> bool:
        return (
            ep.step >= ep.task.max_steps
            or ep.tokens_remaining <= 0
            or (action is not None and action.type == COMPLETE_TASK)
        )

    def reward(
        self, ep: Episode, action: Action | None, response: Response | None, pre: Any
    ) -> dict[str, Any]:
        raise NotImplementedError

    def potential(self, ep: Episode) -> float:
        """Phi(s) for potential-based shaping; rulesets without it return 0."""
        return 0.0

    def catastrophe(self, ep: Episode) -> bool:
        return bool(ep.agent_state.get("catastrophe"))

    def decorate_feedback(self, ep: Episode, feedback: str, fired: list[DriftEvent]) -> str:
        """The feedback of a step on which drifts fired (called only on such steps)."""
        return feedback

    def documentation(self, ep: Episode) -> dict[str, dict[str, Any]]:
        """The tool documentation observations show. Default: the live schema, rebuilt after drift."""
        docs = ep.docs
        if docs is None:
            docs = ep.docs = freeze({name: tool.schema_view() for name, tool in ep.tools.items()})
        return docs

    def observe(self, ep: Episode, feedback: str) -> dict[str, Any]:
        """The view of the episode a policy is shown: a new top-level dict each call.

        Views may share parts with earlier views, but a part is never changed in place once it
        has been in a view (a change makes a new object). Parts made frozen
        (`schemashift.env.frozen`) are handed to policies as they are; the Environment freezes
        the others for every observation.
        """
        raise NotImplementedError

    def visible_step(self, record: dict[str, Any]) -> dict[str, Any]:
        """What an observation's history shows of one step record."""
        return {
            "step": record["step"],
            "action": record["action"],
            "response": record["response"],
            "reward_breakdown": record["reward"],
        }

    # -- episode summaries ------------------------------------------------------------------------
    def summary(self, ep: Episode) -> dict[str, Any]:
        """Episode-level record fields (outcome, rubric, ruleset-specific columns)."""
        raise NotImplementedError

    def drift_outcomes(self, ep: Episode) -> list[dict[str, Any]]:
        """One row per planned drift: when it fired, was discovered, reported and recovered from.

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
            rows.append(
                {
                    "drift_index": drift.index,
                    "kind": spec.kind,
                    "tool": spec.tool,
                    "endpoint": spec.endpoint,
                    "planned_step": spec.fires_at_step,
                    "fired_step": drift.fired_step,
                    "discovered_step": discovered,
                    "reported_step": drift.reported_step,
                    "failed_step": failed_at,
                    "recovered_step": recovered,
                    "steps_to_recover": None if recovered is None else recovered - failed_at,
                }
            )
        return rows

    # -- ground-truth access, for the oracle only ------------------------------------------------------
    def solution(self, task: Task) -> list[dict[str, Any]]:
        """An action sequence that solves the task, written from its ground truth."""
        raise NotImplementedError


def action_counts(ep: Episode) -> dict[str, int]:
    """Effort counters that every ruleset reports the same way."""
    tool_calls = failed = deprecated = 0
    for record in ep.history:
        kind = record["action"].get("type")
        response = record["response"]
        if kind in (CALL_TOOL, RETRY_WITH_VARIANT) and response is not None:
            tool_calls += 1
            if not response["ok"]:
                failed += 1
                if response["status"] == 410:
                    deprecated += 1
    return {"tool_calls": tool_calls, "failed_calls": failed, "deprecated_calls": deprecated}
