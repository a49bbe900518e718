"""`schemashift scenarios`: list a ruleset's scenarios, tiers and seed splits."""

from __future__ import annotations

import argparse

NAME = "scenarios"
HELP = "list the scenarios (families), tiers and splits of a ruleset"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ruleset", default="legacy", help="ruleset to list (default: %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument(
        "--compositions", action="store_true", help="also list the generated cross-tool compositions"
    )


def run(args: argparse.Namespace) -> int:
    import json

    from schemashift.cli import CliError
    from schemashift.env.rulesets import UnknownRuleset, available_rulesets, get_ruleset

    try:
        ruleset = get_ruleset(args.ruleset)
    except UnknownRuleset as exc:
        raise CliError(str(exc)) from None
    infos = ruleset.scenarios() + (ruleset.compositions() if args.compositions else [])
    held_out = ruleset.held_out()
    splits = {
        name: {"first_seed": first, "last_seed": last} for name, (first, last) in ruleset.splits().items()
    }
    if args.json:
        listing = {
            "ruleset": ruleset.name,
            "version": ruleset.version,
            "available_rulesets": available_rulesets(),
            "splits": splits,
            "held_out": held_out,
            "compositions": [i.id for i in ruleset.compositions()],
            "scenarios": [
                {
                    "id": i.id,
                    "family": i.family,
                    "tier": i.tier,
                    "tools": list(i.tools),
                    "max_steps": i.max_steps,
                }
                for i in infos
            ],
        }
        print(json.dumps(listing, indent=2))
        return 0
    print(f"ruleset {ruleset.name} (version {ruleset.version}); available: {', '.join(available_rulesets())}")
    width = max(len(i.id) for i in infos)
    print(f"{'scenario':<{width}}  {'family':<{width}}  tier    max_steps  tools")
    for i in infos:
        print(f"{i.id:<{width}}  {i.family:<{width}}  {i.tier:<6}  {i.max_steps:>9}  {','.join(i.tools)}")
    if splits:
        for name, bounds in splits.items():
            last = bounds["last_seed"] if bounds["last_seed"] is not None else "..."
            print(f"split {name}: seeds {bounds['first_seed']}-{last}")
    else:
        print("splits: none")
    for name, items in held_out.items():
        print(f"held out ({name}): {', '.join(items)}")
    composed = ruleset.compositions()
    if composed and not args.compositions:
        print(f"compositions (with --compositions): {', '.join(i.id for i in composed)}")
    return 0
