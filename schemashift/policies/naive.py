"""The original floor baseline: call the first endpoint of the first tool twice, then stop."""

from __future__ import annotations

from typing import TYPE_CHECKING

from schemashift.policies.base import ActionDict, Observation, call_tool, complete_task

if TYPE_CHECKING:
    from schemashift.env.rulesets.base import Ruleset

CALLS_BEFORE_COMPLETING = 2


class NaiveHeuristic:
    """Spec 9.1: empty-params calls to tool_schemas' first endpoint, then complete_task."""

    name = "naive_heuristic"

    def __init__(self) -> None:
        self.acts = 0

    def reset(self) -> None:
        self.acts = 0

    def act(self, observation: Observation) -> ActionDict:
        self.acts += 1
        if self.acts > CALLS_BEFORE_COMPLETING:
            return complete_task("Naive agent done.")
        schemas = observation.get("tool_schemas") or {}
        for tool, endpoints in schemas.items():
            for endpoint in endpoints:
                return call_tool(tool, endpoint, {})
        return complete_task("No tools.")


def make(_ruleset: Ruleset) -> NaiveHeuristic:
    """The factory `schemashift.policies.BUILTIN` names for this policy."""
    return NaiveHeuristic()
