"""The statistics of the report: per-cell means with seeded bootstrap intervals.

Every interval is a percentile bootstrap of the mean over graded episodes: episodes are
resampled with replacement within a cell, `samples` times, from a generator seeded afresh with
`seed` for every interval, so an interval depends only on its cell's values and the seed (the
tables and the figures get the same numbers). Tier and overall columns average the scenario
means of a policy (each scenario weighs the same) and resample within each scenario
(a stratified bootstrap); they are left empty when a scenario of the group has no graded episode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from schemashift.report.load import (
    catalogue_tier,
    coverage,
    manifest_cells,
    report_policies,
    sorted_scenarios,
    tier_rank,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

#: metric column of the episodes -> how tables and figures name it
METRICS = {"score": "mean score", "success": "success rate"}
LEVEL = 0.95
OVERALL = "overall"
TIER_PREFIX = "tier:"


def bootstrap_mean_ci(
    values: Sequence[float] | np.ndarray, samples: int = 2000, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of `values` (at least one value)."""
    return bootstrap_stratified_ci([values], samples, seed, level)


def bootstrap_stratified_ci(
    groups: Sequence[Sequence[float] | np.ndarray], samples: int = 2000, seed: int = 0, level: float = LEVEL
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean of the group means, resampling within each group.

    The groups draw in order from one generator seeded with `seed`: for each group, a
    (samples x size) matrix of indices from `rng.integers(0, size, ...)`. With one group this is
    the plain bootstrap of its mean.
    """
    import numpy as np

    if samples < 1:
        raise ValueError(f"bootstrap samples must be at least 1, got {samples}")
    arrays = [np.asarray(group, dtype=float) for group in groups]
    if not arrays or any(a.size == 0 for a in arrays):
        raise ValueError("every bootstrap group needs at least one value")
    rng = np.random.default_rng(seed)
    total = np.zeros(samples)
    for a in arrays:
        total += a[rng.integers(0, a.size, size=(samples, a.size))].mean(axis=1)
    means = total / len(arrays)
    alpha = round((1.0 - level) / 2.0, 12)  # 0.025 exactly for level 0.95, not 0.025000000000000022
    low, high = np.quantile(means, [alpha, 1.0 - alpha])
    return float(low), float(high)


@dataclass(frozen=True)
class Stat:
    """A mean with its interval over `n` graded episodes; mean None when it cannot be computed."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int


@dataclass
class RulesetSummary:
    ruleset: str
    policies: list[str]
    scenarios: list[str]
    tiers: dict[str, str | None]
    tier_names: list[str]
    stats: dict[tuple[str, str, str], Stat] = field(default_factory=dict)  # (metric, policy, column)
    coverage: dict[str, Any] = field(default_factory=dict)

    @property
    def columns(self) -> list[str]:
        """Scenario columns, then one per tier, then overall."""
        return [*self.scenarios, *(TIER_PREFIX + t for t in self.tier_names), OVERALL]

    def tidy_rows(self) -> list[dict[str, Any]]:
        """One row per metric, policy and column, in display order."""
        return [
            {
                "ruleset": self.ruleset,
                "policy": policy,
                "scenario": column,
                "metric": metric,
                **vars(self.stats[metric, policy, column]),
            }
            for metric in METRICS
            for policy in self.policies
            for column in self.columns
        ]


def summarize(
    episodes: pd.DataFrame,
    manifest: Mapping[str, Any] | None = None,
    samples: int = 2000,
    seed: int = 0,
) -> list[RulesetSummary]:
    """Per ruleset, the statistics of every policy (by label) and scenario, plus tiers and overall.

    Policies and scenarios are those with rows, plus the manifest's expected cells, so a cell
    that never ran shows up as empty (never as 0).
    """
    expected = manifest_cells(manifest)
    rulesets = sorted(set(episodes["ruleset"]) | {c["ruleset"] for c in expected})
    return [_summarize_ruleset(episodes, expected, manifest, r, samples, seed) for r in rulesets]


def _summarize_ruleset(
    episodes: pd.DataFrame,
    expected: list[dict[str, Any]],
    manifest: Mapping[str, Any] | None,
    ruleset: str,
    samples: int,
    seed: int,
) -> RulesetSummary:
    rows = episodes[episodes["ruleset"] == ruleset]
    expected = [c for c in expected if c["ruleset"] == ruleset]
    tiers: dict[str, str | None] = {}
    for scenario, tier in zip(rows["scenario"], rows["tier"], strict=True):
        if tiers.get(scenario) is None:
            tiers[scenario] = tier if isinstance(tier, str) else None
    for cell in expected:
        if tiers.get(cell["scenario"]) is None:
            tiers[cell["scenario"]] = catalogue_tier(ruleset, cell["scenario"])
    summary = RulesetSummary(
        ruleset=ruleset,
        policies=report_policies(rows, expected),
        scenarios=sorted_scenarios(tiers, tiers),
        tiers=tiers,
        tier_names=sorted({t for t in tiers.values() if t is not None}, key=tier_rank),
        coverage=coverage(episodes, manifest, ruleset),
    )
    graded = rows[rows["status"] == "graded"]
    groups = {TIER_PREFIX + t: [s for s in summary.scenarios if tiers[s] == t] for t in summary.tier_names}
    groups[OVERALL] = summary.scenarios
    for metric in METRICS:
        for policy in summary.policies:
            mine = graded[graded["label"] == policy]
            values = {
                s: mine.loc[mine["scenario"] == s, metric].dropna().to_numpy() for s in summary.scenarios
            }
            for scenario, v in values.items():
                summary.stats[metric, policy, scenario] = _stat([v], samples, seed)
            for column, members in groups.items():
                summary.stats[metric, policy, column] = _stat([values[s] for s in members], samples, seed)
    return summary


def _stat(groups: list[np.ndarray], samples: int, seed: int) -> Stat:
    n = int(sum(g.size for g in groups))
    if not groups or any(g.size == 0 for g in groups):
        return Stat(None, None, None, n)
    mean = float(sum(float(g.mean()) for g in groups) / len(groups))
    low, high = bootstrap_stratified_ci(groups, samples, seed)
    return Stat(mean, low, high, n)
