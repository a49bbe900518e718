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
from schemashift.env.arms import DEFAULT_ARM, check_arm
from schemashift.env.rulesets import get_ruleset
from schemashift.env.rulesets.base import RUBRIC_COLUMNS
from schemashift.policies.base import Policy, complete_task
from schemashift.rollout.backends import EnvBackend
from schemashift.rollout.records import RECORD_SCHEMA_VERSION

TRAJECTORY_VERSION = 1
#: summary text the original harness used when a model's output did not parse (spec 9.3)
PARSE_ERROR_PREFIX = "Parse error \u2014 LLM output: "


@dataclass(frozen=True)
class Cell:
    """One episode to play: (ruleset, scenario, seed, sample) in an arm (`env.arms`)."""

    ruleset: str
    scenario: str
    seed: int
    sample_index: int = 0
    arm: str = DEFAULT_ARM


@dataclass(frozen=True)
class SweepContext:
    """Identity and provenance columns shared by every row of one sweep (one `run` or `eval`
    invocation, named by `sweep_id`; a training rollout is one sweep too)."""

    sweep_id: str
    policy: str
    harness: str | None = None
    train_run: str | None = None
    base_model: str | None = None
    adapter_sha256: str | None = None
    checkpoint_step: int | None = None
    generation_config: str | None = None
    config_hash: str | None = None
    git_sha: str | None = None
    image: str | None = None


@dataclass
class EpisodeResult:
    record: dict[str, Any]
    drifts: list[dict[str, Any]] = field(default_factory=list)
    trajectory: dict[str, Any] = field(default_factory=dict)


def cells(
    rulesets: Iterable[str],
    scenarios: Iterable[str],
    seeds: Iterable[int],
    samples: int = 1,
    arms: Iterable[str] = (DEFAULT_ARM,),
) -> list[Cell]:
    """Every (ruleset, scenario, seed, sample) in every arm; the arms of one (scenario, seed,
    sample) are next to each other, so a paired comparison finds both halves together."""
    scenarios, seeds, arms = list(scenarios), list(seeds), [check_arm(arm) for arm in arms]
    return [
        Cell(ruleset, scenario, seed, sample, arm)
        for ruleset in rulesets
        for scenario in scenarios
        for seed in seeds
        for sample in range(samples)
        for arm in arms
    ]


def _identity(cell: Cell, context: SweepContext) -> dict[str, Any]:
    return {
        "record_version": RECORD_SCHEMA_VERSION,
        "sweep_id": context.sweep_id,
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
        "arm": cell.arm,
    }


