"""`schemashift report tables`: every table of the report, as Markdown (summary.md) and CSV.

Each table is built from `Analysis` as display rows (Markdown, HTML) and tidy records (its CSV,
`<key>.csv`); `tables.json` holds all of them in order for the HTML report. Cells read
`value [low, high] n=N`; `missing` where nothing was graded (never a 0); a trailing dagger marks
a provisional value (computed over incomplete coverage).
"""

from __future__ import annotations

import csv
import io as _io
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from schemashift.report import ReportError, published
from schemashift.report.analysis import METRICS, OVERALL, SEED_METRICS, TIER_PREFIX, Analysis, smoothed
from schemashift.report.load import coverage, coverage_text
from schemashift.report.stats import LEVEL, PASS_K, Stat, compare, metric_stat, pass_k_stat

INDEX_FILE = "tables.json"
SUMMARY_FILE = "summary.md"
MISSING = "missing"
#: a subject that is not evaluated on a ruleset at all (nothing was expected there)
NOT_PLAYED = "not played"
PROVISIONAL = "\u2020"
CELL_NOTE = (
    f"Cells: mean [{LEVEL:.0%} bootstrap interval] n=graded episodes. Within a scenario the seeds are "
    "resampled (samples of a seed stay together); tier and overall columns average the scenario means "
    "(each scenario weighs the same) and resample scenarios, then seeds within them. "
    f"{MISSING}: no graded episode (for a tier or overall: some scenario of it has none), never 0. "
    f"{PROVISIONAL}: provisional, computed over incomplete coverage (missing or infra_error cells). "
    "infra_error episodes never enter a mean."
)
RAW_COLUMNS = (
    "completion",
    "drift_detection",
    "adaptation",
    "efficiency",
    "score",
    "cumulative_reward",
    "success",
    "steps",
)
EFFICIENCY_COLUMNS = {
    "tool_calls": "tool calls",
    "tokens_in": "tokens in",
    "tokens_out": "tokens out",
    "steps": "turns",
    "wall_s": "wall s",
}
SEED_GO_STEPS = (1, 2, 3, 4, 5, 10, 15, 20)
DEFAULT_GO_STEP = 20
TIERS = {
    1: "shaped > 0.1 overall; binary > 0 on 2+ scenarios; shaped > 0.1 on every seed",
    2: "shaped > 0.35 overall; binary > 40% on the easy tier; binary > 0 on a medium scenario",
    3: "shaped > 0.6 overall; binary > 70% easy and > 25% medium; evaluated on held-out seeds",
}


@dataclass
class Table:
    key: str
    section: str
    title: str
    header: list[str]
    rows: list[list[str]]
    records: list[dict[str, Any]] = field(default_factory=list)
    note: str = ""


# -- cell formatting -----------------------------------------------------------------------------


def cell_text(stat: Stat, digits: int = 3) -> str:
    if stat.mean is None:
        return MISSING
    flag = PROVISIONAL if stat.provisional else ""
    return f"{stat.mean:.{digits}f} [{stat.ci_low:.{digits}f}, {stat.ci_high:.{digits}f}] n={stat.n}{flag}"


def stat_record(stat: Stat, **keys: Any) -> dict[str, Any]:
    return {**keys, **asdict(stat)}


def column_title(column: str) -> str:
    if column.startswith(TIER_PREFIX):
        return f"{column.removeprefix(TIER_PREFIX)} (tier)"
    return column


def _num(value: Any, digits: int = 3) -> str:
    if value is None or value != value:
        return MISSING
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


# -- building ------------------------------------------------------------------------------------


def build(a: Analysis) -> list[Table]:
    """Every table, in the order of summary.md."""
    tables: list[Table] = []
    for ruleset in a.rulesets:
        tables += overview_tables(a, ruleset)
        tables.append(coverage_table(a, ruleset))
    tables += table_a(a)
    for ruleset in a.rulesets:
        tables.append(table_b(a, ruleset))
    tables += [table_c(a), table_d(a), table_e(a), legacy_vs_v1(a)]
    tables += [learning_table(a), verdict_table(a), versus_table(a), go_no_go_table(a)]
    for ruleset in a.rulesets:
        tables += [pass_k_table(a, ruleset), efficiency_table(a, ruleset), final_action_table(a, ruleset)]
        tables.append(parse_table(a, ruleset))
        if a.drifts is not None:
            tables.append(drift_table(a, ruleset))
    tables.append(examples_table(a))
    for ruleset in a.rulesets:
        tables += per_seed_tables(a, ruleset)
    return [t for t in tables if t is not None]


def overview_tables(a: Analysis, ruleset: str) -> list[Table]:
    out = []
    columns = list(a.groups(ruleset))
    for metric, title in METRICS.items():
        rows, records = [], []
        for subject in a.subjects(ruleset):
            stats = [a.stat(ruleset, subject, metric, c) for c in columns]
            rows.append([subject, *map(cell_text, stats)])
            records += [
                stat_record(s, ruleset=ruleset, subject=subject, column=c, metric=metric)
                for c, s in zip(columns, stats, strict=True)
            ]
        out.append(
            Table(
                f"{ruleset}_{metric}",
                f"Ruleset {ruleset}",
                f"{title.capitalize()} per subject and scenario",
                ["subject", *map(column_title, columns)],
                rows,
                records,
                "Coverage: " + coverage_text(coverage(a.episodes, a.manifest, ruleset)),
            )
        )
    return out


