"""`schemashift report tables`: every table of the report, as Markdown (summary.md) and CSV.

Each table is built from `Analysis` as display rows (Markdown, HTML) and tidy records (its CSV,
`<key>.csv`); `tables.json` holds all of them in order for the HTML report, and summary.md the
headline ones. The modules: `format` (cells, the `Table` record, writing), `summary` (the
headline per ruleset and what cannot be concluded), `benchmark` (subjects on the scenarios),
`training` (runs and their checkpoints), `drift_cost` (what drift costs: the drift arm against the
control arm) and `seed_document` (the verdicts of the original training log,
docs/original-training-log.md).

Every table but the drift-cost ones reads the drift arm only (`Analysis.episodes`), so control
rows change none of them.
"""

from __future__ import annotations

from schemashift.report import arms
from schemashift.report.analysis import Analysis
from schemashift.report.tables.benchmark import (
    baselines_table,
    coverage_table,
    drift_table,
    efficiency_table,
    examples_table,
    final_action_table,
    harness_table,
    legacy_vs_v1,
    overview_tables,
    parse_table,
    pass_k_table,
    per_seed_tables,
    spread_table,
)
from schemashift.report.tables.drift_cost import drift_cost_kind_table, drift_cost_table
from schemashift.report.tables.format import Table
from schemashift.report.tables.seed_document import go_no_go_table, verdict_table, versus_table
from schemashift.report.tables.summary import cannot_conclude_table, headline_table
from schemashift.report.tables.training import (
    learning_table,
    model_ablation_table,
    repeats_table,
    reward_ablation_table,
    training_cost_table,
    untrained_vs_trained_tables,
)


def build(a: Analysis) -> list[Table]:
    """Every table, the headline ones (summary.md's) first; a ruleset with a control arm leads
    with what drift costs."""
    tables = []
    for ruleset in a.rulesets:
        if arms.plays_control(a, ruleset):
            tables.append(drift_cost_table(a, ruleset))
        tables.append(headline_table(a, ruleset))
    tables += [learning_table(a), versus_table(a), verdict_table(a)]
    tables += [repeats_table(a), reward_ablation_table(a), model_ablation_table(a)]
    tables += [baselines_table(a, ruleset) for ruleset in a.rulesets]
    for table in tables:
        table.headline = True
    tables.append(cannot_conclude_table(a))
    for ruleset in a.rulesets:
        tables += overview_tables(a, ruleset)
        tables += [spread_table(a, ruleset), coverage_table(a, ruleset)]
    tables += untrained_vs_trained_tables(a)
    tables += [harness_table(a, ruleset) for ruleset in a.rulesets]
    tables += [training_cost_table(a), legacy_vs_v1(a), go_no_go_table(a)]
    for ruleset in a.rulesets:
        tables += [pass_k_table(a, ruleset), efficiency_table(a, ruleset), final_action_table(a, ruleset)]
        tables.append(parse_table(a, ruleset))
        if a.drifts is not None:
            tables.append(drift_table(a, ruleset))
        if arms.plays_control(a, ruleset):
            tables.append(drift_cost_kind_table(a, ruleset))
    tables.append(examples_table(a))
    for ruleset in a.rulesets:
        tables += per_seed_tables(a, ruleset)
    return tables
