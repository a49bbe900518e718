"""The ceiling: plays the ruleset's solution of the task, written from its ground truth.

The oracle is the only policy allowed to look behind the observation; it does so through the
ruleset (`arm_task` + `solution`), keyed by the scenario and seed the observation names and the
arm of the cell the runner starts (`start_episode`; the observation does not say it).
"""

from __future__ import annotations

from typing import Any

from schemashift.env.arms import DEFAULT_ARM
from schemashift.env.rulesets.base import Ruleset
from schemashift.policies.base import ActionDict, Observation, complete_task


class Oracle:
    name = "oracle"

    def __init__(self, ruleset: Ruleset) -> None:
        self.ruleset = ruleset
        self.plan: list[dict[str, Any]] | None = None
        self.cursor = 0
        self.arm = DEFAULT_ARM

    def reset(self) -> None:
        self.plan = None
        self.cursor = 0
        self.arm = DEFAULT_ARM

    def start_episode(self, cell: Any) -> None:
        """The cell about to be played (after `reset`): its arm picks the plan."""
        self.arm = cell.arm

    def act(self, observation: Observation) -> ActionDict:
        if self.plan is None:
            task = self.ruleset.arm_task(observation["task_id"], observation["seed"], self.arm)
            self.plan = self.ruleset.solution(task)
        if self.cursor >= len(self.plan):
            return complete_task("Oracle plan exhausted.")
        action = self.plan[self.cursor]
        self.cursor += 1
        return action


def make(ruleset: Ruleset) -> Oracle:
    """The factory `schemashift.policies.BUILTIN` names for this policy."""
    return Oracle(ruleset)
