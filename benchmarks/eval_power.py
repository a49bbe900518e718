"""How precise are the configured evaluation cells? The interval half-width on overall success.

For each ruleset of a workflow config (default: the embedded `config.yaml`) it selects the
evaluation cells as the workflow does (`schemashift.workflow.Plan`) and prints, for a subject
whose overall success rate is 50% (the widest case), the half-width of the report's interval on
it: exact (Clopper-Pearson) bounds on the pooled successes, one episode per cell, as
`schemashift.report.stats.metric_stat` gives them. Then the fewest seeds per scenario for which
that half-width is at most the target (default 0.05), and what one model evaluation costs at
the configured and at that size (episodes per model and ruleset; an API model pays per episode,
a local one in GPU time).

    python benchmarks/eval_power.py [--config config.yaml] [--target 0.05]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, default=REPO / "config.yaml", help="workflow config")
    parser.add_argument("--target", type=float, default=0.05, help="half-width to reach (default 0.05)")
    args = parser.parse_args()
    config = yaml.safe_load(args.config.read_text(encoding="utf-8"))
    plan = Plan(config)
    samples = int(config.get("samples", 1))
    print(f"evaluation power of {args.config.name} (overall success at 50%, exact 95% bounds)")
    for ruleset in config["rulesets"]:
        cells = plan.cells(ruleset)
        scenarios = len({scenario for scenario, _ in cells})
        seeds = len(cells) // max(scenarios, 1)
        needed = seeds_needed(scenarios, args.target)
        print(
            f"{ruleset:>8}: {scenarios} scenarios x {seeds} seeds = {len(cells)} cells: "
            f"half-width {half_width(len(cells)):.3f}; at most {args.target:g} needs {needed} seeds per "
            f"scenario ({scenarios * needed} cells); one model evaluation = {len(cells) * samples} "
            f"episodes now, {scenarios * needed * samples} at that size"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
