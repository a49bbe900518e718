"""The Ruleset base is an interface a third ruleset can implement without legacy's or v1's code.

`CounterRuleset` below is written against `schemashift.env.rulesets.base` alone: one scenario,
one toy tool, one drift. It is played through the Environment and through the runner to graded,
schema-valid records, so a hook that the Environment or the records need but the base does not
declare, or a base default that assumes legacy's tools, fails here. It leaves out the hooks it
does not need: `invalid_step` (it rejects invalid actions) and `solution` (it has no oracle).
"""

from __future__ import annotations

import ast
import dataclasses
import json
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

import schemashift.env.rulesets as registry
from schemashift.env import DriftSpec, Environment, EpisodeStateError, InvalidAction, ScenarioInfo, Task
from schemashift.env.actions import REPORT_DRIFT
from schemashift.env.frozen import ReadOnlyError, freeze
from schemashift.env.rulesets import UnknownRuleset, available_rulesets, get_ruleset
from schemashift.env.rulesets.base import (
    Ruleset,
    UnknownScenario,
    action_counts,
    drift_counts,
    drift_row,
)
from schemashift.env.rulesets.legacy.ruleset import LegacyRuleset

BASE = Path(registry.__file__).with_name("base.py")
TARGET = 3
SCENARIO = ScenarioInfo("count_to_three", "easy", "counting", ("counter",), 8, "Bring the counter to 3.")
#: the toy drift: on step 2, `add` renames its parameter `n` to `amount`
RENAME = DriftSpec("counter", "field_rename", 2, "add", {"from": "n", "to": "amount"})
PUBLISHED = freeze({"counter": {"add": {"params": ["n"]}}})


def answer(status: int, body: Any = None, error: str | None = None) -> dict[str, Any]:
    return {"ok": status == 200, "status": status, "body": body, "error": error}


class Counter:
    """A toy tool: `add` adds an integer to a running total."""

    def __init__(self) -> None:
        self.total = 0
        self.param = "n"

    def schema(self) -> dict[str, Any]:
        return {"add": {"params": [self.param]}}

    def call(self, endpoint: str, params: dict[str, Any]) -> dict[str, Any]:
        if endpoint != "add":
            return answer(404, error=f"no endpoint {endpoint!r}")
        if list(params) != [self.param] or not isinstance(params[self.param], int):
            return answer(400, error=f"add takes one integer, {self.param!r}")
        self.total += params[self.param]
        return answer(200, {"total": self.total})


