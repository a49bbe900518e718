"""Policies and their registry.

Built-in names map to factories; model-backed policies register a name prefix (e.g. `hf:`,
`openai:`) whose module is imported only when such a policy is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from schemashift.env.rulesets import get_ruleset
from schemashift.env.rulesets.base import Ruleset
from schemashift.policies.base import Policy

Factory = Callable[[Ruleset], Policy]


def _naive(ruleset: Ruleset) -> Policy:
    from schemashift.policies.naive import NaiveHeuristic

    return NaiveHeuristic()


def _policy_aware(ruleset: Ruleset) -> Policy:
    from schemashift.policies.policy_aware import PolicyAwareHeuristic

    return PolicyAwareHeuristic()


def _oracle(ruleset: Ruleset) -> Policy:
    from schemashift.policies.oracle import Oracle

    return Oracle(ruleset)


def _random(ruleset: Ruleset) -> Policy:
    from schemashift.policies.random_policy import RandomPolicy

    return RandomPolicy()


def _scripted(ruleset: Ruleset) -> Policy:
    from schemashift.policies.scripted import ScriptedPolicy

    return ScriptedPolicy(ruleset.name)


BUILTIN: dict[str, Factory] = {
    "naive_heuristic": _naive,
    "policy_aware_heuristic": _policy_aware,
    "oracle": _oracle,
    "random": _random,
    "scripted": _scripted,
}
#: name prefix -> "module:function" taking (spec after the prefix, ruleset) and returning a Policy
PREFIXES: dict[str, str] = {
    "hf:": "schemashift.policies.llm.policy:make_hf_policy",
    "openai:": "schemashift.policies.llm.policy:make_openai_policy",
}


class UnknownPolicy(KeyError):
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown policy"


def available_policies() -> list[str]:
    return sorted(BUILTIN) + [f"{prefix}<...>" for prefix in sorted(PREFIXES)]


def make_policy(name: str, ruleset: str | Ruleset = "legacy", **options) -> Policy:
    """Build the policy registered under `name` for a ruleset; `options` go to prefixed (model)
    policies, whose factories reject the ones they do not know."""
    rs = get_ruleset(ruleset) if isinstance(ruleset, str) else ruleset
    factory = BUILTIN.get(name)
    if factory is not None:
        if options:
            raise ValueError(f"policy {name!r} takes no options, got {sorted(options)}")
        return factory(rs)
    for prefix, target in PREFIXES.items():
        if name.startswith(prefix):
            module_name, func = target.split(":")
            return getattr(importlib.import_module(module_name), func)(name[len(prefix) :], rs, **options)
    raise UnknownPolicy(f"Unknown policy {name!r}. Available: {available_policies()}")


__all__ = ["BUILTIN", "PREFIXES", "Policy", "UnknownPolicy", "available_policies", "make_policy"]
