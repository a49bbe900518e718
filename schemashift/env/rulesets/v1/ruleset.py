"""The `v1` ruleset: seeded procedural tasks, the full drift catalogue, final-state grading and a
training reward that cannot be farmed (see docs/rulesets.md, section v1).

Per step the environment calls, in order: fire_drifts (deprecation sunsets that are due, then the
drifts this very call meets: drifts fire on the agent's own use of the drifted endpoint),
dispatch (the tool call against the live contract), before_effects, apply_effects (evidence,
reports, failures and recoveries per drift; invalid-action count), is_terminal, reward
(potential-based shaping, plus the terminal value on the last step) and observe.
"""

from __future__ import annotations

import copy
import os
import random
from functools import lru_cache
from typing import Any

from schemashift.env.actions import (
    COMPLETE_TASK,
    INSPECT_SCHEMA,
    REPORT_DRIFT,
    TOOL_CALL_TYPES,
    Action,
    InvalidAction,
)
from schemashift.env.episode import DriftEvent, DriftSpec, Episode, ScenarioInfo, Task
from schemashift.env.frozen import EMPTY_LIST, FrozenDict, FrozenList, freeze
from schemashift.env.pipeline import StepPipeline
from schemashift.env.rulesets.base import (
    Response,
    Ruleset,
    UnknownScenario,
    action_counts,
    drift_counts,
    drift_row,
)
from schemashift.env.rulesets.v1 import families
from schemashift.env.rulesets.v1.api import Api, build_view, error, ok
from schemashift.env.rulesets.v1.builder import Builder, FamilySpec, Redraw
from schemashift.env.rulesets.v1.catalogue import (
    BREAKING_KINDS,
    CATALOGUE,
    DRIFT_KINDS,
    HELD_OUT_KINDS,
    HELD_OUT_PAIRS,
    TOOL_WIDE,
    TOOL_WIDE_KINDS,
)
from schemashift.env.rulesets.v1.grading import CRITERION_TOOL, DAMAGE_CHECKS, criterion_met
from schemashift.env.rulesets.v1.tools import API_CLASSES, WRITE_ENDPOINTS

W_COMPLETION, W_DETECTION, W_ADAPTATION, W_EFFICIENCY = 0.40, 0.25, 0.20, 0.15
#: Undiscounted potential-based shaping: the shaping terms of an episode sum to -Phi(s_0), so the
#: training reward depends on the terminal value alone (see `reward`).
GAMMA = 1.0
#: Share of its completion a failed, cleanly ended episode keeps as terminal value, so groups
#: without a success still rank progress. Below the lowest successful score (W_COMPLETION).
FAILED_CREDIT = 0.2
WRONG_REPORT_PENALTY = 0.5
#: Adaptation lost per failed call on a drifted endpoint beyond the one that met the drift.
REPEAT_FAILURE_PENALTY = 0.25
TEST_SEEDS = (0, 9999)
TRAIN_FIRST_SEED = 10000
TOKENS_PER_STEP = 4000
HISTORY_WINDOW = 8
#: kinds that exclude any other drift on the same endpoint
EXCLUSIVE_KINDS = frozenset({"endpoint_deprecation", "tool_removal"})
#: endpoints a write can reach another way (a cancellation is a delete or a status update), so a
#: drift on them cannot be the crux: an agent could step around it
ROUTED_ENDPOINTS = frozenset({("calendar", "delete_event"), ("calendar", "update_event")})
DOCS_NOTE = (
    "tool_schemas is the API documentation as published when the episode started. The APIs may change "
    "during the episode without notice; inspect_schema returns a tool's live schema. Report a change "
    "with report_drift once you have evidence of it (a failed call, a changed response or an inspection)."
)


def _derived_rng(*parts: Any) -> random.Random:
    """A generator seeded from text: the same on every machine and Python build (never hash())."""
    return random.Random("v1/" + "/".join(str(p) for p in parts))


