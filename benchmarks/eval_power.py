"""How precise are the configured evaluation cells? The interval half-width on overall success.

For each ruleset of a workflow config (default: the embedded `config.yaml`) it selects the
evaluation cells as the workflow does (`schemashift.workflow.Plan`), both sets: the models'
(`seeds`: model baselines, base models, checkpoints) and the rule baselines' (`baseline_seeds`).
For each it prints, for a subject whose overall success rate is 50% (the widest case), the
half-width of the report's interval on it: exact (Clopper-Pearson) bounds on the pooled
successes, one episode per cell, as `schemashift.report.stats.metric_stat` gives them, and the
fewest seeds per scenario for which that half-width is at most the target (default 0.05). Then
what one model costs: episodes per model and ruleset (an API model pays per episode, a local
one in GPU time), and the baselines' episodes. A ruleset whose seeds do not vary the task
(legacy) is flagged: there more seeds only repeat attempts at the same tasks.

    python benchmarks/eval_power.py [--config config.yaml] [--target 0.05]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from schemashift.env.rulesets import get_ruleset
from schemashift.report.stats import clopper_pearson
from schemashift.workflow import Plan

REPO = Path(__file__).resolve().parents[1]


def half_width(cells: int) -> float:
    """Half the width of the exact interval on a 50% success rate over `cells` episodes."""
    low, high = clopper_pearson(cells // 2, cells)
    return (high - low) / 2.0


def seeds_needed(scenarios: int, target: float) -> int:
    """The fewest seeds per scenario whose cells give a half-width at most `target`."""
    seeds = 1
    while half_width(scenarios * seeds) > target:
        seeds += 1
    return seeds


def describe(cells: list[tuple[str, int]], target: float) -> str:
    """Scenarios x seeds, the half-width at 50% and the seeds per scenario the target needs."""
    scenarios = len({scenario for scenario, _ in cells})
    seeds = len(cells) // max(scenarios, 1)
    needed = seeds_needed(scenarios, target)
    verdict = "meets" if half_width(len(cells)) <= target else f"needs {needed} seeds per scenario for"
    return (
        f"{scenarios} scenarios x {seeds} seeds = {len(cells)} cells, half-width "
        f"{half_width(len(cells)):.3f} ({verdict} <= {target:g})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=REPO / "config.yaml", help="workflow config")
    parser.add_argument("--target", type=float, default=0.05, help="half-width to reach (default 0.05)")
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    plan = Plan(config, environ={})
    samples = int(config.get("samples", 1))
    print(f"evaluation power of {args.config.name} (overall success at 50%, exact 95% bounds)")
    per_model = per_model_at_target = 0
    for ruleset in config["rulesets"]:
        models, baselines = plan.cells(ruleset), plan.cells(ruleset, baselines=True)
        policies = plan.baselines(ruleset)
        scenarios = len({scenario for scenario, _ in models})
        at_target = scenarios * seeds_needed(scenarios, args.target) * samples
        per_model += len(models) * samples
        per_model_at_target += at_target
        print(f"{ruleset}:")
        print(
            f"  models    {describe(models, args.target)}; {len(models) * samples} episodes per model "
            f"({at_target} at <= {args.target:g})"
        )
        print(
            f"  baselines {describe(baselines, args.target)}; {len(baselines) * samples} episodes "
            f"per policy, {len(baselines) * samples * len(policies)} for its {len(policies)} policies"
        )
        if not get_ruleset(ruleset).seeds_vary_task:
            print(
                "  its seeds do not vary the task: a deterministic policy replays one episode per "
                "scenario (more seeds add nothing), a stochastic one repeats attempts at the same tasks"
            )
    evaluations = len(plan.model_subjects())
    print(
        f"one model (API baseline, base model or checkpoint): {per_model} episodes over all rulesets "
        f"({per_model_at_target} at <= {args.target:g}); the training runs' {evaluations} base models "
        f"and checkpoints: {evaluations * per_model} ({evaluations * per_model_at_target})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
