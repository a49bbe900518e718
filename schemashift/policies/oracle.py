"""The ceiling: plays the ruleset's solution of the task, written from its ground truth.

The oracle is the only policy allowed to look behind the observation; it does so through the
ruleset (`arm_task` + `solution`), keyed by the cell the runner starts (`start_episode`: scenario,
seed and arm; v1's observation names neither the seed nor the arm). Without a cell it falls back
to the scenario and seed the observation names (legacy's does).
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
        self.cell: Any = None

    def reset(self) -> None:
        self.plan = None
        self.cursor = 0
        self.arm = DEFAULT_ARM
        self.cell = None

    def start_episode(self, cell: Any) -> None:
        """The cell about to be played (after `reset`): its task and arm pick the plan."""
        self.arm = cell.arm
        self.cell = cell

    def act(self, observation: Observation) -> ActionDict:
        if self.plan is None:
            if self.cell is not None:
                scenario, seed = self.cell.scenario, self.cell.seed
            elif "seed" in observation:
                scenario, seed = observation["task_id"], observation["seed"]
            else:
                raise RuntimeError(
                    "the oracle needs the cell it plays (start_episode): the observation names no seed"
                )
            task = self.ruleset.arm_task(scenario, seed, self.arm)
            self.plan = self.ruleset.solution(task)
        if self.cursor >= len(self.plan):
            return complete_task("Oracle plan exhausted.")
        action = self.plan[self.cursor]
        self.cursor += 1
        return action


def make(ruleset: Ruleset) -> Oracle:
    """The factory `schemashift.policies.BUILTIN` names for this policy."""
    return Oracle(ruleset)
