"""`--seeds` and `--scenarios` parsing."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from schemashift.rollout.selection import (
    MAX_SEED,
    MAX_SEEDS,
    CellSelectionError,
    format_seeds,
    parse_scenarios,
    parse_seeds,
)

SCENARIOS = ["E1_onboard", "E2_invite", "M1_escalate"]


@pytest.mark.parametrize(
    ("text", "seeds"),
    [
        ("0", [0]),
        ("0-4", [0, 1, 2, 3, 4]),
        ("3-3", [3]),
        ("0,2,5", [0, 2, 5]),
        ("0-2,7", [0, 1, 2, 7]),
        ("7, 0-1", [7, 0, 1]),
        ("10-12,1", [10, 11, 12, 1]),
        (f"{MAX_SEED}", [MAX_SEED]),
    ],
)
def test_seeds(text: str, seeds: list[int]) -> None:
    assert parse_seeds(text) == seeds


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("4-0", r"range '4-0' is reversed; write 0-4"),
        ("-1", r"'-1': seeds must be non-negative"),
        ("0,-3-2", r"'-3-2': seeds must be non-negative"),
        ("2--1", r"'2--1': seeds must be non-negative"),
        ("", r"'' is not a seed N or a range N-M"),
        ("0,,1", r"'' is not a seed N or a range N-M"),
        ("1,", r"'' is not a seed N or a range N-M"),
        ("a", r"'a' is not a seed"),
        ("1.5", r"'1.5' is not a seed"),
        ("0-2-4", r"'0-2-4' is not a seed"),
        ("\u0663", r"is not a seed"),
        ("0-3,2", r"seed 2 is named twice"),
        (f"{MAX_SEED + 1}", r"seeds must be at most"),
        (f"0-{MAX_SEEDS}", r"names more than 1000000 seeds"),
    ],
)
def test_bad_seeds_raise_cli_error(text: str, message: str) -> None:
    with pytest.raises(CellSelectionError, match=message) as info:
        parse_seeds(text)
    assert str(info.value).startswith("--seeds: ")


@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 5)), max_size=6))
def test_formatted_seed_lists_parse_back(items: list[tuple[int, int]]) -> None:
    """Disjoint ranges written as `a-b` or `a` parse to exactly their seeds, in order."""
    parts, expected, start = [], [], 0
    for gap, length in items:
        first = start + gap
        last = first + length
        parts.append(f"{first}-{last}" if length else str(first))
        expected += range(first, last + 1)
        start = last + 1
    if not parts:
        return
    assert parse_seeds(",".join(parts)) == expected


def test_all_scenarios_in_catalogue_order() -> None:
    assert parse_scenarios("all", SCENARIOS) == SCENARIOS
    assert parse_scenarios("all", ()) == []


def test_a_scenario_list_keeps_its_order() -> None:
    assert parse_scenarios("M1_escalate, E1_onboard", SCENARIOS) == ["M1_escalate", "E1_onboard"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("E9_missing", r"unknown scenario 'E9_missing'; available: all, E1_onboard, E2_invite, M1_escalate"),
        ("E1_onboard,,E2_invite", r"empty item"),
        ("", r"empty item"),
        ("E1_onboard,E1_onboard", r"'E1_onboard' is named twice"),
        ("all,E1_onboard", r"unknown scenario 'all'"),
        ("ALL", r"unknown scenario 'ALL'"),
    ],
)
def test_bad_scenarios_raise_cli_error(text: str, message: str) -> None:
    with pytest.raises(CellSelectionError, match=message):
        parse_scenarios(text, SCENARIOS)


@given(st.sets(st.integers(min_value=0, max_value=10**6), min_size=1, max_size=200))
def test_formatted_seeds_parse_back_to_the_same_set_in_order(seeds):
    text = format_seeds(list(seeds))
    assert parse_seeds(text) == sorted(seeds)
    items = text.split(",")
    assert len(items) == sum(1 for s in seeds if s - 1 not in seeds), "one item per run of seeds"


def test_formatting_no_seeds_is_an_error():
    with pytest.raises(ValueError, match="no seeds"):
        format_seeds([])