class CounterRuleset(Ruleset):
    name = "counter"
    version = "0"
    tool_names = ("counter",)
    drift_kinds = ("field_rename",)

    def scenarios(self) -> list[ScenarioInfo]:
        return [SCENARIO]

    def build_task(self, scenario: str, seed: int) -> Task:
        if scenario != SCENARIO.id:
            raise UnknownScenario(f"Unknown scenario {scenario!r}")
        return Task(
            scenario=scenario,
            seed=seed,
            tier=SCENARIO.tier,
            family=SCENARIO.family,
            max_steps=SCENARIO.max_steps,
            token_budget=1000,
            tools=SCENARIO.tools,
            seed_data={},
            description=SCENARIO.description,
            success_criteria=("the total is 3",),
            drift_plan=(RENAME,),
            ground_truth={"total": TARGET},
        )

    def make_tools(self, task: Task) -> dict[str, Any]:
        return {"counter": Counter()}

    def new_episode(self, scenario: str, seed: int, episode_id: str | None = None, *, arm: str = "drift"):
        ep = super().new_episode(scenario, seed, episode_id, arm=arm)
        ep.extra.update(failed={}, recovered={}, completed=False)
        return ep

    def fire_drifts(self, ep, action=None):
        fired = [d for d in ep.drifts if not d.fired and d.spec.fires_at_step == ep.step]
        for drift in fired:
            ep.tools[drift.spec.tool].param = drift.spec.details["to"]
            drift.fired, drift.fired_step = True, ep.step
        return fired

    def call_tool(self, ep, action):
        response = ep.tools["counter"].call(action.endpoint, action.params)
        return response, f"add: status={response['status']}"

    def inspect(self, ep, action):
        return answer(200, ep.tools["counter"].schema()), "inspected"

    def report(self, ep, action):
        return None, "report noted"

    def complete(self, ep, action):
        ep.extra["completed"] = True
        return None, "done"

    def apply_effects(self, ep, action, response):
        for drift in ep.drifts:
            if not drift.fired:
                continue
            if action.type == REPORT_DRIFT and action.drift_kind == drift.spec.kind and not drift.detected:
                drift.detected, drift.reported_step = True, ep.step
            elif response is not None and action.endpoint == drift.spec.endpoint:
                if not response["ok"]:
                    ep.extra["failed"].setdefault(drift.index, ep.step)
                elif drift.index in ep.extra["failed"]:
                    ep.extra["recovered"].setdefault(drift.index, ep.step)

    def reward(self, ep, action, response, pre):
        success = self._success(ep)
        return {"success": success, "score": float(success), "done": ep.done}

    def _success(self, ep) -> bool:
        return ep.extra["completed"] and ep.tools["counter"].total == TARGET

    def documentation(self, ep):
        """The documentation as published: it goes stale when the tool drifts."""
        return PUBLISHED

    def visible_step(self, record):
        response = record["response"]
        return {"step": record["step"], "action": record["action"], "status": response and response["status"]}

    def observe(self, ep, feedback):
        return {
            "step": ep.step,
            "task_description": ep.task.description,
            "tool_schemas": self.documentation(ep),
            "history": ep.visible_history[-3:],
            "last_response": ep.history[-1]["response"] if ep.history else None,
            "feedback": feedback,
            "done": ep.done,
        }

    def summary(self, ep):
        success = self._success(ep)
        return {
            "success": success,
            "score": float(success),
            "completion": ep.tools["counter"].total / TARGET,
            "schedule_hash": ep.task.schedule_hash(),
            "catastrophe": False,
            "invalid_actions": 0,
            **drift_counts(ep.drifts, self.drift_outcomes(ep)),
            **action_counts(ep),
        }

    def drift_outcomes(self, ep):
        failed, recovered = ep.extra["failed"], ep.extra["recovered"]
        return [
            drift_row(
                drift,
                discovered=failed.get(drift.index),
                failed=failed.get(drift.index),
                recovered=recovered.get(drift.index),
            )
            for drift in ep.drifts
        ]


class AdaptiveCounting:
    """Adds 1 until the total reaches the target; after a failed add it inspects the tool, reports
    the rename and goes on with the parameter the live schema names."""

    def reset(self) -> None:
        self.param = None
        self.total = 0

    def act(self, observation: dict[str, Any]) -> dict[str, Any]:
        if self.param is None:
            self.param = observation["tool_schemas"]["counter"]["add"]["params"][0]
        last = observation["last_response"]
        body = (last or {}).get("body") or {}
        if last is not None and not last["ok"]:
            return {"type": "inspect_schema", "inspect": {"tool": "counter"}}
        if "add" in body:
            self.param = body["add"]["params"][0]
            report = {"tool": "counter", "drift_kind": "field_rename", "description": "add renamed n"}
            return {"type": "report_drift", "report": report}
        self.total = body.get("total", self.total)
        if self.total >= TARGET:
            return {"type": "complete_task", "complete": {"summary": f"total {self.total}"}}
        return {
            "type": "call_tool",
            "tool_call": {"tool": "counter", "endpoint": "add", "params": {self.param: 1}},
        }


#: what an episode of AdaptiveCounting looks like: add, add (meets the rename and fails), inspect,
#: report, add, add, complete
EXPECTED_STATUSES = [200, 400, 200, None, 200, 200, None]
EXPECTED_DRIFT_ROW = {
    "drift_index": 0,
    "kind": "field_rename",
    "tool": "counter",
    "endpoint": "add",
    "planned_step": 2,
    "fired_step": 2,
    "discovered_step": 2,
    "reported_step": 4,
    "failed_step": 2,
    "recovered_step": 5,
    "steps_to_recover": 3,
}