def coverage_table(a: Analysis, ruleset: str) -> Table:
    scenarios = a.scenarios(ruleset)
    rows, records = [], []
    for subject in a.subjects(ruleset):
        row = [subject]
        for scenario in scenarios:
            c = a.cover(ruleset, subject, scenario)
            expected = "?" if c.expected is None else str(c.expected)
            text = f"{c.graded}/{expected}"
            extras = []
            if c.infra_error:
                extras.append(f"infra {c.infra_error}")
            if c.missing:
                extras.append(f"missing {c.missing}")
            row.append(
                text + (f" ({', '.join(extras)})" if extras else "") + (PROVISIONAL if c.provisional else "")
            )
            records.append(
                {
                    "ruleset": ruleset,
                    "subject": subject,
                    "scenario": scenario,
                    "expected": c.expected,
                    "graded": c.graded,
                    "infra_error": c.infra_error,
                    "missing": c.missing,
                    "provisional": c.provisional,
                }
            )
        rows.append(row)
    return Table(
        f"{ruleset}_coverage",
        f"Ruleset {ruleset}",
        "Coverage: graded / expected cells per subject and scenario",
        ["subject", *scenarios],
        rows,
        records,
        "From the manifest's expected cells (? where no manifest lists the cell); missing and infra_error "
        f"cells counted apart. {PROVISIONAL}: every aggregate over this subject and scenario is provisional.",
    )


def _final(a: Analysis, run) -> str | None:
    return None if run.final_step is None else run.label(run.final_step)


def table_a(a: Analysis) -> list[Table]:
    """Table A per training run and ruleset: untrained (step 0) versus trained, per scenario."""
    out = []
    for run in a.runs.values():
        trained = _final(a, run)
        base = a.base_subject(run)
        trained_role = (
            "trained (no checkpoint yet)" if trained is None else f"trained (step {run.final_step})"
        )
        for ruleset in a.run_rulesets(run) or ([run.ruleset] if run.ruleset in a.rulesets else []):
            columns = list(a.groups(ruleset))
            rows, records = [], []
            for metric, title in METRICS.items():
                for role, subject in (
                    ("untrained (step 0)", base),
                    (trained_role, trained),
                ):
                    stats = [
                        a.stat(ruleset, subject, metric, c) if subject else Stat(None, None, None, 0)
                        for c in columns
                    ]
                    rows.append([title, f"{role}: {subject or MISSING}", *map(cell_text, stats)])
                    records += [
                        stat_record(
                            s,
                            run=run.name,
                            ruleset=ruleset,
                            metric=metric,
                            row=role,
                            subject=subject,
                            column=c,
                        )
                        for c, s in zip(columns, stats, strict=True)
                    ]
                diffs = [
                    a.paired(ruleset, trained, base, metric, c)
                    if trained and base
                    else Stat(None, None, None, 0)
                    for c in columns
                ]
                rows.append([title, "paired difference (trained - untrained)", *map(_signed, diffs)])
                records += [
                    stat_record(
                        d, run=run.name, ruleset=ruleset, metric=metric, row="paired difference", column=c
                    )
                    for c, d in zip(columns, diffs, strict=True)
                ]
            out.append(
                Table(
                    f"table_a_{run.name}_{ruleset}",
                    "Table A: untrained vs trained",
                    f"Run {run.name} on {ruleset}: untrained base vs the trained checkpoint",
                    ["metric", "model state", *map(column_title, columns)],
                    rows,
                    records,
                    "Trained = the final checkpoint (or report.trained_steps), never the best one on the "
                    "test set. "
                    "Paired differences use the (scenario, seed) cells both evaluated; n = pairs.",
                )
            )
    return out


def _signed(stat: Stat) -> str:
    if stat.mean is None:
        return MISSING
    flag = PROVISIONAL if stat.provisional else ""
    return f"{stat.mean:+.3f} [{stat.ci_low:+.3f}, {stat.ci_high:+.3f}] n={stat.n}{flag}"


def _published_stats(a: Analysis, metric: str, scenarios: Sequence[str]) -> Stat:
    import pandas as pd

    rows = pd.DataFrame(published.gpt_oss_rows())
    return metric_stat(rows, metric, scenarios, a.samples, a.seed)


