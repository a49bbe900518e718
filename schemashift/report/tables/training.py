"""The training tables: each run untrained against trained, the reward and model ablations,
training cost and the learning curves."""

from __future__ import annotations

from dataclasses import replace

from schemashift.report.analysis import (
    METRICS,
    OVERALL,
    TRAINED_ON,
    Analysis,
    repeat_groups,
    smoothed,
)
from schemashift.report.comparisons import ablation_groups
from schemashift.report.stats import MISSING_STAT, Stat, repeats_stat, standard_error, verdict
from schemashift.report.tables.format import (
    MISSING,
    Table,
    cell_text,
    column_title,
    detectable_note,
    num,
    signed,
    size_text,
    stat_record,
)
from schemashift.runs.tracking import SAMPLING_COLUMNS

#: the cell of a run whose stack made no importance-sampling correction (nothing to measure)
NO_CORRECTION = "\u2014"


def untrained_vs_trained_tables(a: Analysis) -> list[Table]:
    """Table A per training run and ruleset: untrained (step 0) versus trained, per scenario."""
    out = []
    for run in a.runs.values():
        trained = run.trained_subject
        base = a.base_subject(run)
        trained_role = f"trained (step {run.trained_step})"
        for ruleset in a.run_rulesets(run):
            sides = {s for s in (trained, base) if s}
            if sides and sides <= set(a.not_run(ruleset)):
                continue  # both sides expected and never run: the overview's not-run line says why
            columns = list(a.groups(ruleset))
            rows, records = [], []
            diffs = {
                (metric, c): a.compared(ruleset, trained, base, metric, c)
                if trained and base
                else MISSING_STAT
                for metric in METRICS
                for c in columns
            }
            for metric, title in METRICS.items():
                for role, subject in (
                    ("untrained (step 0)", base),
                    (trained_role, trained),
                ):
                    stats = [
                        a.stat(ruleset, subject, metric, c) if subject else Stat(None, None, None, 0)
                        for c in columns
                    ]
                    rows.append([title, f"{role}: {a.shown(ruleset, subject)}", *map(cell_text, stats)])
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
                row_diffs = [diffs[metric, c] for c in columns]
                rows.append([title, "paired difference (trained - untrained)", *map(signed, row_diffs)])
                records += [
                    stat_record(
                        d, run=run.name, ruleset=ruleset, metric=metric, row="paired difference", column=c
                    )
                    for c, d in zip(columns, row_diffs, strict=True)
                ]
            out.append(
                Table(
                    f"table_a_{run.name}_{ruleset}",
                    "Table A: untrained vs trained",
                    f"Run {run.name} on {ruleset}: untrained base vs the trained checkpoint",
                    ["metric", "model state", *map(column_title, columns)],
                    rows,
                    records,
                    "Trained = the run's report_step (default: its last checkpoint), never the best one on "
                    "the test set. Paired differences use the (scenario, seed) cells both evaluated "
                    "(n = pairs); p_holm: two-sided p-value against no difference, Holm-adjusted within "
                    "its question (overall: every checkpoint against its step 0; scenario and tier "
                    "columns: every trained checkpoint's columns). One training run: the differences "
                    "measure evaluation noise, not training randomness. "
                    + detectable_note(list(diffs.values())),
                )
            )
    return out


def _ablation_diffs(a: Analysis, vary: str) -> dict[str, Stat]:
    """Each non-first run of an ablation group against its group's first run (overall score),
    Holm-adjusted within the ablation's family."""
    return {
        run.name: a.compared(run.ruleset, run.trained_subject, group[0].trained_subject, "score")
        for group in ablation_groups(a, vary)
        for run in group[1:]
        if run.ruleset in a.rulesets
    }


