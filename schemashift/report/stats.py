"""The statistics of the report: what each interval estimates, and how.

Units. An episode belongs to a cell (subject, scenario, seed); with several samples per seed the
cell's samples are averaged first, so every seed weighs the same within a scenario and every
scenario weighs the same in an aggregate over scenarios (tiers, overall).

The benchmark estimand. The scenarios are fixed (they are the benchmark); the seeds of a scenario
are a sample of its task instances. A mean over scenarios S is the stratified mean
m = (1/|S|) sum_s m_s of the scenarios' seed means m_s, and its 95% interval answers "what would
this subject score on these scenarios over all their seeds". It comes from the seeds alone:

- `exact`: success rates whose cells are 0/1 (one sample per seed) with the same number of seeds
  in every scenario: Clopper-Pearson bounds on the pooled successes (the stratified mean is then
  the pooled proportion; the bounds are conservative for a stratified design);
- `t`: otherwise a Student-t interval, m +- t(df) * SE with SE^2 = sum_s var_s / (n_s |S|^2)
  (var_s the sample variance of scenario s's seed means) and Welch-Satterthwaite df (a rate's
  t interval is cut to [0, 1], a difference of rates to [-1, 1]);
- no interval, with a note, where the seeds show no variation (`NO_VARIATION`: every scenario's
  seed means are equal; a zero-width interval would read as certainty) or a scenario has one seed.

Paired differences (`paired_stat`: a checkpoint against step 0, a model against a baseline) use
the same stratified t on the per-cell differences and carry a two-sided p-value; where the
differences show no variation the p-value is the exact sign test's (every cell on one side).
`holm` adjusts the p-values of one table's comparisons (Holm's step-down) and `verdict` reads
beats / ties / loses from the adjusted p-value and the sign of the difference.

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
from collections.abc import Sequence
from dataclasses import dataclass, replace
from math import comb
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

LEVEL = 0.95
ALPHA = 1.0 - LEVEL
PASS_K = (1, 2, 3, 4)
#: fewest scenarios for which an interval over scenarios (generalisation) is given
MIN_GENERALISATION = 5
#: metrics that are rates (0/1 per episode): their means lie in [0, 1], differences in [-1, 1]
RATES = ("success", "binary")
NO_VARIATION = "no variation observed"
ONE_SEED = "one seed in a scenario: no interval"


@dataclass(frozen=True)
class Stat:
    """A mean with its interval over `n` units (graded episodes, cells for pass^k, pairs for a
    difference); mean None when it cannot be computed. `provisional`: computed over incomplete
    coverage. `method`: how the interval was made (`exact`, `t`, `bootstrap`, `generalisation`),
    None where there is none, and then `note` says why. `p_value`: for a difference, two-sided
    against 0 (`p_adjusted` after Holm within its table)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    provisional: bool = False
    method: str | None = None
    note: str | None = None
    p_value: float | None = None
    p_adjusted: float | None = None

    @property
    def has_interval(self) -> bool:
        return self.ci_low is not None and self.ci_high is not None


MISSING_STAT = Stat(None, None, None, 0)


# -- distributions (no scipy in the report's dependencies) -----------------------------------------


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 1000):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def beta_cdf(x: float, a: float, b: float) -> float:
    """The regularised incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def _invert(cdf, target: float, low: float, high: float) -> float:
    """The x in [low, high] where the increasing `cdf` reaches `target` (bisection)."""
    for _ in range(200):
        mid = (low + high) / 2.0
        if cdf(mid) < target:
            low = mid
        else:
            high = mid
        if high - low < 1e-13:
            break
    return (low + high) / 2.0


def beta_ppf(q: float, a: float, b: float) -> float:
    return _invert(lambda x: beta_cdf(x, a, b), q, 0.0, 1.0)


def t_sf2(t: float, df: float) -> float:
    """Two-sided tail P(|T| >= |t|) of Student's t with `df` (real) degrees of freedom."""
    return beta_cdf(df / (df + t * t), df / 2.0, 0.5)


def t_ppf(q: float, df: float) -> float:
    """Quantile of Student's t (q in (0.5, 1))."""
    target = 2.0 * (1.0 - q)  # two-sided tail at the quantile
    high = 1.0
    while t_sf2(high, df) > target:
        high *= 2.0
    return _invert(lambda t: -t_sf2(t, df), -target, 0.0, high)


def clopper_pearson(successes: int, n: int, level: float = LEVEL) -> tuple[float, float]:
    """Exact binomial bounds of a success rate."""
    if not 0 <= successes <= n or n < 1:
        raise ValueError(f"Clopper-Pearson needs 0 <= successes <= n and n >= 1, got {successes}/{n}")
    alpha = 1.0 - level
    low = 0.0 if successes == 0 else beta_ppf(alpha / 2.0, successes, n - successes + 1)
    high = 1.0 if successes == n else beta_ppf(1.0 - alpha / 2.0, successes + 1, n - successes)
    return low, high


def sign_test_p(positive: int, negative: int) -> float:
    """Exact two-sided sign test of `positive` against `negative` non-zero differences."""
    n = positive + negative
    if n == 0:
        return 1.0
    k = min(positive, negative)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


# -- the stratified estimator ------------------------------------------------------------------------


def _binary(groups: Sequence[np.ndarray]) -> bool:
    return all(((g == 0.0) | (g == 1.0)).all() for g in groups)


