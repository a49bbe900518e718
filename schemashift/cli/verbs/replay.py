"""`schemashift replay`: score an action file, or re-score a stored trajectory, step by step."""

from __future__ import annotations

import argparse

NAME = "replay"
HELP = "replay actions (JSON lines) or a stored trajectory and print the per-step scores as JSON"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ruleset", default=None, help="ruleset (default: legacy, or the trajectory's own)")
    parser.add_argument(
        "--scenario", default=None, help="scenario id (with --actions; selects with --trajectory)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="seed (default 0 with --actions; selects with --trajectory)"
    )
    parser.add_argument(
        "--sample-index", type=int, default=None, help="selects the sample in a trajectory file"
    )
    parser.add_argument(
        "--arm",
        default=None,
        help="arm to play in: drift (the drift plan) or control (none) (default: drift with --actions; "
        "selects with --trajectory, whose own arm is replayed)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="with --actions: write the episode's records (episodes, drifts, trajectories) to this directory",
    )
    parser.add_argument("--policy", default="external", help="with --out: the policy the records name")
    parser.add_argument(
        "--harness", default="mcp", help="with --out: the harness the records name (default: %(default)s)"
    )
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--actions", help="file of JSON lines, one action per line ('-' for stdin)")
    source.add_argument("--trajectory", help="trajectories.jsonl(.gz) file written by run")


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out}


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from schemashift.cli import CliError
    from schemashift.env.arms import DEFAULT_ARM, check_arm
    from schemashift.env.rulesets import UnknownRuleset, get_ruleset
    from schemashift.env.rulesets.base import UnknownScenario
    from schemashift.rollout.records import read_arm
    from schemashift.rollout.replay import ReplayError, replay, trajectory_actions

    tokens = None
    if args.seed is not None:
        _check_seed(args.seed, "--seed")
    if args.arm is not None:
        try:
            check_arm(args.arm)
        except ValueError as exc:
            raise CliError(f"--arm: {exc}") from None
    try:
        if args.actions is not None:
            if args.scenario is None:
                raise CliError("--scenario is required with --actions")
            ruleset, scenario, seed = args.ruleset or "legacy", args.scenario, args.seed or 0
            arm = args.arm or DEFAULT_ARM
            actions = _read_action_lines(args.actions)
        else:
            trajectory = _select_trajectory(args)
            ruleset, scenario, seed = (trajectory.get(key) for key in ("ruleset", "scenario", "seed"))
            if not (isinstance(ruleset, str) and isinstance(scenario, str)):
                raise CliError(f"the trajectory in {args.trajectory} names no ruleset and scenario")
            _check_seed(seed, f"the trajectory's seed in {args.trajectory}")
            if args.ruleset is not None and args.ruleset != ruleset:
                raise CliError(f"the trajectory was played under ruleset {ruleset!r}, not {args.ruleset!r}")
            actions, tokens = trajectory_actions(trajectory)
            try:
                arm = read_arm(trajectory)
            except ValueError as exc:
                raise CliError(f"the trajectory in {args.trajectory}: {exc}") from None
        played = get_ruleset(ruleset).arms
        if arm not in played:
            raise CliError(
                f"--arm: ruleset {ruleset!r} does not play the {arm} arm (its arms: {', '.join(played)})"
            )
        if args.out is not None:
            return _record(args, ruleset, scenario, seed, actions, arm)
        result = replay(ruleset, scenario, seed, actions, tokens, arm)
    except (UnknownRuleset, UnknownScenario, ReplayError) as exc:
        raise CliError(str(exc)) from None
    json.dump(result, sys.stdout, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def _record(args: argparse.Namespace, ruleset: str, scenario: str, seed: int, actions: list, arm: str) -> int:
    """Write an externally played episode's records (the third harness: docs/llm.md)."""
    import uuid

    from schemashift import provenance
    from schemashift.cli import CliError
    from schemashift.cli.progress import report_outcome
    from schemashift.rollout.replay import record_actions
    from schemashift.rollout.runner import SweepContext, write_results

    if args.actions is None:
        raise CliError("--out records an episode from --actions, not from a stored trajectory")
    context = SweepContext(
        sweep_id=uuid.uuid4().hex, policy=args.policy, harness=args.harness, git_sha=provenance.git_sha()
    )
    result = record_actions(ruleset, scenario, seed, actions, context, arm)
    try:
        write_results(args.out, [result])
    except OSError as exc:
        raise CliError(f"cannot write results to {args.out}: {exc}") from None
    return report_outcome("replay", [result.record], args.out)


def _check_seed(seed, what: str) -> None:
    """Seeds are what the records hold (non-negative int64), whatever the ruleset."""
    from schemashift.cli import CliError
    from schemashift.rollout.selection import MAX_SEED

    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed <= MAX_SEED:
        raise CliError(f"{what}: {seed!r} is not a seed (an integer from 0 to {MAX_SEED})")


def _read_action_lines(path: str) -> list:
    """One JSON value per non-blank line of a UTF-8 file; any line that is not one is an error
    naming it."""
    import json
    import sys

    from schemashift.cli import CliError

    try:
        handle = getattr(sys.stdin, "buffer", sys.stdin) if path == "-" else open(path, "rb")
    except OSError as exc:
        raise CliError(f"cannot read {path}: {exc.strerror}") from None
    actions = []
    with handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8") if isinstance(raw, bytes) else raw
            except UnicodeDecodeError as exc:
                raise CliError(
                    f"{path} line {number}: not UTF-8 text ({exc.reason} at byte {exc.start})"
                ) from None
            if not line.strip():
                continue
            try:
                actions.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise CliError(
                    f"{path} line {number}: malformed JSON ({exc.msg} at column {exc.colno})"
                ) from None
            except RecursionError:
                raise CliError(f"{path} line {number}: JSON nested too deeply") from None
            except ValueError as exc:  # e.g. an integer beyond Python's digit limit
                raise CliError(f"{path} line {number}: unreadable JSON ({exc})") from None
    return actions


def _select_trajectory(args: argparse.Namespace) -> dict:
    from schemashift.cli import CliError
    from schemashift.env.arms import DEFAULT_ARM
    from schemashift.rollout.io import read_jsonl

    wanted = {
        "scenario": args.scenario,
        "seed": args.seed,
        "sample_index": args.sample_index,
        "arm": args.arm,
    }

    def value_of(trajectory: dict, key: str):
        # a trajectory written before arms existed was played in the drift arm
        return (trajectory.get("arm") or DEFAULT_ARM) if key == "arm" else trajectory.get(key)

    try:
        matches = [
            t
            for t in read_jsonl(args.trajectory)
            if all(value is None or value_of(t, key) == value for key, value in wanted.items())
        ]
    except OSError as exc:
        raise CliError(f"cannot read {args.trajectory}: {exc}") from None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not matches:
        raise CliError(f"no trajectory in {args.trajectory} matches {_describe(wanted)}")
    if len(matches) > 1:
        raise CliError(
            f"{len(matches)} trajectories in {args.trajectory} match {_describe(wanted)}; "
            "select one with --scenario, --seed, --sample-index and --arm"
        )
    if matches[0].get("status") != "graded":
        raise CliError("the selected trajectory is an infra_error episode with no steps to replay")
    return matches[0]


def _describe(wanted: dict) -> str:
    given = {k: v for k, v in wanted.items() if v is not None}
    return ", ".join(f"{k}={v}" for k, v in given.items()) or "(no filter)"
