"""The statistics of the report: clustered bootstrap intervals, paired differences and pass^k.

Units. An episode belongs to a cell (subject, scenario, seed); with several samples per seed the
cell's samples are averaged first, so every seed weighs the same within a scenario and every
scenario weighs the same in an aggregate over scenarios.

Intervals are 95% percentile bootstrap intervals from `numpy.random.default_rng(seed)`, seeded
afresh for every interval, so an interval depends only on its data and the seed:

- within one scenario the seeds are resampled (a cluster bootstrap: the samples of a seed stay
  together), `bootstrap_mean_ci` of the seed means;
- across scenarios the scenarios are resampled and, inside each drawn scenario, its seeds
  (a two-stage clustered bootstrap), `clustered_ci`; with one scenario it is the seed bootstrap.

pass^k (the chance that k independent attempts at a task all succeed) uses the unbiased
estimator per cell with n graded samples of which c succeeded: C(c, k) / C(n, k), averaged over
the cells like any other metric; it is defined only where every cell has at least k samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from math import comb
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

LEVEL = 0.95
PASS_K = (1, 2, 3, 4)


@dataclass(frozen=True)
class Stat:
    """A mean with its interval over `n` units (graded episodes, or pairs for a difference);
    mean None when it cannot be computed. `provisional`: computed over incomplete coverage."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    provisional: bool = False


MISSING_STAT = Stat(None, None, None, 0)


def _quantiles(means: np.ndarray, level: float) -> tuple[float, float]:
    import numpy as np

    alpha = round((1.0 - level) / 2.0, 12)  # 0.025 exactly for level 0.95
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


def bootstrap_mean_ci(
    values: Sequence[float] | np.ndarray, samples: int = 2000, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (at least one): `samples` rows of
    indices from `rng.integers(0, n, (samples, n))`."""
    import numpy as np

    if samples < 1:
        raise ValueError(f"bootstrap samples must be at least 1, got {samples}")
    a = np.asarray(values, dtype=float)
    if a.size == 0:
        raise ValueError("the bootstrap needs at least one value")
    rng = np.random.default_rng(seed)
    means = a[rng.integers(0, a.size, size=(samples, a.size))].mean(axis=1)
    return _quantiles(means, level)


def clustered_ci(
    groups: Sequence[Sequence[float] | np.ndarray], samples: int = 2000, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """Interval of the mean of group means (groups: scenarios, values: seed means), resampling
    the groups and, within each drawn group, its values.

    Draw order from one generator: the (samples x groups) matrix of drawn groups, then for each
    group in order a (samples x size) matrix of value indices. One group: `bootstrap_mean_ci`.
    """
    import numpy as np

    if samples < 1:
        raise ValueError(f"bootstrap samples must be at least 1, got {samples}")
    arrays = [np.asarray(g, dtype=float) for g in groups]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("every bootstrap group needs at least one value")
    if len(arrays) == 1:
        return bootstrap_mean_ci(arrays[0], samples, seed, level)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(arrays), size=(samples, len(arrays)))
    inner = np.column_stack([a[rng.integers(0, a.size, size=(samples, a.size))].mean(axis=1) for a in arrays])
    means = np.take_along_axis(inner, picks, axis=1).mean(axis=1)
    return _quantiles(means, level)


def group_stat(
    groups: Sequence[np.ndarray], n: int, samples: int, seed: int, provisional: bool = False
) -> Stat:
    """Mean of the group means with its clustered interval; missing when some group is empty."""
    if not groups or any(len(g) == 0 for g in groups):
        return Stat(None, None, None, n, provisional)
    mean = float(sum(float(g.mean()) for g in groups) / len(groups))
    low, high = clustered_ci(groups, samples, seed)
    return Stat(mean, low, high, n, provisional)


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


def metric_stat(
    rows: pd.DataFrame,
    metric: str,
    scenarios: Sequence[str],
    samples: int,
    seed: int,
    provisional: bool = False,
) -> Stat:
    """The mean of `metric` over `scenarios` (graded rows of one subject) with its interval."""
    groups, n = seed_means(rows, metric, scenarios)
    return group_stat(groups, n, samples, seed, provisional)


def paired_stat(
    rows: pd.DataFrame,
    reference: pd.DataFrame,
    metric: str,
    scenarios: Sequence[str],
    samples: int,
    seed: int,
    provisional: bool = False,
) -> Stat:
    """Mean difference `rows - reference` over the (scenario, seed) cells both have graded,
    clustered like any aggregate; n is the number of such pairs. Missing when a scenario has none."""
    import numpy as np

    def cells(frame: pd.DataFrame) -> pd.Series:
        values = frame[["scenario", "seed", metric]].dropna(subset=[metric])
        values = values[values["scenario"].isin(list(scenarios))]
        return values.groupby(["scenario", "seed"], sort=True)[metric].mean()

    diff = (cells(rows) - cells(reference)).dropna()
    groups = [
        np.asarray(diff[diff.index.get_level_values(0) == s].to_numpy(), dtype=float)
        if len(diff)
        else np.array([])
        for s in scenarios
    ]
    return group_stat(groups, int(len(diff)), samples, seed, provisional)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass^k from n samples with c successes: C(c, k) / C(n, k) (n >= k)."""
    if not 0 <= c <= n or k < 1 or n < k:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    return comb(c, k) / comb(n, k)


def pass_k_stat(
    rows: pd.DataFrame, k: int, scenarios: Sequence[str], samples: int, seed: int, provisional: bool = False
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
    return group_stat(groups, int(len(counts)), samples, seed, provisional)


def compare(diff: Stat) -> str:
    """beats / ties / loses from a paired difference's interval (ties when it holds 0 or is missing)."""
    if diff.mean is None:
        return "n/a"
    if diff.ci_low > 0:
        return "beats"
    if diff.ci_high < 0:
        return "loses"
    return "ties"
