"""`schemashift sft`: supervised warm-start of a model on oracle trajectories (full or LoRA)."""

from __future__ import annotations

import argparse
import sys

NAME = "sft"
HELP = "supervised warm-start of a model on oracle trajectories in the interaction format"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model id or directory (with a chat template)")
    parser.add_argument(
        "--out", required=True, help="directory to create: the model, or the adapter with --lora"
    )
    parser.add_argument("--steps", type=int, default=200, help="optimizer steps (default: %(default)s)")
    parser.add_argument("--lora", action="store_true", help="train a LoRA adapter instead of the full model")
    parser.add_argument("--lora-r", type=int, default=16, help="LoRA rank (default: %(default)s)")
    parser.add_argument(
        "--lr", type=float, default=None, help="learning rate (default: 2e-4 LoRA, 2e-5 full)"
    )
    parser.add_argument("--ruleset", default="legacy", help="comma list of rulesets (default: %(default)s)")
    parser.add_argument("--scenarios", default="all", help="'all' or a comma list of scenario ids")
    parser.add_argument("--seeds", default="0-4", help="seeds of the oracle episodes (default: %(default)s)")
    parser.add_argument("--max-seconds", type=float, default=None, help="stop after this much training time")
    parser.add_argument("--seed", type=int, default=0, help="data order seed")
    parser.add_argument("--device", default=None, help="torch device (default: cuda if present, else cpu)")


#: the folder is built beside --out and renamed into place: its lock lies beside it too
BUILDS_FOLDER_BY_RENAME = True


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out}


def run(args: argparse.Namespace) -> int:
    from schemashift.cli import CliError
    from schemashift.env.rulesets import UnknownRuleset, get_ruleset
    from schemashift.rollout.selection import CellSelectionError, parse_scenarios, parse_seeds
    from schemashift.train.sft import sft

    if args.steps < 1:
        raise CliError(f"--steps must be at least 1, got {args.steps}")
    try:
        rulesets = [get_ruleset(name.strip()) for name in args.ruleset.split(",")]
    except UnknownRuleset as exc:
        raise CliError(str(exc)) from None
    if args.scenarios != "all" and len(rulesets) != 1:
        raise CliError("--scenarios other than 'all' needs a single --ruleset")
    try:
        scenarios = (
            None if args.scenarios == "all" else parse_scenarios(args.scenarios, rulesets[0].scenario_ids())
        )
        seeds = parse_seeds(args.seeds)
    except CellSelectionError as exc:
        raise CliError(str(exc)) from None
    try:
        manifest = sft(
            args.model,
            args.out,
            rulesets=[r.name for r in rulesets],
            seeds=seeds,
            scenarios=scenarios,
            steps=args.steps,
            lr=args.lr,
            lora=args.lora,
            lora_r=args.lora_r,
            seed=args.seed,
            max_seconds=args.max_seconds,
            device=args.device,
            log=lambda m: print(m, file=sys.stderr),
        )
    except (FileExistsError, ValueError, OSError) as exc:
        raise CliError(str(exc)) from None
    print(
        f"sft ({manifest['kind']}, {manifest['examples']} conversations, {manifest['steps']} steps, "
        f"loss {manifest['first_loss']:.3f} -> {manifest['last_loss']:.3f}) -> {args.out}"
    )
    return 0
