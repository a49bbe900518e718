"""The GRPO dataset of a run: one row per training episode, drawn from the run's ruleset and split.

Each row's prompt is the interaction format's opening (system prompt and task) in the run's
harness, the same messages evaluation starts from. The first message also carries the episode it opens
(`ruleset/scenario/seed`) in an `episode` field, which chat templates ignore: TRL hands the
rollout function only the prompts, and the rollout needs the exact episode to replay it.
"""

from __future__ import annotations

import json
import random
from typing import Any

from schemashift.env.environment import Environment
from schemashift.env.rulesets import get_ruleset
from schemashift.policies.llm.format import TOOLS_FIELD
from schemashift.policies.llm.harnesses import get_harness
from schemashift.runs.contract import TrainRun, training_scenarios

EPISODE_FIELD = "episode"


class DatasetError(ValueError):
    """The run asks for tasks its ruleset cannot provide."""


def episode_key(ruleset: str, scenario: str, seed: int) -> str:
    return f"{ruleset}/{scenario}/{seed}"


def parse_episode_key(key: str) -> tuple[str, str, int]:
    ruleset, scenario, seed = key.split("/")
    return ruleset, scenario, int(seed)


def training_seeds(run: TrainRun, count: int) -> list[int]:
    """`count` distinct seeds of the run's split, drawn with the run's seed, or the run's own
    `seeds` (repeated in order when fewer than `count`).

    Rulesets without splits (legacy, whose seed changes nothing) take 0..count-1.
    """
    ruleset = get_ruleset(run.ruleset)
    splits = ruleset.splits()
    if run["seeds"]:
        chosen = [int(seed) for seed in run["seeds"]]
        if splits and run.split in splits:
            first, last = splits[run.split]
            outside = [seed for seed in chosen if seed < first or (last is not None and seed > last)]
            if outside:
                raise DatasetError(f"run {run.name}: seeds {outside} are not in the {run.split!r} split")
        return [chosen[index % len(chosen)] for index in range(count)]
    if not splits:
        return list(range(count))
    if run.split not in splits:
        raise DatasetError(
            f"run {run.name}: ruleset {run.ruleset!r} has splits {sorted(splits)}, not {run.split!r}"
        )
    first, last = splits[run.split]
    span = (last - first + 1) if last is not None else max(count * 100, 10_000)
    if span < count:
        raise DatasetError(f"run {run.name}: split {run.split!r} has {span} seeds, fewer than {count}")
    rng = random.Random(f"train-seeds/{run.name}/{run['seed']}")
    return sorted(first + offset for offset in rng.sample(range(span), count))


def opening_messages(
    ruleset_name: str, scenario: str, seed: int, harness: str = "default"
) -> list[dict[str, Any]]:
    """The first prompt of an episode in the harness's interaction format, tagged with its
    episode key; the tools harness's function definitions as JSON text (a dataset's rows share
    one schema, which definitions of different functions would not)."""
    ruleset = get_ruleset(ruleset_name)
    observation = Environment(ruleset).reset(scenario, seed)
    entry = get_harness(harness)
    conversation = entry.conversation.for_ruleset(ruleset, observation)
    messages = [dict(message) for message in conversation.messages()]
    for message in messages:
        message[EPISODE_FIELD] = None
        if entry.function_calls:
            tools = message.get(TOOLS_FIELD)
            message[TOOLS_FIELD] = None if tools is None else json.dumps(tools, ensure_ascii=False)
    messages[0][EPISODE_FIELD] = episode_key(ruleset_name, scenario, seed)
    return messages


def build_rows(run: TrainRun) -> list[dict[str, Any]]:
    """`dataset_size` rows cycling through the scenarios, each with its own seed of the split."""
    scenarios = training_scenarios(run)
    size = run["dataset_size"]
    per_scenario = -(-size // len(scenarios))
    seeds = training_seeds(run, per_scenario)
    rows = []
    for index in range(size):
        scenario = scenarios[index % len(scenarios)]
        seed = seeds[index // len(scenarios)]
        rows.append(
            {
                "prompt": opening_messages(run.ruleset, scenario, seed, run["harness"]),
                "ruleset": run.ruleset,
                "scenario": scenario,
                "seed": seed,
            }
        )
    return rows
