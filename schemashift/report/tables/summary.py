"""What summary.md leads with: per ruleset the overall result of every subject that ran, and what
the results cannot support (replays, subjects trained on their evaluation tasks, comparisons the
sizes run cannot separate, single training runs). The rest of the report stays in the CSVs."""

from __future__ import annotations

from schemashift.report.analysis import METRICS, OVERALL, Analysis, repeat_groups
from schemashift.report.comparisons import FAMILIES
from schemashift.report.load import coverage, coverage_text
from schemashift.report.stats import NOT_SEPARABLE, REPLAYS, verdict
from schemashift.report.tables.benchmark import not_run_note
from schemashift.report.tables.format import TRAINED_ON, Table, cell_text, detectable_span, stat_record


def headline_table(a: Analysis, ruleset: str) -> Table:
    """Every subject that ran on `ruleset`: overall score and success rate with their intervals."""
    rows, records = [], []
    for subject in a.ran(ruleset):
        stats = {metric: a.stat(ruleset, subject, metric, OVERALL) for metric in METRICS}
        rows.append([a.shown(ruleset, subject), a.kinds.get(subject) or "?", *map(cell_text, stats.values())])
        records += [
            stat_record(
                s, ruleset=ruleset, subject=subject, metric=m, trained_on=a.trained_on(ruleset, subject)
            )
            for m, s in stats.items()
        ]
    return Table(
        f"{ruleset}_headline",
        "Headline",
        f"Ruleset {ruleset}: overall score and success rate of every subject that ran",
        ["subject", "kind", *(f"{title} (overall)" for title in METRICS.values())],
        rows,
        records,
        not_run_note(a, ruleset, "Coverage: " + coverage_text(coverage(a.episodes, a.manifest, ruleset))),
        headline=True,
    )


def cannot_conclude_table(a: Analysis) -> Table:
    """One row per limit of what the results show, with the subjects or comparisons it concerns."""
    rows: list[list[str]] = []
    for ruleset in a.rulesets:
        replayed = [s for s in a.ran(ruleset) if a.stat(ruleset, s, "success", OVERALL).note == REPLAYS]
        if replayed:
            rows.append(
                [
                    f"{ruleset}: how sure these numbers are",
                    "seeds do not vary the task here and these subjects replay one episode per scenario: "
                    f"their numbers are {len(a.scenarios(ruleset))} episodes, not a sample, and have no "
                    f"interval: {', '.join(replayed)}",
                ]
            )
        recalled = [s for s in a.ran(ruleset) if a.trained_on(ruleset, s)]
        if recalled:
            rows.append(
                [
                    f"{ruleset}: skill",
                    f"{TRAINED_ON} (training or warm start saw the evaluated tasks): a high score is "
                    f"recall, not skill or generalisation: {', '.join(recalled)}",
                ]
            )
    separable: dict[str, list[float]] = {}
    untested: dict[str, int] = {}
    for stat in a.families.values():
        if stat.mean is None or stat.family is None:
            continue
        if stat.p_value is None:
            untested[stat.family] = untested.get(stat.family, 0) + 1
        elif verdict(stat).startswith(NOT_SEPARABLE):
            separable.setdefault(stat.family, []).append(stat.detectable or float("nan"))
    for family, found in separable.items():
        known = [d for d in found if d == d]
        span = f"; detectable differences {detectable_span(known)}" if known else ""
        rows.append(
            [
                f"comparisons: {family}",
                f"{_count(len(found))} ({FAMILIES[family][0]}) not separable at this size{span} (80% "
                "power, Holm within the question): smaller true differences would mostly go unseen, so "
                "these rows are not ties",
            ]
        )
    for family, count in untested.items():
        rows.append(
            [f"comparisons: {family}", f"{_count(count)} without a test: both sides replay their episodes"]
        )
    single = [name for name, runs in repeat_groups(a).items() if len(runs) == 1]
    if single:
        rows.append(
            [
                "training methods",
                "one training run each (no repeats): a difference between runs or from step 0 is an "
                f"observation of that run, not of the training method: {', '.join(single)}",
            ]
        )
    return Table(
        "cannot_conclude",
        "What cannot be concluded",
        "Limits of these results",
        ["about", "what the results cannot support"],
        rows,
        [{"about": about, "limit": limit} for about, limit in rows],
        headline=True,
    )


def _count(comparisons: int) -> str:
    return "1 comparison is" if comparisons == 1 else f"{comparisons} comparisons are"
