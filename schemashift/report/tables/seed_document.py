"""The verdicts of the original training log (docs/original-training-log.md): its win tiers, the
trained model against each baseline, and the step-20 go/no-go."""

from __future__ import annotations

import json
from typing import Any

from schemashift.report import published
from schemashift.report.analysis import (
    METRICS,
    OVERALL,
    SEED_METRICS,
    TIER_PREFIX,
    TRAINED_ON,
    Analysis,
    published_stat,
)
from schemashift.report.stats import Stat, metric_stat, verdict
from schemashift.report.tables.format import (
    MISSING,
    Table,
    cell_text,
    detectable_note,
    num,
    signed,
    stat_record,
)

SEED_GO_STEPS = (1, 2, 3, 4, 5, 10, 15, 20)
#: the go/no-go checks (schemashift.lineage's names) -> their columns in go_no_go.csv
CHECKS = {
    "reward_trending_up": "trending_up",
    "any_reward_positive": "any_reward_positive",
    "not_stuck": "not_stuck",
}
TIERS = {
    1: "shaped > 0.1 overall; binary > 0 on 2+ scenarios; shaped > 0.1 on every seed",
    2: "shaped > 0.35 overall; binary > 40% on the easy tier; binary > 0 on a medium scenario",
    3: "shaped > 0.6 overall; binary > 70% easy and > 25% medium; evaluated on held-out seeds",
}


def _tier_check(a: Analysis, ruleset: str, subject: str, run) -> dict[str, Any]:
    shaped_col, binary_col = SEED_METRICS.get(ruleset, ("score", "success"))
    groups = a.groups(ruleset)
    shaped = a.stat(ruleset, subject, shaped_col, OVERALL)
    binary = {s: a.stat(ruleset, subject, binary_col, s) for s in a.scenarios(ruleset)}
    easy = (
        a.stat(ruleset, subject, binary_col, TIER_PREFIX + "easy") if TIER_PREFIX + "easy" in groups else None
    )
    medium_scen = groups.get(TIER_PREFIX + "medium", [])
    medium = a.stat(ruleset, subject, binary_col, TIER_PREFIX + "medium") if medium_scen else None
    rows = a.rows(ruleset, subject)
    per_seed = []
    for _seed, part in rows.groupby("seed"):
        stat = metric_stat(part, shaped_col, a.scenarios(ruleset), seeds_vary_task=a.seeds_vary_task(ruleset))
        per_seed.append(stat.mean)
    positive = sum(1 for s in binary.values() if s.mean is not None and s.mean > 0)
    splits = set(rows["split"].dropna())
    held_out = bool(splits) and run.split is not None and run.split not in splits
    known = shaped.mean is not None

    def gt(stat: Stat | None, threshold: float) -> bool:
        return stat is not None and stat.mean is not None and stat.mean > threshold

    def lower_gt(stat: Stat | None, threshold: float) -> bool:
        return stat is not None and stat.ci_low is not None and stat.ci_low > threshold

    def tier_checks(above) -> dict[int, bool]:
        """The three tiers with `above(stat, threshold)` deciding each threshold criterion."""
        positive = sum(1 for s in binary.values() if above(s, 0))
        return {
            1: known
            and above(shaped, 0.1)
            and positive >= 2
            and bool(per_seed)
            and all(v is not None and v > 0.1 for v in per_seed),
            2: known
            and above(shaped, 0.35)
            and above(easy, 0.40)
            and any(above(binary[s], 0) for s in medium_scen),
            3: known and above(shaped, 0.6) and above(easy, 0.70) and above(medium, 0.25) and held_out,
        }

    return {
        "shaped_column": shaped_col,
        "binary_column": binary_col,
        "shaped": shaped,
        "easy": easy,
        "medium": medium,
        "positive": positive,
        "per_seed_min": min((v for v in per_seed if v is not None), default=None),
        "held_out": held_out,
        "tiers": tier_checks(gt),
        "confirmed": tier_checks(lower_gt),
    }


def _tier_text(check: dict[str, Any], tier: int) -> str:
    if check["confirmed"][tier]:
        return "met (bounds)"
    return "met (point)" if check["tiers"][tier] else "not met"


