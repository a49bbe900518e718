"""The `v1` ruleset: seeded procedural tasks, the full drift catalogue, final-state grading and a
training reward that cannot be farmed (see docs/rulesets.md, section v1).

Per step the environment calls, in order: fire_drifts (deprecation sunsets that are due, then the
drifts this very call meets: drifts fire on the agent's own use of the drifted endpoint),
dispatch (the tool call against the live contract), before_effects, apply_effects (evidence,
reports, failures and recoveries per drift; invalid-action count), is_terminal, reward
(potential-based shaping, plus the terminal value on the last step) and observe.

This module is the plugin that composes the v1 parts: task instances are drawn by `tasks.py`
(from `families.py` and `builder.py`), drifts fire and count by `drifts.py`, episodes are
graded by `grading.py` and the oracle's plans are played by `oracle.py`.
"""

from __future__ import annotations

import copy
import os
from typing import Any

from schemashift.env.actions import (
    COMPLETE_TASK,
    INSPECT_SCHEMA,
    REPORT_DRIFT,
    TOOL_CALL_TYPES,
    Action,
    InvalidAction,
)
from schemashift.env.arms import DEFAULT_ARM
from schemashift.env.episode import DriftEvent, Episode, ScenarioInfo, Task
from schemashift.env.frozen import EMPTY_LIST, FrozenDict, FrozenList, freeze
from schemashift.env.rulesets.base import SALT_ENV, Response, Ruleset, action_counts, drift_counts, drift_row
from schemashift.env.rulesets.v1 import families, grading, oracle
from schemashift.env.rulesets.v1.api import Api, error, ok
from schemashift.env.rulesets.v1.catalogue import DRIFT_KINDS, HELD_OUT_KINDS, HELD_OUT_PAIRS
from schemashift.env.rulesets.v1.drifts import due_on_call, shows_change, targets
from schemashift.env.rulesets.v1.tasks import (
    FAMILY_BLURBS,
    TEST_SEEDS,
    TRAIN_FIRST_SEED,
    build_task,
    start_docs,
)
from schemashift.env.rulesets.v1.tasks import salt_id as tasks_salt_id
from schemashift.env.rulesets.v1.tools import API_CLASSES, WRITE_ENDPOINTS

#: Undiscounted potential-based shaping: the shaping terms of an episode sum to -Phi(s_0), so the
#: training reward depends on the terminal value alone (see `reward`).
GAMMA = 1.0
HISTORY_WINDOW = 8
DOCS_NOTE = (
    "tool_schemas is the API documentation as published when the episode started. The APIs may change "
    "during the episode without notice; inspect_schema returns a tool's live schema. Report a change "
    "with report_drift once you have evidence of it (a failed call, a changed response or an inspection)."
)


