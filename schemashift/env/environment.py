"""The SchemaShift environment: the step pipeline over a ruleset given by name or as an instance."""

from __future__ import annotations

from schemashift.env.pipeline import EpisodeStateError, StepPipeline
from schemashift.env.rulesets import get_ruleset
from schemashift.env.rulesets.base import Ruleset

__all__ = ["Environment", "EpisodeStateError"]


class Environment(StepPipeline):
    """`StepPipeline` (reset / step, frozen snapshots) over a ruleset named or given:
    `Environment("v1")`, `Environment(get_ruleset("v1"), snapshots=False)`."""

    def __init__(self, ruleset: str | Ruleset = "legacy", *, snapshots: bool = True) -> None:
        super().__init__(get_ruleset(ruleset) if isinstance(ruleset, str) else ruleset, snapshots=snapshots)
