"""The v1 ruleset: seeds that matter, procedural scenario families, the full drift catalogue,
final-state grading and a potential-shaped training reward (see docs/rulesets.md)."""

from schemashift.env.rulesets.v1.ruleset import V1Ruleset

RULESET = V1Ruleset

__all__ = ["RULESET", "V1Ruleset"]
