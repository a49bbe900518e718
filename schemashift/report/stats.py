"""The statistics of the report: what each interval estimates, and how.

Units. An episode belongs to a cell (subject, scenario, seed); with several samples per seed the
cell's samples are averaged first, so every seed weighs the same within a scenario and every
scenario weighs the same in an aggregate over scenarios (tiers, overall).

The benchmark estimand. The scenarios are fixed (they are the benchmark); the seeds of a scenario
are a sample of its task instances. A mean over scenarios S is the stratified mean
m = (1/|S|) sum_s m_s of the scenarios' seed means m_s, and its 95% interval answers "what would
this subject score on these scenarios over all their seeds". It comes from the seeds alone,
by a method chosen by simulation at the sizes the benchmark runs (benchmarks/interval_coverage.py,
at least 93% coverage at nominal 95%):

- `bounded`: metrics whose episodes lie in [0, 1] (success, score, pass^k): Clopper-Pearson bounds
  on the effective number of seeds (`bounded_interval`); they hold without observed variation
  and give 0/n and n/n a bound with any number of samples per seed;
- `t`: other metrics, a Student-t interval m +- t(df) * SE with SE^2 = sum_s var_s / (n_s |S|^2)
  and Welch-Satterthwaite df; none, with a note, where the seeds show no variation or a
  scenario has one seed.

Replays are not trials. Where a ruleset's seeds do not vary the task (legacy), a scenario's seeds
are attempts at one task and identical episodes are one episode replayed (`episode_units`): n
counts distinct episodes, and where every scenario replays a single episode there is no interval
(`REPLAYS`), only the mean.

Paired differences (`paired_stat`) on the cells both subjects graded: for [0, 1] metrics
Newcombe's square-and-add interval from the two sides' bounded intervals (`mover`) and the p-value
that inverts it; otherwise the stratified t on the per-cell differences (the exact sign test where
they show no variation). `adjust` applies Holm within one family (one question, so a comparison
has one adjusted p-value wherever it is shown) and gives each comparison its minimum detectable
difference at 80% power (`detectable`); `verdict` reads beats / loses from the adjusted p-value,
and otherwise "not separable at this size (detectable >= X)", never a tie.

`generalisation_stat` answers another question, "new scenarios like these": a t interval over
the scenario means (df = |S| - 1), given only where there are at least `MIN_GENERALISATION`
scenarios and always labelled as such; fewer scenarios give the spread between them instead.

`savings_stat` (efficiency) is a ratio over cells, 1 - sum(subject) / sum(reference) over the
cells both solved; its interval is a stratified percentile bootstrap (the cells of each scenario
resampled with replacement, `samples` replicates from `numpy.random.default_rng(seed)`).

pass^k (the chance that k independent attempts at a task all succeed) uses the unbiased
estimator per cell with n graded samples of which c succeeded: C(c, k) / C(n, k), aggregated like
any metric; it is defined only where every cell has at least k samples.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from math import comb
from typing import TYPE_CHECKING

from schemashift.report.distributions import LEVEL, clopper_pearson, sign_test_p, t_ppf, t_sf2, z_ppf

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

ALPHA = 1.0 - LEVEL
PASS_K = (1, 2, 3, 4)
#: fewest scenarios for which an interval over scenarios (generalisation) is given
MIN_GENERALISATION = 5
#: metrics that are rates (0/1 per episode): their means lie in [0, 1], differences in [-1, 1]
RATES = ("success", "binary")
#: metrics whose episodes score in [0, 1]: their means get `bounded` intervals, their differences
#: `mover` ones (where every value is inside [0, 1]; a value outside falls back to `t`)
BOUNDED = (*RATES, "score")
UNIT = (0.0, 1.0)
#: the power at which a comparison's minimum detectable difference is given
POWER = 0.8
NO_VARIATION = "no variation observed"
ONE_SEED = "one seed in a scenario: no interval"
REPLAYS = "replays"
#: the episode columns that tell two episodes of one task apart (a replay repeats all of them)
SIGNATURE = ("success", "score", "steps", "tool_calls", "failed_calls", "tokens_out", "final_action")


@dataclass(frozen=True)
class Stat:
    """A mean with its interval over `n` units (graded episodes, cells for pass^k, pairs for a
    difference); mean None when it cannot be computed. `provisional`: computed over incomplete
    coverage. `method`: how the interval was made (`bounded`, `mover`, `t`, `bootstrap`,
    `generalisation`), None where there is none, and then `note` says why. `p_value`: for a
    difference, two-sided against 0 (`p_adjusted` after Holm within its `family`, the question it
    answers); `detectable`: the smallest true difference its test finds with 80% power at its
    size and Holm family."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    provisional: bool = False
    method: str | None = None
    note: str | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    family: str | None = None
    detectable: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None