def _standard_error(groups: Sequence[np.ndarray]) -> tuple[float, float] | None:
    """The standard error of the mean of the groups' means, from the variance within each group,
    and its Welch-Satterthwaite degrees of freedom (every group has two values or more); None
    where the variance is below what floats resolve."""
    shares = [float(g.var(ddof=1)) / len(g) for g in groups]
    spread = sum(v * v / (len(g) - 1) for v, g in zip(shares, groups, strict=True))
    if sum(shares) <= 0.0 or spread <= 0.0:
        return None
    return math.sqrt(sum(shares)) / len(groups), sum(shares) ** 2 / spread


def stratified_stat(
    groups: Sequence[np.ndarray],
    n: int,
    provisional: bool = False,
    exact: bool = False,
    level: float = LEVEL,
    bounds: tuple[float, float] | None = None,
) -> Stat:
    """The mean of the groups' means (scenarios: values = seed means) over fixed groups, with its
    interval from the values within each group; missing when some group is empty. `exact`: the
    values are success indicators (one sample per seed), so equal-sized 0/1 groups get
    Clopper-Pearson bounds. `bounds`: the range the mean cannot leave (a t interval is cut to it)."""
    if not groups or any(len(g) == 0 for g in groups):
        return Stat(None, None, None, n, provisional)
    k = len(groups)
    mean = float(sum(float(g.mean()) for g in groups) / k)
    sizes = {len(g) for g in groups}
    if exact and len(sizes) == 1 and _binary(groups):
        successes = int(round(sum(float(g.sum()) for g in groups)))
        low, high = clopper_pearson(successes, sum(len(g) for g in groups), level)
        return Stat(mean, low, high, n, provisional, "exact")
    if min(sizes) < 2:
        return Stat(mean, None, None, n, provisional, note=ONE_SEED)
    error = None if all(float(g.max() - g.min()) == 0.0 for g in groups) else _standard_error(groups)
    if error is None:
        return Stat(mean, None, None, n, provisional, note=NO_VARIATION)
    se, df = error
    half = t_ppf(1.0 - (1.0 - level) / 2.0, df) * se
    low, high = mean - half, mean + half
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
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
    stat = stratified_stat(groups, n, provisional, bounds=bounds)
    if stat.mean is None:
        return stat
    if stat.method == "t":
        se, df = _standard_error(groups)  # an interval was given, so the variance is resolved
        return replace(stat, p_value=t_sf2(stat.mean / se, df))
    values = [float(v) for g in groups for v in g]
    positive, negative = sum(v > 0 for v in values), sum(v < 0 for v in values)
    return replace(stat, p_value=sign_test_p(positive, negative))


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


def generalisation_stat(scenario_means: Sequence[float], n: int, level: float = LEVEL) -> Stat:
    """Interval for the mean over new scenarios like these: t over the scenario means, df |S| - 1;
    none below MIN_GENERALISATION scenarios (too few to say anything about others)."""
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
    return Stat(mean, mean - half, mean + half, n, method="generalisation")


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


def adjust(stats: Sequence[Stat]) -> list[Stat]:
    """The stats of one table's comparisons with their Holm-adjusted p-values."""
    adjusted = holm([s.p_value for s in stats])
    return [replace(s, p_adjusted=p) for s, p in zip(stats, adjusted, strict=True)]


def verdict(diff: Stat, alpha: float = ALPHA) -> str:
    """beats / loses when the (Holm-adjusted where adjusted) p-value is below alpha, by the sign of
    the difference; ties otherwise; n/a without a difference."""
    if diff.mean is None:
        return "n/a"
    p = diff.p_adjusted if diff.p_adjusted is not None else diff.p_value
    if p is None or p >= alpha or diff.mean == 0:
        return "ties"
    return "beats" if diff.mean > 0 else "loses"


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


def metric_stat(rows: pd.DataFrame, metric: str, scenarios: Sequence[str], provisional: bool = False) -> Stat:
    """The mean of `metric` over `scenarios` (graded rows of one subject) with its interval;
    success rates get exact bounds where every cell is one 0/1 episode."""
    groups, n = seed_means(rows, metric, scenarios)
    rate = metric in RATES
    exact = rate and n == sum(len(g) for g in groups)
    return stratified_stat(groups, n, provisional, exact=exact, bounds=(0.0, 1.0) if rate else None)


def cell_differences(
    rows: pd.DataFrame, reference: pd.DataFrame, metric: str, scenarios: Sequence[str]
) -> pd.Series:
    """Per (scenario, seed) cell both graded, the difference of the two subjects' cell means."""

    def cells(frame: pd.DataFrame) -> pd.Series:
        values = frame[["scenario", "seed", metric]].dropna(subset=[metric])
        values = values[values["scenario"].isin(list(scenarios))]
        return values.groupby(["scenario", "seed"], sort=True)[metric].mean()

    return (cells(rows) - cells(reference)).dropna()


def paired_stat(
    rows: pd.DataFrame,
    reference: pd.DataFrame,
    metric: str,
    scenarios: Sequence[str],
    provisional: bool = False,
) -> Stat:
    """Mean difference `rows - reference` over the cells both have graded, stratified by
    scenario, with its p-value; n is the number of pairs. Missing when a scenario has none."""
    import numpy as np

    diff = cell_differences(rows, reference, metric, scenarios)
    groups = [
        np.asarray(diff[diff.index.get_level_values(0) == s].to_numpy(), dtype=float)
        if len(diff)
        else np.array([])
        for s in scenarios
    ]
    return difference_stat(groups, int(len(diff)), provisional, (-1.0, 1.0) if metric in RATES else None)


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


def pass_k_stat(rows: pd.DataFrame, k: int, scenarios: Sequence[str], provisional: bool = False) -> Stat:
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
    exact = k == 1 and int(counts["count"].max()) == 1
    return stratified_stat(groups, int(len(counts)), provisional, exact=exact, bounds=(0.0, 1.0))


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
