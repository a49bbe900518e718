"""`schemashift run`: play one policy over scenarios x seeds (x samples) and write the records.

A row's `config_hash` is the digest of what it was played with (ruleset and version, policy,
split, samples), not of which other cells were played beside it: a cell's row is the same
whether it was played alone or in a shard of many (apart from `sweep_id` and timing).
"""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

NAME = "run"
HELP = "play a policy over scenarios x seeds and write episodes, drifts and trajectories"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from schemashift.cli.options import add_cell_arguments

    add_cell_arguments(parser)
    parser.add_argument(
        "--policy", required=True, help="policy name: naive_heuristic, policy_aware_heuristic, oracle, ..."
    )
    parser.add_argument(
        "--out",
        required=True,
        help="output directory; gets episodes.parquet, drifts.parquet, trajectories.jsonl.gz",
    )
    parser.add_argument(
        "--backend",
        default="inprocess",
        help="where episodes run: inprocess, or a server URL such as ws://127.0.0.1:8000 "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--sweep-id", default=None, help="the sweep's identifier, stamped on every row (default: a new uuid)"
    )
    parser.add_argument(
        "--config-hash",
        default=None,
        help="config digest to stamp on rows (default: a digest of the settings a row is played with)",
    )


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out}


def run(args: argparse.Namespace) -> int:
    from schemashift import provenance
    from schemashift.cli import CliError
    from schemashift.cli.options import arms_of, cells_of
    from schemashift.cli.progress import Progress
    from schemashift.env.rulesets import UnknownRuleset, get_ruleset
    from schemashift.policies import UnknownPolicy, make_policy
    from schemashift.rollout import resultset
    from schemashift.rollout.backends import make_backend
    from schemashift.rollout.runner import SweepContext, cells, run_sweep, write_results

    try:
        ruleset = get_ruleset(args.ruleset)
        policy = make_policy(args.policy, ruleset)
        backend = make_backend(args.backend, policy=args.policy)
    except (UnknownRuleset, UnknownPolicy, ValueError) as exc:
        raise CliError(str(exc)) from None
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out} exists and is not a directory")
    resultset.clean(out)
    scenarios, seeds = cells_of(args, ruleset)
    arms = arms_of(args, ruleset)
    cell_list = cells([ruleset.name], scenarios, seeds, args.samples, arms)
    settings = {
        "ruleset": ruleset.name,
        "ruleset_version": ruleset.version,
        "policy": args.policy,
        "split": args.split,
        "samples": args.samples,
    }
    if ruleset.salt_id() is not None:
        settings["salt_id"] = ruleset.salt_id()
    context = SweepContext(
        sweep_id=args.sweep_id or uuid.uuid4().hex,
        policy=args.policy,
        config_hash=args.config_hash or provenance.config_hash(settings),
        git_sha=provenance.git_sha(),
        image=provenance.image(),
    )
    try:
        with Progress(len(cell_list), label=f"{args.policy} on {ruleset.name}") as progress:
            results = run_sweep(backend, policy, cell_list, context, on_episode=lambda _: progress.update())
    finally:
        backend.close()
    try:
        write_results(out, results)
    except OSError as exc:
        raise CliError(f"cannot write results to {args.out}: {exc}") from None
    from schemashift.cli.progress import report_outcome

    return report_outcome("run", [r.record for r in results], args.out)
