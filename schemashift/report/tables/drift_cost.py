"""The drift-cost tables (`report.arms`): each subject's success and score in the drift and the
control arm on the cells it played in both, and the paired drift cost, overall (a headline table
of every ruleset with a control arm) and per drift kind."""

from __future__ import annotations

from schemashift.env.arms import CONTROL, DRIFT
from schemashift.report import arms
from schemashift.report.analysis import METRICS, OVERALL, Analysis
from schemashift.report.tables.format import Table, cell_text, detectable_note, signed, stat_record

COST = "drift - control"


def _header(first: list[str]) -> list[str]:
    out = list(first)
    for title in (METRICS[m] for m in arms.METRICS):
        out += [f"{title}: drift", f"{title}: control", f"{title}: drift cost", f"{title}: verdict"]
    return out


def _rows(a: Analysis, ruleset: str, by_kind: bool) -> tuple[list[list[str]], list[dict], list]:
    rows, records, diffs = [], [], []
    for subject in arms.subjects(a, ruleset):
        columns = arms.columns(a, ruleset)[1:] if by_kind else [OVERALL]
        for column in columns:
            pairs = arms.matched_episodes(a, ruleset, subject, column)
            if not pairs:
                continue
            shown = column.removeprefix(arms.KIND_PREFIX)
            row = [a.shown(ruleset, subject), a.kinds.get(subject) or "?"]
            row += [shown] if by_kind else []
            row.append(str(pairs))
            for metric in arms.METRICS:
                sides = {
                    arm: arms.arm_stat(a, ruleset, subject, arm, metric, column) for arm in (DRIFT, CONTROL)
                }
                cost = a.compared(ruleset, subject, arms.CONTROL_REFERENCE, metric, column)
                diffs.append(cost)
                verdict = arms.cost_verdict(cost)
                row += [cell_text(sides[DRIFT]), cell_text(sides[CONTROL]), signed(cost), verdict]
                keys = {"ruleset": ruleset, "subject": subject, "column": shown, "metric": metric}
                keys["matched_episodes"] = pairs
                records += [stat_record(s, **keys, arm=arm) for arm, s in sides.items()]
                records.append(stat_record(cost, **keys, arm=COST, verdict=verdict))
            rows.append(row)
    return rows, records, diffs


def _matched_note(a: Analysis, ruleset: str) -> str:
    graded = a.graded[a.graded["ruleset"] == ruleset]
    pairs = sum(arms.matched_episodes(a, ruleset, s) for s in arms.subjects(a, ruleset))
    return (
        f"Only cells played in both arms count: {pairs} episode pairs (same scenario, seed and sample, "
        f"graded in both arms), of {len(graded)} graded drift-arm episodes on {ruleset}."
    )


NO_CONTROL = (
    "No control-arm results on {ruleset}: the drift cost needs the same cells played with the drift "
    "plan off (arm control), and none were."
)
READING = (
    "Drift cost = drift arm minus control arm (drift plan off: same world, task text and seed) of the "
    "same subject on the same cells, paired like every difference of the report; negative is what "
    "drift takes away. A subject at 0 in both arms cannot do the task at all; its cost of 0 says "
    "nothing about adapting. Verdicts: 'worse under drift' / 'better under drift' need a Holm-adjusted "
    "p below 0.05 within the question (family {family})."
)


def drift_cost_table(a: Analysis, ruleset: str) -> Table:
    """Every subject with cells in both arms: overall success and score per arm and the cost."""
    rows, records, diffs = _rows(a, ruleset, by_kind=False)
    if not rows:
        note = NO_CONTROL.format(ruleset=ruleset)
    else:
        note = " ".join(
            [_matched_note(a, ruleset), READING.format(family="'drift cost'"), detectable_note(diffs)]
        )
    return Table(
        f"{ruleset}_drift_cost",
        "Headline",
        f"Ruleset {ruleset}: what drift costs, each subject with and without drift on the same cells",
        _header(["subject", "kind", "matched episodes"]),
        rows,
        records,
        note,
        headline=True,
    )


def drift_cost_kind_table(a: Analysis, ruleset: str) -> Table:
    """The drift cost per drift kind: the cells whose drift plan holds the kind."""
    rows, records, diffs = _rows(a, ruleset, by_kind=True)
    if not rows:
        note = NO_CONTROL.format(ruleset=ruleset)
    else:
        note = " ".join(
            [
                "A cell belongs to a drift kind when its drift-arm plan holds that kind (the subject's "
                "drift rows, fired or not); a cell with several kinds counts for each, so the kinds "
                "overlap and do not add up to the overall cost.",
                READING.format(family="'drift cost by kind'"),
                detectable_note(diffs),
            ]
        )
    return Table(
        f"{ruleset}_drift_cost_by_kind",
        f"Ruleset {ruleset}",
        "What drift costs per drift kind, each subject with and without drift on the same cells",
        _header(["subject", "kind", "drift kind", "matched episodes"]),
        rows,
        records,
        note,
    )