def _ablation_table(a: Analysis, vary: str, key: str, section: str, title: str) -> Table:
    rows, records = [], []
    diffs = _ablation_diffs(a, vary)
    header = ["group", "run", "reward", "base model", "size", "scenarios", "final score (overall)"]
    header += ["final success (overall)", "vs first run (score)", "convergence step"]
    for number, group in enumerate(ablation_groups(a, vary), start=1):
        for run in group:
            trained = run.trained_subject
            ruleset = run.ruleset
            if ruleset not in a.rulesets:
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
                f"{s}: {num(a.stat(ruleset, trained, 'score', s).mean)}" for s in a.scenarios(ruleset)
            )
            diff = diffs.get(run.name)
            versus = f"{verdict(diff)} {signed(diff)}" if diff else ""
            converged = a.convergence_step(run.name)
            rows.append(
                [
                    str(number),
                    run.name,
                    run.reward or "?",
                    run.base_model or "?",
                    size_text(a.params_b(trained), a.params_estimated(trained)),
                    per_scenario,
                    cell_text(score),
                    cell_text(success),
                    versus,
                    num(converged),
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
                    "vs_first": diff.mean if diff else None,
                    "vs_first_p_holm": diff.p_adjusted if diff else None,
                    "vs_first_verdict": verdict(diff) if diff else None,
                    "training_runs": 1,
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
        "first run on shared cells, beats / loses by its Holm-adjusted p-value (over this ablation) at "
        "0.05, otherwise not separable at this size. "
        + detectable_note(list(diffs.values()))
        + " Each arm is one training run (a run's first repeat; the training repeats table pools the "
        "others): a difference is a single-run observation about these runs, not about the training "
        "method (training randomness is not in its interval). Convergence step: "
        "first step where the smoothed training reward covers 90% of the way from its first value to "
        "its peak.",
    )


def repeats_table(a: Analysis) -> Table:
    """Each configured run over its repeats (training seeds): what the method reaches at the
    reported step, with training variance told apart from evaluation variance."""
    header = ["run", "ruleset", "repeats", "metric", "pooled over repeats", "per repeat"]
    header += ["sd between repeats", "evaluation se (within)", "training sd (estimated)"]
    rows, records = [], []
    for configured, runs in repeat_groups(a).items():
        ruleset = runs[0].ruleset
        if ruleset not in a.rulesets:
            continue
        scenarios = a.groups(ruleset)[OVERALL]
        for metric, title in METRICS.items():
            stats = [a.stat(ruleset, run.trained_subject, metric, OVERALL) for run in runs]
            ran = [(run, stat) for run, stat in zip(runs, stats, strict=True) if stat.mean is not None]
            ses = [standard_error(a.rows(ruleset, run.trained_subject), metric, scenarios) for run, _ in ran]
            pooled = repeats_stat([stat.mean for _, stat in ran], ses, sum(stat.n for _, stat in ran))
            shown = pooled.pooled
            if len(ran) < len(runs) or any(stat.provisional for _, stat in ran):
                shown = replace(shown, provisional=True)
            per_repeat = "; ".join(
                f"{run.name}: {num(stat.mean) if stat.mean is not None else MISSING}"
                for run, stat in zip(runs, stats, strict=True)
            )
            rows.append(
                [
                    configured,
                    ruleset,
                    f"{len(ran)} of {len(runs)}",
                    title,
                    cell_text(shown),
                    per_repeat,
                    num(pooled.between_sd),
                    num(pooled.evaluation_se),
                    num(pooled.training_sd),
                ]
            )
            records.append(
                {
                    **stat_record(shown, run=configured, ruleset=ruleset, metric=metric),
                    "repeats": len(runs),
                    "repeats_evaluated": len(ran),
                    "between_sd": pooled.between_sd,
                    "evaluation_se": pooled.evaluation_se,
                    "training_sd": pooled.training_sd,
                }
            )
    return Table(
        "training_repeats",
        "Training repeats",
        "Each run over its training seeds: training variance beside evaluation variance",
        header,
        rows,
        records,
        "The question: what does this run's configuration (the training method) reach at its reported "
        "step, over training seeds? A run with `repeats: N` trains N times, each with another seed "
        "(<run>, <run>.rep2, ...). Pooled: the mean of the repeats' overall means, with a t interval "
        "over them (df = repeats - 1), which holds training and evaluation noise together. Sd between "
        "repeats: their spread; evaluation se: the standard error of one repeat's mean over its "
        "evaluation seeds (root mean square over the repeats); training sd: the part of the spread "
        "evaluation noise does not explain (a moment estimate, 0 where it explains all of it). With "
        "one repeat there is no interval over training seeds: what the tables say of a training "
        "method is then an observation of one run.",
    )


def reward_ablation_table(a: Analysis) -> Table:
    return _ablation_table(
        a, "reward", "table_c", "Table C: reward ablation", "Same base model, different reward"
    )


def model_ablation_table(a: Analysis) -> Table:
    return _ablation_table(
        a, "base_model", "table_d", "Table D: model ablation", "Same reward, different base model"
    )


def training_cost_table(a: Analysis) -> Table:
    price = float((a.config.get("report") or {}).get("price_per_gpu_hour", 2.5))
    rows, records = [], []
    for run in a.runs.values():
        t = a.training_rows(run.name)
        if t is None:
            rows.append([run.name, *([MISSING] * 9)])
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
            **_engine_mismatch(t),
        }
        records.append(record)
        rows.append(
            [
                run.name,
                str(record["steps"]),
                num(record["wall_clock_h"], 2),
                f"{record['gpu_type'] or MISSING} x{gpus or '?'}",
                num(gpu_hours, 2),
                num(record["cost_usd"], 2),
                f"{record['peak_reward']:.3f} (smoothed {record['peak_reward_smoothed']:.3f})",
                num(record["peak_gpu_mem_gb"], 1),
                _ratio_range(record["is_ratio_min"], record["is_ratio_max"]),
                NO_CORRECTION if record["logp_diff_max"] is None else f"{record['logp_diff_max']:.4f}",
            ]
        )
    return Table(
        "table_e",
        "Table E: training efficiency",
        "Steps, wall-clock, GPU, cost, peak reward and engine/trainer agreement per training run",
        [
            "run",
            "steps",
            "wall-clock h",
            "GPU",
            "GPU-hours",
            "cost USD",
            "peak reward",
            "peak GPU mem GiB",
            "IS ratio (last step)",
            "max logp diff (last step)",
        ],
        rows,
        records,
        f"From the saved metric lineage (superseded rows dropped). Cost at {price:g} USD per GPU-hour "
        "(report.price_per_gpu_hour). Wall-clock: sum of seconds_per_step. IS ratio: the range [min, max] "
        "of TRL's importance-sampling ratios (trainer over engine probability of the sampled tokens) at "
        "the run's last logged step, max logp diff: the largest absolute log-probability difference of "
        "engine and trainer there; a healthy run shows ratios near 1 and differences near 0. "
        f"{NO_CORRECTION}: the run logged no correction (a stack that generates with the trained model "
        "itself: transformers, Unsloth).",
    )