def table_b(a: Analysis, ruleset: str) -> Table:
    """Table B: rule baselines, model baselines (with size), published rows, trained models."""
    columns = list(a.groups(ruleset))
    finals = {_final(a, r) for r in a.runs.values()}
    rows, records = [], []
    entries = []
    for subject in a.subjects(ruleset):
        kind = a.kinds.get(subject)
        if kind in ("rule", "model", "base") or subject in finals:
            entries.append((subject, kind))
    for subject, kind in entries:
        size = a.params_b(subject)
        role = {"rule": "rule baseline", "model": "model baseline", "base": "untrained model"}.get(
            kind, "trained"
        )
        stats = [a.stat(ruleset, subject, "score", c) for c in columns]
        success = a.stat(ruleset, subject, "success", OVERALL)
        rows.append([subject, role, _size(size), *map(cell_text, stats), cell_text(success)])
        records += [
            stat_record(
                s, ruleset=ruleset, subject=subject, role=role, params_b=size, metric="score", column=c
            )
            for c, s in zip(columns, stats, strict=True)
        ]
        records.append(
            stat_record(
                success,
                ruleset=ruleset,
                subject=subject,
                role=role,
                params_b=size,
                metric="success",
                column=OVERALL,
            )
        )
    if ruleset == "legacy":
        known = set(a.scenarios(ruleset))
        stats = []
        for c in columns:
            scenarios = [s for s in a.groups(ruleset)[c] if s in known]
            present = {r["scenario"] for r in published.gpt_oss_rows()}
            stats.append(
                _published_stats(a, "score", scenarios)
                if set(scenarios) <= present
                else Stat(None, None, None, 0)
            )
        success = _published_stats(a, "success", [s for s in a.scenarios(ruleset)])
        label = published.GPT_OSS_120B
        rows.append(
            [
                label,
                "published, not rerun",
                _size(published.GPT_OSS_PARAMS_B),
                *map(cell_text, stats),
                cell_text(success),
            ]
        )
        records += [
            stat_record(
                s,
                ruleset=ruleset,
                subject=label,
                role="published",
                params_b=published.GPT_OSS_PARAMS_B,
                metric="score",
                column=c,
            )
            for c, s in zip(columns, stats, strict=True)
        ]
    return Table(
        f"table_b_{ruleset}",
        "Table B: baselines vs the trained model",
        f"Ruleset {ruleset}: mean score per scenario, and overall success rate",
        ["subject", "kind", "size", *map(column_title, columns), "success (overall)"],
        rows,
        records,
        f"Published rows come from {published.SOURCE}; they are not rerun (seeds 0-2). Size: parameters "
        "from models.<name>.params_b in the config.",
    )


def _size(size: Any) -> str:
    return "\u2014" if size is None else f"{size:g}B"


def ablation_groups(a: Analysis, vary: str) -> list[list[Any]]:
    """Runs that differ only in `vary` (reward or base_model): same ruleset and the other field."""
    keep = "base_model" if vary == "reward" else "reward"
    groups: dict[tuple[Any, Any], list[Any]] = {}
    for run in a.runs.values():
        groups.setdefault((run.ruleset, getattr(run, keep)), []).append(run)
    return [g for g in groups.values() if len({getattr(r, vary) for r in g}) > 1]


def _ablation_table(a: Analysis, vary: str, key: str, section: str, title: str) -> Table:
    rows, records = [], []
    header = ["group", "run", "reward", "base model", "size", "scenarios", "final score (overall)"]
    header += ["final success (overall)", "vs first run (score)", "convergence step"]
    for number, group in enumerate(ablation_groups(a, vary), start=1):
        first = group[0]
        for run in group:
            trained = _final(a, run)
            ruleset = run.ruleset
            if ruleset not in a.rulesets or trained is None:
                rows.append(
                    [
                        str(number),
                        run.name,
                        run.reward or "?",
                        run.base_model or "?",
                        "",
                        "",
                        MISSING,
                        MISSING,
                        "",
                        "",
                    ]
                )
                continue
            score = a.stat(ruleset, trained, "score", OVERALL)
            success = a.stat(ruleset, trained, "success", OVERALL)
            per_scenario = "; ".join(
                f"{s}: {_num(a.stat(ruleset, trained, 'score', s).mean)}" for s in a.scenarios(ruleset)
            )
            versus = ""
            if run is not first and _final(a, first):
                diff = a.paired(ruleset, trained, _final(a, first), "score")
                versus = f"{compare(diff)} {_signed(diff)}"
            converged = a.convergence_step(run.name)
            rows.append(
                [
                    str(number),
                    run.name,
                    run.reward or "?",
                    run.base_model or "?",
                    _size(a.params_b(trained)),
                    per_scenario,
                    cell_text(score),
                    cell_text(success),
                    versus,
                    _num(converged),
                ]
            )
            records.append(
                {
                    "group": number,
                    "run": run.name,
                    "reward": run.reward,
                    "base_model": run.base_model,
                    "ruleset": ruleset,
                    "subject": trained,
                    "score": score.mean,
                    "score_ci_low": score.ci_low,
                    "score_ci_high": score.ci_high,
                    "success": success.mean,
                    "n": score.n,
                    "provisional": score.provisional,
                    "convergence_step": converged,
                }
            )
    return Table(
        key,
        section,
        title,
        header,
        rows,
        records,
        "Groups: runs on the same ruleset that differ only in "
        f"{'the reward' if vary == 'reward' else 'the base model'}. Versus: paired difference to the group's "
        "first run on shared cells (beats/ties/loses by its interval). Convergence step: first step where "
        "the "
        "smoothed training reward covers 90% of the way from its first value to its peak.",
    )


def table_c(a: Analysis) -> Table:
    return _ablation_table(
        a, "reward", "table_c", "Table C: reward ablation", "Same base model, different reward"
    )


def table_d(a: Analysis) -> Table:
    return _ablation_table(
        a, "base_model", "table_d", "Table D: model ablation", "Same reward, different base model"
    )


