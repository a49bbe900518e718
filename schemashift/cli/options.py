"""Option values that several verbs share (`--seeds`, `--scenarios`), and the cells they select.

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
        if max(len(match[1]), len(match[2] or "")) > len(str(MAX_SEED)):
            raise CliError(f"--seeds: {item[:40]!r}...: seeds must be at most {MAX_SEED}")
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
            raise CliError(f"--scenarios: empty item in {text!r}")
        if item not in available:
            raise CliError(f"--scenarios: unknown scenario {item!r}; available: all, {', '.join(available)}")
        if item in scenarios:
            raise CliError(f"--scenarios: scenario {item!r} is named twice")
        scenarios.append(item)
    return scenarios


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
        raise CliError(f"ruleset {ruleset.name!r} has no generated compositions")
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
            raise CliError(f"ruleset {ruleset.name!r} has no seed splits; drop --split")
        raise CliError(f"--split: unknown split {split!r}; {ruleset.name} has {', '.join(splits)}")
    first, last = splits[split]
    if seed_list is None:
        count = DEFAULT_SPLIT_SEEDS if last is None else min(DEFAULT_SPLIT_SEEDS, last - first + 1)
        return chosen, list(range(first, first + count))
    outside = [s for s in seed_list if ruleset.split_of(s) != split]
    if outside:
        bounds = f"{first}-{last if last is not None else ''}"
        raise CliError(f"--seeds: {outside[:5]} are not in split {split!r} (seeds {bounds})")
    return chosen, seed_list


def add_cell_arguments(parser) -> None:
    """--ruleset, --scenarios, --seeds, --split, --compositions and --samples (run and eval)."""
    parser.add_argument("--ruleset", default="legacy", help="ruleset to play (default: %(default)s)")
    parser.add_argument(
        "--scenarios", default="all", help="'all' or a comma list of scenario ids (default: %(default)s)"
    )
    parser.add_argument(
        "--seeds",
        default=None,
        help="seeds as a range '0-4', a comma list '0,2,5' or both '0-2,7' "
        "(default: the first 5 seeds of --split, else 0-4)",
    )
    parser.add_argument(
        "--split",
        default=None,
        help="seed split of rulesets that have them (v1: train, test); --seeds must then lie in it",
    )
    parser.add_argument(
        "--compositions",
        action="store_true",
        help="with --scenarios all, also play the ruleset's generated cross-tool compositions",
    )
    parser.add_argument("--samples", type=int, default=1, help="episodes per (scenario, seed) (default: 1)")


def cells_of(args, ruleset) -> tuple[list[str], list[int]]:
    """select_cells on a verb's parsed cell arguments."""
    if args.samples < 1:
        raise CliError(f"--samples must be at least 1, got {args.samples}")
    return select_cells(ruleset, args.scenarios, args.seeds, args.split, args.compositions)
