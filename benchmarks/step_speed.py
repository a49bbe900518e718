"""In-process step latency: policy_aware_heuristic episodes over the six legacy scenarios.

The figure covers the whole loop, the agent's decision included, as the original's 86 us/step
was measured. Target: at most 17 us per step (goal 9 us), set when observations were shared
read-only views; since they are frozen snapshots (docs/architecture.md) legacy measures about
21-23 us here, against 13 before. Prints the median of several repeats.

Absolute figures depend on the machine and its load, so the target is really a ratio to the
original. `--original DIR` takes a checkout of the original SchemaShift repository (it needs
pydantic v2, and httpx because its eval.py imports its HTTP client) and plays the same episode
mix through the original's in-process API too: its environment class and its
policy_aware_heuristic agent, reset(task_id, seed) / step(action, tokens_used=0). Passes of the
two alternate within each repeat, so both see the same machine conditions, and the script
prints both figures and the ratio original/ours.

`--ruleset legacy,v1` times several rulesets under the same policy, interleaved the same way,
and prints each figure and the ratio to the first (v1 type-checks every call and grades the
world after every write, so its steps cost more). Passes replay seeds 0.. (tasks cached after
the first); `--fresh-seeds` plays each episode on a new seed, which adds building the task
(v1 draws a world and a drift plan per seed).

    python benchmarks/step_speed.py [--episodes 3000] [--repeats 7] [--original DIR]
    python benchmarks/step_speed.py --ruleset legacy,v1 [--fresh-seeds]
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from schemashift.env import Environment
from schemashift.policies import make_policy

WARMUP_EPISODES = 300

# A timed pass: plays `episodes` episodes, returns (seconds, steps).
Pass = Callable[[int], tuple[float, int]]


def one_pass(
    env: Environment, policy, scenarios: list[str], episodes: int, seeds: itertools.count | None = None
) -> tuple[float, int]:
    """Episodes on seeds 0, 1, ... (or, with `seeds`, on seeds never played before in this run)."""
    steps = 0
    started = time.perf_counter()
    for i in range(episodes):
        policy.reset()
        observation = env.reset(scenarios[i % len(scenarios)], i if seeds is None else next(seeds))
        while not observation["done"]:
            observation, _ = env.step(policy.act(observation))
            steps += 1
    return time.perf_counter() - started, steps


def original_pass(checkout: Path, scenarios: list[str]) -> Pass:
    """The same episode mix through the original's environment and agent, imported from `checkout`.

    The original is a flat repository (top-level `models`, `eval`, `server/environment.py`, ...),
    so its root goes first on sys.path.
    """
    sys.path.insert(0, str(checkout.resolve()))
    env = importlib.import_module("server.environment").SchemaShiftEnvironment()
    agent = importlib.import_module("eval").PolicyAwareHeuristicAgent()

    def run(episodes: int) -> tuple[float, int]:
        steps = 0
        started = time.perf_counter()
        for i in range(episodes):
            agent.reset()
            observation = env.reset(scenarios[i % len(scenarios)], seed=i)
            while not observation.done:
                observation, _ = env.step(agent.act(observation), tokens_used=0)
                steps += 1
        return time.perf_counter() - started, steps

    return run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ruleset", default="legacy", help="a ruleset, or a comma list timed side by side")
    parser.add_argument("--policy", default="policy_aware_heuristic")
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument(
        "--fresh-seeds",
        action="store_true",
        help="play every episode on a new seed, so task construction is timed too (rulesets cache tasks)",
    )
    parser.add_argument(
        "--original",
        type=Path,
        metavar="DIR",
        help="a checkout of the original SchemaShift repository: also time it, interleaved with ours",
    )
    args = parser.parse_args()
    rulesets = args.ruleset.split(",")
    passes: dict[str, Pass] = {}
    for name in rulesets:
        env = Environment(name)
        label = "ours" if len(rulesets) == 1 else name
        seeds = itertools.count() if args.fresh_seeds else None
        passes[label] = partial(
            one_pass, env, make_policy(args.policy, name), env.ruleset.scenario_ids(), seeds=seeds
        )
    if args.original is not None:
        if (rulesets, args.policy) != (["legacy"], "policy_aware_heuristic"):
            parser.error("--original compares the legacy ruleset under policy_aware_heuristic only")
        passes["original"] = original_pass(args.original, Environment("legacy").ruleset.scenario_ids())

    for run in passes.values():
        run(WARMUP_EPISODES)
    per_step: dict[str, list[float]] = {name: [] for name in passes}
    cpu_per_step: dict[str, list[float]] = {name: [] for name in passes}
    steps: dict[str, int] = {}
    for repeat in range(args.repeats):
        # Alternate which one goes first, so neither always runs on the warmer (or busier) slot.
        order = list(passes.items()) if repeat % 2 == 0 else list(reversed(passes.items()))
        for name, run in order:
            cpu_started = time.process_time()
            seconds, steps[name] = run(args.episodes)
            cpu_per_step[name].append((time.process_time() - cpu_started) / steps[name] * 1e6)
            per_step[name].append(seconds / steps[name] * 1e6)
    if "original" in passes and len(set(steps.values())) > 1:
        sys.exit(f"the implementations played different numbers of steps per pass: {steps}")

    print(
        f"ruleset={args.ruleset} policy={args.policy} episodes/pass={args.episodes} "
        f"steps/pass={','.join(str(n) for n in steps.values())}"
    )
    for name, figures in per_step.items():
        label = f"{name:<9} " if len(passes) > 1 else ""
        print(
            f"{label}us per step: median {statistics.median(figures):.2f}  "
            f"min {min(figures):.2f}  max {max(figures):.2f}  "
            f"(CPU: median {statistics.median(cpu_per_step[name]):.2f})"
        )
    if len(rulesets) > 1:
        first = rulesets[0]
        base, cpu_base = statistics.median(per_step[first]), statistics.median(cpu_per_step[first])
        for name in rulesets[1:]:
            print(
                f"ratio {name}/{first}: medians {statistics.median(per_step[name]) / base:.2f}  "
                f"CPU medians {statistics.median(cpu_per_step[name]) / cpu_base:.2f}  (target <= 1.5)"
            )
    if "original" in per_step:
        ours, original = per_step["ours"], per_step["original"]
        cpu_ratio = statistics.median(cpu_per_step["original"]) / statistics.median(cpu_per_step["ours"])
        print(
            f"ratio original/ours: medians {statistics.median(original) / statistics.median(ours):.2f}  "
            f"mins {min(original) / min(ours):.2f}  CPU medians {cpu_ratio:.2f}  "
            f"(target >= {86 / 17:.2f}, i.e. 86/17)"
        )
    print("target: <= 17 us/step (goal 9); the original measured about 86 us/step on this kind of machine")


if __name__ == "__main__":
    main()
