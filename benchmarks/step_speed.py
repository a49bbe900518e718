"""In-process step latency: policy_aware_heuristic episodes over the six legacy scenarios.

The figure covers the whole loop, the agent's decision included, as the original's 86 us/step
was measured. Target: at most 17 us per step (goal 9 us). Prints the median of several repeats.
"""

from __future__ import annotations

import argparse
import statistics
import time

from schemashift.env import Environment
from schemashift.policies import make_policy


def one_pass(env: Environment, policy, scenarios: list[str], episodes: int) -> tuple[float, int]:
    steps = 0
    started = time.perf_counter()
    for i in range(episodes):
        policy.reset()
        observation = env.reset(scenarios[i % len(scenarios)], i)
        while not observation["done"]:
            observation, _ = env.step(policy.act(observation))
            steps += 1
    return time.perf_counter() - started, steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ruleset", default="legacy")
    parser.add_argument("--policy", default="policy_aware_heuristic")
    parser.add_argument("--episodes", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    env = Environment(args.ruleset)
    policy = make_policy(args.policy, args.ruleset)
    scenarios = env.ruleset.scenario_ids()
    one_pass(env, policy, scenarios, 300)
    per_step = []
    for _ in range(args.repeats):
        seconds, steps = one_pass(env, policy, scenarios, args.episodes)
        per_step.append(seconds / steps * 1e6)
    print(f"ruleset={args.ruleset} policy={args.policy} episodes/pass={args.episodes} steps/pass={steps}")
    print(
        f"us per step: median {statistics.median(per_step):.2f}  "
        f"min {min(per_step):.2f}  max {max(per_step):.2f}"
    )
    print("target: <= 17 us/step (goal 9); the original measured about 86 us/step on this kind of machine")


if __name__ == "__main__":
    main()
