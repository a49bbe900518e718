"""`schemashift run`: play one policy over scenarios x seeds (x samples) and write the records."""

from __future__ import annotations

import argparse
import uuid
from pathlib import Path

NAME = "run"
HELP = "play a policy over scenarios x seeds and write episodes, drifts and trajectories"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ruleset", default="legacy", help="ruleset to play (default: %(default)s)")
    parser.add_argument(
        "--policy", required=True, help="policy name: naive_heuristic, policy_aware_heuristic, oracle, ..."
    )
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
        "--run-id", default=None, help="identifier stamped on every row (default: a new uuid)"
    )
    parser.add_argument(
        "--config-hash",
        default=None,
        help="config digest to stamp on rows (default: a digest of these arguments)",
    )


def run(args: argparse.Namespace) -> int:
    from schemashift import provenance
    from schemashift.cli import CliError
    from schemashift.cli.options import parse_scenarios
    from schemashift.cli.progress import Progress
    from schemashift.env.rulesets import UnknownRuleset, get_ruleset
    from schemashift.policies import UnknownPolicy, make_policy
    from schemashift.rollout.backends import make_backend
    from schemashift.rollout.runner import RunContext, cells, run_sweep, write_results

    if args.samples < 1:
        raise CliError(f"--samples must be at least 1, got {args.samples}")
    try:
        ruleset = get_ruleset(args.ruleset)
        policy = make_policy(args.policy, ruleset)
        backend = make_backend(args.backend)
    except (UnknownRuleset, UnknownPolicy, ValueError) as exc:
        raise CliError(str(exc)) from None
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out} exists and is not a directory")
    families = ruleset.scenario_ids()
    composed = [info.id for info in ruleset.compositions()]
    if args.compositions and not composed:
        raise CliError(f"ruleset {ruleset.name!r} has no generated compositions")
    scenarios = parse_scenarios(args.scenarios, families + composed)
    if args.scenarios.strip() == "all" and not args.compositions:
        scenarios = families
    seeds = _seeds(args, ruleset)
    cell_list = cells([ruleset.name], scenarios, seeds, args.samples)
    invocation = {
        "ruleset": ruleset.name,
        "ruleset_version": ruleset.version,
        "policy": args.policy,
        "scenarios": scenarios,
        "seeds": seeds,
        "split": args.split,
        "samples": args.samples,
    }
    context = RunContext(
        run_id=args.run_id or uuid.uuid4().hex,
        policy=args.policy,
        config_hash=args.config_hash or provenance.config_hash(invocation),
        git_sha=provenance.git_sha(),
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


DEFAULT_SPLIT_SEEDS = 5


def _seeds(args: argparse.Namespace, ruleset) -> list[int]:
    """--seeds as given, or the first seeds of --split; seeds outside the split are an error."""
    from schemashift.cli import CliError
    from schemashift.cli.options import parse_seeds

    if args.split is None:
        return parse_seeds(args.seeds if args.seeds is not None else "0-4")
    splits = ruleset.splits()
    if args.split not in splits:
        if not splits:
            raise CliError(f"ruleset {ruleset.name!r} has no seed splits; drop --split")
        raise CliError(f"--split: unknown split {args.split!r}; {ruleset.name} has {', '.join(splits)}")
    first, last = splits[args.split]
    if args.seeds is None:
        count = DEFAULT_SPLIT_SEEDS if last is None else min(DEFAULT_SPLIT_SEEDS, last - first + 1)
        return list(range(first, first + count))
    seeds = parse_seeds(args.seeds)
    outside = [s for s in seeds if ruleset.split_of(s) != args.split]
    if outside:
        bounds = f"{first}-{last if last is not None else ''}"
        raise CliError(f"--seeds: {outside[:5]} are not in split {args.split!r} (seeds {bounds})")
    return seeds