MISSING_STAT = Stat(None, None, None, 0)


# -- the stratified estimator ------------------------------------------------------------------------


def _standard_error(groups: Sequence[np.ndarray]) -> tuple[float, float] | None:
    """The standard error of the mean of the groups' means, from the variance within each group,
    and its Welch-Satterthwaite degrees of freedom (every group has two values or more); None
    where the variance is below what floats resolve."""
    shares = [float(g.var(ddof=1)) / len(g) for g in groups]
    spread = sum(v * v / (len(g) - 1) for v, g in zip(shares, groups, strict=True))
    if sum(shares) <= 0.0 or spread <= 0.0:
        return None
    return math.sqrt(sum(shares)) / len(groups), sum(shares) ** 2 / spread


def bounded_interval(
    groups: Sequence[np.ndarray], level: float = LEVEL, units: Sequence[int] | None = None
) -> tuple[float, float]:
    """Bounds of the mean of the groups' means of values in [0, 1]: Clopper-Pearson on the
    effective number of units, m * N successes of N = |S|^2 / sum_s 1/n_s (Kish's for weights
    1/(|S| n_s)). A unit's mean has variance at most mu (1 - mu), a 0/1 value's, so the bounds hold
    for any [0, 1] values, with or without variation, and for 0/n and n/n. `units`: per group, how
    many independent units it holds (default: its values)."""
    sizes = [len(g) for g in groups] if units is None else list(units)
    effective = len(groups) ** 2 / sum(1.0 / size for size in sizes)
    mean = sum(float(g.mean()) for g in groups) / len(groups)
    return clopper_pearson(min(max(mean, 0.0), 1.0) * effective, effective, level)


def _inside(groups: Sequence[np.ndarray], bounds: tuple[float, float] | None) -> bool:
    return bounds == UNIT and all(float(g.min()) >= 0.0 and float(g.max()) <= 1.0 for g in groups)


def stratified_stat(
    groups: Sequence[np.ndarray],
    n: int,
    provisional: bool = False,
    level: float = LEVEL,
    bounds: tuple[float, float] | None = None,
    units: Sequence[int] | None = None,
) -> Stat:
    """The mean of the groups' means (scenarios: values = seed means) over fixed groups, with its
    interval from the values within each group; missing when some group is empty. `bounds`: the
    range of the metric; [0, 1], where every value lies in it, gets `bounded_interval` (over
    `units` per group), anything else the t interval."""
    if not groups or any(len(g) == 0 for g in groups):
        return Stat(None, None, None, n, provisional)
    mean = _stratified_mean(groups)
    if _inside(groups, bounds):
        low, high = bounded_interval(groups, level, units)
        return Stat(mean, low, high, n, provisional, "bounded")
    if min(len(g) for g in groups) < 2:
        return Stat(mean, None, None, n, provisional, note=ONE_SEED)
    error = None if all(float(g.max() - g.min()) == 0.0 for g in groups) else _standard_error(groups)
    if error is None:
        return Stat(mean, None, None, n, provisional, note=NO_VARIATION)
    se, df = error
    half = t_ppf(1.0 - (1.0 - level) / 2.0, df) * se
    low, high = mean - half, mean + half
    if not low < high:  # a spread below the resolution of the mean
        return Stat(mean, None, None, n, provisional, note=NO_VARIATION)
    return Stat(mean, low, high, n, provisional, "t")


def difference_stat(
    groups: Sequence[np.ndarray],
    n: int,
    provisional: bool = False,
    bounds: tuple[float, float] | None = None,
) -> Stat:
    """A stratified mean of per-cell differences with its t interval and two-sided p-value
    against 0; where the differences show no variation, the exact sign test's p-value."""
    stat = stratified_stat(groups, n, provisional)
    if stat.mean is None:
        return stat
    if stat.method == "t":
        if bounds is not None:
            stat = replace(stat, ci_low=max(stat.ci_low, bounds[0]), ci_high=min(stat.ci_high, bounds[1]))
        se, df = _standard_error(groups)  # an interval was given, so the variance is resolved
        return replace(stat, p_value=t_sf2(stat.mean / se, df))
    values = [float(v) for g in groups for v in g]
    positive, negative = sum(v > 0 for v in values), sum(v < 0 for v in values)
    return replace(stat, p_value=sign_test_p(positive, negative))


