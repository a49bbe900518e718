"""The simulation core: the Environment, the Ruleset interface and the rulesets (each with its
own tools). Standard library only."""

from schemashift.env.actions import ACTION_TYPES, Action, InvalidAction, parse_action
from schemashift.env.environment import Environment, EpisodeStateError
from schemashift.env.episode import DriftSpec, ScenarioInfo, Task
from schemashift.env.rulesets import UnknownRuleset, available_rulesets, get_ruleset
from schemashift.env.rulesets.base import Ruleset, UnknownScenario

__all__ = [
    "ACTION_TYPES",
    "Action",
    "DriftSpec",
    "Environment",
    "EpisodeStateError",
    "InvalidAction",
    "Ruleset",
    "ScenarioInfo",
    "Task",
    "UnknownRuleset",
    "UnknownScenario",
    "available_rulesets",
    "get_ruleset",
    "parse_action",
]
