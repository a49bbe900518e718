"""The legacy contract's published numbers (tests/data/legacy_reference.json) and how the tests
compare against them: exactly, as fractions, to 1e-9."""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path

REF = json.loads(
    (Path(__file__).resolve().parent / "data" / "legacy_reference.json").read_text(encoding="utf-8")
)
#: the reference's scenarios, in its order
SCENARIOS = [entry["id"] for key, entry in REF["scenarios"].items() if not key.startswith("_")]
TOL = Fraction(1, 10**9)
#: reference table column -> episode column (and reward breakdown key of the last step)
COLUMNS = {
    "completion": "completion",
    "drift_detection": "drift_detection",
    "adaptation": "adaptation",
    "efficiency": "efficiency",
    "shaped": "shaped_total",
    "cumul": "cumulative_reward",
    "binary": "binary",
}


def exact(value) -> Fraction:
    """A reference value as an exact fraction: number, "p/q" string or {published, exact}."""
    if isinstance(value, dict):
        return Fraction(value["exact"])
    if isinstance(value, float):
        return Fraction(repr(value))
    return Fraction(value)


def assert_close(actual, expected, what: str) -> None:
    assert isinstance(actual, (int, float, Fraction)), f"{what}: not a number: {actual!r}"
    assert abs(Fraction(actual) - exact(expected)) <= TOL, f"{what}: got {actual!r}, expected {expected!r}"
