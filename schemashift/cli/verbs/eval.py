"""`schemashift eval`: a model policy over scenarios x seeds x samples, batched and resumable.

Writes the same three files as `run` (plus the model columns), as a resumable sweep
(`rollout.sweep`): each finished cell is kept under `OUT/progress/` as it lands, so a killed
evaluation continues where it stopped, and `OUT/eval.json` pins the run id and configuration
digest (a different configuration in the same directory is refused) and lists, per invocation,
the settings it applied that are not part of it (an API model's timeout, retries, concurrency).
A checkpoint's rows name the training run and step its adapter's manifest records
(`schemashift.lineage.evaluated_identity`), never what a caller says it is, and play with the
run's prompt and turn budgets unless --max-prompt-tokens / --max-new-tokens say otherwise.
"""

from __future__ import annotations

import argparse
from pathlib import Path

NAME = "eval"
HELP = "evaluate a model policy (hf:MODEL[@ADAPTER], openai:MODEL) over scenarios x seeds, resumably"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--policy", required=True, help="hf:<model id or dir>[@<adapter dir>], openai:<model>, ..."
    )
    from schemashift.cli.options import add_cell_arguments

    add_cell_arguments(parser)
    parser.add_argument("--out", required=True, help="output directory (resumable)")
    parser.add_argument(
        "--batch-size", type=int, default=32, help="episodes played in lockstep (default: 32)"
    )
    parser.add_argument("--backend", default="inprocess", help="where episodes run (default: %(default)s)")
    parser.add_argument(
        "--harness",
        default="default",
        help="how the model acts: default (JSON actions in its text), tools (native tool calling), legacy",
    )
    parser.add_argument(
        "--sweep-id", default=None, help="the sweep's identifier, stamped on every row (default: new uuid)"
    )
    parser.add_argument("--config-hash", default=None, help="config digest to stamp (default: of these args)")
    cache = parser.add_mutually_exclusive_group()
    cache.add_argument("--cache", default=None, help="response cache file (default: OUT/responses.sqlite)")
    cache.add_argument("--no-cache", action="store_true", help="do not read or write the response cache")
    model = parser.add_argument_group("generation")
    model.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="tokens per turn (default: a checkpoint's run's max_turn_tokens, else 256 local, 512 API, "
        "500 API with --harness legacy)",
    )
    model.add_argument(
        "--max-prompt-tokens",
        type=int,
        default=None,
        help="prompt budget for the history (default: a checkpoint's run's max_prompt_tokens, else a "
        "local model's context less one turn, none for API models)",
    )
    model.add_argument("--temperature", type=float, default=None, help="0 (default) is greedy")
    model.add_argument("--top-p", type=float, default=None, help="nucleus sampling mass")
    model.add_argument("--seed", type=int, default=None, help="sampling seed (each sample_index varies it)")
    model.add_argument(
        "--dtype", default=None, help="hf: auto (bf16 on GPU, fp32 on CPU), float32, float64, ..."
    )
    model.add_argument("--device", default=None, help="hf: torch device (default: cuda if present, else cpu)")
    model.add_argument(
        "--base-url", default=None, help="openai: endpoint (default: $OPENAI_BASE_URL or OpenAI)"
    )
    model.add_argument("--api-key-env", default=None, help="openai: NAME of the variable holding the key")
    model.add_argument(
        "--max-concurrency", type=int, default=None, help="openai: requests in flight (default: 4)"
    )
    model.add_argument(
        "--max-retries", type=int, default=None, help="openai: retries on 429/5xx/network errors (default: 5)"
    )
    model.add_argument(
        "--request-timeout",
        type=float,
        default=None,
        help="openai: seconds one request may take before its connection is closed (default: 60)",
    )
    model.add_argument(
        "--stream",
        action="store_true",
        default=None,
        help="openai: read answers as they are generated, so that a server such as transformers serve "
        "stops generating an abandoned one",
    )


def _options(args: argparse.Namespace) -> dict:
    options: dict = {"harness": args.harness}
    if args.max_prompt_tokens is not None:
        options["max_prompt_tokens"] = args.max_prompt_tokens
    if args.policy.startswith("hf:"):
        names = {"max_new_tokens": "max_new_tokens", "dtype": "dtype", "device": "device"}
    else:
        names = {"max_new_tokens": "max_tokens", "base_url": "base_url", "api_key_env": "api_key_env"}
        names.update(max_concurrency="max_concurrency", max_retries="max_retries")
        names.update(request_timeout="timeout_s", stream="stream")
    names.update(temperature="temperature", top_p="top_p", seed="seed")
    for attribute, option in names.items():
        value = getattr(args, attribute)
        if value is not None:
            options[option] = value
    return options


