"""The Policy protocol: anything with reset() and act(observation) -> action dict."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol, runtime_checkable

from schemashift.env.frozen import freeze

Observation = dict[str, Any]
ActionDict = dict[str, Any]
#: an e-mail address in task text or a response, as the heuristic policies read them
EMAIL_PATTERN = r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"


@runtime_checkable
class Policy(Protocol):
    """A decision maker that sees only serialised observations.

    `reset()` starts a new episode. `act()` returns one action in the Action JSON shape.
    Policies that use a model may also expose `last_usage` = (tokens_in, tokens_out) of the
    latest decision and `parse_failures`; the runner records them when present.
    """

    def reset(self) -> None: ...

    def act(self, observation: Observation) -> ActionDict: ...


def call_tool(tool: str, endpoint: str, params: dict[str, Any]) -> ActionDict:
    return {"type": "call_tool", "tool_call": {"tool": tool, "endpoint": endpoint, "params": params}}


def retry_with_variant(tool: str, endpoint: str, params: dict[str, Any]) -> ActionDict:
    return {"type": "retry_with_variant", "retry": {"tool": tool, "endpoint": endpoint, "params": params}}


# The actions below are frozen and kept per argument: a policy sends the same inspection, report
# or completion again and again, and the Environment validates a frozen action once (it cannot
# change) instead of at every step. Sharing them is safe: nothing can edit them.


@lru_cache(maxsize=1024)
def inspect_schema(tool: str) -> ActionDict:
    return freeze({"type": "inspect_schema", "inspect": {"tool": tool}})


@lru_cache(maxsize=1024)
def report_drift(tool: str, kind: str, description: str) -> ActionDict:
    return freeze(
        {"type": "report_drift", "report": {"tool": tool, "drift_kind": kind, "description": description}}
    )


@lru_cache(maxsize=1024)
def complete_task(summary: str) -> ActionDict:
    return freeze({"type": "complete_task", "complete": {"summary": summary}})
