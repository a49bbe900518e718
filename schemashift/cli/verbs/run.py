"""`schemashift run`: play one policy over scenarios x seeds (x samples) and write the records."""

from __future__ import annotations

import argparse
import sys
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
        help="seeds as a range '0-4', a comma list '0,2,5' or both '0-2,7' (default: 0-4)",
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
    from schemashift.cli.options import parse_scenarios, parse_seeds
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
    scenarios = parse_scenarios(args.scenarios, ruleset.scenario_ids())
    seeds = parse_seeds(args.seeds if args.seeds is not None else "0-4")
    cell_list = cells([ruleset.name], scenarios, seeds, args.samples)
    invocation = {
        "ruleset": ruleset.name,
        "ruleset_version": ruleset.version,
        "policy": args.policy,
        "scenarios": scenarios,
        "seeds": seeds,
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
    failed = [r.record for r in results if r.record["status"] != "graded"]
    for record in failed:
        print(
            f"schemashift run: infra_error in {record['scenario']} seed {record['seed']}: {record['error']}",
            file=sys.stderr,
        )
    graded = [r.record for r in results if r.record["status"] == "graded"]
    if graded:
        successes = sum(1 for r in graded if r["success"])
        mean_score = sum(r["score"] for r in graded) / len(graded)
        print(
            f"{len(graded)} episodes graded ({len(failed)} infra errors): success {successes}/{len(graded)}, "
            f"mean score {mean_score:.6f} -> {args.out}"
        )
    return 1 if failed else 0