#: the episode columns drift_counts and action_counts fill
EXPECTED_COUNTS = {
    "drifts_fired": 1,
    "drifts_detected": 1,
    "drifts_discovered": 1,
    "drifts_recovered": 1,
    "steps_to_recover": 3.0,
    "tool_calls": 4,
    "failed_calls": 1,
    "deprecated_calls": 0,
}


def play(env: Environment, policy: AdaptiveCounting) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    policy.reset()
    observation = env.reset(SCENARIO.id, 0)
    steps = []
    while not observation["done"]:
        observation, reward = env.step(policy.act(observation))
        steps.append((observation, reward))
    return steps


def test_the_base_leaves_every_ruleset_specific_hook_to_the_ruleset():
    base = Ruleset()
    hooks = {
        "scenarios": (),
        "build_task": ("s", 0),
        "make_tools": (None,),
        "fire_drifts": (None, None),
        "call_tool": (None, None),
        "inspect": (None, None),
        "report": (None, None),
        "complete": (None, None),
        "invalid_step": (None, None, None),
        "reward": (None, None, None, None),
        "documentation": (None,),
        "visible_step": (None,),
        "observe": (None, ""),
        "summary": (None,),
        "drift_outcomes": (None,),
        "solution": (None,),
    }
    for hook, args in hooks.items():
        with pytest.raises(NotImplementedError):
            getattr(base, hook)(*args)
    assert base.compositions() == [] and base.splits() == {} and base.held_out() == {}
    assert base.split_of(7) is None and base.before_effects(None, None, None) is None


def test_a_third_ruleset_plays_through_the_environment():
    env = Environment(CounterRuleset())
    steps = play(env, AdaptiveCounting())
    ep = env.episode
    assert [record["response"] and record["response"]["status"] for record in ep.history] == EXPECTED_STATUSES
    assert [record["step"] for record in ep.history if record["drift_events"]] == [2]
    assert ep.history[1]["drift_events"] == [RENAME.to_dict()]
    assert ep.history[1]["feedback"] == "add: status=400"  # decorate_feedback's default keeps it
    observation, reward = steps[-1]
    assert reward == {"success": True, "score": 1.0, "done": True} and observation["done"]
    assert [seen["status"] for seen in observation["history"]] == EXPECTED_STATUSES[-3:]
    with pytest.raises(ReadOnlyError):
        observation["tool_schemas"]["counter"]["add"]["params"].append("x")
    assert env.ruleset.drift_outcomes(ep) == [EXPECTED_DRIFT_ROW]
    with pytest.raises(EpisodeStateError):
        env.step({"type": "complete_task", "complete": {"summary": "again"}})


def test_a_third_ruleset_rejects_invalid_actions_without_taking_a_step():
    env = Environment(CounterRuleset())
    env.reset(SCENARIO.id, 0)
    with pytest.raises(InvalidAction):
        env.step({"type": "call_tool", "tool_call": {"tool": "mail", "endpoint": "add", "params": {}}})
    assert env.episode.step == 0 and env.episode.history == []


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> str:
    """CounterRuleset as if it were a subpackage of schemashift/env/rulesets exporting RULESET."""
    name = CounterRuleset.name
    module = types.ModuleType(f"{registry.__name__}.{name}")
    module.RULESET = CounterRuleset
    listed = available_rulesets()
    monkeypatch.setitem(sys.modules, module.__name__, module)
    monkeypatch.setattr(registry, "available_rulesets", lambda: sorted([*listed, name]))
    return name


