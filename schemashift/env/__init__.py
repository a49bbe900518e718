"""The simulation core: the Environment, the Ruleset interface and the rulesets (each with its
own tools). Standard library only."""

from schemashift.env.actions import ACTION_TYPES, Action, InvalidAction, parse_action
from schemashift.env.arms import ARMS, CONTROL, DEFAULT_ARM, DRIFT, check_arm
from schemashift.env.environment import Environment, EpisodeStateError
from schemashift.env.episode import DriftSpec, ScenarioInfo, Task
from schemashift.env.rulesets import UnknownRuleset, available_rulesets, get_ruleset
from schemashift.env.rulesets.base import Ruleset, UnknownScenario

__all__ = [
    "ACTION_TYPES",
    "ARMS",
    "CONTROL",
    "DEFAULT_ARM",
    "DRIFT",
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
    "check_arm",
    "get_ruleset",
    "parse_action",
]