def table_e(a: Analysis) -> Table:
    price = float((a.config.get("report") or {}).get("price_per_gpu_hour", 2.5))
    rows, records = [], []
    for run in a.runs.values():
        t = a.training_rows(run.name)
        if t is None:
            rows.append([run.name, *([MISSING] * 7)])
            records.append({"run": run.name})
            continue
        wall = float(t["seconds_per_step"].sum()) if t["seconds_per_step"].notna().any() else None
        gpus = int(t["gpu_count"].dropna().max()) if t["gpu_count"].notna().any() else None
        gpu_hours = wall * (gpus or 1) / 3600 if wall is not None else None
        record = {
            "run": run.name,
            "steps": int(t["step"].max()),
            "wall_clock_h": None if wall is None else wall / 3600,
            "gpu_type": ", ".join(sorted(set(t["gpu_type"].dropna()))) or None,
            "gpu_count": gpus,
            "gpu_hours": gpu_hours,
            "cost_usd": None if gpu_hours is None else gpu_hours * price,
            "peak_reward": float(t["reward_mean"].max()),
            "peak_reward_smoothed": float(smoothed(t["reward_mean"]).max()),
            "peak_gpu_mem_gb": float(t["peak_gpu_mem_gb"].max())
            if t["peak_gpu_mem_gb"].notna().any()
            else None,
        }
        records.append(record)
        rows.append(
            [
                run.name,
                str(record["steps"]),
                _num(record["wall_clock_h"], 2),
                f"{record['gpu_type'] or MISSING} x{gpus or '?'}",
                _num(gpu_hours, 2),
                _num(record["cost_usd"], 2),
                f"{record['peak_reward']:.3f} (smoothed {record['peak_reward_smoothed']:.3f})",
                _num(record["peak_gpu_mem_gb"], 1),
            ]
        )
    return Table(
        "table_e",
        "Table E: training efficiency",
        "Steps, wall-clock, GPU, cost and peak reward per training run",
        ["run", "steps", "wall-clock h", "GPU", "GPU-hours", "cost USD", "peak reward", "peak GPU mem GiB"],
        rows,
        records,
        f"From the saved metric lineage (superseded rows dropped). Cost at {price:g} USD per GPU-hour "
        "(report.price_per_gpu_hour). Wall-clock: sum of seconds_per_step.",
    )


def legacy_vs_v1(a: Analysis) -> Table:
    rulesets = [r for r in ("legacy", "v1") if r in a.rulesets]
    subjects = [s for s in a.subjects(rulesets[0]) if a.kinds.get(s) == "rule"] if rulesets else []
    for r in rulesets[1:]:
        subjects += [s for s in a.subjects(r) if a.kinds.get(s) == "rule" and s not in subjects]
    rows, records = [], []
    for subject in subjects:
        row = [subject]
        for ruleset in ("legacy", "v1"):
            played = ruleset in a.rulesets and subject in a.subjects(ruleset)
            for metric in METRICS:
                stat = a.stat(ruleset, subject, metric, OVERALL) if played else Stat(None, None, None, 0)
                row.append(cell_text(stat) if played else NOT_PLAYED)
                records.append(stat_record(stat, subject=subject, ruleset=ruleset, metric=metric))
        rows.append(row)
    return Table(
        "legacy_vs_v1",
        "Legacy vs v1",
        "Rule baselines on both rulesets (overall)",
        ["baseline", "legacy score", "legacy success", "v1 score", "v1 success"],
        rows,
        records,
        "Legacy score is the final shaped total and its success the binary reward; v1 has its own score and "
        f"success. {NOT_PLAYED}: the baseline is not played on that ruleset (a ruleset's own baselines, "
        f"or a ruleset not run); {MISSING}: expected but not graded.",
    )


