"""Registry of rulesets. Each subpackage here exports `RULESET`, a Ruleset subclass.

Discovery is by package listing, so adding a ruleset means adding a subpackage; nothing
else in the environment changes.
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache

from schemashift.env.rulesets.base import Ruleset


class UnknownRuleset(KeyError):
    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "unknown ruleset"


def available_rulesets() -> list[str]:
    return sorted(info.name for info in pkgutil.iter_modules(__path__) if info.ispkg)


@cache
def get_ruleset(name: str) -> Ruleset:
    """The (stateless, shared) ruleset instance registered under `name`."""
    if name not in available_rulesets():
        raise UnknownRuleset(f"Unknown ruleset {name!r}. Available: {available_rulesets()}")
    module = importlib.import_module(f"{__name__}.{name}")
    return module.RULESET()
