"""Do v1 seeds matter at scale? Distinct drift schedules and task texts over a whole split, and
train tasks that equal a test task.

For every family and composition, over the test split (seeds 0-9999 by default) it prints the
share of seeds with a distinct drift schedule (`Task.schedule_hash`) and a distinct task text,
and, over as many train seeds, how many train tasks equal a test task: the same text and the same
answer (criteria, allowed changes and the honest summary). Guarantee 7 of docs/rulesets.md: at
least 95% distinct schedules per scenario over all 10,000 test seeds, and no such overlap.

    python benchmarks/v1_seeds.py [--seeds 10000]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter

from schemashift.env.rulesets import get_ruleset
from schemashift.env.rulesets.v1.tasks import TEST_SEEDS, TRAIN_FIRST_SEED

THRESHOLD = 0.95


def task_identity(task) -> tuple[str, str]:
    """What makes two tasks the same task: the text, and the answer the grader holds."""
    truth = task.ground_truth
    answer = json.dumps([truth["criteria"], truth["allowed"], truth["summary"]], sort_keys=True)
    return task.description, answer


def plan_key(task) -> tuple[tuple[str, str, str, int], ...]:
    """A drift plan as a situation: which (tool, endpoint, kind, call) drifts it holds, whatever
    new name or value each one picks (a tool-wide drift has endpoint "")."""
    return tuple(sorted((d.tool, d.endpoint or "", d.kind, d.on_call) for d in task.drift_plan))


def seed_figures(scenario: str, seeds: int) -> dict[str, float]:
    """Distinct-schedule and distinct-text shares over `seeds` test seeds, and the number of the
    first `seeds` train tasks that equal a test task."""
    ruleset = get_ruleset("v1")
    schedules, texts, test_tasks = set(), set(), set()
    plans: Counter = Counter()
    for seed in range(TEST_SEEDS[0], TEST_SEEDS[0] + seeds):
        task = ruleset.build_task(scenario, seed)
        schedules.add(task.schedule_hash())
        plans[plan_key(task)] += 1
        texts.add(task.description)
        test_tasks.add(task_identity(task))
    overlap = sum(
        task_identity(ruleset.build_task(scenario, seed)) in test_tasks
        for seed in range(TRAIN_FIRST_SEED, TRAIN_FIRST_SEED + seeds)
    )
    return {
        "distinct_schedules": len(schedules) / seeds,
        "distinct_texts": len(texts) / seeds,
        "train_equal_to_test": overlap,
        "distinct_plans": len(plans),
        "largest_plan_share": max(plans.values()) / seeds,
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seeds", type=int, default=TEST_SEEDS[1] - TEST_SEEDS[0] + 1)
    args = parser.parse_args()
    ruleset = get_ruleset("v1")
    scenarios = ruleset.scenario_ids() + [info.id for info in ruleset.compositions()]
    print(f"v1 version {ruleset.version}: {args.seeds} test seeds and {args.seeds} train seeds per scenario")
    print(
        f"{'scenario':<22}{'schedules':>11}{'texts':>9}{'train=test':>12}{'plans':>7}{'largest':>9}{'s':>7}"
    )
    ok = True
    for scenario in scenarios:
        started = time.perf_counter()
        figures = seed_figures(scenario, args.seeds)
        ok &= figures["distinct_schedules"] >= THRESHOLD and figures["train_equal_to_test"] == 0
        print(
            f"{scenario:<22}{figures['distinct_schedules']:>11.4f}{figures['distinct_texts']:>9.4f}"
            f"{figures['train_equal_to_test']:>12d}{figures['distinct_plans']:>7d}"
            f"{figures['largest_plan_share']:>9.4f}{time.perf_counter() - started:>7.1f}"
        )
    print(
        f"target: >= {THRESHOLD:.0%} distinct schedules per scenario and no train task equal to a test task: "
        + ("met" if ok else "NOT met")
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
