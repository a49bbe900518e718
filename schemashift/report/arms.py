"""What drift costs: each subject in the drift arm beside the control arm (`env.arms`) on the same
cells.

The control arm plays a cell with its drift plan off: same world, task text and seed. A cell
counts when the subject has a graded episode at the same (scenario, seed, sample) in both arms
(`matched`); every number here is computed on those cells only, so the two arms always answer
for the same tasks. The drift cost of a metric is drift minus control, paired as every paired
difference of the report is (`stats.paired_stat`: the samples of a (scenario, seed) averaged,
the scenarios weighted alike, Newcombe's square-and-add interval for success and score, the
replays of a ruleset whose seeds do not vary the task without a test). A negative cost is what
drift takes away; 0 in both arms is a subject that cannot do the task, not one that cannot adapt.

Per drift kind: the cells whose drift-arm plan holds that kind, read from the subject's own drift
rows (a drift row is a planned drift, fired or not). A cell with two kinds counts for both, so the
kinds' costs overlap and do not add up to the overall one.

Holm families (`comparisons.FAMILIES`): `drift cost` (each subject's overall cost, both metrics)
and `drift cost by kind` (the same per kind), keyed with `CONTROL_REFERENCE` as the reference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from schemashift.env.arms import CONTROL, DRIFT
from schemashift.report.load import OVERALL
from schemashift.report.stats import MISSING_STAT, Stat, metric_stat, paired_stat, verdict

if TYPE_CHECKING:
    from collections.abc import Iterator

    import pandas as pd

    from schemashift.report.analysis import Analysis

#: the reference of a drift-cost comparison in a Holm family's key: the subject's own control arm
CONTROL_REFERENCE = "arm:control"
#: a drift-cost column of one drift kind: `kind:<kind>`, beside `overall`
KIND_PREFIX = "kind:"
#: what pairs an episode with its twin in the other arm
CELL = ("scenario", "seed", "sample_index")
METRICS = ("success", "score")
#: a drift-cost verdict in words: drift minus control, so "loses" is what drift costs
VERDICTS = {"loses": "worse under drift", "beats": "better under drift"}


def plays_control(a: Analysis, ruleset: str) -> bool:
    """Whether `ruleset` has a control arm (`Ruleset.arms`; legacy does not), or control rows."""
    from schemashift.env.rulesets import UnknownRuleset, get_ruleset

    if (a.control["ruleset"] == ruleset).any():
        return True
    try:
        return CONTROL in get_ruleset(ruleset).arms
    except UnknownRuleset:
        return False


def _cache(a: Analysis) -> dict[tuple[Any, ...], Any]:
    return a.__dict__.setdefault("_arm_cache", {})


def matched(a: Analysis, ruleset: str, subject: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The subject's graded episodes in the drift and the control arm at the cells (scenario,
    seed, sample) graded in both."""
    key = ("matched", ruleset, subject)
    cache = _cache(a)
    if key not in cache:
        sides = []
        for frame in (a.episodes, a.control):
            rows = frame[
                (frame["ruleset"] == ruleset) & (frame["label"] == subject) & (frame["status"] == "graded")
            ]
            sides.append(rows)
        both = _cells(sides[0]) & _cells(sides[1])
        cache[key] = tuple(_within(rows, both) for rows in sides)
    return cache[key]


def _cells(rows: pd.DataFrame) -> set[tuple[Any, ...]]:
    return set(zip(*(rows[c] for c in CELL), strict=True))


def _within(rows: pd.DataFrame, cells: set[tuple[Any, ...]]) -> pd.DataFrame:
    keep = [cell in cells for cell in zip(*(rows[c] for c in CELL), strict=True)]
    return rows[keep]


def subjects(a: Analysis, ruleset: str) -> list[str]:
    """The subjects that ran on `ruleset` with at least one cell graded in both arms, in order."""
    return [s for s in a.ran(ruleset) if len(matched(a, ruleset, s)[0])]


def kinds(a: Analysis, ruleset: str) -> list[str]:
    """The drift kinds planned on `ruleset`'s drift arm, sorted."""
    if a.drifts is None:
        return []
    rows = a.drifts[a.drifts["ruleset"] == ruleset]
    return sorted({str(k) for k in rows["kind"].dropna()})


def columns(a: Analysis, ruleset: str) -> list[str]:
    return [OVERALL, *(KIND_PREFIX + k for k in kinds(a, ruleset))]


