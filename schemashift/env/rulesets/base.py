"""The Ruleset interface: what a ruleset author implements, and what every ruleset shares.

A ruleset is everything that differs between benchmark versions: the scenario catalogue, how a
task instance (world, drift plan, ground truth) is drawn from (scenario, seed), its tools, when
drifts fire, what each action does, what the agent is shown, grading, shaping and the record
columns. The Environment (`schemashift.env.environment`) runs the same pipeline for every
ruleset and calls the hooks below; a hook that raises NotImplementedError here is one a ruleset
must implement, the others have defaults that suit any ruleset.

    reset:  new_episode (build_task, make_tools) -> observe
    step:   fire_drifts -> dispatch (call_tool | inspect | report | complete), or invalid_step
            -> before_effects -> apply_effects -> (step record appended) -> is_terminal
            -> reward -> decorate_feedback (only on steps where drifts fired) -> visible_step
            -> observe

Before `fire_drifts` the Environment has validated the action against `tool_names` and
`drift_kinds`, incremented `ep.step` and charged the step's tokens. It freezes
(`schemashift.env.frozen`) the response after dispatch, the step record's action, the reward
breakdown and each `visible_step`; these are shared by the history and every later view, so no
hook changes them in place. `summary` and `drift_outcomes` describe the episode as it stands;
the records read them when it ends.
"""

from __future__ import annotations

import os
from dataclasses import replace
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
from schemashift.env.arms import ARMS, DEFAULT_ARM, DRIFT, check_arm
from schemashift.env.episode import DriftEvent, Episode, ScenarioInfo, Task

#: a tool's answer: {"ok", "status", ...} as the ruleset's tools define it; None for steps with
#: no response (a report or completion that answers nothing, a no-op)
Response = dict[str, Any]

#: the `episodes` record columns of the rubric: its components and the final step's shaped and
#: binary reward (a ruleset whose reward has them copies them from its last step's reward)
RUBRIC_COLUMNS = ("completion", "drift_detection", "adaptation", "efficiency", "shaped_total", "binary")


#: the environment variable holding the salt a ruleset draws its held-out test tasks under
#: (`Ruleset.salt_id`); its value is a secret, never recorded: records carry the salt's id
SALT_ENV = "SCHEMASHIFT_SALT"


