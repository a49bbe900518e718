"""Play a policy over cells (ruleset x scenario x seed x sample) and build the records.

Every policy, heuristic or model, goes through `play_episode`, so every result has the same
episode row, per-drift rows and trajectory, whatever produced it.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import schemashift
from schemashift.env.actions import InvalidAction
from schemashift.env.rulesets import get_ruleset
from schemashift.policies.base import Policy, complete_task
from schemashift.rollout.backends import EnvBackend
from schemashift.rollout.records import RECORD_SCHEMA_VERSION

TRAJECTORY_VERSION = 1
#: summary text the original harness used when a model's output did not parse (spec 9.3)
PARSE_ERROR_PREFIX = "Parse error \u2014 LLM output: "


@dataclass(frozen=True)
class Cell:
    ruleset: str
    scenario: str
    seed: int
    sample_index: int = 0


@dataclass(frozen=True)
class RunContext:
    """Identity and provenance columns shared by every row of one invocation."""

    run_id: str
    policy: str
    harness: str | None = None
    train_run: str | None = None
    base_model: str | None = None
    adapter_sha256: str | None = None
    checkpoint_step: int | None = None
    generation_config: str | None = None
    config_hash: str | None = None
    git_sha: str | None = None


@dataclass
class EpisodeResult:
    record: dict[str, Any]
    drifts: list[dict[str, Any]] = field(default_factory=list)
    trajectory: dict[str, Any] = field(default_factory=dict)


def cells(
    rulesets: Iterable[str], scenarios: Iterable[str], seeds: Iterable[int], samples: int = 1
) -> list[Cell]:
    scenarios, seeds = list(scenarios), list(seeds)
    return [
        Cell(ruleset, scenario, seed, sample)
        for ruleset in rulesets
        for scenario in scenarios
        for seed in seeds
        for sample in range(samples)
    ]


def _identity(cell: Cell, context: RunContext) -> dict[str, Any]:
    return {
        "record_version": RECORD_SCHEMA_VERSION,
        "run_id": context.run_id,
        "train_run": context.train_run,
        "ruleset": cell.ruleset,
        "env_version": schemashift.__version__,
        "policy": context.policy,
        "base_model": context.base_model,
        "adapter_sha256": context.adapter_sha256,
        "checkpoint_step": context.checkpoint_step,
        "harness": context.harness,
        "scenario": cell.scenario,
        "seed": cell.seed,
        "sample_index": cell.sample_index,
    }


def play_episode(backend: EnvBackend, policy: Policy, cell: Cell, context: RunContext) -> EpisodeResult:
    """Play one episode to its end. Failures of the backend or policy become an `infra_error` row."""
    identity = _identity(cell, context)
    started = time.perf_counter()
    tokens_in = tokens_out = parse_failures = 0
    per_step: list[dict[str, Any]] = []
    try:
        policy.reset()
        observation = backend.reset(cell.ruleset, cell.scenario, cell.seed)
        charge = get_ruleset(cell.ruleset).charges_tokens
        while not observation["done"]:
            action = policy.act(observation)
            step_in, step_out = getattr(policy, "last_usage", None) or (0, 0)
            tokens_in += step_in
            tokens_out += step_out
            used = step_in + step_out if charge else 0
            extra: dict[str, Any] = {"tokens_used": used}
            try:
                observation, _ = backend.step(action, used)
            except InvalidAction as exc:
                # Rulesets that reject invalid actions end the episode the way the original harness
                # did: complete_task with a parse-error summary.
                parse_failures += 1
                text = _as_text(action)
                extra = {"tokens_used": used, "raw": text, "invalid": str(exc)}
                observation, _ = backend.step(complete_task(PARSE_ERROR_PREFIX + text[:120]), used)
            per_step.append(extra)
        outcome = backend.outcome()
    except Exception as exc:  # noqa: BLE001 - any failure here is an infrastructure failure of this cell
        record = {
            **identity,
            **_catalogue_facts(cell),
            "status": "infra_error",
            "error": f"{type(exc).__name__}: {exc}",
            "wall_s": time.perf_counter() - started,
            "generation_config": context.generation_config,
            "config_hash": context.config_hash,
            "git_sha": context.git_sha,
        }
        trajectory = {
            **identity,
            "trajectory_version": TRAJECTORY_VERSION,
            "status": "infra_error",
            "error": record["error"],
            "traceback": traceback.format_exc(),
            "steps": [],
        }
        return EpisodeResult(record, [], trajectory)
    wall = time.perf_counter() - started
    parse_failures += getattr(policy, "parse_failures", 0) or 0
    task, summary, history = outcome["task"], outcome["summary"], outcome["history"]
    record = {
        **identity,
        "ruleset_version": task["ruleset_version"],
        "family": task["family"],
        "tier": task["tier"],
        "split": task["split"],
        "status": "graded",
        "error": None,
        **summary,
        "steps": len(history),
        "max_steps": task["max_steps"],
        "final_action": history[-1]["action"]["type"] if history else None,
        "parse_failures": parse_failures,
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "wall_s": wall,
        "generation_config": context.generation_config,
        "config_hash": context.config_hash,
        "git_sha": context.git_sha,
    }
    drift_keys = {
        k: identity[k]
        for k in (
            "record_version",
            "run_id",
            "train_run",
            "ruleset",
            "policy",
            "checkpoint_step",
            "scenario",
            "seed",
            "sample_index",
        )
    }
    drifts = [{**drift_keys, **row} for row in outcome["drifts"]]
    steps = [{**step, **extra} for step, extra in zip(history, per_step, strict=False)]
    trajectory = {
        **identity,
        "trajectory_version": TRAJECTORY_VERSION,
        "ruleset_version": task["ruleset_version"],
        "status": "graded",
        "schedule": task.get("schedule"),
        "steps": steps,
        "final": {key: record[key] for key in FINAL_KEYS if key in record},
    }
    return EpisodeResult(record, drifts, trajectory)


def _catalogue_facts(cell: Cell) -> dict[str, Any]:
    """What the catalogue says about a cell without playing it (for infra_error rows)."""
    try:
        ruleset = get_ruleset(cell.ruleset)
        info = ruleset.scenario_info(cell.scenario)
    except (KeyError, ValueError):
        return {}
    return {
        "ruleset_version": ruleset.version,
        "family": info.family,
        "tier": info.tier,
        "split": ruleset.split_of(cell.seed),
        "max_steps": info.max_steps,
    }


def _as_text(action: Any) -> str:
    """A policy's output as text: model text as is, structured output as JSON."""
    if isinstance(action, str):
        return action
    if isinstance(action, bytes):
        return action.decode("utf-8", "replace")
    try:
        return json.dumps(action, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(action)


#: the episode outcome columns repeated at the end of a trajectory and in replay's `final`
FINAL_KEYS = (
    "completion",
    "drift_detection",
    "adaptation",
    "efficiency",
    "shaped_total",
    "binary",
    "cumulative_reward",
    "success",
    "score",
    "training_reward",
    "schedule_hash",
    "catastrophe",
    "invalid_actions",
    "drifts_discovered",
    "drifts_recovered",
    "steps_to_recover",
    "deprecated_calls",
    "steps",
)


def run_sweep(
    backend: EnvBackend,
    policy: Policy,
    cell_list: list[Cell],
    context: RunContext,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Play every cell in order with one policy; `on_episode` sees each result as it lands."""
    results = []
    for cell in cell_list:
        result = play_episode(backend, policy, cell, context)
        results.append(result)
        if on_episode is not None:
            on_episode(result)
    return results


def write_results(out_dir: str | Path, results: list[EpisodeResult]) -> dict[str, str]:
    """Write the three result files of a sweep; returns their paths.

    Both tables are built (and so validated) before anything is written, and each file is
    replaced atomically; `episodes.parquet` goes last, so a directory whose episodes file is
    new holds a complete set.
    """
    from schemashift.rollout import io, records

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "episodes": out / "episodes.parquet",
        "drifts": out / "drifts.parquet",
        "trajectories": out / "trajectories.jsonl.gz",
    }
    episodes = records.to_table([r.record for r in results], records.EPISODE_COLUMNS)
    drifts = records.to_table([row for r in results for row in r.drifts], records.DRIFT_COLUMNS)
    io.write_jsonl_gz(paths["trajectories"], [r.trajectory for r in results])
    io.write_parquet(paths["drifts"], drifts)
    io.write_parquet(paths["episodes"], episodes)
    return {name: str(path) for name, path in paths.items()}
