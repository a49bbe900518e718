"""The benchmark's tables: per-subject overviews and coverage, baselines against the trained
models, legacy against v1, pass^k, efficiency, final actions, parse success, drift outcomes,
failed examples and the per-seed raw tables."""

from __future__ import annotations

import json

from schemashift.report import published
from schemashift.report.analysis import (
    EFFICIENCY_COLUMNS,
    METRICS,
    OVERALL,
    SAVING_COLUMNS,
    TIER_PREFIX,
    Analysis,
    drift_outcomes,
    efficiency_reference,
    published_stat,
    savings,
)
from schemashift.report.load import coverage, coverage_text
from schemashift.report.stats import (
    MIN_GENERALISATION,
    PASS_K,
    Stat,
    metric_stat,
    pass_k_stat,
    scenario_spread,
    verdict,
)
from schemashift.report.tables.format import (
    MISSING,
    NOT_PLAYED,
    PROVISIONAL,
    Table,
    cell_text,
    column_title,
    detectable_note,
    num,
    signed,
    size_text,
    slug,
    stat_record,
)
from schemashift.rollout.subject import DEFAULT_HARNESS

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


def overview_tables(a: Analysis, ruleset: str) -> list[Table]:
    out = []
    columns = list(a.groups(ruleset))
    for metric, title in METRICS.items():
        rows, records = [], []
        ran = set(a.ran(ruleset))
        for subject in a.subjects(ruleset):
            stats = [a.stat(ruleset, subject, metric, c) for c in columns]
            if subject in ran:
                rows.append([a.shown(ruleset, subject), *map(cell_text, stats)])
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
                not_run_note(
                    a, ruleset, "Coverage: " + coverage_text(coverage(a.episodes, a.manifest, ruleset))
                ),
            )
        )
    return out


def not_run_note(a: Analysis, ruleset: str, note: str) -> str:
    """A table's note followed by the subjects that never ran on `ruleset` (they have no rows)."""
    lines = a.not_run_lines(ruleset)
    return " ".join([note, *(f"{line[0].upper()}{line[1:]}." for line in lines)])


def coverage_table(a: Analysis, ruleset: str) -> Table:
    scenarios = a.scenarios(ruleset)
    rows, records = [], []
    ran = set(a.ran(ruleset))
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
        if subject in ran:
            rows.append(row)
    return Table(
        f"{ruleset}_coverage",
        f"Ruleset {ruleset}",
        "Coverage: graded / expected cells per subject and scenario",
        ["subject", *scenarios],
        rows,
        records,
        not_run_note(
            a,
            ruleset,
            "From the manifest's expected cells (? where no manifest lists the cell); missing and "
            f"infra_error cells counted apart. {PROVISIONAL}: every aggregate over this subject and "
            "scenario is provisional.",
        ),
    )