class V1Ruleset(Ruleset):
    name = "v1"
    version = "2"
    tool_names = ("mail", "calendar", "crm")
    drift_kinds = DRIFT_KINDS
    invalid_actions_consume_step = True
    charges_tokens = True

    def __init__(self) -> None:
        self._infos = [
            ScenarioInfo(fid, tier, fid, tools, limit, FAMILY_BLURBS[fid])
            for fid, (tier, _, limit, tools) in families.FAMILIES.items()
        ]
        self._composed = [
            ScenarioInfo(
                cid,
                tier,
                "composition",
                ("mail", "calendar", "crm"),
                limit,
                f"{parts} subtasks drawn across tools per seed",
            )  # fmt: skip
            for cid, (tier, parts, limit) in families.COMPOSITIONS.items()
        ]

    # -- catalogue ---------------------------------------------------------------------------------
    def scenarios(self) -> list[ScenarioInfo]:
        """The six families; generated compositions are listed by `compositions()`."""
        return list(self._infos)

    def compositions(self) -> list[ScenarioInfo]:
        return list(self._composed)

    def splits(self) -> dict[str, tuple[int, int | None]]:
        return {"test": TEST_SEEDS, "train": (TRAIN_FIRST_SEED, None)}

    def held_out(self) -> dict[str, list[str]]:
        """What only the test split draws: drift kinds, and kinds on particular tools."""
        return {
            "test-only drift kinds": sorted(HELD_OUT_KINDS),
            "test-only tool/kind pairs": sorted(f"{tool}:{kind}" for tool, kind in HELD_OUT_PAIRS),
        }

    # -- task instances ----------------------------------------------------------------------------
    def build_task(self, scenario: str, seed: int) -> Task:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"v1 seeds are non-negative integers, got {seed!r}")
        return _build_task(scenario, seed)

    def make_tools(self, task: Task) -> dict[str, Api]:
        return {name: API_CLASSES[name](task.seed_data[name]) for name in task.tools}

    def new_episode(self, scenario: str, seed: int, episode_id: str | None = None) -> Episode:
        return self.start(self.build_task(scenario, seed), episode_id)

    def start(self, task: Task, episode_id: str | None = None) -> Episode:
        """A fresh episode of a task instance."""
        ep = Episode(task, episode_id or os.urandom(16).hex(), self.make_tools(task))
        extra = ep.extra
        extra["base"] = {
            "episode_id": ep.episode_id,
            "ruleset": self.name,
            "task_id": task.scenario,
            "family": task.family,
            "seed": task.seed,
            "difficulty": task.tier,
            "max_steps": task.max_steps,
            "task_description": task.description,
            "success_criteria": FrozenList(task.success_criteria),
            "tool_schemas": _start_docs(task.tools),
            "documentation_note": DOCS_NOTE,
            "drift_kinds": _DRIFT_KINDS_SHOWN,
        }
        extra["retire"] = {}
        extra["calls"] = {}
        extra["evidence"] = {}
        extra["failed"] = {}
        extra["failures"] = {}
        extra["recovered"] = {}
        extra["wrong_reports"] = 0
        extra["invalid"] = 0
        extra["retired_calls"] = 0
        extra["summary_text"] = None
        extra["known"] = FrozenDict()
        extra["met"] = [False] * len(task.ground_truth["criteria"])
        extra["damage"] = dict.fromkeys(task.tools, ())
        extra["dirty"] = {*task.tools, None}
        # Phi of the state before the next step, and of the world as it is now.
        extra["phi"] = extra["phi_now"] = self._progress(ep)[0]
        extra["training_reward"] = 0.0
        extra["grade"] = None
        return ep

    # -- step pipeline -----------------------------------------------------------------------------
    def fire_drifts(self, ep: Episode, action: Action | None = None) -> list[DriftEvent]:
        """Retire endpoints whose sunset is due, then fire the drifts this call meets.

        A drift fires just before the agent's `on_call`-th call to its endpoint (any call on the
        tool for tool-wide kinds), so the call that triggers it already meets the new contract.
        """
        step = ep.step
        retiring = ep.extra["retire"].pop(step, None)
        if retiring:
            for tool, endpoint in retiring:
                ep.tools[tool].retire(endpoint)
        if action is None or action.type not in TOOL_CALL_TYPES or not action.present:
            return []
        api = ep.tools.get(action.tool)
        if api is None:
            return []
        canonical = api.canonical_of(action.endpoint)
        fired = _due_on_call(ep, action.tool, canonical)
        calls = ep.extra["calls"]
        for key in ((action.tool, None), (action.tool, canonical)) if canonical else ((action.tool, None),):
            calls[key] = calls.get(key, 0) + 1
        for drift in fired:
            spec = drift.spec
            api.apply_drift(spec.kind, spec.endpoint, spec.details, step)
            drift.fired = True
            drift.fired_step = step
            if spec.kind == "endpoint_deprecation":
                ep.extra["retire"].setdefault(step + spec.details["sunset_after"], []).append(
                    (spec.tool, spec.endpoint)
                )
        return fired

    def call_tool(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        if not action.present:
            ep.extra["invalid"] += 1
            key = "tool_call" if action.type == "call_tool" else "retry"
            return _invalid(f"{action.type} needs a '{key}' object with tool, endpoint and params")
        api = ep.tools.get(action.tool)
        if api is None:
            message = f"Tool '{action.tool}' is not available in this task; available: {list(ep.tools)}."
            return error(404, message, "unknown_tool"), f"{action.tool}: status=404 (unknown_tool)"
        response = api.call(action.endpoint, action.params, ep.step)
        if response["ok"]:
            live = api.endpoints.get(action.endpoint)
            if live is not None and (action.tool, live.canonical) in WRITE_ENDPOINTS:
                ep.extra["dirty"].add(action.tool)
                key = _KNOWN_KEYS[(action.tool, live.canonical)]
                known = ep.extra["known"]
                ep.extra["known"] = FrozenDict({**known, key: known.get(key, 0) + 1})
            return response, f"Called {action.tool}.{action.endpoint}: status=200"
        if response["body"]["code"] == "endpoint_retired":
            ep.extra["retired_calls"] += 1
        return (
            response,
            f"Called {action.tool}.{action.endpoint}: "
            f"status={response['status']} ({response['body']['code']})",
        )

    def inspect(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        api = ep.tools.get(action.tool) if action.present else None
        if api is None:
            if not action.present:
                ep.extra["invalid"] += 1
                return _invalid("inspect_schema needs an 'inspect' object naming a tool")
            return error(404, f"Tool '{action.tool}' is not available in this task.", "unknown_tool"), (
                f"Inspect {action.tool}: status=404"
            )
        return ok(
            {"tool": action.tool, "schema": api.schema_view()}
        ), f"Inspected the live {action.tool} schema."

    def report(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        if not action.present:
            ep.extra["invalid"] += 1
            return _invalid("report_drift needs a 'report' object with tool, drift_kind and description")
        return ok({"recorded": True}), f"Drift report recorded: {action.drift_kind} on {action.tool}."

    def complete(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        ep.extra["summary_text"] = action.summary if action.present else ""
        ep.extra["dirty"].add(None)
        return ok({"completed": True}), "Task marked complete."

    def invalid_step(self, ep: Episode, raw: Any, exc: InvalidAction) -> tuple[Response | None, str]:
        ep.extra["invalid"] += 1
        return _invalid(str(exc))

    def apply_effects(self, ep: Episode, action: Action | None, response: Response | None) -> None:
        if action is None or not action.present:
            return
        kind = action.type
        step = ep.step
        extra = ep.extra
        if kind == REPORT_DRIFT:
            for drift in ep.drifts:
                spec = drift.spec
                if (
                    drift.fired
                    and not drift.detected
                    and spec.tool == action.tool
                    and spec.kind == action.drift_kind
                    and drift.index in extra["evidence"]
                ):
                    drift.detected = True
                    drift.reported_step = step
                    return
            extra["wrong_reports"] += 1
            return
        if kind == COMPLETE_TASK:
            return
        tool = action.tool
        api = ep.tools.get(tool)
        for drift in ep.drifts:
            spec = drift.spec
            if not drift.fired or spec.tool != tool:
                continue
            index = drift.index
            if kind == INSPECT_SCHEMA:
                if response["ok"]:
                    extra["evidence"].setdefault(index, step)
                continue
            on_target = spec.endpoint is None or action.endpoint in _targets(spec)
            if not response["ok"]:
                extra["evidence"].setdefault(index, step)
                if on_target and index not in extra["recovered"]:
                    # A call that meets a new drift may fail on it; that failure is not held
                    # against the drifts met earlier.
                    if (
                        drift.fired_step < step
                        and index in extra["failed"]
                        and any(d.fired_step == step for d in ep.drifts)
                    ):
                        continue
                    extra["failed"].setdefault(index, step)
                    extra["failures"][index] = extra["failures"].get(index, 0) + 1
            elif on_target:
                if _shows_change(api, action.endpoint, spec, response):
                    extra["evidence"].setdefault(index, step)
                if index in extra["failed"] and index not in extra["recovered"]:
                    extra["recovered"][index] = step

    def reward(
        self, ep: Episode, action: Action | None, response: Response | None, pre: Any
    ) -> dict[str, Any]:
        """r_t = Phi(s_t+1) - Phi(s_t), plus the terminal value on the last step (Phi(s_T) = 0).

        The sum over an episode is terminal value - Phi(s_0): progress is paid as it happens and
        taken back at the end, so nothing but the final outcome decides the training reward.
        """
        extra = ep.extra
        if extra["dirty"]:
            extra["phi_now"] = self._progress(ep)[0]
        phi_now = 0.0 if ep.done else extra["phi_now"]
        shaping = GAMMA * phi_now - extra["phi"]
        extra["phi"] = phi_now
        if not ep.done:
            extra["training_reward"] += shaping
            # Built frozen, so the Environment hands it out without copying it again.
            return FrozenDict(
                phi=phi_now,
                shaping=shaping,
                reward=shaping,
                training_reward=extra["training_reward"],
                steps=ep.step,
                done=False,
            )
        breakdown: dict[str, Any] = {"phi": phi_now, "shaping": shaping}
        grade = self._grade(ep)
        breakdown.update(grade)
        step_reward = shaping + grade["terminal_value"]
        extra["training_reward"] += step_reward
        breakdown.update(
            reward=step_reward, training_reward=extra["training_reward"], steps=ep.step, done=True
        )
        return breakdown

    def training_reward(self, ep: Episode) -> float:
        """The episode's training reward if it stops now: an episode the environment did not end
        gives its potential back, so it earns what a failed episode would."""
        extra = ep.extra
        return extra["training_reward"] if ep.done else extra["training_reward"] - extra["phi"]

    # -- grading -----------------------------------------------------------------------------------
    def _progress(self, ep: Episode) -> tuple[float, list[bool], list[str]]:
        """(potential Phi, criteria met, collateral damage) of the current world.

        Only the parts that read a tool written since the last call are checked again (None
        stands for the completion summary).
        """
        extra = ep.extra
        dirty = extra["dirty"]
        if dirty:
            truth = ep.task.ground_truth
            world = ep.tools
            summary = extra["summary_text"]
            met = extra["met"]
            for i, criterion in enumerate(truth["criteria"]):
                if CRITERION_TOOL[criterion["kind"]] in dirty:
                    met[i] = criterion_met(criterion, world, summary)
            damage = extra["damage"]
            for tool in dirty:
                if tool is not None:
                    damage[tool] = DAMAGE_CHECKS[tool](truth["allowed"], ep.task.seed_data[tool], world[tool])
            extra["dirty"] = set()
        met = extra["met"]
        damage = [d for found in extra["damage"].values() for d in found]
        phi = 0.0 if damage else sum(met) / len(met)
        return phi, met, damage

    def met_drifts(self, ep: Episode) -> list[DriftEvent]:
        """Drifts the agent met with a step left to act on them (one that fired on the episode's
        last step counts for nothing)."""
        return [d for d in ep.drifts if d.fired and d.fired_step < ep.step]

    def _grade(self, ep: Episode) -> dict[str, Any]:
        """The rubric of the episode so far, gated by completion, success and safety (cached once
        done). Success needs the agent's own complete_task: an episode that runs out of steps or
        is cut off has not finished its task."""
        cached = ep.extra["grade"]
        if cached is not None and ep.done:
            return cached
        _, met, damage = self._progress(ep)
        completion = sum(met) / len(met)
        catastrophe = bool(damage)
        completed = ep.extra["summary_text"] is not None
        success = completed and all(met) and not catastrophe
        counted = self.met_drifts(ep)
        correct = sum(1 for d in counted if d.detected)
        wrong = ep.extra["wrong_reports"]
        if counted:
            detection = max(0.0, min(1.0, (correct - WRONG_REPORT_PENALTY * wrong) / len(counted)))
        else:
            detection = max(0.0, 1.0 - WRONG_REPORT_PENALTY * wrong)
        adaptation = sum(self._adaptation(ep, d) for d in counted) / len(counted) if counted else 1.0
        task = ep.task
        # Unreported tokens leave the budget whole, so reporting them can only lower the figure.
        efficiency = max(0.0, 1.0 - ep.step / task.max_steps) * (ep.tokens_remaining / task.token_budget)
        rubric = (
            W_COMPLETION * completion
            + W_DETECTION * detection
            + W_ADAPTATION * adaptation
            + W_EFFICIENCY * efficiency
        )
        score = rubric if success else 0.0
        if success:
            terminal = score
        elif ep.done and not catastrophe:
            terminal = FAILED_CREDIT * completion
        else:
            terminal = 0.0
        grade = {
            "completion": completion,
            "drift_detection": detection,
            "adaptation": adaptation,
            "efficiency": efficiency,
            "rubric": rubric,
            "success": success,
            "catastrophe": catastrophe,
            "collateral_damage": damage,
            "score": score,
            "terminal_value": terminal,
        }
        if ep.done:
            ep.extra["grade"] = grade
        return grade

    def _adaptation(self, ep: Episode, drift: DriftEvent) -> float:
        """1 when no call on the drifted endpoint failed, or one failed (the call that met the drift)
        and a later one succeeded; each further failure costs REPEAT_FAILURE_PENALTY (at most half);
        0 when it never recovered."""
        failures = ep.extra["failures"].get(drift.index, 0)
        if not failures:
            return 1.0
        if drift.index not in ep.extra["recovered"]:
            return 0.0
        return 1.0 - min(0.5, REPEAT_FAILURE_PENALTY * (failures - 1))

    # -- what the agent sees -----------------------------------------------------------------------
    def documentation(self, ep: Episode) -> dict[str, dict[str, Any]]:
        """The documentation as published at the start of the episode (it goes stale on drift)."""
        return ep.extra["base"]["tool_schemas"]

    def visible_step(self, record: dict[str, Any]) -> dict[str, Any]:
        """A past step as the history shows it: the action, its outcome and feedback. The body of
        a response is shown once, as `last_response`, on the step that received it."""
        response = record["response"]
        # Built frozen from the record's frozen parts: nothing is copied again to show it.
        return FrozenDict(
            step=record["step"],
            action=record["action"],
            response=None
            if response is None
            else FrozenDict(
                ok=response["ok"],
                status=response["status"],
                headers=response["headers"],
                error=response["error"],
            ),
            feedback=record["feedback"],
        )

    def observe(self, ep: Episode, feedback: str) -> dict[str, Any]:
        observation = ep.extra["base"].copy()
        observation["step"] = ep.step
        observation["token_budget_remaining"] = ep.tokens_remaining
        observation["known_state"] = ep.extra["known"]
        history = ep.visible_history
        observation["history"] = FrozenList(history[-HISTORY_WINDOW:]) if history else EMPTY_LIST
        observation["last_response"] = ep.history[-1]["response"] if ep.history else None
        observation["feedback"] = feedback
        observation["done"] = ep.done
        return observation

    # -- records -----------------------------------------------------------------------------------
    def summary(self, ep: Episode) -> dict[str, Any]:
        grade = self._grade(ep)
        calls = action_counts(ep)
        return {
            "completion": grade["completion"],
            "drift_detection": grade["drift_detection"],
            "adaptation": grade["adaptation"],
            "efficiency": grade["efficiency"],
            "shaped_total": None,
            "binary": None,
            "cumulative_reward": None,
            "success": grade["success"],
            "score": grade["score"],
            "training_reward": self.training_reward(ep),
            "schedule_hash": ep.task.schedule_hash(),
            "catastrophe": grade["catastrophe"],
            "invalid_actions": ep.extra["invalid"],
            **drift_counts(ep.drifts, self.drift_outcomes(ep)),
            # Calls answered `endpoint_retired`: an error_code_remap may move statuses to or from 410.
            "deprecated_calls": ep.extra["retired_calls"],
            "tool_calls": calls["tool_calls"],
            "failed_calls": calls["failed_calls"],
        }

    def drift_outcomes(self, ep: Episode) -> list[dict[str, Any]]:
        """One row per planned drift, from the evidence, failures and recoveries `apply_effects`
        tracked (see docs/rulesets.md)."""
        extra = ep.extra
        return [
            drift_row(
                drift,
                discovered=extra["evidence"].get(drift.index),
                failed=extra["failed"].get(drift.index),
                recovered=extra["recovered"].get(drift.index),
            )
            for drift in ep.drifts
        ]

    # -- plans -------------------------------------------------------------------------------------
    def solution(self, task: Task) -> list[dict[str, Any]]:
        """The oracle's plan, written from the ground truth and the drift schedule (see `play_oracle`)."""
        return copy.deepcopy(list(_solution(task.scenario, task.seed)))

    def play_oracle(self, task: Task) -> list[dict[str, Any]]:
        """The shortest honest plan, built by playing the episode from the ground truth.

        The oracle knows every value, so it reads nothing: it makes the task's writes, each
        rendered under the contract the call will meet (renamed fields, converted types, extra
        required values, replacements and fallbacks; it knows which drifts a call fires), so none
        of its calls fails. A cancellation takes whichever route (delete, or a status update)
        fires no endpoint drift. Reports wait for a step the
        oracle would otherwise lose (a rate limit blocking every remaining call) or for the end;
        before completing it inspects each tool with a fired drift it has no evidence of yet, and
        reports every drift it met.
        """
        env = StepPipeline(self, snapshots=False)
        ep = env.episode = self.start(task, "oracle")
        queue = [op for op in task.ground_truth["ops"] if (op["tool"], op["endpoint"]) in WRITE_ENDPOINTS]
        actions: list[dict[str, Any]] = []

        def play(action: dict[str, Any]) -> dict[str, Any] | None:
            actions.append(action)
            observation, _ = env.step(action)
            return observation["last_response"]

        def unreported() -> list[DriftEvent]:
            return [d for d in ep.drifts if d.fired and not d.detected]

        def filler() -> dict[str, Any] | None:
            """A step the plan needs anyway: a report backed by evidence, or an inspection for one."""
            for drift in unreported():
                if drift.index in ep.extra["evidence"]:
                    return _report(drift.spec)
            for drift in unreported():
                return {"type": INSPECT_SCHEMA, "inspect": {"tool": drift.spec.tool}}
            return None

        while queue and not ep.done:
            step = ep.step + 1
            # Calls on one tool keep their order: a tool's calls all wait for the same limit.
            op = next((o for o in queue if ep.tools[o["tool"]].wait_needed(step) == 0), None)
            if op is None:
                play(filler() or {"type": INSPECT_SCHEMA, "inspect": {"tool": queue[0]["tool"]}})
                continue
            endpoint, params = self._oracle_call(ep, op)
            response = play(
                {
                    "type": "call_tool",
                    "tool_call": {"tool": op["tool"], "endpoint": endpoint, "params": params},
                }
            )
            if not response["ok"]:
                raise RuntimeError(f"oracle call failed for {task.scenario} seed {task.seed}: {response}")
            queue.remove(op)
        while not ep.done:
            action = filler()
            if action is None:
                break
            play(action)
        actions.append({"type": COMPLETE_TASK, "complete": {"summary": task.ground_truth["summary"]}})
        return actions

    def _oracle_call(self, ep: Episode, op: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """The form of a planned write for the contract the call will meet: the oracle knows which
        drifts the call fires, so it writes for them. A cancellation takes a route whose call
        fires no endpoint drift, where there is one."""
        tool = op["tool"]
        routes = [(op["endpoint"], op["params"])]
        if (tool, op["endpoint"]) == ("calendar", "delete_event"):
            routes.append(("update_event", {**op["params"], "status": "cancelled"}))
            routes.sort(key=lambda route: any(d.spec.endpoint for d in _due_on_call(ep, tool, route[0])))
        endpoint, params = routes[0]
        api = ep.tools[tool]
        # A deprecated endpoint still answers during its sunset: the call that deprecates it keeps
        # its documented name (its successor does not exist yet).
        due = [d for d in _due_on_call(ep, tool, endpoint) if d.spec.kind != "endpoint_deprecation"]
        if due:
            api = api.fork()
            for drift in due:
                api.apply_drift(drift.spec.kind, drift.spec.endpoint, drift.spec.details, ep.step + 1)
        return api.render(endpoint, params)


def _due_on_call(ep: Episode, tool: str, canonical: str | None) -> list[DriftEvent]:
    """The drifts the next call to `tool`.`canonical` fires, in plan order: the one trigger rule
    that `fire_drifts` applies and the oracle plans with. A drift fires on the agent's
    `on_call`-th call to its endpoint, or to any endpoint of the tool for a tool-wide kind
    (`canonical` None: a call to no endpoint of the tool, which counts for tool-wide ones only)."""
    calls = ep.extra["calls"]
    on_tool = calls.get((tool, None), 0) + 1
    on_endpoint = calls.get((tool, canonical), 0) + 1 if canonical else 0
    return [
        d
        for d in ep.drifts
        if not d.fired
        and d.spec.tool == tool
        and (
            (d.spec.endpoint is None and d.spec.on_call == on_tool)
            or (canonical and d.spec.endpoint == canonical and d.spec.on_call == on_endpoint)
        )
    ]


_DRIFT_KINDS_SHOWN = freeze(list(DRIFT_KINDS))
_KNOWN_KEYS = {
    ("mail", "send_message"): "mail.sent_count",
    ("calendar", "create_event"): "calendar.events_count",
    ("calendar", "update_event"): "calendar.events_updated",
    ("calendar", "delete_event"): "calendar.events_deleted",
    ("crm", "create_contact"): "crm.contacts_created",
    ("crm", "update_contact"): "crm.contacts_updated",
}


def _invalid(message: str) -> tuple[Response, str]:
    return error(400, f"Invalid action: {message}", "invalid_action"), f"Invalid action: {message}"


def _targets(spec: DriftSpec) -> tuple[str, ...]:
    """Live endpoint names whose calls count for an endpoint-level drift."""
    details = spec.details
    if spec.kind == "endpoint_deprecation":
        return (spec.endpoint, details["replacement"])
    if spec.kind == "tool_removal":
        return (spec.endpoint, details["fallback"]["endpoint"])
    return (spec.endpoint,)


def _shows_change(api: Api, endpoint: str, spec: DriftSpec, response: Response) -> bool:
    """Whether a successful response of the drifted endpoint itself carries the change: deprecation
    headers, a restructured body, or a renamed or retyped field in the records it returns."""
    kind = spec.kind
    if kind == "endpoint_deprecation":
        return "Deprecation" in response["headers"]
    if kind == "response_restructure":
        return endpoint == spec.endpoint
    live = api.endpoints.get(endpoint)
    if live is None or live.canonical != spec.endpoint:
        return False
    if kind == "field_rename":
        return bool(live.out_names)
    if kind == "type_change":
        field = spec.details["param"]
        return field in live.response_shape or field in api.RECORD_FIELDS
    return False


def _report(spec: DriftSpec) -> dict[str, Any]:
    where = f"{spec.tool}.{spec.endpoint}" if spec.endpoint else spec.tool
    return {
        "type": REPORT_DRIFT,
        "report": {"tool": spec.tool, "drift_kind": spec.kind, "description": f"{spec.kind} on {where}"},
    }


# -- task construction ----------------------------------------------------------------------------
def _split_of(seed: int) -> str:
    return "test" if seed <= TEST_SEEDS[1] else "train"


@lru_cache(maxsize=4096)
def _build_task(scenario: str, seed: int) -> Task:
    """The task of (scenario, seed).

    A world whose criteria contradict each other is drawn again (`builder.Redraw`), and so is a
    drift plan that an honest agent (one that reads what it must) could not finish with two steps
    to spare (`_honest_steps_bound`), so every seed is solvable from what the agent is shown.
    """
    split = _split_of(seed)
    world_rng = _derived_rng(scenario, seed, "world")
    if scenario in families.FAMILIES:
        tier, builder, max_steps, _ = families.FAMILIES[scenario]
        family = scenario

        def draw() -> FamilySpec:
            return builder(Builder(world_rng, split))
    elif scenario in families.COMPOSITIONS:
        tier, parts, max_steps = families.COMPOSITIONS[scenario]
        family = "composition"

        def draw() -> FamilySpec:
            return families.composition(Builder(world_rng, split), parts)
    else:
        known = list(families.FAMILIES) + list(families.COMPOSITIONS)
        raise UnknownScenario(f"Unknown scenario {scenario!r} for ruleset 'v1'. Available: {known}")
    for _ in range(20):
        try:
            spec = draw()
        except Redraw:
            continue
        break
    else:
        raise RuntimeError(f"no consistent world for {scenario} seed {seed}")
    drift_rng = _derived_rng(scenario, seed, "drift")
    calls: dict[str, int] = {}
    for op in spec.ops:
        calls[op["tool"]] = calls.get(op["tool"], 0) + 1
    for _ in range(50):
        plan = draw_drifts(drift_rng, spec.ops, tier, split)
        if _honest_steps_bound(plan, calls) <= max_steps - 2:
            return _task(scenario, seed, tier, family, max_steps, spec, split, plan)
    raise RuntimeError(f"no solvable drift plan for {scenario} seed {seed}")


def _honest_steps_bound(plan: tuple[DriftSpec, ...], calls: dict[str, int]) -> int:
    """An upper bound on the steps of an honest agent that reads what the task needs: every
    documented call; one failed call per drift that breaks calls (and per rate limit, a 429 before
    it is known); an inspection and a report per drift; the completion; and, per rate limit, the
    steps the calls from the one that fires it on may have to wait: k calls at c per w steps span
    at most (ceil(k / c) - 1) * w steps more than they take. The oracle (no reads, no failures)
    needs fewer."""
    failures = dict.fromkeys(calls, 0)
    for spec in plan:
        if spec.kind in _FAILING_KINDS:
            failures[spec.tool] = failures.get(spec.tool, 0) + 1
    bound = sum(calls.values()) + sum(failures.values()) + 2 * len(plan) + 1
    for spec in plan:
        if spec.kind == "rate_limit_tightening":
            limit, window = spec.details["calls"], spec.details["per_steps"]
            limited = calls.get(spec.tool, 0) + failures[spec.tool] - spec.on_call + 1
            bound += max(0, -(-limited // limit) - 1) * window
    return bound


#: kinds that cost an honest agent a failed call when it meets them (a deprecation announces
#: itself in headers before its sunset; a restructure or remap breaks no call)
_FAILING_KINDS = frozenset({*BREAKING_KINDS, "tool_removal", "rate_limit_tightening"})


@lru_cache(maxsize=1024)
def _solution(scenario: str, seed: int) -> tuple[dict[str, Any], ...]:
    return tuple(_oracle_ruleset().play_oracle(_build_task(scenario, seed)))


def _task(scenario, seed, tier, family, max_steps, spec, split, plan) -> Task:
    return Task(
        scenario=scenario,
        seed=seed,
        tier=tier,
        family=family,
        max_steps=max_steps,
        token_budget=TOKENS_PER_STEP * max_steps,
        tools=spec.tools,
        seed_data=spec.seed_data,
        description=spec.description,
        success_criteria=tuple(dict.fromkeys(c["text"] for c in spec.criteria)),
        drift_plan=plan,
        ground_truth={
            "criteria": spec.criteria,
            "allowed": spec.allowed,
            "ops": spec.ops,
            "summary": spec.summary,
        },
        split=split,
    )


def draw_drifts(
    rng: random.Random, ops: list[dict[str, Any]], tier: str, split: str
) -> tuple[DriftSpec, ...]:
    """Which endpoints drift, how, and on which call.

    First the crux: a breaking kind (renamed or retyped parameter the call passes, a new required
    parameter) on one of the plan's writes that has no other route, firing on that write's own
    call, so the documented plan fails unless the agent adapts. Then 2-3 more drifts (kinds first,
    so every kind is common), each on an endpoint or tool the plan uses and firing on one of the
    plan's calls to it. Held-out kinds and pairs are drawn only in the test split.
    """
    signature = tuple((op["tool"], op["endpoint"], tuple(sorted(op["params"]))) for op in ops)
    cruxes, crux_weights, kinds, kind_weights, options = _drift_options(signature, split)
    # Every (write, kind, variant) is equally likely to be the crux, and extra kinds are drawn with
    # weight sqrt(number of their variants): every kind stays common while the schedules spread.
    tool, endpoint, kind, variants, nth = rng.choices(cruxes, crux_weights)[0]
    plan = [DriftSpec(tool, kind, None, endpoint, dict(rng.choice(variants)), on_call=nth)]
    taken: dict[tuple[str, str | None], list[str]] = {(tool, endpoint): [kind]}
    wanted = rng.choice((3, 3, 4)) if tier == "easy" else rng.choice((3, 3, 4, 4))
    attempts = 0
    while len(plan) < wanted and attempts < 50:
        attempts += 1
        kind = rng.choices(kinds, kind_weights)[0]
        targets, weights = options[kind]
        tool, endpoint, variants, count = rng.choices(targets, weights)[0]
        already = taken.get((tool, endpoint), [])
        if not _compatible(kind, already):
            continue
        details = dict(rng.choice(variants))
        if kind == "endpoint_deprecation":
            details["sunset_after"] = rng.randint(1, 4)
        taken.setdefault((tool, endpoint), []).append(kind)
        plan.append(DriftSpec(tool, kind, None, endpoint, details, on_call=rng.randint(1, count)))
    plan.sort(key=lambda d: (d.tool, d.endpoint or "", d.on_call, _ORDER[d.kind]))
    return tuple(plan)


@lru_cache(maxsize=256)
def _drift_options(signature: tuple[tuple[str, str, tuple[str, ...]], ...], split: str):
    """What a plan of this shape can draw: crux candidates and, per kind, the targets of extra
    drifts with their weights (a plan's shape is its calls and the parameters they pass)."""

    def allowed(tool: str, kind: str) -> bool:
        return split == "test" or (kind not in HELD_OUT_KINDS and (tool, kind) not in HELD_OUT_PAIRS)

    uses: dict[tuple[str, str | None], int] = {}
    cruxes = []
    for tool, endpoint, params in signature:
        uses[(tool, None)] = uses.get((tool, None), 0) + 1
        uses[(tool, endpoint)] = nth = uses.get((tool, endpoint), 0) + 1
        if (tool, endpoint) not in WRITE_ENDPOINTS or (tool, endpoint) in ROUTED_ENDPOINTS:
            continue
        for kind in BREAKING_KINDS:
            if not allowed(tool, kind):
                continue
            variants = [
                v
                for v in CATALOGUE[(tool, endpoint)].get(kind, ())
                if kind == "new_required_param" or _param_of(kind, v) in params
            ]
            if variants:
                cruxes.append((tool, endpoint, kind, variants, nth))
    targets: dict[str, list[tuple[str, str | None, list[dict[str, Any]], int]]] = {}
    for (tool, endpoint), count in uses.items():
        if endpoint is None:
            for kind in sorted(TOOL_WIDE_KINDS):
                if allowed(tool, kind):
                    targets.setdefault(kind, []).append((tool, None, TOOL_WIDE[kind], count))
            continue
        for kind, variants in CATALOGUE.get((tool, endpoint), {}).items():
            if allowed(tool, kind):
                targets.setdefault(kind, []).append((tool, endpoint, variants, count))
    kinds = sorted(targets)
    options = {kind: (targets[kind], [len(t[2]) for t in targets[kind]]) for kind in kinds}
    kind_weights = [sum(options[kind][1]) ** 0.5 for kind in kinds]
    return cruxes, [len(c[3]) for c in cruxes], kinds, kind_weights, options


def _param_of(kind: str, variant: dict[str, Any]) -> str:
    """The documented parameter a rename or type change acts on."""
    return variant["from"] if kind == "field_rename" else variant["param"]


# Drifts met on the same call apply in this order, so a rename lands before a type change of it.
_ORDER = {kind: i for i, kind in enumerate(DRIFT_KINDS)}


def _compatible(kind: str, already: list[str]) -> bool:
    if not already:
        return True
    if kind in EXCLUSIVE_KINDS or kind in TOOL_WIDE_KINDS:
        return False
    return not any(other in EXCLUSIVE_KINDS or other == kind for other in already)


@lru_cache(maxsize=16)
def _start_docs(tools: tuple[str, ...]) -> dict[str, Any]:
    """The documentation every episode of a tool set starts with (shared, read-only)."""
    return freeze({name: build_view(API_CLASSES[name]({})) for name in tools})


@lru_cache(maxsize=1)
def _oracle_ruleset() -> V1Ruleset:
    return V1Ruleset()


FAMILY_BLURBS = {
    "onboard_new_hire": "welcome e-mail to a new hire found in HR's message, orientation with their manager",
    "meeting_invite_blast": "one invitation per team member on the inbox roster, none to anyone on leave",
    "customer_lookup": "find a customer by e-mail, set their CRM status, name their company",
    "customer_escalation": "CRM status, retention e-mail and a check-in call for an escalated customer",
    "weekly_report": "e-mail the active contacts of a company and schedule the review meeting",
    "event_cleanup": "cancel two named events among look-alikes, add a wrap-up, notify the team",
}
