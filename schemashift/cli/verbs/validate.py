"""`schemashift validate`: re-grade a results folder and check its declared settings."""

from __future__ import annotations

import argparse

NAME = "validate"
HELP = "re-grade a results folder by replaying its trajectories and check its manifest; prints verified"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "results",
        metavar="RESULTS_DIR",
        help="a results folder: the workflow's results/ (manifest.json), an eval --out (eval.json), "
        "a run --out or serve --record folder",
    )


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from schemashift.cli import CliError
    from schemashift.rollout.validate import EVAL_PIN, MANIFEST, differences, result_sets

    root = Path(args.results)
    if not root.is_dir():
        raise CliError(f"{args.results}: not a directory")
    try:
        first = next(differences(root), None)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if first is not None:
        print(f"difference: {first}")
        return 1
    sets = result_sets(root)
    declared = [str(d.relative_to(root) / EVAL_PIN) for d in sets if (d / EVAL_PIN).is_file()]
    if (root / MANIFEST).is_file():
        declared.insert(0, MANIFEST)
    settings = (
        f"settings of {', '.join(declared)} agree"
        if declared
        else "no manifest.json or eval.json to check settings against"
    )
    print(f"verified: {len(sets)} result set(s) re-graded from their trajectories; {settings}")
    return 0
