"""`schemashift train`: GRPO-train one run of the config's run matrix into LoRA checkpoints."""

from __future__ import annotations

import argparse

NAME = "train"
HELP = "GRPO-train a run of config.yaml (train.runs.NAME) into checkpoint-<step>/ adapters"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="config file holding train.runs (e.g. config.yaml)")
    parser.add_argument("--run", required=True, help="run name under train.runs")
    parser.add_argument("--out", required=True, help="run directory, e.g. results/train/NAME")
    parser.add_argument("--max-steps", type=int, default=None, help="override the run's max_steps")
    parser.add_argument(
        "--backend",
        choices=("auto", "transformers", "unsloth", "vllm"),
        default=None,
        help="training stack (default: the run's setting, normally auto)",
    )
    parser.add_argument(
        "--env-backend", default="inprocess", help="where rollout episodes run: inprocess or a server URL"
    )
    parser.add_argument(
        "--resume", action="store_true", help="continue from the last complete checkpoint in --out"
    )


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out}


def run(args: argparse.Namespace) -> int:
    import json

    import yaml

    from schemashift import provenance
    from schemashift.cli import CliError
    from schemashift.runs.contract import RunConfigError
    from schemashift.train.backends import BackendUnavailable
    from schemashift.train.trainer import TrainingError, train

    try:
        with open(args.config, encoding="utf-8") as handle:
            # a run's config slice is JSON (rule train_config), where a rate below 1e-4 is written
            # as 5e-05, which YAML 1.1 reads as a string (torch then refuses the learning rate)
            config = (json.load(handle) if args.config.endswith(".json") else yaml.safe_load(handle)) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError, ValueError, RecursionError) as exc:
        # ValueError: an integer beyond Python's digit limit; RecursionError: nesting
        raise CliError(f"cannot read config {args.config}: {type(exc).__name__}: {exc}") from None
    if not isinstance(config, dict):
        raise CliError(f"config {args.config} is not a mapping but {type(config).__name__}")
    overrides = {}
    if args.max_steps is not None:
        overrides["max_steps"] = args.max_steps
    if args.backend is not None:
        overrides["backend"] = args.backend
    try:
        summary = train(
            config,
            args.run,
            args.out,
            overrides=overrides,
            resume=args.resume,
            config_hash=provenance.config_hash(config),
            git_sha=provenance.git_sha(),
            env_backend=args.env_backend,
        )
    except (RunConfigError, BackendUnavailable, TrainingError) as exc:
        raise CliError(str(exc)) from None
    steps = ", ".join(summary["checkpoints"].values())
    print(f"train {args.run}: {summary['steps']} steps; checkpoints {steps} in {args.out}")
    return 0