def verdict_table(a: Analysis) -> Table:
    rows, records = [], []
    for run in a.runs.values():
        trained = run.trained_subject
        for ruleset in a.run_rulesets(run):
            check = _tier_check(a, ruleset, trained, run)
            met = [t for t, ok in check["tiers"].items() if ok]
            confirmed = [t for t, ok in check["confirmed"].items() if ok]
            tier = f"Tier {max(met)}" if met else "no tier"
            if met and confirmed and max(confirmed) == max(met):
                tier += " (every criterion's 95% lower bound clears it)"
            elif met:
                by_bounds = f"; Tier {max(confirmed)} by the bounds" if confirmed else ""
                tier += f" (point estimates only{by_bounds})"
            if a.trained_on(ruleset, trained):
                tier += f"; {TRAINED_ON}: recall, not skill"
            rows.append(
                [
                    a.shown(ruleset, trained).replace(trained, run.name),
                    ruleset,
                    f"{check['shaped_column']} / {check['binary_column']}",
                    cell_text(check["shaped"]),
                    cell_text(check["easy"]) if check["easy"] else MISSING,
                    cell_text(check["medium"]) if check["medium"] else MISSING,
                    str(check["positive"]),
                    num(check["per_seed_min"]),
                    "yes" if check["held_out"] else "no / unknown",
                    *(_tier_text(check, t) for t in (1, 2, 3)),
                    tier,
                ]
            )
            records.append(
                {
                    "run": run.name,
                    "ruleset": ruleset,
                    "subject": trained,
                    "shaped": check["shaped"].mean,
                    "shaped_ci_low": check["shaped"].ci_low,
                    "shaped_ci_high": check["shaped"].ci_high,
                    "easy_binary": check["easy"].mean if check["easy"] else None,
                    "medium_binary": check["medium"].mean if check["medium"] else None,
                    "scenarios_with_binary": check["positive"],
                    "held_out": check["held_out"],
                    **{f"tier{t}": check["tiers"][t] for t in (1, 2, 3)},
                    **{f"tier{t}_confirmed": check["confirmed"][t] for t in (1, 2, 3)},
                    "provisional": check["shaped"].provisional,
                }
            )
    return Table(
        "verdicts",
        "Seed-document verdicts",
        "TRAINING_LOG win tiers of each run's trained checkpoint",
        [
            "run",
            "ruleset",
            "shaped / binary as",
            "shaped (overall)",
            "binary (easy tier)",
            "binary (medium tier)",
            "scenarios with binary > 0",
            "lowest per-seed shaped",
            "held-out seeds",
            "Tier 1",
            "Tier 2",
            "Tier 3",
            "verdict",
        ],
        rows,
        records,
        "Tiers (seed TRAINING_LOG): "
        + " | ".join(f"Tier {t}: {text}" for t, text in TIERS.items())
        + ". On legacy, "
        "shaped = shaped_total and binary = the binary reward as the seed defines them; on v1, score and "
        "success. "
        "Each tier is checked twice: on the point estimates, and on the 95% lower bound of every "
        "criterion that has a threshold (an intersection-union test: all must clear, so no multiplicity "
        "adjustment is needed; a criterion without an interval does not clear). 'met (bounds)' is the "
        "second, 'met (point)' the first only. The per-seed criterion is about the evaluated seeds. "
        "Held-out: the evaluated seeds' split differs from the run's training split.",
    )