def baselines_table(a: Analysis, ruleset: str) -> Table:
    """Table B: rule baselines, model baselines (with size), published rows, trained models."""
    columns = list(a.groups(ruleset))
    finals = {r.trained_subject for r in a.runs.values()}
    rows, records = [], []
    entries = []
    for subject in a.ran(ruleset):
        kind = a.kinds.get(subject)
        if kind in ("rule", "model", "base") or subject in finals:
            entries.append((subject, kind))
    for subject, kind in entries:
        size, estimated = a.params_b(subject), a.params_estimated(subject)
        role = {"rule": "rule baseline", "model": "model baseline", "base": "untrained model"}.get(
            kind, "trained"
        )
        stats = [a.stat(ruleset, subject, "score", c) for c in columns]
        success = a.stat(ruleset, subject, "success", OVERALL)
        label = a.shown(ruleset, subject)
        rows.append([label, role, size_text(size, estimated), *map(cell_text, stats), cell_text(success)])
        facts = {"ruleset": ruleset, "subject": subject, "role": role, "params_b": size}
        facts["params_estimated"] = estimated
        measured = [("score", c, stat) for c, stat in zip(columns, stats, strict=True)]
        records += [
            stat_record(stat, **facts, metric=metric, column=column)
            for metric, column, stat in [*measured, ("success", OVERALL, success)]
        ]
    if ruleset == "legacy":
        known = set(a.scenarios(ruleset))
        stats = []
        for c in columns:
            scenarios = [s for s in a.groups(ruleset)[c] if s in known]
            present = {r["scenario"] for r in published.gpt_oss_rows()}
            stats.append(
                published_stat(a, "score", scenarios)
                if set(scenarios) <= present
                else Stat(None, None, None, 0)
            )
        success = published_stat(a, "success", [s for s in a.scenarios(ruleset)])
        label = published.GPT_OSS_120B
        rows.append(
            [
                label,
                "published, not rerun",
                size_text(published.GPT_OSS_PARAMS_B),
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
        not_run_note(
            a,
            ruleset,
            f"Published rows come from {published.SOURCE}; they are not rerun (seeds 0-2). Size: "
            "parameters from models.<name>.params_b in the config; ~ marks an estimate (params_estimated).",
        ),
    )


def harness_table(a: Analysis, ruleset: str) -> Table:
    """Each model through each harness it played, side by side: overall score and success, and
    every other harness's paired difference from the default one (the same cells, graded by
    both)."""
    by_model = a.harnesses(ruleset)
    harnesses = sorted(
        {h for found in by_model.values() for h in found}, key=lambda h: (h != DEFAULT_HARNESS, h)
    )
    others = [h for h in harnesses if h != DEFAULT_HARNESS]
    diffs = []
    columns = [f"{harness} {title}" for harness in harnesses for title in METRICS.values()]
    columns += [f"{harness} - {DEFAULT_HARNESS} {title}" for harness in others for title in METRICS.values()]
    rows, records = [], []
    for model, found in by_model.items():
        row = [model]
        for harness in harnesses:
            for metric in METRICS:
                subject = found.get(harness)
                stat = a.stat(ruleset, subject, metric, OVERALL) if subject else Stat(None, None, None, 0)
                row.append(cell_text(stat) if subject else NOT_PLAYED)
                records.append(
                    stat_record(stat, ruleset=ruleset, subject=model, harness=harness, metric=metric)
                )
        for harness in others:
            for metric in METRICS:
                both = harness in found and DEFAULT_HARNESS in found
                stat = (
                    a.compared(ruleset, found[harness], found[DEFAULT_HARNESS], metric)
                    if both
                    else Stat(None, None, None, 0)
                )
                diffs.append(stat)
                row.append(f"{signed(stat)}: {verdict(stat)}" if both else NOT_PLAYED)
                records.append(
                    stat_record(
                        stat,
                        ruleset=ruleset,
                        subject=model,
                        harness=f"{harness} - {DEFAULT_HARNESS}",
                        metric=metric,
                    )
                )
        rows.append(row)
    return Table(
        f"{ruleset}_harnesses",
        f"Ruleset {ruleset}",
        "Models per harness: the JSON-action prompt (default) beside native tool calling (tools)",
        ["model", *columns],
        rows,
        records,
        "Overall cells as in the overview tables. A harness changes how a model is asked to act, not the "
        "episode: default writes each action as JSON in the model's text, tools offers the actions as "
        "functions of the API's own tool calling. Differences are paired by cell (scenario and "
        f"seed, its samples averaged) over the cells both harnesses graded, Holm-adjusted over every "
        f"harness comparison of the report. {NOT_PLAYED}: the model was not evaluated through that "
        "harness. " + detectable_note(diffs),
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


def pass_k_table(a: Analysis, ruleset: str) -> Table:
    rows, records = [], []
    scenarios = a.scenarios(ruleset)
    for subject in a.ran(ruleset):
        flag = a.provisional(ruleset, subject, scenarios)
        vary = a.seeds_vary_task(ruleset)
        stats = [pass_k_stat(a.rows(ruleset, subject), k, scenarios, flag, vary) for k in PASS_K]
        rows.append([a.shown(ruleset, subject), *map(cell_text, stats)])
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
        "pass^k = C(c, k) / C(n, k); averaged over seeds, then scenarios, with the same bounded "
        "intervals as any [0, 1] metric (over the cells' estimates); n = cells. "
        f"{MISSING} where some cell has fewer than k samples.",
    )


def episode_costs(rows, price):
    """USD per graded episode at a model's price (None without one): its tokens at the prices
    per million, or its wall-clock seconds at the GPU-hour price (an upper bound where episodes
    shared the GPU in lockstep, each charged its whole wall time)."""
    if not price:
        return None
    if "gpu_hour" in price:
        return rows["wall_s"] / 3600 * price["gpu_hour"]
    return (rows["tokens_in"] * price["input_per_mtok"] + rows["tokens_out"] * price["output_per_mtok"]) / 1e6


def usd(value: float | None) -> str:
    return MISSING if value is None else f"{value:.4g}"


def efficiency_table(a: Analysis, ruleset: str) -> Table:
    rows, records = [], []
    for subject in a.ran(ruleset):
        mine = a.rows(ruleset, subject)
        means = {c: (float(mine[c].mean()) if mine[c].notna().any() else None) for c in EFFICIENCY_COLUMNS}
        price = a.price(subject)
        costs = episode_costs(mine, price)
        solved = int(mine["success"].sum())
        cost = {
            "cost_basis": None if costs is None else ("gpu_hour" if "gpu_hour" in price else "tokens"),
            "cost_per_episode_usd": None if costs is None or not len(mine) else float(costs.mean()),
            "cost_per_success_usd": None if costs is None or not solved else float(costs.sum()) / solved,
        }
        reference = efficiency_reference(a, ruleset, subject)
        saved = savings(a, ruleset, subject, reference) if reference else None
        if saved:
            text = "; ".join(
                f"{EFFICIENCY_COLUMNS[c]} {saving_text(saved[c])}"
                for c in SAVING_COLUMNS
                if saved[c].mean is not None
            )
            flag = PROVISIONAL if saved["provisional"] else ""
            saved_text = (
                f"vs {reference} on {saved['solved_by_both']} of {saved['graded_by_both']} cells both "
                f"graded that both solved{flag}: {text or MISSING}"
            )
        else:
            saved_text = MISSING
        rows.append(
            [
                subject,
                str(len(mine)),
                *(num(means[c], 1) for c in EFFICIENCY_COLUMNS),
                usd(cost["cost_per_episode_usd"]),
                usd(cost["cost_per_success_usd"]),
                saved_text,
            ]
        )
        record = {
            "ruleset": ruleset,
            "subject": subject,
            "n": len(mine),
            **means,
            **cost,
            "reference": reference,
        }
        if saved:
            record |= {
                "saving_solved_by_both": saved["solved_by_both"],
                "saving_graded_by_both": saved["graded_by_both"],
                "saving_provisional": saved["provisional"],
            }
            for c in SAVING_COLUMNS:
                stat = saved[c]
                record |= {
                    f"saving_{c}": stat.mean,
                    f"saving_{c}_ci_low": stat.ci_low,
                    f"saving_{c}_ci_high": stat.ci_high,
                }
        records.append(record)
    return Table(
        f"{ruleset}_efficiency",
        f"Ruleset {ruleset}",
        "Efficiency per graded episode, and savings versus a reference",
        ["subject", "episodes", *EFFICIENCY_COLUMNS.values(), "USD / episode", "USD / success", "savings"],
        rows,
        records,
        "Means per graded episode. Savings are paired by cell (scenario, seed): each side's cost on a "
        "cell is its mean over the samples that solved it, and a saving is 1 - subject total / reference "
        "total over the cells both solved, with a 95% bootstrap interval (cells resampled within each "
        "scenario) and its coverage: cells both solved of the cells both graded. A checkpoint is compared "
        "with its untrained base through the same harness, anything else with "
        "report.efficiency_reference (default policy_aware_heuristic). Rule policies use no tokens. "
        "Cost at the model's models.<name>.price: its tokens at the USD per million input and output "
        "tokens, or its wall seconds at the USD per GPU hour (an upper bound: episodes played in lockstep "
        "share the GPU); per success: the cost of all graded episodes over the successes among them.",
    )


def saving_text(stat: Stat) -> str:
    if stat.has_interval:
        return f"{stat.mean:+.0%} [{stat.ci_low:+.0%}, {stat.ci_high:+.0%}]"
    return f"{stat.mean:+.0%} ({stat.note or 'no interval'})"


def spread_table(a: Analysis, ruleset: str) -> Table:
    """How much the scenarios differ, apart from the seed intervals; an interval over new
    scenarios only where there are enough scenarios for one."""
    rows, records = [], []
    columns = [c for c in a.groups(ruleset) if c == OVERALL or c.startswith(TIER_PREFIX)]
    for subject in a.ran(ruleset):
        for metric in METRICS:
            for column in columns:
                scenarios = a.groups(ruleset)[column]
                spread = scenario_spread(a.rows(ruleset, subject), metric, scenarios)
                general = a.generalisation(ruleset, subject, metric, column)
                rows.append(
                    [
                        subject,
                        metric,
                        column_title(column),
                        f"{spread['scenarios']} of {len(scenarios)}",
                        num(spread["sd"]),
                        f"{num(spread['min'])} - {num(spread['max'])}",
                        cell_text(general),
                    ]
                )
                records.append(
                    {
                        **stat_record(
                            general, ruleset=ruleset, subject=subject, metric=metric, column=column
                        ),
                        "scenarios_graded": spread["scenarios"],
                        "scenarios": len(scenarios),
                        "between_sd": spread["sd"],
                        "scenario_min": spread["min"],
                        "scenario_max": spread["max"],
                    }
                )
    return Table(
        f"{ruleset}_scenario_spread",
        f"Ruleset {ruleset}",
        "Between scenarios: how much they differ, and what can be said about new ones",
        [
            "subject",
            "metric",
            "column",
            "scenarios",
            "sd between scenarios",
            "lowest - highest",
            "new scenarios",
        ],
        rows,
        records,
        "The score and success tables answer 'these scenarios over all their seeds'. This table shows how "
        "much the scenario means differ (standard deviation, range) and, only where a column has at "
        f"least {MIN_GENERALISATION} scenarios, a generalisation interval (method generalisation): a "
        "t interval over the scenario means (df = scenarios - 1) for new scenarios drawn like these. "
        "Tiers of two or three scenarios get no such interval.",
    )


def final_action_table(a: Analysis, ruleset: str) -> Table:
    g = a.graded[a.graded["ruleset"] == ruleset]
    actions = sorted(set(g["final_action"].dropna()))
    rows, records = [], []
    for subject in a.ran(ruleset):
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
    for subject in a.ran(ruleset):
        if a.kinds.get(subject) == "rule":
            continue
        mine = a.rows(ruleset, subject)
        failures = mine["parse_failures"].dropna()
        steps = mine.loc[failures.index, "steps"].fillna(0)
        total = float(steps.sum())
        rate = None if total == 0 else 1 - float(failures.sum()) / total
        clean = None if not len(failures) else float((failures == 0).mean())
        rows.append(
            [subject, str(len(mine)), str(int(total)), str(int(failures.sum())), num(rate), num(clean)]
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
    records = drift_outcomes(a, ruleset)
    rows = [
        [
            str(record["subject"]),
            str(record["kind"]),
            *(str(record[k]) for k in ("planned", "fired", "discovered", "reported", "failed", "recovered")),
            num(record["recovery_rate"], 2),
            num(record["mean_steps_to_recover"], 2),
        ]
        for record in records
    ]
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
        "Over all drift rows: discovered = evidence seen on the drifted tool; reported = the agent "
        "reported it correctly; recovered = a successful call after a failure on it; recovery rate = "
        "recovered / failed on.",
    )


def examples_table(a: Analysis) -> Table:
    from schemashift.report.traces import trace_key, trace_link
    from schemashift.runs.tracking import DEFAULT_URL, TRACKIO_PROJECT

    rows, records = [], []
    for example in a.examples:
        link = trace_link(DEFAULT_URL, TRACKIO_PROJECT, example["ruleset"], example["subject"])
        key = trace_key(example["scenario"], example["seed"], example["sample_index"])
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
                num(example.get("score")),
                steps,
                f"{link} {key}",
            ]
        )
        records.append(
            {k: v for k, v in example.items() if k != "key_steps"}
            | {"key_steps": json.dumps(example["key_steps"]), "trace": link, "trace_key": key}
        )
    return Table(
        "failed_examples",
        "Failed episodes",
        "Three failed episodes per subject, as key steps (action -> response)",
        ["ruleset", "subject", "scenario", "seed", "sample", "steps", "score", "key steps", "trace"],
        rows,
        records,
        "Picked without randomness by `schemashift aggregate`: failures sorted by scenario, seed and "
        "sample, one "
        "scenario at a time. Key steps: the first and last, failed calls, steps where drifts fired, drift "
        "reports and complete_task. Trace: the episode in the Trackio dashboard's Traces tab (`report "
        "trackio --cells`, served by `trackio show`), under its key (scenario/seed/sample, searchable).",
    )