def learning_table(a: Analysis) -> Table:
    rows, records = [], []
    for run in a.runs.values():
        base = a.base_subject(run)
        for ruleset in a.run_rulesets(run):
            points = [(0, base)] + [(s, run.label(s)) for s in run.steps]
            for step, subject in points:
                if subject is None:
                    rows.append([run.name, ruleset, str(step), MISSING, MISSING, MISSING, MISSING])
                    continue
                score = a.stat(ruleset, subject, "score", OVERALL)
                success = a.stat(ruleset, subject, "success", OVERALL)
                dscore = a.paired(ruleset, subject, base, "score") if step and base else None
                dsuccess = a.paired(ruleset, subject, base, "success") if step and base else None
                rows.append(
                    [
                        run.name,
                        ruleset,
                        str(step),
                        cell_text(score),
                        cell_text(success),
                        _signed(dscore) if dscore else "",
                        _signed(dsuccess) if dsuccess else "",
                    ]
                )
                for metric, stat, diff in (("score", score, dscore), ("success", success, dsuccess)):
                    records.append(
                        {
                            **stat_record(
                                stat, run=run.name, ruleset=ruleset, step=step, subject=subject, metric=metric
                            ),
                            "diff_vs_step0": diff.mean if diff else None,
                            "diff_ci_low": diff.ci_low if diff else None,
                            "diff_ci_high": diff.ci_high if diff else None,
                            "pairs": diff.n if diff else None,
                        }
                    )
    return Table(
        "learning_curves",
        "Learning curves",
        "Every checkpoint against step 0 (the untrained base model)",
        [
            "run",
            "ruleset",
            "step",
            "score (overall)",
            "success (overall)",
            "score - step 0",
            "success - step 0",
        ],
        rows,
        records,
        "Step 0 is the shared untrained base model's evaluation (one evaluation, shown in every run that "
        "uses it). Differences are paired on the (scenario, seed) cells both evaluated; n = pairs.",
    )


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
        stat = metric_stat(part, shaped_col, a.scenarios(ruleset), 1, 0)
        per_seed.append(stat.mean)
    positive = sum(1 for s in binary.values() if s.mean is not None and s.mean > 0)
    splits = set(rows["split"].dropna())
    held_out = bool(splits) and run.split is not None and run.split not in splits
    known = shaped.mean is not None

    def gt(stat: Stat | None, threshold: float) -> bool:
        return stat is not None and stat.mean is not None and stat.mean > threshold

    def robust(stat: Stat | None, threshold: float) -> bool:
        return stat is not None and stat.ci_low is not None and stat.ci_low > threshold

    tiers = {
        1: known
        and gt(shaped, 0.1)
        and positive >= 2
        and bool(per_seed)
        and all(v is not None and v > 0.1 for v in per_seed),
        2: known and gt(shaped, 0.35) and gt(easy, 0.40) and any(gt(binary[s], 0) for s in medium_scen),
        3: known and gt(shaped, 0.6) and gt(easy, 0.70) and gt(medium, 0.25) and held_out,
    }
    thresholds = {1: 0.1, 2: 0.35, 3: 0.6}
    return {
        "shaped_column": shaped_col,
        "binary_column": binary_col,
        "shaped": shaped,
        "easy": easy,
        "medium": medium,
        "positive": positive,
        "per_seed_min": min((v for v in per_seed if v is not None), default=None),
        "held_out": held_out,
        "tiers": tiers,
        "robust": {t: tiers[t] and robust(shaped, thresholds[t]) for t in tiers},
    }


def verdict_table(a: Analysis) -> Table:
    rows, records = [], []
    for run in a.runs.values():
        trained = _final(a, run)
        for ruleset in a.run_rulesets(run):
            check = _tier_check(a, ruleset, trained, run)
            met = [t for t, ok in check["tiers"].items() if ok]
            verdict = f"Tier {max(met)}" if met else "no tier"
            if met and not check["robust"][max(met)]:
                verdict += " (shaped interval reaches below the threshold)"
            rows.append(
                [
                    run.name,
                    ruleset,
                    f"{check['shaped_column']} / {check['binary_column']}",
                    cell_text(check["shaped"]),
                    cell_text(check["easy"]) if check["easy"] else MISSING,
                    cell_text(check["medium"]) if check["medium"] else MISSING,
                    str(check["positive"]),
                    _num(check["per_seed_min"]),
                    "yes" if check["held_out"] else "no / unknown",
                    *("met" if check["tiers"][t] else "not met" for t in (1, 2, 3)),
                    verdict,
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
        "A tier is met on the point estimates; the verdict says when the interval of the overall shaped "
        "value "
        "reaches below the threshold. Held-out: the evaluated seeds' split differs from the run's training "
        "split.",
    )


def versus_table(a: Analysis) -> Table:
    rows, records = [], []
    for run in a.runs.values():
        trained = _final(a, run)
        for ruleset in a.run_rulesets(run):
            baselines = [s for s in a.subjects(ruleset) if a.kinds.get(s) in ("model", "base")]
            for baseline in baselines:
                for metric in METRICS:
                    diff = a.paired(ruleset, trained, baseline, metric)
                    rows.append([run.name, ruleset, baseline, metric, _signed(diff), compare(diff)])
                    records.append(
                        stat_record(
                            diff,
                            run=run.name,
                            ruleset=ruleset,
                            baseline=baseline,
                            metric=metric,
                            verdict=compare(diff),
                        )
                    )
            if ruleset == "legacy":
                trained_stat = a.stat(ruleset, trained, "score", OVERALL)
                pub = _published_stats(a, "score", a.scenarios(ruleset))
                if trained_stat.mean is None:
                    verdict = "n/a"
                elif trained_stat.ci_low > pub.mean:
                    verdict = "beats"
                elif trained_stat.ci_high < pub.mean:
                    verdict = "loses"
                else:
                    verdict = "ties"
                rows.append(
                    [
                        run.name,
                        ruleset,
                        published.GPT_OSS_120B,
                        "score",
                        f"{cell_text(trained_stat)} vs {pub.mean:.3f}",
                        verdict,
                    ]
                )
                records.append(
                    {
                        "run": run.name,
                        "ruleset": ruleset,
                        "baseline": published.GPT_OSS_120B,
                        "metric": "score",
                        "mean": trained_stat.mean,
                        "published": pub.mean,
                        "verdict": verdict,
                    }
                )
    return Table(
        "versus_baselines",
        "Seed-document verdicts",
        "Trained checkpoint vs each model baseline",
        ["run", "ruleset", "baseline", "metric", "difference (trained - baseline)", "verdict"],
        rows,
        records,
        "Paired differences on the (scenario, seed) cells both evaluated: beats when the interval lies "
        "above 0, "
        "loses when below, ties otherwise. Published rows are not paired: the trained interval against the "
        "published mean.",
    )


def go_no_go(rows) -> dict[str, Any]:
    """The seed's step-20 check, computed from the metric lineage."""
    import numpy as np

    early = rows[rows["step"] <= DEFAULT_GO_STEP]
    rewards = early["reward_mean"].dropna()
    slope = float(np.polyfit(early.loc[rewards.index, "step"], rewards, 1)[0]) if len(rewards) >= 2 else None
    top = early["reward_max"].dropna()
    any_positive = bool((top > 0).any()) if len(top) else bool((rewards > 0).any())
    checks = {
        "trending_up": slope is not None and slope > 0,
        "any_reward_positive": any_positive,
        "not_stuck": rewards.nunique() > 1,
    }
    return {"slope": slope, **checks, "decision": "PROCEED" if all(checks.values()) else "STOP AND DEBUG"}


def go_no_go_table(a: Analysis) -> Table:
    rows, records = [], []
    recorded = (a.manifest or {}).get("training") or {}
    for run in a.runs.values():
        t = a.training_rows(run.name)
        if t is None:
            continue
        computed = go_no_go(t)
        log = []
        for step in SEED_GO_STEPS:
            hit = t[t["step"] == step]
            if len(hit):
                r = hit.iloc[0]
                log.append(
                    f"{step}: {r['reward_mean']:.3f} [{_num(r['reward_min'])}, {_num(r['reward_max'])}]"
                )
        record = (recorded.get(run.name) or {}).get("go_no_go")
        recorded_text = MISSING if record is None else json.dumps(record, sort_keys=True)
        rows.append(
            [
                run.name,
                "; ".join(log) or MISSING,
                "yes" if computed["trending_up"] else "no",
                "yes" if computed["any_reward_positive"] else "no",
                "yes" if computed["not_stuck"] else "no",
                computed["decision"],
                recorded_text,
            ]
        )
        records.append({"run": run.name, **computed, "recorded": recorded_text})
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
        "Computed from the metric lineage up to step 20: trending up = positive least-squares slope of the "
        "mean "
        "reward; any reward > 0 = some step's maximum reward above 0; not stuck = more than one distinct "
        "mean. "
        "The record the training run wrote is shown beside it.",
    )