class EpisodeRecorder:
    """One episode's bookkeeping, shared by the sequential and the lockstep paths so that both
    build identical records."""

    def __init__(self, backend: EnvBackend, cell: Cell, context: SweepContext) -> None:
        self.backend, self.cell, self.context = backend, cell, context
        self.identity = _identity(cell, context)
        self.started = time.perf_counter()
        self.tokens_in = self.tokens_out = self.parse_failures = 0
        self.per_step: list[dict[str, Any]] = []
        self.charge = True

    def start(self) -> dict[str, Any]:
        self.charge = get_ruleset(self.cell.ruleset).charges_tokens
        cell = self.cell
        if cell.arm == DEFAULT_ARM:
            return self.backend.reset(cell.ruleset, cell.scenario, cell.seed)
        return self.backend.reset(cell.ruleset, cell.scenario, cell.seed, arm=cell.arm)

    def apply(
        self,
        action: Any,
        usage: tuple[int, int] | None = None,
        parse_failed: bool = False,
        text: str | None = None,
    ) -> dict[str, Any]:
        """Take one step with a policy's action; returns the next observation."""
        step_in, step_out = usage or (0, 0)
        self.tokens_in += step_in
        self.tokens_out += step_out
        used = step_in + step_out if self.charge else 0
        extra: dict[str, Any] = {"tokens_used": used}
        if text is not None:
            extra["text"] = text
        if parse_failed:
            self.parse_failures += 1
        try:
            observation, _ = self.backend.step(action, used)
        except InvalidAction as exc:
            # Rulesets that reject invalid actions end the episode the way the original harness
            # did: complete_task with a parse-error summary.
            if not parse_failed:
                self.parse_failures += 1
            raw = _as_text(action)
            extra.update(raw=raw, invalid=str(exc))
            observation, _ = self.backend.step(complete_task(PARSE_ERROR_PREFIX + raw[:120]), used)
        self.per_step.append(extra)
        return observation

    def fail(self, exc: BaseException) -> EpisodeResult:
        """The infra_error row of an episode that could not be played."""
        cell, context, identity = self.cell, self.context, self.identity
        record = {
            **identity,
            **_catalogue_facts(cell),
            "status": "infra_error",
            "error": f"{type(exc).__name__}: {exc}",
            "wall_s": time.perf_counter() - self.started,
            "generation_config": context.generation_config,
            "config_hash": context.config_hash,
            "git_sha": context.git_sha,
            "image": context.image,
        }
        trajectory = {
            **identity,
            "trajectory_version": TRAJECTORY_VERSION,
            "status": "infra_error",
            "error": record["error"],
            "traceback": "".join(traceback.format_exception(exc)),
            "steps": [],
        }
        return EpisodeResult(record, [], trajectory)

    def finish(self, extra_parse_failures: int = 0) -> EpisodeResult:
        return episode_result(
            self.backend.outcome(),
            self.cell,
            self.context,
            self.per_step,
            time.perf_counter() - self.started,
            (self.tokens_in, self.tokens_out),
            self.parse_failures + extra_parse_failures,
        )