class V1Ruleset(Ruleset):
    name = "v1"
    version = "4"
    tool_names = ("mail", "calendar", "crm")
    drift_kinds = DRIFT_KINDS
    invalid_actions_consume_step = True
    charges_tokens = True
    #: observe builds every part of a view frozen (tests/env/test_observation_snapshots.py)
    frozen_views = True

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
        return build_task(scenario, seed, self.salt())

    def salt(self) -> str | None:
        """The held-out split's salt, read at every task build so that a process is not tied to
        the value it started with (`SALT_ENV`; empty means none)."""
        return os.environ.get(SALT_ENV) or None

    def salt_id(self) -> str | None:
        salt = self.salt()
        return None if salt is None else tasks_salt_id(salt)

    def make_tools(self, task: Task) -> dict[str, Api]:
        return {name: API_CLASSES[name](task.seed_data[name]) for name in task.tools}

    def new_episode(
        self, scenario: str, seed: int, episode_id: str | None = None, *, arm: str = DEFAULT_ARM
    ) -> Episode:
        return self.start(self.arm_task(scenario, seed, arm), episode_id)

    def start(self, task: Task, episode_id: str | None = None) -> Episode:
        """A fresh episode of a task instance."""
        ep = Episode(task, episode_id or os.urandom(16).hex(), self.make_tools(task))
        extra = ep.extra
        extra["base"] = {
            "episode_id": ep.episode_id,
            "ruleset": self.name,
            "task_id": task.scenario,
            "family": task.family,
            "difficulty": task.tier,
            "max_steps": task.max_steps,
            "task_description": task.description,
            "success_criteria": FrozenList(task.success_criteria),
            "tool_schemas": start_docs(task.tools),
            "documentation_note": DOCS_NOTE,
            "drift_kinds": _DRIFT_KINDS_SHOWN,
        }
        # The live names whose calls count for each endpoint-level drift (`drifts.targets`).
        extra["targets"] = [targets(d.spec) if d.spec.endpoint is not None else () for d in ep.drifts]
        extra["unfired"] = {}  # tool -> how many of its drifts have not fired yet
        extra["drifts_of"] = {}  # tool -> its drifts, in plan order (`drifts.due_on_call`)
        for drift in ep.drifts:
            extra["unfired"][drift.spec.tool] = extra["unfired"].get(drift.spec.tool, 0) + 1
            extra["drifts_of"].setdefault(drift.spec.tool, []).append(drift)
        extra["drift_step"] = None  # the last step on which a drift fired
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
        extra["phi"] = extra["phi_now"] = grading.progress(ep)[0]
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
        extra = ep.extra
        retiring = extra["retire"].pop(step, None) if extra["retire"] else None
        if retiring:
            for tool, endpoint in retiring:
                ep.tools[tool].retire(endpoint)
        if action is None or action.type not in TOOL_CALL_TYPES or not action.present:
            return []
        tool = action.tool
        api = ep.tools.get(tool)
        if api is None:
            return []
        canonical = api.canonical_of(action.endpoint)
        unfired = extra["unfired"]
        # Most calls meet no drift: a tool whose drifts have all fired is not searched.
        fired = due_on_call(ep, tool, canonical) if unfired.get(tool) else []
        calls = extra["calls"]
        calls[tool, None] = calls.get((tool, None), 0) + 1
        if canonical:
            calls[tool, canonical] = calls.get((tool, canonical), 0) + 1
        if fired:
            unfired[tool] -= len(fired)
            extra["drift_step"] = step
        for drift in fired:
            spec = drift.spec
            api.apply_drift(spec.kind, spec.endpoint, spec.details, step)
            drift.fired = True
            drift.fired_step = step
            if spec.kind == "endpoint_deprecation":
                extra["retire"].setdefault(step + spec.details["sunset_after"], []).append(
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
        drifts = extra["drifts_of"].get(tool)
        if not drifts:
            return
        api = ep.tools.get(tool)
        succeeded = response["ok"]
        evidence, failed, recovered = extra["evidence"], extra["failed"], extra["recovered"]
        for drift in drifts:
            if not drift.fired:
                continue
            spec = drift.spec
            index = drift.index
            if kind == INSPECT_SCHEMA:
                if succeeded:
                    evidence.setdefault(index, step)
                continue
            on_target = spec.endpoint is None or action.endpoint in extra["targets"][index]
            if not succeeded:
                evidence.setdefault(index, step)
                if on_target and index not in recovered:
                    # A call that meets a new drift may fail on it; that failure is not held
                    # against the drifts met earlier.
                    if drift.fired_step < step and index in failed and extra["drift_step"] == step:
                        continue
                    failed.setdefault(index, step)
                    failures = extra["failures"]
                    failures[index] = failures.get(index, 0) + 1
            elif on_target:
                if shows_change(api, action.endpoint, spec, response):
                    evidence.setdefault(index, step)
                if index in failed and index not in recovered:
                    recovered[index] = step

    def reward(
        self, ep: Episode, action: Action | None, response: Response | None, pre: Any
    ) -> dict[str, Any]:
        """r_t = Phi(s_t+1) - Phi(s_t), plus the terminal value on the last step (Phi(s_T) = 0).

        The sum over an episode is terminal value - Phi(s_0): progress is paid as it happens and
        taken back at the end, so nothing but the final outcome decides the training reward.
        """
        extra = ep.extra
        if extra["dirty"]:
            extra["phi_now"] = grading.progress(ep)[0]
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
        grade = grading.grade(ep)
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

    # -- grading (grading.py) ----------------------------------------------------------------------
    def met_drifts(self, ep: Episode) -> list[DriftEvent]:
        """Drifts the agent met with a step left to act on them (see `grading.met_drifts`)."""
        return grading.met_drifts(ep)

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
        grade = grading.grade(ep)
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
        """The oracle's plan, written from the ground truth and the drift schedule (see
        `oracle.play_oracle`)."""
        return copy.deepcopy(list(oracle.solution(V1Ruleset, task.scenario, task.seed, task.arm)))


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