def pass_k_table(a: Analysis, ruleset: str) -> Table:
    rows, records = [], []
    scenarios = a.scenarios(ruleset)
    for subject in a.subjects(ruleset):
        flag = a.provisional(ruleset, subject, scenarios)
        stats = [pass_k_stat(a.rows(ruleset, subject), k, scenarios, a.samples, a.seed, flag) for k in PASS_K]
        rows.append([subject, *map(cell_text, stats)])
        records += [
            stat_record(s, ruleset=ruleset, subject=subject, k=k) for k, s in zip(PASS_K, stats, strict=True)
        ]
    return Table(
        f"{ruleset}_pass_k",
        f"Ruleset {ruleset}",
        "pass^k: all of k attempts succeed",
        ["subject", *(f"pass^{k}" for k in PASS_K)],
        rows,
        records,
        "Unbiased estimator per (scenario, seed) cell with n graded samples and c successes: "
        "pass^k = C(c, k) / C(n, k); averaged over seeds, then scenarios; n = cells. "
        f"{MISSING} where some cell has fewer than k samples.",
    )


def efficiency_reference(a: Analysis, ruleset: str, subject: str) -> str | None:
    kind = a.kinds.get(subject)
    if kind == "checkpoint":
        run = a.runs.get(subject.rpartition("@step-")[0])
        return a.base_subject(run) if run else None
    reference = (a.config.get("report") or {}).get("efficiency_reference", "policy_aware_heuristic")
    return reference if reference != subject and reference in a.subjects(ruleset) else None


def savings(a: Analysis, ruleset: str, subject: str, reference: str) -> dict[str, Any]:
    """Savings of `subject` against `reference` over the cells both solved: 1 - sum(subject) / sum(ref)."""
    keys = ["scenario", "seed", "sample_index"]
    mine = a.rows(ruleset, subject)
    ref = a.rows(ruleset, reference)
    both = mine[mine["success"] == 1].merge(ref[ref["success"] == 1], on=keys, suffixes=("", "_ref"))
    out: dict[str, Any] = {"solved_by_both": len(both)}
    for column in ("tool_calls", "tokens_in", "tokens_out", "steps"):
        total = both[f"{column}_ref"].sum() if len(both) else 0
        out[column] = None if not len(both) or not total else float(1 - both[column].sum() / total)
    return out