class UnknownScenario(KeyError):
    """A scenario id the ruleset does not define."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown scenario"


class Ruleset:
    """Base class of rulesets: subclasses implement the hooks that raise NotImplementedError.

    A ruleset instance is stateless and shared (`get_ruleset` caches one per name): all
    per-episode state lives in the `Episode`, ruleset-specific parts in `ep.extra`.
    """

    name: str = ""
    version: str = ""
    #: tool names an action may mention (validation; tools outside a scenario answer 404)
    tool_names: tuple[str, ...] = ()
    #: drift kinds a report may name
    drift_kinds: tuple[str, ...] = ()
    #: False: an invalid action is rejected with InvalidAction and no step is taken.
    #: True: it is recorded as a wasted step (`invalid_step`).
    invalid_actions_consume_step: bool = False
    #: whether callers charge the policy's tokens against the budget (the legacy harness sent 0)
    charges_tokens: bool = True
    #: whether the seed draws the task instance; False: every seed of a scenario is the same task,
    #: so more seeds only repeat a stochastic policy's attempts (and a deterministic one's episode)
    seeds_vary_task: bool = True
    #: the arms it plays (`env.arms`): the drift arm, and the control arm where its oracle and
    #: grading hold without a drift plan
    arms: tuple[str, ...] = ARMS
    #: True: every part of every view `observe` returns is frozen (`schemashift.env.frozen` types
    #: or immutable leaves), so the Environment hands views out as they are; False: it checks each
    #: view and freezes the parts that are not
    frozen_views: bool = False

    # -- catalogue ------------------------------------------------------------------------------
    def scenarios(self) -> list[ScenarioInfo]:
        """The scenarios a run plays by default, in listing order."""
        raise NotImplementedError

    def scenario_ids(self) -> list[str]:
        return [info.id for info in self.scenarios()]

    def compositions(self) -> list[ScenarioInfo]:
        """Generated scenarios that runs include only when asked for (none by default)."""
        return []

    def scenario_info(self, scenario: str) -> ScenarioInfo:
        """The listing of any scenario the ruleset builds, compositions included."""
        infos = self.scenarios() + self.compositions()
        for info in infos:
            if info.id == scenario:
                return info
        raise UnknownScenario(
            f"Unknown scenario {scenario!r} for ruleset {self.name!r}. Available: {[i.id for i in infos]}"
        )

    def splits(self) -> dict[str, tuple[int, int | None]]:
        """Split name -> (first seed, last seed or None for open-ended). Empty: no splits."""
        return {}

    def split_of(self, seed: int) -> str | None:
        for split, (first, last) in self.splits().items():
            if seed >= first and (last is None or seed <= last):
                return split
        return None

    def held_out(self) -> dict[str, list[str]]:
        """What only some split draws, by description (`schemashift scenarios` lists it)."""
        return {}

    def salt_id(self) -> str | None:
        """The recorded name of the salt this process draws held-out tasks under (a ruleset that
        takes one reads it at run time); None where there is none or the ruleset takes none."""
        return None

    # -- episode construction ----------------------------------------------------------------------
    def build_task(self, scenario: str, seed: int) -> Task:
        """The task instance of (scenario, seed): the same on every machine. Raises
        UnknownScenario (or ValueError for a seed the ruleset does not take)."""
        raise NotImplementedError

    def make_tools(self, task: Task) -> dict[str, Any]:
        """Fresh tool objects of `task.tools`, by name, in their seeded state (`ep.tools`)."""
        raise NotImplementedError

    def arm_task(self, scenario: str, seed: int, arm: str = DEFAULT_ARM) -> Task:
        """The task of (scenario, seed) as `arm` plays it: the control arm's is the same task
        (world, text, ground truth, seed) with no drift plan. A ValueError for an arm the
        ruleset does not play (`arms`)."""
        if check_arm(arm) not in self.arms:
            raise ValueError(f"ruleset {self.name} plays only the {', '.join(self.arms)} arm(s), not {arm!r}")
        task = self.build_task(scenario, seed)
        return task if arm == DRIFT else replace(task, drift_plan=(), arm=arm)

    def new_episode(
        self, scenario: str, seed: int, episode_id: str | None = None, *, arm: str = DEFAULT_ARM
    ) -> Episode:
        """A fresh episode (`Environment.reset`) in `arm`; a ruleset extends it to set up `ep.extra`."""
        task = self.arm_task(scenario, seed, arm)
        return Episode(task, episode_id or os.urandom(16).hex(), self.make_tools(task))

    # -- step pipeline ------------------------------------------------------------------------------
    def fire_drifts(self, ep: Episode, action: Action | None = None) -> list[DriftEvent]:
        """Apply the drifts due before `action` is dispatched; returns those that fired, in order.

        Called first on every step, `ep.step` already counting it; `action` is None on an invalid
        step. A fired drift gets `fired` and `fired_step` set; the step record lists the specs.
        """
        raise NotImplementedError

    def dispatch(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        """(response, feedback) of a valid action: routed by type to the hooks below."""
        kind = action.type
        if kind in TOOL_CALL_TYPES:
            return self.call_tool(ep, action)
        if kind == INSPECT_SCHEMA:
            return self.inspect(ep, action)
        if kind == REPORT_DRIFT:
            return self.report(ep, action)
        return self.complete(ep, action)

    def direct_hooks(self) -> tuple[dict[str, Any] | None, Any]:
        """(the handler of each action type, `before_effects` or None): the step's hooks as the
        Environment calls them at every step. A ruleset that keeps the base class's `dispatch` has
        its handler looked up by action type (no call through `dispatch`), and one that keeps the
        no-op `before_effects` is not called for it (`pre` is None); an override keeps its hook."""
        cls = type(self)
        routes = None
        if cls.dispatch is Ruleset.dispatch:
            routes = {
                CALL_TOOL: self.call_tool,
                RETRY_WITH_VARIANT: self.call_tool,
                INSPECT_SCHEMA: self.inspect,
                REPORT_DRIFT: self.report,
                COMPLETE_TASK: self.complete,
            }
        return routes, None if cls.before_effects is Ruleset.before_effects else self.before_effects

    def call_tool(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        """A `call_tool` or `retry_with_variant` (`action.present` False: its sub-object was absent)."""
        raise NotImplementedError

    def inspect(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        """An `inspect_schema`: what the agent learns of a tool's current contract."""
        raise NotImplementedError

    def report(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        """A `report_drift`; whether it counts is for `apply_effects` to record."""
        raise NotImplementedError

    def complete(self, ep: Episode, action: Action) -> tuple[Response | None, str]:
        """A `complete_task`; the generic `is_terminal` then ends the episode."""
        raise NotImplementedError

    def invalid_step(self, ep: Episode, raw: Any, error: InvalidAction) -> tuple[Response | None, str]:
        """(response, feedback) of an action that failed validation: called instead of `dispatch`,
        and only on rulesets whose `invalid_actions_consume_step` is True."""
        raise NotImplementedError

    def before_effects(self, ep: Episode, action: Action | None, response: Response | None) -> Any:
        """Whatever `reward` needs of the state before this step's bookkeeping (`ep.history` does
        not hold the step yet, `apply_effects` has not run); handed to `reward` as `pre`."""
        return None

    def apply_effects(self, ep: Episode, action: Action | None, response: Response | None) -> None:
        """Update progress tracking (detection, evidence, agent state) after dispatch."""

    def is_terminal(self, ep: Episode, action: Action | None) -> bool:
        """Whether the episode ends on this step (sets `ep.done` before `reward`)."""
        return (
            ep.step >= ep.task.max_steps
            or ep.tokens_remaining <= 0
            or (action is not None and action.type == COMPLETE_TASK)
        )

    def reward(
        self, ep: Episode, action: Action | None, response: Response | None, pre: Any
    ) -> dict[str, Any]:
        """The step's reward breakdown, a JSON-serialisable dict (the Environment returns it from
        `step` and stores it in the step record); `ep.done` is already set."""
        raise NotImplementedError

    def decorate_feedback(self, ep: Episode, feedback: str, fired: list[DriftEvent]) -> str:
        """The feedback of a step on which drifts fired (called only on such steps)."""
        return feedback

    # -- what the agent sees ----------------------------------------------------------------------
    def documentation(self, ep: Episode) -> dict[str, dict[str, Any]]:
        """The tool documentation the agent is shown now, by tool (read-only). The same object
        until what it shows changes: the MCP server lists its tools from it and announces a new
        tool list whenever the object differs."""
        raise NotImplementedError

    def visible_step(self, record: dict[str, Any]) -> dict[str, Any]:
        """What an observation's history shows of one step record (built once, then frozen and
        appended to `ep.visible_history`)."""
        raise NotImplementedError

    def observe(self, ep: Episode, feedback: str) -> dict[str, Any]:
        """The view of the episode a policy is shown: a new top-level dict each call, with at
        least `done` (the runner plays until it is true).

        Views may share parts with earlier views, but a part is never changed in place once it
        has been in a view (a change makes a new object). Parts made frozen
        (`schemashift.env.frozen`) are handed to policies as they are; the Environment freezes
        the others for every observation.
        """
        raise NotImplementedError

    # -- episode records ----------------------------------------------------------------------------
    def summary(self, ep: Episode) -> dict[str, Any]:
        """Episode-level record fields (outcome, rubric, counters), named as the `episodes`
        columns of `schemashift.rollout.records`."""
        raise NotImplementedError

    def drift_outcomes(self, ep: Episode) -> list[dict[str, Any]]:
        """One `drifts` record row per planned drift, in plan order (`drift_row` builds each)."""
        raise NotImplementedError

    # -- ground-truth access, for the oracle only ------------------------------------------------------
    def solution(self, task: Task) -> list[dict[str, Any]]:
        """An action sequence that solves the task, written from its ground truth."""
        raise NotImplementedError


#: The rubric's weights, shared by every ruleset (docs/rulesets.md): completion, drift detection,
#: adaptation and efficiency.
W_COMPLETION, W_DETECTION, W_ADAPTATION, W_EFFICIENCY = 0.40, 0.25, 0.20, 0.15


def weighted_rubric(completion: float, detection: float, adaptation: float, efficiency: float) -> float:
    """The rubric W: the weighted sum of an episode's four scores (each in [0, 1])."""
    return (
        W_COMPLETION * completion
        + W_DETECTION * detection
        + W_ADAPTATION * adaptation
        + W_EFFICIENCY * efficiency
    )


def drift_row(
    drift: DriftEvent, *, discovered: int | None, failed: int | None, recovered: int | None
) -> dict[str, Any]:
    """A `drifts` record row: the drift, when it fired and was reported, and the steps at which
    the ruleset saw it discovered, first failing and recovered from (None: never)."""
    spec = drift.spec
    return {
        "drift_index": drift.index,
        "kind": spec.kind,
        "tool": spec.tool,
        "endpoint": spec.endpoint,
        "planned_step": spec.fires_at_step,
        "fired_step": drift.fired_step,
        "discovered_step": discovered,
        "reported_step": drift.reported_step,
        "failed_step": failed,
        "recovered_step": recovered,
        "steps_to_recover": None if recovered is None else recovered - failed,
    }


def drift_counts(drifts: list[DriftEvent], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The episode's drift columns, from its drifts and their `drift_outcomes` rows."""
    recovered = [row["steps_to_recover"] for row in rows if row["steps_to_recover"] is not None]
    return {
        "drifts_fired": sum(1 for d in drifts if d.fired),
        "drifts_detected": sum(1 for d in drifts if d.detected),
        "drifts_discovered": sum(1 for row in rows if row["discovered_step"] is not None),
        "drifts_recovered": len(recovered),
        "steps_to_recover": (sum(recovered) / len(recovered)) if recovered else None,
    }


def action_counts(ep: Episode) -> dict[str, int]:
    """The call columns, from the step history: calls and retries that reached a tool, those
    that failed, and those answered 410 (a ruleset whose statuses move counts its own)."""
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