def mover_stat(
    mine: Sequence[np.ndarray],
    theirs: Sequence[np.ndarray],
    n: int,
    provisional: bool = False,
    units: tuple[Sequence[int] | None, Sequence[int] | None] = (None, None),
    level: float = LEVEL,
    test: bool = True,
) -> Stat:
    """The difference of two stratified means of [0, 1] values (the same cells on both sides),
    with Newcombe's square-and-add (MOVER) interval from the two sides' `bounded_interval`s and
    the p-value that inverts it (the largest level whose interval still holds 0). It ignores the
    pairing, so it is conservative where the two sides are correlated, as on shared cells.
    `test` False skips the p-value (its bisection), for simulations that need only the interval."""
    a, b = _stratified_mean(mine), _stratified_mean(theirs)
    difference = a - b

    def interval(at: float) -> tuple[float, float]:
        a_low, a_high = bounded_interval(mine, at, units[0])
        b_low, b_high = bounded_interval(theirs, at, units[1])
        low = difference - math.hypot(a - a_low, b_high - b)
        high = difference + math.hypot(a_high - a, b - b_low)
        return max(low, -1.0), min(high, 1.0)

    low, high = interval(level)
    p_value = _inverted_p(interval, difference) if test else None
    return Stat(difference, low, high, n, provisional, "mover", p_value=p_value)


def _stratified_mean(groups: Sequence[np.ndarray]) -> float:
    return sum(float(g.mean()) for g in groups) / len(groups)


def _inverted_p(interval: Callable[[float], tuple[float, float]], difference: float) -> float:
    """Two-sided p-value of "no difference" from nested intervals: 1 minus the lowest level whose
    interval holds 0 (bisection to 1e-4; 1e-4 where even the 0.9999 interval excludes 0)."""

    def holds_zero(level: float) -> bool:
        low, high = interval(level)
        return low <= 0.0 <= high

    if difference == 0.0 or holds_zero(1e-4):
        return 1.0
    if not holds_zero(1.0 - 1e-4):
        return 1e-4
    low, high = 1e-4, 1.0 - 1e-4  # excludes 0 at low, holds it at high
    while high - low > 1e-4:
        mid = (low + high) / 2.0
        if holds_zero(mid):
            high = mid
        else:
            low = mid
    return 1.0 - high


@dataclass(frozen=True)
class RepeatsStat:
    """A training method's estimate from R repeats of one run (each its own training seed): the
    mean of the repeats' means with a t interval over them (df R - 1: training and evaluation
    noise together), the spread between repeats, the evaluation noise within them, and the part
    of the spread evaluation noise does not explain (training variance, a moment estimate). One
    repeat gives no interval over training seeds: `note` says so."""

    pooled: Stat
    repeats: int
    between_sd: float | None
    evaluation_se: float | None
    training_sd: float | None


def repeats_stat(
    means: Sequence[float], evaluation_ses: Sequence[float | None], n: int, level: float = LEVEL
) -> RepeatsStat:
    """Pool the repeats' means (`means`, one per repeat; `evaluation_ses`: the standard error of
    each repeat's mean over its evaluation seeds, None where no variation was observed)."""
    count = len(means)
    if count == 0:
        return RepeatsStat(Stat(None, None, None, n), 0, None, None, None)
    mean = sum(means) / count
    known = [se for se in evaluation_ses if se is not None]
    evaluation_se = math.sqrt(sum(se * se for se in known) / len(known)) if known else None
    if count == 1:
        note = "one training run: an observation of this run, not of the training method"
        return RepeatsStat(Stat(mean, None, None, n, note=note), 1, None, evaluation_se, None)
    between_var = sum((m - mean) ** 2 for m in means) / (count - 1)
    between_sd = math.sqrt(between_var)
    training_sd = math.sqrt(max(0.0, between_var - (evaluation_se or 0.0) ** 2))
    if between_sd <= 1e-12 * max(1.0, abs(mean)):
        pooled = Stat(mean, None, None, n, note=f"{NO_VARIATION} between the repeats")
    else:
        half = t_ppf(0.5 + level / 2, count - 1) * between_sd / math.sqrt(count)
        pooled = Stat(mean, mean - half, mean + half, n, method="t")
    return RepeatsStat(pooled, count, between_sd, evaluation_se, training_sd)