def test_a_third_ruleset_plays_through_the_runner_to_graded_records(registered):
    from schemashift.rollout import records
    from schemashift.rollout.backends import InProcessBackend
    from schemashift.rollout.runner import Cell, SweepContext, play_episode

    cell = Cell(registered, SCENARIO.id, 0)
    result = play_episode(InProcessBackend(), AdaptiveCounting(), cell, SweepContext("run", "adaptive"))
    record = result.record
    assert record["status"] == "graded", record["error"]
    assert {key: record[key] for key in ("ruleset", "ruleset_version", "family", "tier", "split")} == {
        "ruleset": "counter",
        "ruleset_version": "0",
        "family": "counting",
        "tier": "easy",
        "split": None,
    }
    assert record["success"] and record["score"] == 1.0 and record["steps"] == 7
    assert record["final_action"] == "complete_task"
    assert {key: record[key] for key in EXPECTED_COUNTS} == EXPECTED_COUNTS
    assert [{key: row[key] for key in EXPECTED_DRIFT_ROW} for row in result.drifts] == [EXPECTED_DRIFT_ROW]
    # The records schema takes every column the ruleset filled, with its type.
    assert records.to_table([record], records.EPISODE_COLUMNS).num_rows == 1
    assert records.to_table(result.drifts, records.DRIFT_COLUMNS).num_rows == 1
    assert [step["response"] and step["response"]["status"] for step in result.trajectory["steps"]] == (
        EXPECTED_STATUSES
    )
    json.dumps(result.trajectory)


def test_discovery_lists_subpackages_only():
    assert "base" not in available_rulesets() and {"legacy", "v1"} <= set(available_rulesets())
    with pytest.raises(UnknownRuleset):
        get_ruleset("base")


def _package_imports(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add("." * node.level + node.module)
        elif isinstance(node, ast.ImportFrom):
            names.update("." * node.level + alias.name for alias in node.names)
    return names


def test_the_base_module_imports_no_ruleset():
    imports = _package_imports(ast.parse(BASE.read_text()))
    assert "schemashift.env.actions" in imports  # the scan sees the module's imports
    assert not [name for name in imports if name.startswith(("schemashift.env.rulesets", "."))], imports
    code = (
        "import sys, schemashift.env.rulesets.base; "
        "print([m for m in sys.modules if m.startswith('schemashift.env.rulesets.')])"
    )
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(loaded.stdout.replace("'", '"')) == ["schemashift.env.rulesets.base"]


@pytest.mark.parametrize("name", available_rulesets())
def test_seeds_vary_task_says_whether_two_seeds_draw_different_tasks(name):
    """eval_power and docs/report.md read `seeds_vary_task` to say what more seeds buy: it must
    match what build_task draws (everything but the seed itself)."""
    ruleset = get_ruleset(name)
    first = next(iter(ruleset.splits().values()), (0, None))[0]

    def drawn(scenario: str, seed: int) -> Task:
        return dataclasses.replace(ruleset.build_task(scenario, seed), seed=-1)

    differ = [drawn(s, first) != drawn(s, first + 1) for s in ruleset.scenario_ids()]
    assert any(differ) == ruleset.seeds_vary_task


@pytest.mark.timeout(30)
def test_a_ruleset_that_overrides_dispatch_or_before_effects_has_them_called():
    """The Environment calls a kept base `dispatch` as a lookup and skips the base no-op
    `before_effects` (`Ruleset.direct_hooks`); a ruleset's own versions are called every step."""
    calls: list[str] = []

    class Traced(LegacyRuleset):
        def dispatch(self, ep, action):
            calls.append("dispatch")
            return super().dispatch(ep, action)

        def before_effects(self, ep, action, response):
            calls.append("before_effects")
            return super().before_effects(ep, action, response)

    assert LegacyRuleset().direct_hooks()[0] is not None
    assert Traced().direct_hooks()[0] is None
    env = Environment(Traced())
    env.reset("E1_onboard_new_hire", 0)
    env.step({"type": "inspect_schema", "inspect": {"tool": "mail"}})
    assert calls == ["dispatch", "before_effects"]
