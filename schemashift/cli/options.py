"""Parsers for option values that several verbs share (`--seeds`, `--scenarios`).

They raise CliError rather than argparse errors so that a verb can parse after it knows the
context (the ruleset's scenario list) and the message still reads `schemashift <verb>: error:`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from schemashift.cli import CliError

_SEED_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?")
_NEGATIVE = re.compile(r"-[0-9]+(?:-[0-9]+)?|[0-9]+--[0-9]+")
MAX_SEED = 2**63 - 1  # seeds are int64 in the records
MAX_SEEDS = 1_000_000  # a guard against typos like 0-10000000000, which would exhaust memory


def parse_seeds(text: str) -> list[int]:
    """Seeds from ranges `0-4`, comma lists `0,2,5` or both `0-2,7`, in the order given.

    Ranges include both ends. Negative numbers, reversed ranges, empty items, seeds named twice
    and more than MAX_SEEDS seeds raise CliError.
    """
    seeds: list[int] = []
    seen: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        match = _SEED_ITEM.fullmatch(item)
        if match is None:
            if _NEGATIVE.fullmatch(item):
                raise CliError(f"--seeds: {item!r}: seeds must be non-negative")
            raise CliError(f"--seeds: {item!r} is not a seed N or a range N-M (in {text!r})")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if last < first:
            raise CliError(f"--seeds: range {item!r} is reversed; write {last}-{first}")
        if last > MAX_SEED:
            raise CliError(f"--seeds: {item!r}: seeds must be at most {MAX_SEED}")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise CliError(f"--seeds: {text!r} names more than {MAX_SEEDS} seeds")
        for seed in range(first, last + 1):
            if seed in seen:
                raise CliError(f"--seeds: seed {seed} is named twice in {text!r}")
            seen.add(seed)
            seeds.append(seed)
    return seeds


def parse_scenarios(text: str, available: Sequence[str]) -> list[str]:
    """`all` (every scenario in `available`, in its order) or a comma list of scenario ids."""
    if text.strip() == "all":
        return list(available)
    scenarios: list[str] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise CliError(f"--scenarios: empty item in {text!r}")
        if item not in available:
            raise CliError(f"--scenarios: unknown scenario {item!r}; available: all, {', '.join(available)}")
        if item in scenarios:
            raise CliError(f"--scenarios: scenario {item!r} is named twice")
        scenarios.append(item)
    return scenarios