def standard_error(rows: pd.DataFrame, metric: str, scenarios: Sequence[str]) -> float | None:
    """The standard error of the stratified mean of `metric` over `scenarios` (seeds resampled
    within each scenario), None where no variation was observed or a scenario has under 2 seeds."""
    groups, _ = seed_means(rows, metric, scenarios)
    if not groups or any(len(g) < 2 for g in groups):
        return None
    found = _standard_error(groups)
    return found[0] if found else None


def generalisation_stat(
    scenario_means: Sequence[float], n: int, level: float = LEVEL, bounds: tuple[float, float] | None = None
) -> Stat:
    """Interval for the mean over new scenarios like these: t over the scenario means, df |S| - 1,
    cut to `bounds` (the range the mean cannot leave); none below MIN_GENERALISATION scenarios
    (too few to say anything about others)."""
    means = [float(m) for m in scenario_means]
    if not means:
        return MISSING_STAT
    mean = sum(means) / len(means)
    if len(means) < MIN_GENERALISATION:
        return Stat(mean, None, None, n, note=f"{len(means)} scenarios: too few for an interval over them")
    if max(means) == min(means):
        return Stat(mean, None, None, n, note=NO_VARIATION)
    variance = sum((m - mean) ** 2 for m in means) / (len(means) - 1)
    half = t_ppf(1.0 - (1.0 - level) / 2.0, len(means) - 1) * math.sqrt(variance / len(means))
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return Stat(mean, low, high, n, method="generalisation")


def holm(p_values: Sequence[float | None]) -> list[float | None]:
    """Holm's step-down adjustment of one family of p-values (None stays None)."""
    present = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    adjusted: list[float | None] = [None] * len(p_values)
    running = 0.0
    m = len(present)
    for rank, (p, i) in enumerate(present):
        running = max(running, min(1.0, (m - rank) * p))
        adjusted[i] = running
    return adjusted


def adjust(stats: Sequence[Stat], family: str | None = None) -> list[Stat]:
    """The stats of one family of comparisons (one question) with their Holm-adjusted p-values and
    minimum detectable differences at the family's size."""
    adjusted = holm([s.p_value for s in stats])
    size = sum(p is not None for p in adjusted)
    return [
        replace(s, p_adjusted=p, family=family, detectable=detectable(s, size))
        for s, p in zip(stats, adjusted, strict=True)
    ]


def detectable(diff: Stat, comparisons: int, alpha: float = ALPHA, power: float = POWER) -> float | None:
    """The smallest true difference a test of `diff`'s precision finds with probability `power`
    at the first (strictest) Holm level alpha / comparisons: (z(1 - alpha / 2m) + z(power)) * se,
    se read off the 95% interval's width as a normal standard error. None without an interval."""
    if not diff.has_interval or comparisons < 1:
        return None
    se = (diff.ci_high - diff.ci_low) / (2.0 * z_ppf(1.0 - ALPHA / 2.0))
    return (z_ppf(1.0 - alpha / (2.0 * comparisons)) + z_ppf(power)) * se


NOT_SEPARABLE = "not separable at this size"


def verdict(diff: Stat, alpha: float = ALPHA) -> str:
    """beats / loses when the (Holm-adjusted where adjusted) p-value is below alpha, by the sign of
    the difference; otherwise not separable at this size, with the difference it could have
    detected; n/a without a difference, no test where there is no p-value (replays)."""
    if diff.mean is None:
        return "n/a"
    p = diff.p_adjusted if diff.p_adjusted is not None else diff.p_value
    if p is None:
        return f"no test ({diff.note})" if diff.note else "no test"
    if p < alpha and diff.mean != 0:
        return "beats" if diff.mean > 0 else "loses"
    if diff.detectable is None:
        return NOT_SEPARABLE
    return f"{NOT_SEPARABLE} (detectable >= {diff.detectable:.2f})"


# -- from result rows --------------------------------------------------------------------------------


def seed_means(rows: pd.DataFrame, metric: str, scenarios: Sequence[str]) -> tuple[list[np.ndarray], int]:
    """Per scenario, the per-seed means of `metric` over graded rows (nulls dropped), and the
    number of episodes behind them."""
    import numpy as np

    values = rows[["scenario", "seed", metric]].dropna(subset=[metric])
    grouped = values.groupby(["scenario", "seed"], sort=True)[metric].mean()
    groups = []
    for scenario in scenarios:
        part = grouped[grouped.index.get_level_values(0) == scenario] if len(grouped) else grouped
        groups.append(np.asarray(part.to_numpy(), dtype=float))
    n = int(values["scenario"].isin(list(scenarios)).sum())
    return groups, n


