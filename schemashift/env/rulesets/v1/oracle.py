"""The v1 oracle: the shortest honest plan of a task, played from its ground truth.

`solution` caches each (scenario, seed)'s plan, played once on a ruleset instance of its own.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from schemashift.env.actions import COMPLETE_TASK, INSPECT_SCHEMA, REPORT_DRIFT
from schemashift.env.episode import DriftEvent, DriftSpec, Episode, Task
from schemashift.env.pipeline import StepPipeline
from schemashift.env.rulesets.base import Ruleset
from schemashift.env.rulesets.v1.catalogue import TRANSIENT_CODES
from schemashift.env.rulesets.v1.drifts import due_on_call
from schemashift.env.rulesets.v1.tools import WRITE_ENDPOINTS


@lru_cache(maxsize=1024)
def solution(ruleset_class: type[Ruleset], scenario: str, seed: int, arm: str) -> tuple[dict[str, Any], ...]:
    """The oracle's plan of (scenario, seed) in `arm`, played on the shared instance of `ruleset_class`."""
    ruleset = oracle_ruleset(ruleset_class)
    return tuple(play_oracle(ruleset, ruleset.arm_task(scenario, seed, arm)))


@lru_cache(maxsize=1)
def oracle_ruleset(ruleset_class: type[Ruleset]) -> Ruleset:
    return ruleset_class()


def play_oracle(ruleset: Ruleset, task: Task) -> list[dict[str, Any]]:
    """The shortest honest plan, built by playing the episode from the ground truth.

    The oracle knows every value, so it reads nothing: it makes the task's writes, each
    rendered under the contract the call will meet (renamed fields, converted types, extra
    required values, successors and vocabularies of silent changes, replacements and fallbacks;
    it knows which drifts a call fires), so none of its calls fails but the one a transient
    fault meets, which it makes again once the fault's Retry-After has passed. A cancellation
    takes whichever route (delete, or a status update) fires no endpoint drift. Reports wait
    for a step the oracle would otherwise lose (a rate limit or a transient fault blocking every
    remaining call) or for the end; before completing it inspects each tool with a fired drift
    it has no evidence of yet, and reports every drift it met.
    """
    env = StepPipeline(ruleset, snapshots=False)
    ep = env.episode = ruleset.start(task, "oracle")
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
        endpoint, params = _oracle_call(ep, op)
        response = play(
            {
                "type": "call_tool",
                "tool_call": {"tool": op["tool"], "endpoint": endpoint, "params": params},
            }
        )
        if not response["ok"] and response["body"]["code"] not in TRANSIENT_CODES:
            raise RuntimeError(f"oracle call failed for {task.scenario} seed {task.seed}: {response}")
        if response["ok"]:
            queue.remove(op)
    while not ep.done:
        action = filler()
        if action is None:
            break
        play(action)
    actions.append({"type": COMPLETE_TASK, "complete": {"summary": task.ground_truth["summary"]}})
    return actions


def _oracle_call(ep: Episode, op: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The form of a planned write for the contract the call will meet: the oracle knows which
    drifts the call fires, so it writes for them. A cancellation takes a route whose call
    fires no endpoint drift, where there is one."""
    tool = op["tool"]
    routes = [(op["endpoint"], op["params"])]
    if (tool, op["endpoint"]) == ("calendar", "delete_event"):
        routes.append(("update_event", {**op["params"], "status": "cancelled"}))
        routes.sort(key=lambda route: any(d.spec.endpoint for d in due_on_call(ep, tool, route[0])))
    endpoint, params = routes[0]
    api = ep.tools[tool]
    # A deprecated endpoint still answers during its sunset: the call that deprecates it keeps
    # its documented name (its successor does not exist yet).
    due = [d for d in due_on_call(ep, tool, endpoint) if d.spec.kind != "endpoint_deprecation"]
    if due:
        api = api.fork()
        for drift in due:
            api.apply_drift(drift.spec.kind, drift.spec.endpoint, drift.spec.details, ep.step + 1)
    return api.render(endpoint, params)


def _report(spec: DriftSpec) -> dict[str, Any]:
    where = f"{spec.tool}.{spec.endpoint}" if spec.endpoint else spec.tool
    return {
        "type": REPORT_DRIFT,
        "report": {"tool": spec.tool, "drift_kind": spec.kind, "description": f"{spec.kind} on {where}"},
    }
