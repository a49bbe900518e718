"""Policies and their registry.

Built-in names map to factories named as "module:function"; model-backed policies register a
name prefix (e.g. `hf:`, `openai:`). A policy's module is imported only when it is asked for.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from schemashift.env.rulesets import get_ruleset
from schemashift.env.rulesets.base import Ruleset
from schemashift.policies.base import Policy

Factory = Callable[[Ruleset], Policy]

#: name -> "module:function" of its factory (taking the ruleset), imported when asked for; the
#: workflow reads the module to give each policy's cells a code digest of their own
BUILTIN: dict[str, str | Factory] = {
    "naive_heuristic": "schemashift.policies.naive:make",
    "policy_aware_heuristic": "schemashift.policies.policy_aware:make",
    "oracle": "schemashift.policies.oracle:make",
    "random": "schemashift.policies.random_policy:make",
    "scripted": "schemashift.policies.scripted:make",
    "scripted_oblivious": "schemashift.policies.scripted:make_oblivious",
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
        return _resolve(factory)(rs)
    for prefix, target in PREFIXES.items():
        if name.startswith(prefix):
            return _resolve(target)(name[len(prefix) :], rs, **options)
    raise UnknownPolicy(f"Unknown policy {name!r}. Available: {available_policies()}")


def _resolve(target: str | Callable) -> Callable:
    """A registry entry's factory: "module:function" imported now, or a callable as it is."""
    if callable(target):
        return target
    module_name, function = target.split(":")
    return getattr(importlib.import_module(module_name), function)


def policy_module(name: str) -> str:
    """The module a built-in policy's factory lives in (its cells' code digest starts there)."""
    target = BUILTIN[name]
    if not isinstance(target, str):
        raise TypeError(f"policy {name!r} is registered as a callable, not as 'module:function'")
    return target.partition(":")[0]


__all__ = [
    "BUILTIN",
    "PREFIXES",
    "Policy",
    "UnknownPolicy",
    "available_policies",
    "make_policy",
    "policy_module",
]