def episode_units(
    rows: pd.DataFrame, scenarios: Sequence[str], seeds_vary_task: bool = True
) -> tuple[list[int] | None, int]:
    """Per scenario, how many independent units its seeds hold, and the number of distinct
    episodes. Where the seeds do not vary the task, a scenario's seeds are attempts at one task,
    and identical episodes (by `SIGNATURE`) are replays, not new trials: its units are its
    distinct episodes (at most its seeds). Otherwise each seed is a unit (units None) and a
    seed's identical samples count once."""
    wanted = set(scenarios)
    columns = [c for c in SIGNATURE if c in rows.columns]
    episodes: dict[str, set[tuple]] = {}
    seeds: dict[str, set[int]] = {}
    for row in zip(rows["scenario"], rows["seed"], *(rows[c] for c in columns), strict=True):
        if row[0] in wanted:
            # NaN != NaN: write missing values as None so that two replays compare equal
            key = tuple(None if v != v else v for v in row[2:])
            episodes.setdefault(row[0], set()).add((row[1], *key) if seeds_vary_task else key)
            seeds.setdefault(row[0], set()).add(row[1])
    distinct = sum(len(found) for found in episodes.values())
    if seeds_vary_task:
        return None, distinct
    return [min(len(seeds.get(s, ())), len(episodes.get(s, ()))) for s in scenarios], distinct


def replay_stat(mean: float, distinct: int, provisional: bool = False) -> Stat:
    """A mean over replays: every scenario's seeds replay one episode, so there is no sample to
    give an interval from; n counts the distinct episodes."""
    return Stat(mean, None, None, distinct, provisional, note=REPLAYS)


def metric_stat(
    rows: pd.DataFrame,
    metric: str,
    scenarios: Sequence[str],
    provisional: bool = False,
    seeds_vary_task: bool = True,
) -> Stat:
    """The mean of `metric` over `scenarios` (graded rows of one subject) with its interval; n is
    the number of distinct episodes (see `episode_units`)."""
    groups, _ = seed_means(rows, metric, scenarios)
    units, distinct = episode_units(rows, scenarios, seeds_vary_task)
    stat = stratified_stat(
        groups, distinct, provisional, bounds=UNIT if metric in BOUNDED else None, units=units
    )
    if units is not None and stat.mean is not None and max(units) <= 1:
        return replay_stat(stat.mean, distinct, provisional)
    return stat


def paired_stat(
    rows: pd.DataFrame,
    reference: pd.DataFrame,
    metric: str,
    scenarios: Sequence[str],
    provisional: bool = False,
    seeds_vary_task: bool = True,
) -> Stat:
    """Mean difference `rows - reference` over the (scenario, seed) cells both have graded,
    stratified by scenario, n the number of pairs; missing when a scenario has none. Values in
    [0, 1] get `mover_stat`, others the stratified t on the cell differences; replays on both
    sides give the difference without a test."""
    import numpy as np

    def cells(frame: pd.DataFrame) -> pd.Series:
        values = frame[["scenario", "seed", metric]].dropna(subset=[metric])
        values = values[values["scenario"].isin(list(scenarios))]
        return values.groupby(["scenario", "seed"], sort=True)[metric].mean()

    mine, theirs = cells(rows), cells(reference)
    shared = mine.index.intersection(theirs.index)
    mine, theirs = mine.loc[shared], theirs.loc[shared]

    def split(series: pd.Series) -> list[np.ndarray]:
        if not len(series):
            return [np.array([]) for _ in scenarios]
        where = series.index.get_level_values(0)
        return [np.asarray(series[where == s].to_numpy(), dtype=float) for s in scenarios]

    a, b = split(mine), split(theirs)
    pairs = len(shared)
    if not scenarios or any(len(g) == 0 for g in a):
        return Stat(None, None, None, pairs, provisional)
    units = [None, None]
    if not seeds_vary_task:
        keys = set(shared)
        for side, frame in enumerate((rows, reference)):
            played = frame[[key in keys for key in zip(frame["scenario"], frame["seed"], strict=True)]]
            units[side] = episode_units(played, scenarios, False)[0]
        if max(units[0]) <= 1 and max(units[1]) <= 1:
            difference = _stratified_mean(a) - _stratified_mean(b)
            return Stat(difference, None, None, pairs, provisional, note=REPLAYS)
    if metric in BOUNDED and _inside(a + b, UNIT):
        return mover_stat(a, b, pairs, provisional, (units[0], units[1]))
    differences = [x - y for x, y in zip(a, b, strict=True)]
    return difference_stat(differences, pairs, provisional, (-1.0, 1.0) if metric in RATES else None)


