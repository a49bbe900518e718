"""Reference agents of the v1 guarantee tests: each is denied one thing an honest agent needs.

- `no_read_actions`: writes only with what it was shown before any response (task text, criteria,
  documentation); every value a response would have given it (an address, a record id, a name,
  a company) is unknown to it. It is handed perfect drift handling (its calls are rendered under
  the live contract), so a failure is due to the missing lookups alone.
- `oblivious_actions`: the documented plan with the right values (ids included) and the honest
  completion, never adapted to drift.
"""

from __future__ import annotations

import json
import re
from typing import Any

from v1_support import RULESET, documented_plan

from schemashift.env import Environment
from schemashift.env.rulesets.v1.builder import COMPANIES, FIRST, LAST
from schemashift.env.rulesets.v1.oracle import _oracle_call
from schemashift.env.rulesets.v1.tools import WRITE_ENDPOINTS

UNKNOWN = "[unknown]"
_EMAIL = re.compile(r"[\w.+-]+@[\w.-]+\w")
_ID = re.compile(r"\b(?:c|evt|msg)_\d+\b")
_NAME = re.compile(r"\b(" + "|".join(FIRST) + r") (" + "|".join(LAST) + r")\b")
_COMPANY = re.compile("|".join(re.escape(c) for c in COMPANIES))


def shown_before_any_response(observation: dict[str, Any]) -> str:
    """Everything an agent is shown before it reads a tool response."""
    return "\n".join(
        [
            observation["task_description"],
            *observation["success_criteria"],
            json.dumps(observation["tool_schemas"]),
            observation["documentation_note"],
        ]
    )


def hide_unseen(value: Any, shown: str) -> Any:
    """`value` with every address, id, person name and company that `shown` lacks replaced."""
    if isinstance(value, list):
        return [hide_unseen(v, shown) for v in value]
    if not isinstance(value, str):
        return value
    for pattern in (_EMAIL, _ID, _NAME, _COMPANY):
        value = pattern.sub(lambda m: m.group(0) if m.group(0) in shown else UNKNOWN, value)
    return value


def play_no_read(scenario: str, seed: int, env: Environment, *, blind: bool = True) -> dict[str, Any]:
    """Play the task's writes with only the values shown before any response, each rendered under
    the live contract, then complete with the honest summary stripped the same way. With
    `blind=False` nothing is hidden: the same agent then solves the task (the control)."""
    task = RULESET.build_task(scenario, seed)
    observation = env.reset(scenario, seed)
    shown = shown_before_any_response(observation) if blind else json.dumps(task.ground_truth)
    ep = env.episode
    for op in task.ground_truth["ops"]:
        if (op["tool"], op["endpoint"]) not in WRITE_ENDPOINTS or ep.done:
            continue
        params = {k: hide_unseen(v, shown) for k, v in op["params"].items()}
        for _ in range(4):  # a call that meets a drift fails once per drift; render again
            api = ep.tools[op["tool"]]
            while api.wait_needed(ep.step + 1) and not ep.done:  # wait out a rate limit
                env.step({"type": "inspect_schema", "inspect": {"tool": op["tool"]}})
            if ep.done:
                break
            try:
                endpoint, live = _oracle_call(ep, {**op, "params": params})
            except ValueError:  # an unknown id has no numeric form: the call cannot be written
                break
            observation, _ = env.step(
                {"type": "call_tool", "tool_call": {"tool": op["tool"], "endpoint": endpoint, "params": live}}
            )
            if observation["done"] or observation["last_response"]["ok"]:
                break
            if not any(d.fired_step == ep.step for d in ep.drifts):
                break  # failed on its own values, not on a drift
    if not ep.done:
        summary = hide_unseen(task.ground_truth["summary"], shown)
        env.step({"type": "complete_task", "complete": {"summary": summary}})
    return RULESET.summary(ep)


def oblivious_actions(scenario: str, seed: int) -> list[dict[str, Any]]:
    task = RULESET.build_task(scenario, seed)
    return documented_plan(task) + [
        {"type": "complete_task", "complete": {"summary": task.ground_truth["summary"]}}
    ]