def pair(a: Analysis, ruleset: str, subject: str, column: str = OVERALL) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The matched episodes of both arms in `column`: every matched cell, or for `kind:<kind>`
    those whose drift-arm plan (the subject's drift rows) holds that kind."""
    drift, control = matched(a, ruleset, subject)
    if column == OVERALL:
        return drift, control
    if a.drifts is None:
        return drift.iloc[0:0], control.iloc[0:0]
    rows = a.drifts
    rows = rows[
        (rows["ruleset"] == ruleset)
        & (rows["label"] == subject)
        & (rows["kind"] == column.removeprefix(KIND_PREFIX))
    ]
    planned = _cells(rows)
    return _within(drift, planned), _within(control, planned)


def _scenarios(a: Analysis, ruleset: str, rows: pd.DataFrame) -> list[str]:
    played = set(rows["scenario"])
    return [s for s in a.scenarios(ruleset) if s in played]


def _provisional(a: Analysis, ruleset: str, subject: str, scenarios: list[str]) -> bool:
    """Incomplete coverage in either arm: the drift arm's cover, or a control cell of these
    scenarios expected and not graded (missing, infra_error) or an infra_error control row."""
    if a.provisional(ruleset, subject, scenarios):
        return True
    wanted = set(scenarios)
    for cell in a.expected_control:
        if (cell["ruleset"], cell["subject"]) == (ruleset, subject) and cell["scenario"] in wanted:
            if cell.get("status") != "graded":
                return True
    c = a.control
    mine = c[(c["ruleset"] == ruleset) & (c["label"] == subject) & c["scenario"].isin(wanted)]
    return bool((mine["status"] == "infra_error").any())


def arm_stat(a: Analysis, ruleset: str, subject: str, arm: str, metric: str, column: str = OVERALL) -> Stat:
    """`metric` of `subject` in `arm` over its matched cells of `column`."""
    key = ("arm", ruleset, subject, arm, metric, column)
    cache = _cache(a)
    if key not in cache:
        drift, control = pair(a, ruleset, subject, column)
        rows = drift if arm == DRIFT else control
        scenarios = _scenarios(a, ruleset, rows)
        if not scenarios:
            cache[key] = MISSING_STAT
        else:
            flag = _provisional(a, ruleset, subject, scenarios)
            cache[key] = metric_stat(rows, metric, scenarios, flag, a.seeds_vary_task(ruleset))
    return cache[key]


def cost(a: Analysis, ruleset: str, subject: str, metric: str, column: str = OVERALL) -> Stat:
    """Drift minus control of `metric` on the matched cells of `column`, unadjusted (the Holm-
    adjusted one is `Analysis.compared(ruleset, subject, CONTROL_REFERENCE, metric, column)`)."""
    key = ("cost", ruleset, subject, metric, column)
    cache = _cache(a)
    if key not in cache:
        drift, control = pair(a, ruleset, subject, column)
        scenarios = _scenarios(a, ruleset, drift)
        if not scenarios:
            cache[key] = MISSING_STAT
        else:
            flag = _provisional(a, ruleset, subject, scenarios)
            vary = a.seeds_vary_task(ruleset)
            cache[key] = paired_stat(drift, control, metric, scenarios, flag, vary)
    return cache[key]


def matched_episodes(a: Analysis, ruleset: str, subject: str, column: str = OVERALL) -> int:
    """How many episode pairs (one per arm at one cell) `column` holds."""
    return len(pair(a, ruleset, subject, column)[0])


def cost_verdict(stat: Stat) -> str:
    """`stats.verdict` of a drift cost, its sign in words: worse or better under drift, not
    separable at this size (detectable >= X), or no test (replays)."""
    text = verdict(stat)
    return VERDICTS.get(text, text)


def members(a: Analysis) -> Iterator[tuple[str, str, str, str, str]]:
    """The `drift cost` family: every subject's overall cost, both metrics."""
    for ruleset in a.rulesets:
        for subject in subjects(a, ruleset):
            yield from ((ruleset, subject, CONTROL_REFERENCE, m, OVERALL) for m in METRICS)


def members_by_kind(a: Analysis) -> Iterator[tuple[str, str, str, str, str]]:
    """The `drift cost by kind` family: every subject's cost per drift kind, both metrics."""
    for ruleset in a.rulesets:
        for subject in subjects(a, ruleset):
            for column in columns(a, ruleset)[1:]:
                if matched_episodes(a, ruleset, subject, column):
                    yield from ((ruleset, subject, CONTROL_REFERENCE, m, column) for m in METRICS)