def scenario_spread(rows: pd.DataFrame, metric: str, scenarios: Sequence[str]) -> dict[str, float | None]:
    """Between-scenario spread of one subject's scenario means: how many, their standard
    deviation, lowest and highest (None where no scenario has a graded episode)."""
    groups, _ = seed_means(rows, metric, scenarios)
    means = [float(g.mean()) for g in groups if len(g)]
    if not means:
        return {"scenarios": 0, "sd": None, "min": None, "max": None}
    mean = sum(means) / len(means)
    sd = math.sqrt(sum((m - mean) ** 2 for m in means) / (len(means) - 1)) if len(means) > 1 else None
    return {"scenarios": len(means), "sd": sd, "min": min(means), "max": max(means)}


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k from n samples with c successes: C(c, k) / C(n, k) (n >= k)."""
    if not 0 <= c <= n or k < 1 or n < k:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return comb(c, k) / comb(n, k)


def pass_k_stat(
    rows: pd.DataFrame,
    k: int,
    scenarios: Sequence[str],
    provisional: bool = False,
    seeds_vary_task: bool = True,
) -> Stat:
    """pass^k over `scenarios` from the graded rows of one subject; missing where a cell has fewer
    than k samples or a scenario has no graded cell. n is the number of cells."""
    import numpy as np

    values = rows[["scenario", "seed", "success"]].dropna(subset=["success"])
    values = values[values["scenario"].isin(list(scenarios))]
    counts = values.groupby(["scenario", "seed"], sort=True)["success"].agg(["count", "sum"])
    if len(counts) == 0 or int(counts["count"].min()) < k:
        return Stat(None, None, None, int(len(counts)), provisional)
    estimates = [pass_hat_k(int(n), int(c), k) for n, c in zip(counts["count"], counts["sum"], strict=True)]
    series = counts.assign(estimate=estimates)["estimate"]
    groups = [
        np.asarray(series[series.index.get_level_values(0) == s].to_numpy(), dtype=float) for s in scenarios
    ]
    units = episode_units(values, scenarios, seeds_vary_task)[0]
    if units is not None and max(units) <= 1:
        return replay_stat(_stratified_mean(groups), len(scenarios), provisional)
    return stratified_stat(groups, int(len(counts)), provisional, bounds=UNIT, units=units)


def savings_stat(
    subject: np.ndarray,
    reference: np.ndarray,
    strata: np.ndarray,
    samples: int,
    seed: int,
    provisional: bool = False,
    level: float = LEVEL,
) -> Stat:
    """1 - sum(subject) / sum(reference) over paired cells (the cost of each on the cells both
    solved), with a stratified percentile bootstrap: each replicate draws, within every stratum
    (scenario), as many cells as it has, with replacement. Missing without cells or reference
    cost; no interval where the replicates show no variation."""
    import numpy as np

    if samples < 1:
        raise ValueError(f"bootstrap samples must be at least 1, got {samples}")
    subject = np.asarray(subject, dtype=float)
    reference = np.asarray(reference, dtype=float)
    strata = np.asarray(strata)
    n = int(subject.size)
    if n == 0 or reference.sum() <= 0:
        return Stat(None, None, None, n, provisional)
    mean = float(1.0 - subject.sum() / reference.sum())
    rng = np.random.default_rng(seed)
    mine = np.zeros(samples)
    theirs = np.zeros(samples)
    for stratum in sorted(set(strata.tolist())):
        index = np.flatnonzero(strata == stratum)
        draw = index[rng.integers(0, index.size, size=(samples, index.size))]
        mine += subject[draw].sum(axis=1)
        theirs += reference[draw].sum(axis=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        replicates = 1.0 - mine / theirs
    replicates = replicates[np.isfinite(replicates)]
    if replicates.size == 0 or float(replicates.max() - replicates.min()) == 0.0:
        return Stat(mean, None, None, n, provisional, note=NO_VARIATION)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(replicates, [alpha, 1.0 - alpha])
    return Stat(mean, float(low), float(high), n, provisional, "bootstrap")