def _engine_mismatch(t) -> dict[str, float | None]:
    """The importance-sampling ratios and log-probability differences at the run's last step
    (null where its stack logged none): a broken engine/trainer sync shows here, where the
    learning curve would only flatten."""
    last = t.iloc[-1]  # training_rows are in step order
    return {
        column: None if last[column] != last[column] else float(last[column])
        for column in SAMPLING_COLUMNS.values()
    }


def _ratio_range(low: float | None, high: float | None) -> str:
    if low is None or high is None:
        return NO_CORRECTION
    return f"[{low:.3f}, {high:.3f}]"


def learning_table(a: Analysis) -> Table:
    rows, records = [], []
    points = [
        (run, ruleset, step, subject, a.base_subject(run))
        for run in a.runs.values()
        for ruleset in a.run_rulesets(run)
        for step, subject in a.checkpoints(run)
    ]
    diffs = {
        (run.name, ruleset, step, metric): a.compared(ruleset, subject, base, metric)
        for run, ruleset, step, subject, base in points
        if subject is not None and base and subject != base
        for metric in ("score", "success")
    }
    ran = {ruleset: set(a.ran(ruleset)) for ruleset in a.rulesets}
    for run, ruleset, step, subject, _base in points:
        if subject is None:
            rows.append([run.name, ruleset, str(step), MISSING, MISSING, MISSING, MISSING])
            continue
        score = a.stat(ruleset, subject, "score", OVERALL)
        success = a.stat(ruleset, subject, "success", OVERALL)
        dscore = diffs.get((run.name, ruleset, step, "score"))
        dsuccess = diffs.get((run.name, ruleset, step, "success"))
        if subject in ran[ruleset]:
            rows.append(
                [
                    run.name,
                    ruleset,
                    f"{step} ({TRAINED_ON})" if a.trained_on(ruleset, subject) else str(step),
                    cell_text(score),
                    cell_text(success),
                    signed(dscore) if dscore else "",
                    signed(dsuccess) if dsuccess else "",
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
                    "diff_p_value": diff.p_value if diff else None,
                    "diff_p_holm": diff.p_adjusted if diff else None,
                    "diff_detectable": diff.detectable if diff else None,
                    "pairs": diff.n if diff else None,
                }
            )
    return Table(
        "learning_curves",
        "Learning curves",
        "Every checkpoint, and a run's warm start, against the untrained base model",
        [
            "run",
            "ruleset",
            "step",
            "score (overall)",
            "success (overall)",
            "score - base",
            "success - base",
        ],
        rows,
        records,
        " ".join(
            [
                "Step 0 is the run's warm start where it has one (the adapter GRPO starts from), else "
                "the shared untrained base model's evaluation (one evaluation, shown in every run that "
                "uses it). Differences are against the untrained base, paired on the (scenario, seed) "
                "cells both evaluated (n = pairs); p_holm is Holm-adjusted over every checkpoint and "
                "warm start against its base (one question: the same adjusted p-value as in Table A).",
                detectable_note(list(diffs.values())),
                *(
                    f"{ruleset}: {line}."
                    for ruleset in a.rulesets
                    for line in a.not_run_lines(ruleset, ("base", "checkpoint"))
                ),
            ]
        ),
    )
