"""Which cells a sweep plays: seed specs (`0-4,7`), scenario lists and a ruleset's splits turned
into (scenarios, seeds), the one selection that `run`, `eval`, the workflow's targets and its
expected-cell census all use. Errors name the option they are about (`--seeds: ...`); the CLI
shows them as its own, the workflow says them of the config key they came from.
"""

from __future__ import annotations

import re
from collections.abc import Sequence


class CellSelectionError(ValueError):
    """A seed spec, scenario list or split that selects no valid cells."""


_SEED_ITEM = re.compile(r"([0-9]+)(?:-([0-9]+))?")
_NEGATIVE = re.compile(r"-[0-9]+(?:-[0-9]+)?|[0-9]+--[0-9]+")
MAX_SEED = 2**63 - 1  # seeds are int64 in the records
MAX_SEEDS = 1_000_000  # a guard against typos like 0-10000000000, which would exhaust memory


def parse_seeds(text: str) -> list[int]:
    """Seeds from ranges `0-4`, comma lists `0,2,5` or both `0-2,7`, in the order given.

    Ranges include both ends. Negative numbers, reversed ranges, empty items, seeds named twice
    and more than MAX_SEEDS seeds raise CellSelectionError.
    """
    seeds: list[int] = []
    seen: set[int] = set()
    for raw in text.split(","):
        item = raw.strip()
        match = _SEED_ITEM.fullmatch(item)
        if match is None:
            if _NEGATIVE.fullmatch(item):
                raise CellSelectionError(f"--seeds: {item!r}: seeds must be non-negative")
            raise CellSelectionError(f"--seeds: {item!r} is not a seed N or a range N-M (in {text!r})")
        if max(len(match[1]), len(match[2] or "")) > len(str(MAX_SEED)):
            raise CellSelectionError(f"--seeds: {item[:40]!r}...: seeds must be at most {MAX_SEED}")
        first = int(match[1])
        last = int(match[2]) if match[2] is not None else first
        if last < first:
            raise CellSelectionError(f"--seeds: range {item!r} is reversed; write {last}-{first}")
        if last > MAX_SEED:
            raise CellSelectionError(f"--seeds: {item!r}: seeds must be at most {MAX_SEED}")
        if len(seeds) + last - first + 1 > MAX_SEEDS:
            raise CellSelectionError(f"--seeds: {text!r} names more than {MAX_SEEDS} seeds")
        for seed in range(first, last + 1):
            if seed in seen:
                raise CellSelectionError(f"--seeds: seed {seed} is named twice in {text!r}")
            seen.add(seed)
            seeds.append(seed)
    return seeds


def format_seeds(seeds: Sequence[int]) -> str:
    """The shortest `--seeds` text of a set of seeds, ascending: [0, 1, 2, 5, 7, 8] -> "0-2,5,7-8"."""
    ordered = sorted(set(seeds))
    if not ordered:
        raise ValueError("no seeds to format")
    items, start = [], ordered[0]
    for previous, seed in zip(ordered, [*ordered[1:], None], strict=True):
        if seed is None or seed != previous + 1:
            items.append(str(start) if start == previous else f"{start}-{previous}")
            start = seed
    return ",".join(items)


def parse_scenarios(text: str, available: Sequence[str]) -> list[str]:
    """`all` (every scenario in `available`, in its order) or a comma list of scenario ids."""
    if text.strip() == "all":
        return list(available)
    scenarios: list[str] = []
    for raw in text.split(","):
        item = raw.strip()
        if not item:
            raise CellSelectionError(f"--scenarios: empty item in {text!r}")
        if item not in available:
            raise CellSelectionError(
                f"--scenarios: unknown scenario {item!r}; available: all, {', '.join(available)}"
            )
        if item in scenarios:
            raise CellSelectionError(f"--scenarios: scenario {item!r} is named twice")
        scenarios.append(item)
    return scenarios


def parse_arms(arms: str | Sequence[str], ruleset) -> list[str]:
    """The arms (`schemashift.env.arms`) a comma list `drift,control` or a list names, in the
    order given. An unknown arm, an arm named twice, none at all, or an arm the ruleset does not
    play (`Ruleset.arms`: legacy plays only drift) raise CellSelectionError."""
    from schemashift.env.arms import check_arm

    items = [item.strip() for item in arms.split(",")] if isinstance(arms, str) else list(arms)
    if not items or items == [""]:
        raise CellSelectionError("--arms: no arm given")
    chosen: list[str] = []
    for item in items:
        try:
            check_arm(item)
        except ValueError as exc:
            raise CellSelectionError(f"--arms: {exc}") from None
        if item in chosen:
            raise CellSelectionError(f"--arms: arm {item!r} is named twice")
        if item not in ruleset.arms:
            raise CellSelectionError(
                f"--arms: ruleset {ruleset.name!r} does not play the {item} arm "
                f"(its arms: {', '.join(ruleset.arms)})"
            )
        chosen.append(item)
    return chosen


#: Seeds of --split when --seeds is not given.
DEFAULT_SPLIT_SEEDS = 5


def select_cells(
    ruleset,
    scenarios: str | Sequence[str] = "all",
    seeds: str | Sequence[int] | None = None,
    split: str | None = None,
    compositions: bool = False,
) -> tuple[list[str], list[int]]:
    """The (scenarios, seeds) a ruleset's cells play: the one selection `run`, `eval`, the
    workflow's targets and its expected-cell census all use.

    `scenarios` is "all" (the families, plus the generated compositions with `compositions`) or
    ids (a comma string or a list; compositions may be named); `seeds` a spec or a list (default:
    the first seeds of `split`, else 0-4); `split`, on a ruleset that has splits, must hold them.
    """
    families = ruleset.scenario_ids()
    composed = [info.id for info in ruleset.compositions()]
    if compositions and not composed:
        raise CellSelectionError(f"ruleset {ruleset.name!r} has no generated compositions")
    text = scenarios if isinstance(scenarios, str) else ",".join(scenarios)
    chosen = parse_scenarios(text, families + composed)
    if text.strip() == "all" and not compositions:
        chosen = families
    if isinstance(seeds, str) or seeds is None:
        seed_list = None if seeds is None else parse_seeds(seeds)
    else:
        seed_list = parse_seeds(",".join(map(str, seeds)))
    if split is None:
        return chosen, seed_list if seed_list is not None else parse_seeds("0-4")
    splits = ruleset.splits()
    if split not in splits:
        if not splits:
            raise CellSelectionError(f"ruleset {ruleset.name!r} has no seed splits; drop --split")
        raise CellSelectionError(f"--split: unknown split {split!r}; {ruleset.name} has {', '.join(splits)}")
    first, last = splits[split]
    if seed_list is None:
        count = DEFAULT_SPLIT_SEEDS if last is None else min(DEFAULT_SPLIT_SEEDS, last - first + 1)
        return chosen, list(range(first, first + count))
    outside = [s for s in seed_list if ruleset.split_of(s) != split]
    if outside:
        bounds = f"{first}-{last if last is not None else ''}"
        raise CellSelectionError(f"--seeds: {outside[:5]} are not in split {split!r} (seeds {bounds})")
    return chosen, seed_list