def writes(args: argparse.Namespace) -> dict:
    """The folder this verb writes, locked while it runs (`cli.main`)."""
    return {"--out": args.out}


def run(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from schemashift import provenance
    from schemashift.cli import CliError
    from schemashift.cli.options import arms_of, cells_of
    from schemashift.cli.progress import Progress
    from schemashift.env.arms import DEFAULT_ARM
    from schemashift.env.rulesets import UnknownRuleset, get_ruleset
    from schemashift.policies import UnknownPolicy, make_policy
    from schemashift.rollout.backends import make_backend
    from schemashift.rollout.runner import (
        EpisodeResult,
        SweepContext,
        cells,
        run_sweep_batched,
        write_results,
    )
    from schemashift.rollout.subject import check_harness
    from schemashift.rollout.sweep import ResumableSweep, SweepConflict, in_cell_order

    if args.batch_size < 1:
        raise CliError(f"--batch-size must be at least 1, got {args.batch_size}")
    try:
        check_harness(args.harness)
    except ValueError as exc:
        raise CliError(f"--harness: {exc}") from None
    if not (args.policy.startswith("hf:") or args.policy.startswith("openai:")):
        raise CliError(f"--policy {args.policy!r}: eval plays model policies (hf:..., openai:...); use `run`")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise CliError(f"--out {args.out} exists and is not a directory")
    try:
        ruleset = get_ruleset(args.ruleset)
        make_backend(args.backend).close()
    except (UnknownRuleset, ValueError) as exc:
        raise CliError(str(exc)) from None
    scenarios, seeds = cells_of(args, ruleset)
    arms = arms_of(args, ruleset)
    options = _options(args)
    if not args.no_cache:
        out.mkdir(parents=True, exist_ok=True)
        options["cache"] = args.cache or str(out / "responses.sqlite")
    try:
        policy = make_policy(args.policy, ruleset, **options)
    except (UnknownPolicy, ValueError, OSError) as exc:
        raise CliError(f"--policy {args.policy}: {exc}") from None

    cell_list = cells([ruleset.name], scenarios, seeds, args.samples, arms)
    invocation = {
        "policy": args.policy,
        "ruleset": ruleset.name,
        "ruleset_version": ruleset.version,
        "scenarios": scenarios,
        "seeds": seeds,
        "samples": args.samples,
        "model": policy.engine.identity(),
        "generation_config": policy.generation_config(),
        "train_run": policy.train_run,
        "checkpoint_step": policy.checkpoint_step,
    }
    if arms != [DEFAULT_ARM]:
        # only where it differs from the one arm evaluations played before arms existed, so that
        # a drift-only evaluation keeps its digest (and its folder resumes)
        invocation["arms"] = arms
    if ruleset.salt_id() is not None:
        # held-out tasks are other tasks: a folder of public ones does not resume under a salt
        invocation["salt_id"] = ruleset.salt_id()
    digest = args.config_hash or provenance.config_hash(invocation)
    out.mkdir(parents=True, exist_ok=True)
    sweep = ResumableSweep(out, "eval.json")
    try:
        pinned = sweep.pin(args.sweep_id, digest, invocation)
    except SweepConflict as exc:
        raise CliError(str(exc)) from None
    context = SweepContext(
        sweep_id=pinned["sweep_id"],
        policy=args.policy,
        **policy.row_identity(),
        config_hash=digest,
        git_sha=provenance.git_sha(),
        image=provenance.image(),
    )
    sweep.remove_leftovers()
    finished = sweep.finished(cell_list)
    todo = [cell for position, cell in enumerate(cell_list) if position not in finished]
    if todo:
        started = datetime.now(UTC).isoformat(timespec="seconds")
        applied = {"at": started, "cells": len(todo), "batch_size": args.batch_size}
        sweep.note_applied({**applied, **policy.request_settings()})

    def persist(result: EpisodeResult) -> None:
        sweep.persist(result)
        bar.update()

    try:
        with Progress(len(todo), label=f"{args.policy} on {ruleset.name}") as bar:
            fresh = run_sweep_batched(
                lambda: make_backend(args.backend), policy, todo, context, args.batch_size, on_episode=persist
            )
    finally:
        policy.close()
    results = in_cell_order(len(cell_list), finished, fresh)
    try:
        write_results(out, results)
    except OSError as exc:
        raise CliError(f"cannot write results to {args.out}: {exc}") from None
    from schemashift.cli.progress import report_outcome

    return report_outcome("eval", [r.record for r in results], args.out, f", {len(finished)} resumed")