def efficiency_table(a: Analysis, ruleset: str) -> Table:
    rows, records = [], []
    for subject in a.subjects(ruleset):
        mine = a.rows(ruleset, subject)
        means = {c: (float(mine[c].mean()) if mine[c].notna().any() else None) for c in EFFICIENCY_COLUMNS}
        reference = efficiency_reference(a, ruleset, subject)
        saved = savings(a, ruleset, subject, reference) if reference else None
        if saved:
            text = ", ".join(
                f"{EFFICIENCY_COLUMNS[c]} {saved[c]:+.0%}"
                for c in ("tool_calls", "tokens_in", "tokens_out", "steps")
                if saved[c] is not None
            )
            saved_text = f"vs {reference} on {saved['solved_by_both']} cells both solved: {text or MISSING}"
        else:
            saved_text = MISSING
        rows.append([subject, str(len(mine)), *(_num(means[c], 1) for c in EFFICIENCY_COLUMNS), saved_text])
        records.append(
            {
                "ruleset": ruleset,
                "subject": subject,
                "n": len(mine),
                **means,
                "reference": reference,
                **{f"saving_{k}": v for k, v in (saved or {}).items()},
            }
        )
    return Table(
        f"{ruleset}_efficiency",
        f"Ruleset {ruleset}",
        "Efficiency per graded episode, and savings versus a reference",
        ["subject", "episodes", *EFFICIENCY_COLUMNS.values(), "savings"],
        rows,
        records,
        "Means per graded episode. Savings (1 - subject total / reference total) only over the cells both "
        "solved, with their number; a checkpoint is compared with its untrained base, anything else with "
        "report.efficiency_reference (default policy_aware_heuristic). Rule policies use no tokens.",
    )


def final_action_table(a: Analysis, ruleset: str) -> Table:
    g = a.graded[a.graded["ruleset"] == ruleset]
    actions = sorted(set(g["final_action"].dropna()))
    rows, records = [], []
    for subject in a.subjects(ruleset):
        mine = g[g["label"] == subject]
        counts = mine["final_action"].value_counts()
        rows.append(
            [
                subject,
                str(len(mine)),
                *(
                    f"{int(counts.get(x, 0))} ({counts.get(x, 0) / len(mine):.0%})" if len(mine) else MISSING
                    for x in actions
                ),
            ]
        )
        records += [
            {
                "ruleset": ruleset,
                "subject": subject,
                "final_action": x,
                "count": int(counts.get(x, 0)),
                "episodes": len(mine),
            }
            for x in actions
        ]
    return Table(
        f"{ruleset}_final_actions",
        f"Ruleset {ruleset}",
        "Final action of each graded episode",
        ["subject", "episodes", *actions],
        rows,
        records,
        "How episodes ended: complete_task is a voluntary stop, any other action means the step limit was "
        "hit.",
    )


def parse_table(a: Analysis, ruleset: str) -> Table:
    rows, records = [], []
    for subject in a.subjects(ruleset):
        if a.kinds.get(subject) == "rule":
            continue
        mine = a.rows(ruleset, subject)
        failures = mine["parse_failures"].dropna()
        steps = mine.loc[failures.index, "steps"].fillna(0)
        total = float(steps.sum())
        rate = None if total == 0 else 1 - float(failures.sum()) / total
        clean = None if not len(failures) else float((failures == 0).mean())
        rows.append(
            [subject, str(len(mine)), str(int(total)), str(int(failures.sum())), _num(rate), _num(clean)]
        )
        records.append(
            {
                "ruleset": ruleset,
                "subject": subject,
                "episodes": len(mine),
                "actions": total,
                "parse_failures": int(failures.sum()),
                "action_parse_rate": rate,
                "clean_episode_rate": clean,
            }
        )
    return Table(
        f"{ruleset}_parse",
        f"Ruleset {ruleset}",
        "Parse success of model policies",
        [
            "subject",
            "episodes",
            "actions",
            "parse failures",
            "parse-success rate (actions)",
            "episodes without a parse failure",
        ],
        rows,
        records,
        "Model subjects only. parse-success rate = 1 - parse failures / actions taken.",
    )


def drift_table(a: Analysis, ruleset: str) -> Table:
    rows, records = [], []
    drifts = a.drifts[a.drifts["ruleset"] == ruleset]
    for (subject, kind), group in sorted(
        drifts.groupby(["label", "kind"], dropna=False), key=lambda x: (str(x[0][0]), str(x[0][1]))
    ):
        fired = int(group["fired_step"].notna().sum())
        recovered = int(group["recovered_step"].notna().sum())
        failed = int(group["failed_step"].notna().sum())
        recover = group["steps_to_recover"].dropna()
        record = {
            "ruleset": ruleset,
            "subject": subject,
            "kind": kind,
            "planned": len(group),
            "fired": fired,
            "discovered": int(group["discovered_step"].notna().sum()),
            "reported": int(group["reported_step"].notna().sum()),
            "failed": failed,
            "recovered": recovered,
            "recovery_rate": recovered / failed if failed else None,
            "mean_steps_to_recover": float(recover.mean()) if len(recover) else None,
        }
        records.append(record)
        rows.append(
            [
                str(subject),
                str(kind),
                *(
                    str(record[k])
                    for k in ("planned", "fired", "discovered", "reported", "failed", "recovered")
                ),
                _num(record["recovery_rate"], 2),
                _num(record["mean_steps_to_recover"], 2),
            ]
        )
    return Table(
        f"{ruleset}_drifts",
        f"Ruleset {ruleset}",
        "Drift outcomes per subject and drift kind",
        [
            "subject",
            "drift kind",
            "planned",
            "fired",
            "discovered",
            "reported",
            "failed on",
            "recovered",
            "recovery rate",
            "steps to recover",
        ],
        rows,
        records,
        "Over all drift rows: discovered = evidence seen on the drifted tool; reported = the agent reported "
        "it "
        "correctly; recovered = a successful call after a failure on it; recovery rate = recovered / failed "
        "on.",
    )


