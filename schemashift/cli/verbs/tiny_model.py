"""`schemashift tiny-model`: build the offline tiny chat model (see schemashift.train.tiny)."""

from __future__ import annotations

import argparse
import sys

NAME = "tiny-model"
HELP = "build a tiny Qwen2-shaped chat model offline, warm-started on oracle trajectories"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, help="directory to create (must be absent or empty)")
    parser.add_argument(
        "--steps",
        type=int,
        default=None,
        help="supervised steps (default: DEFAULTS in schemashift/train/tiny.py)",
    )
    parser.add_argument(
        "--max-seconds", type=float, default=None, help="wall-time cap of the supervised pass"
    )
    parser.add_argument("--seed", type=int, default=0, help="initialisation and data order seed")


#: the folder is built beside --out and renamed into place: its lock lies beside it too
BUILDS_FOLDER_BY_RENAME = True


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out}


def run(args: argparse.Namespace) -> int:
    from schemashift.cli import CliError
    from schemashift.train.tiny import DEFAULTS, build_tiny_model

    steps = args.steps if args.steps is not None else DEFAULTS["steps"]
    if steps < 1:
        raise CliError(f"--steps must be at least 1, got {steps}")
    max_seconds = args.max_seconds if args.max_seconds is not None else DEFAULTS["max_seconds"]
    try:
        manifest = build_tiny_model(
            args.out,
            steps=steps,
            max_seconds=max_seconds,
            seed=args.seed,
            log=lambda m: print(m, file=sys.stderr),
        )
    except FileExistsError as exc:
        raise CliError(str(exc)) from None
    print(
        f"tiny model ({manifest['vocab_size']} tokens, {manifest['steps']} steps, "
        f"loss {manifest['first_loss']:.3f} -> {manifest['last_loss']:.3f}) -> {args.out}"
    )
    return 0
