"""The original SchemaShift rules, reproduced exactly (see docs/rulesets.md)."""

from schemashift.env.rulesets.legacy.ruleset import LegacyRuleset

RULESET = LegacyRuleset

__all__ = ["RULESET", "LegacyRuleset"]