def episode_result(
    outcome: dict[str, Any],
    cell: Cell,
    context: SweepContext,
    per_step: list[dict[str, Any]],
    wall_s: float,
    tokens: tuple[int | None, int | None] = (0, 0),
    parse_failures: int | None = 0,
) -> EpisodeResult:
    """The records of a played episode from its backend's `outcome()` and what the policy side
    knew of each step (`per_step`: tokens charged, raw text): one builder for every path that
    plays episodes (the runner's, the server's recordings), so their records agree."""
    identity = _identity(cell, context)
    task, summary, history = outcome["task"], outcome["summary"], outcome["history"]
    record = {
        **identity,
        "ruleset_version": task["ruleset_version"],
        "family": task["family"],
        "tier": task["tier"],
        "split": task["split"],
        "salt_id": task.get("salt_id"),
        "status": "graded",
        "error": None,
        **summary,
        "steps": len(history),
        "max_steps": task["max_steps"],
        "final_action": history[-1]["action"]["type"] if history else None,
        "parse_failures": parse_failures,
        "tokens_in": tokens[0],
        "tokens_out": tokens[1],
        "wall_s": wall_s,
        "generation_config": context.generation_config,
        "config_hash": context.config_hash,
        "git_sha": context.git_sha,
        "image": context.image,
    }
    drift_keys = {
        k: identity[k]
        for k in (
            "record_version",
            "sweep_id",
            "train_run",
            "ruleset",
            "policy",
            "checkpoint_step",
            "harness",
            "scenario",
            "seed",
            "sample_index",
            "arm",
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


def play_episode(backend: EnvBackend, policy: Policy, cell: Cell, context: SweepContext) -> EpisodeResult:
    """Play one episode to its end. Failures of the backend or policy become an `infra_error` row.

    A policy may also have `start_episode(cell)` (model policies seed their sampling by it),
    `last_usage`, `last_parse_failed` and `last_text` (what the latest decision cost, whether its
    output failed to parse, the raw model text) and `parse_failures` (a per-episode total).
    """
    episode = EpisodeRecorder(backend, cell, context)
    try:
        policy.reset()
        start = getattr(policy, "start_episode", None)
        if start is not None:
            start(cell)
        observation = episode.start()
        while not observation["done"]:
            action = policy.act(observation)
            observation = episode.apply(
                action,
                getattr(policy, "last_usage", None),
                bool(getattr(policy, "last_parse_failed", False)),
                getattr(policy, "last_text", None),
            )
        return episode.finish(getattr(policy, "parse_failures", 0) or 0)
    except Exception as exc:  # noqa: BLE001 - any failure here is an infrastructure failure of this cell
        return episode.fail(exc)


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
    *RUBRIC_COLUMNS,
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
    context: SweepContext,
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


def run_sweep_batched(
    make_backend: Callable[[], EnvBackend],
    policy: Any,
    cell_list: list[Cell],
    context: SweepContext,
    batch_size: int = 32,
    on_episode: Callable[[EpisodeResult], None] | None = None,
) -> list[EpisodeResult]:
    """Play the cells in lockstep, up to `batch_size` episodes at once, one backend each.

    Each round asks the policy for the next action of every running episode in one call,
    `policy.act_batch([(slot, cell, observation), ...])`, which returns one `Decision`-like object
    per entry (`action`, `usage`, `parse_failed`, `text`, `error`). A finished episode's slot takes
    the next cell at once. Records are built by the same bookkeeping as `play_episode`, so they
    equal the sequential path's wherever the actions agree; results come back in cell order.
    """
    if batch_size < 1:
        raise ValueError(f"batch_size must be at least 1, got {batch_size}")
    results: list[EpisodeResult | None] = [None] * len(cell_list)
    pending = list(range(len(cell_list)))[::-1]
    # slot -> (cell position, episode, observation)
    running: dict[int, tuple[int, EpisodeRecorder, dict[str, Any]]] = {}
    backends: dict[int, EnvBackend] = {}

    def done(position: int, result: EpisodeResult) -> None:
        results[position] = result
        if on_episode is not None:
            on_episode(result)

    def fill(slot: int) -> None:
        while pending:
            position = pending.pop()
            if slot not in backends:
                backends[slot] = make_backend()
            episode = EpisodeRecorder(backends[slot], cell_list[position], context)
            try:
                policy.start_slot(slot, episode.cell)
                observation = episode.start()
            except Exception as exc:  # noqa: BLE001 - an infrastructure failure of this cell
                done(position, episode.fail(exc))
                continue
            if observation["done"]:
                done(position, episode.finish())
                continue
            running[slot] = (position, episode, observation)
            return

    try:
        for slot in range(batch_size):
            fill(slot)
        while running:
            slots = sorted(running)
            try:
                decisions = policy.act_batch([(s, running[s][1].cell, running[s][2]) for s in slots])
            except Exception as exc:  # noqa: BLE001 - the whole round failed: every episode in it
                decisions = [exc] * len(slots)
            for slot, decision in zip(slots, decisions, strict=True):
                position, episode, _ = running.pop(slot)
                error = decision if isinstance(decision, BaseException) else decision.error
                try:
                    if error is not None:
                        raise error
                    observation = episode.apply(
                        decision.action, decision.usage, decision.parse_failed, decision.text
                    )
                    if observation["done"]:
                        done(position, episode.finish())
                    else:
                        running[slot] = (position, episode, observation)
                        continue
                except Exception as exc:  # noqa: BLE001 - an infrastructure failure of this cell
                    done(position, episode.fail(exc))
                fill(slot)
    finally:
        for backend in backends.values():
            backend.close()
    return [r for r in results if r is not None]


def write_results(out_dir: str | Path, results: list[EpisodeResult]) -> dict[str, str]:
    """Write the three result files of a sweep as one set (`resultset.write`); returns their paths.

    Both tables are built (and so validated) before anything is written.
    """
    from schemashift.rollout import records, resultset

    episodes = records.to_table([r.record for r in results], records.EPISODE_COLUMNS)
    drifts = records.to_table([row for r in results for row in r.drifts], records.DRIFT_COLUMNS)
    return resultset.write(out_dir, episodes, drifts, [r.trajectory for r in results])
