"""The simulation core: tools, drift, rulesets and the environment. Standard library only."""

from schemashift.env.actions import ACTION_TYPES, Action, InvalidAction, parse_action
from schemashift.env.environment import Environment, EpisodeStateError
from schemashift.env.episode import DriftSpec, ScenarioInfo, Task
from schemashift.env.ruleset import Ruleset, UnknownScenario
from schemashift.env.rulesets import UnknownRuleset, available_rulesets, get_ruleset

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