def versus_table(a: Analysis) -> Table:
    """Every trained checkpoint against every model baseline and untrained model on both headline
    metrics (Holm over the table), and on legacy against the original training log's published row
    (docs/original-training-log.md)."""
    tested = [
        (run, ruleset, baseline, metric, a.compared(ruleset, run.trained_subject, baseline, metric))
        for run in a.runs.values()
        for ruleset in a.run_rulesets(run)
        for baseline in a.subjects(ruleset)
        if a.kinds.get(baseline) in ("model", "base")
        for metric in METRICS
    ]
    rows, records = [], []
    for run, ruleset, baseline, metric, diff in tested:
        trained = a.shown(ruleset, run.trained_subject).removeprefix(run.trained_subject).strip()
        rows.append(
            [
                f"{run.name} {trained}".strip(),
                ruleset,
                a.shown(ruleset, baseline),
                metric,
                signed(diff),
                verdict(diff),
            ]
        )
        records.append(
            stat_record(
                diff, run=run.name, ruleset=ruleset, baseline=baseline, metric=metric, verdict=verdict(diff)
            )
        )
    for run in a.runs.values():
        if "legacy" not in a.run_rulesets(run):
            continue
        trained_stat = a.stat("legacy", run.trained_subject, "score", OVERALL)
        pub = published_stat(a, "score", a.scenarios("legacy"))
        reading = _published_reading(trained_stat, pub.mean)
        rows.append(
            [
                run.name,
                "legacy",
                published.GPT_OSS_120B,
                "score",
                f"{cell_text(trained_stat)} vs published {pub.mean:.3f}",
                reading,
            ]
        )
        records.append(
            {
                "run": run.name,
                "ruleset": "legacy",
                "baseline": published.GPT_OSS_120B,
                "metric": "score",
                "mean": trained_stat.mean,
                "published": pub.mean,
                "verdict": reading,
            }
        )
    return Table(
        "versus_baselines",
        "Seed-document verdicts",
        "Trained checkpoint vs each model baseline",
        ["run", "ruleset", "baseline", "metric", "difference (trained - baseline)", "verdict"],
        rows,
        records,
        "Paired differences on the (scenario, seed) cells both evaluated, with their 95% interval "
        "and a two-sided p-value; p_holm is Holm-adjusted within the comparison's question: against "
        "the run's own step 0 with every checkpoint against its step 0 (as in Table A and the "
        "learning curves), against any other model or base model with the others of this table. "
        "beats / loses need p_holm < 0.05; otherwise the row is not separable at this size. "
        + detectable_note([t[-1] for t in tested])
        + " Published rows are not paired and carry "
        "no interval or seed count: the reading says only where the trained interval lies relative to "
        "the published point value.",
    )


def _published_reading(trained: Stat, published_mean: float) -> str:
    """What comparing an interval with a published point value can show, and no more."""
    if trained.mean is None:
        return "n/a"
    where = f"the published value ({published_mean:.3f}, a point value without interval)"
    if trained.has_interval and trained.ci_low > published_mean:
        return f"above {where}: trained interval lies above it"
    if trained.has_interval and trained.ci_high < published_mean:
        return f"below {where}: trained interval lies below it"
    if not trained.has_interval:
        return f"{'above' if trained.mean > published_mean else 'not above'} {where}, on the point estimate"
    return f"not separable from {where}"


def go_no_go_table(a: Analysis) -> Table:
    rows, records = [], []
    recorded = (a.manifest or {}).get("training") or {}
    for run in a.runs.values():
        t = a.training_rows(run.name)
        if t is None:
            continue
        computed = a.go_no_go(run)
        checks = (computed or {}).get("checks") or {}
        log = []
        for step in SEED_GO_STEPS:
            hit = t[t["step"] == step]
            if len(hit):
                r = hit.iloc[0]
                log.append(f"{step}: {r['reward_mean']:.3f} [{num(r['reward_min'])}, {num(r['reward_max'])}]")
        record = (recorded.get(run.name) or {}).get("go_no_go")
        decision = (
            f"waiting (step {run.go_no_go_step} not logged)" if computed is None else computed["decision"]
        )
        recorded_text = MISSING if record is None else json.dumps(record, sort_keys=True)
        rows.append(
            [
                run.name,
                "; ".join(log) or MISSING,
                *(_yes_no(checks.get(check)) for check in CHECKS),
                decision,
                recorded_text,
            ]
        )
        records.append(
            {
                "run": run.name,
                "slope": None if computed is None else computed["reward_slope"],
                **{name: checks.get(check) for check, name in CHECKS.items()},
                "decision": decision,
                "recorded": recorded_text,
            }
        )
    return Table(
        "go_no_go",
        "Seed-document verdicts",
        "Step-20 go/no-go (TRAINING_LOG, Stage 1)",
        [
            "run",
            "reward at steps 1-5, 10, 15, 20: mean [min, max]",
            "trending up",
            "any reward > 0",
            "not stuck",
            "decision (computed)",
            "recorded go_no_go.json",
        ],
        rows,
        records,
        "Computed from the metric lineage up to step 20 by the trainer's rule (schemashift.lineage): "
        "trending up = positive least-squares slope of the mean reward; any reward > 0 = some step's "
        "maximum reward above 0; not stuck = the rewards (min, max, mean) take more than one value or some "
        "step's spread is above 0. Waiting until step 20 is logged. The record the training run wrote is "
        "shown beside it.",
    )


def _yes_no(value: bool | None) -> str:
    return "\u2014" if value is None else "yes" if value else "no"