def per_seed_tables(a: Analysis, ruleset: str) -> list[Table]:
    out = []
    columns = list(a.groups(ruleset))
    aggregates = [c for c in columns if c.startswith(TIER_PREFIX) or c == OVERALL]
    for subject in a.ran(ruleset):
        mine = a.episodes[(a.episodes["ruleset"] == ruleset) & (a.episodes["label"] == subject)]
        mine = mine.sort_values(["scenario", "seed", "sample_index"])
        rows, records = [], []
        for r in mine.itertuples():
            values = [None if r.status != "graded" else getattr(r, c) for c in RAW_COLUMNS]
            rows.append([r.scenario, str(r.seed), str(r.sample_index), *(num(v) for v in values), r.status])
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
                    stat = metric_stat(
                        a.rows(ruleset, subject),
                        c,
                        a.groups(ruleset)[column],
                        False,
                        a.seeds_vary_task(ruleset),
                    )
                    means.append(num(stat.mean))
            rows.append([f"{column_title(column)} mean", "", "", *means, ""])
        out.append(
            Table(
                f"{ruleset}_per_seed_{slug(subject)}",
                f"Per-seed raw tables ({ruleset})",
                f"{subject}",
                ["task", "seed", "sample", *RAW_COLUMNS, "status"],
                rows,
                records,
            )
        )
    return out