def examples_table(a: Analysis) -> Table:
    rows, records = [], []
    for example in a.examples:
        steps = " | ".join(
            f"#{s['step']} {s['action']} -> {s['response']}"
            + (f" [drift: {', '.join(s['drifts'])}]" if s.get("drifts") else "")
            for s in example["key_steps"]
        )
        rows.append(
            [
                example["ruleset"],
                example["subject"],
                example["scenario"],
                str(example["seed"]),
                str(example["sample_index"]),
                str(example["steps"]),
                _num(example.get("score")),
                steps,
            ]
        )
        records.append(
            {k: v for k, v in example.items() if k != "key_steps"}
            | {"key_steps": json.dumps(example["key_steps"])}
        )
    return Table(
        "failed_examples",
        "Failed episodes",
        "Three failed episodes per subject, as key steps (action -> response)",
        ["ruleset", "subject", "scenario", "seed", "sample", "steps", "score", "key steps"],
        rows,
        records,
        "Picked without randomness by `schemashift aggregate`: failures sorted by scenario, seed and "
        "sample, one "
        "scenario at a time. Key steps: the first and last, failed calls, steps where drifts fired, drift "
        "reports and complete_task.",
    )


def per_seed_tables(a: Analysis, ruleset: str) -> list[Table]:
    out = []
    columns = list(a.groups(ruleset))
    aggregates = [c for c in columns if c.startswith(TIER_PREFIX) or c == OVERALL]
    for subject in a.subjects(ruleset):
        mine = a.episodes[(a.episodes["ruleset"] == ruleset) & (a.episodes["label"] == subject)]
        mine = mine.sort_values(["scenario", "seed", "sample_index"])
        rows, records = [], []
        for r in mine.itertuples():
            values = [None if r.status != "graded" else getattr(r, c) for c in RAW_COLUMNS]
            rows.append([r.scenario, str(r.seed), str(r.sample_index), *(_num(v) for v in values), r.status])
            records.append(
                {
                    "ruleset": ruleset,
                    "subject": subject,
                    "scenario": r.scenario,
                    "seed": r.seed,
                    "sample_index": r.sample_index,
                    "status": r.status,
                    **dict(zip(RAW_COLUMNS, values, strict=True)),
                }
            )
        for column in aggregates:
            means = []
            for c in RAW_COLUMNS:
                if c in ("score", "success"):
                    means.append(cell_text(a.stat(ruleset, subject, c, column)))
                else:
                    stat = metric_stat(a.rows(ruleset, subject), c, a.groups(ruleset)[column], 1, 0)
                    means.append(_num(stat.mean))
            rows.append([f"{column_title(column)} mean", "", "", *means, ""])
        out.append(
            Table(
                f"{ruleset}_per_seed_{_slug(subject)}",
                f"Per-seed raw tables ({ruleset})",
                f"{subject}",
                ["task", "seed", "sample", *RAW_COLUMNS, "status"],
                rows,
                records,
            )
        )
    return out


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in text)


# -- writing -------------------------------------------------------------------------------------


def write(tables: Sequence[Table], out_dir: str | Path, summary: str | Path | None = None) -> list[Path]:
    """Write each table's CSV, `tables.json` and summary.md; returns the paths written."""
    from schemashift.rollout import io

    out = Path(out_dir)
    written = []
    for table in tables:
        path = out / f"{table.key}.csv"
        text = to_csv(table.records)
        io.atomic_write(path, lambda f, text=text: f.write(text.encode("utf-8")))
        written.append(path)
    io.write_json(out / INDEX_FILE, [asdict(t) for t in tables])
    written.append(out / INDEX_FILE)
    path = Path(summary) if summary is not None else out / SUMMARY_FILE
    text = markdown(tables)
    io.atomic_write(path, lambda f: f.write(text.encode("utf-8")))
    written.append(path)
    return written


def markdown(tables: Sequence[Table]) -> str:
    lines = ["# SchemaShift results", "", CELL_NOTE, ""]
    section = None
    for table in tables:
        if table.section != section:
            section = table.section
            lines += [f"## {section}", ""]
        lines += [f"### {table.title}", ""]
        if table.note:
            lines += [table.note, ""]
        lines += [markdown_table(table.header, table.rows) if table.rows else "(nothing to show)", ""]
    return "\n".join(lines)


def to_csv(records: Sequence[Mapping[str, Any]]) -> str:
    columns = list(dict.fromkeys(k for r in records for k in r))
    buffer = _io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for row in records:
        writer.writerow(["" if row.get(c) is None else _csv_value(row[c]) for c in columns])
    return buffer.getvalue()


def _csv_value(value: Any) -> str:
    if isinstance(value, float):
        return repr(value)
    return str(value)


def markdown_table(header: Sequence[str], body: Sequence[Sequence[str]]) -> str:
    def line(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    return "\n".join([line(header), "| " + " | ".join("---" for _ in header) + " |", *map(line, body)])


def read_index(path: str | Path) -> list[Table]:
    """The tables a `report tables` run wrote (its tables.json)."""
    from schemashift.report.load import read_json

    data = read_json(path, "table index")
    if not isinstance(data, list):
        raise ReportError(f"{path}: not a table index")
    try:
        return [Table(**entry) for entry in data]
    except TypeError as exc:
        raise ReportError(f"{path}: not a table index: {exc}") from None
