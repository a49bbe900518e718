"""Do the report's 95% intervals cover at the sizes the benchmark runs? A coverage simulation.

Each interval kind the report prints is computed, by the report's own functions
(`schemashift.report.stats`), on data sets drawn from a generative model shaped like the
benchmark's, and the share of intervals that hold the true value is counted (an interval that is
not given counts as a miss). Shapes: the embedded default's (6 scenarios x 5 seeds x 1 sample,
tiers of 3 scenarios) and the report fixture's (4 scenarios x 3 seeds x 4 samples, tiers of 2).
True rates near 0, in the middle and near 1.

The model: scenario s of a subject with overall rate r succeeds with chance p_s, logit(p_s) =
logit(r) + N(0, 0.5) (fixed per shape); each seed draws its own chance q ~ Beta(2 p_s, 2 (1 - p_s))
(seeds differ in difficulty, a seed's samples share it), and each sample succeeds with chance q.
A success scores 0.85 + 0.1 Beta(5, 2), a failure 0.4 Beta(2, 8). Differences pair two subjects
on the same seeds, their seed chances drawn from one uniform (harder seeds are harder for both).

    python benchmarks/interval_coverage.py [--replicates 2000] [--seed 2026]

prints one Markdown table: interval kind x shape x true rate -> coverage (the floor the CI test,
tests/report/test_stats.py, holds is 0.93).
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from dataclasses import dataclass
from math import comb

import numpy as np
from scipy import stats as sp

from schemashift.report import stats

FLOOR = 0.93
#: name -> (scenarios, seeds per scenario, samples per seed, scenarios of a tier)
SHAPES = {"default 6x5x1": (6, 5, 1, 3), "fixture 4x3x4": (4, 3, 4, 2)}
#: true overall rates of the subject; a difference compares it with the paired rate here
RATES = (0.05, 0.5, 0.95)
REFERENCE = {0.05: 0.05, 0.5: 0.3, 0.95: 0.8}
CONCENTRATION = 2.0
SUCCESS_SCORE = 0.85 + 0.1 * 5 / 7
FAILURE_SCORE = 0.4 * 2 / 10


@dataclass
class Drawn:
    """One subject's data set: per scenario, each seed's samples (success 0/1 and score)."""

    success: list[np.ndarray]
    score: list[np.ndarray]

    def means(self, metric: str) -> list[np.ndarray]:
        return [m.mean(axis=1) for m in getattr(self, metric)]

    def pass_k(self, k: int) -> list[np.ndarray]:
        samples = self.success[0].shape[1]
        return [np.array([comb(int(c), k) / comb(samples, k) for c in m.sum(axis=1)]) for m in self.success]


def scenario_rates(count: int, rate: float, seed: int) -> np.ndarray:
    shift = np.random.default_rng(seed).normal(0.0, 0.5, count)
    return 1.0 / (1.0 + np.exp(-(math.log(rate / (1.0 - rate)) + shift)))


def draw(rng: np.random.Generator, rates: np.ndarray, uniforms: np.ndarray, samples: int) -> Drawn:
    success, score = [], []
    for p, u in zip(rates, uniforms, strict=True):
        chance = sp.beta.ppf(u, CONCENTRATION * p, CONCENTRATION * (1.0 - p))
        won = rng.random((u.size, samples)) < chance[:, None]
        success.append(won.astype(float))
        size = won.shape
        score.append(np.where(won, 0.85 + 0.1 * rng.beta(5, 2, size), 0.4 * rng.beta(2, 8, size)))
    return Drawn(success, score)


def truths(rates: np.ndarray) -> dict[str, np.ndarray]:
    """Per scenario, the true mean of each metric (pass^2: E[q^2] of the Beta seed chance)."""
    c = CONCENTRATION
    return {
        "success": rates,
        "score": rates * SUCCESS_SCORE + (1.0 - rates) * FAILURE_SCORE,
        "pass^2": rates * (1.0 - rates) / (c + 1.0) + rates**2,
    }


def mean_stat(groups: list[np.ndarray]) -> stats.Stat:
    return stats.stratified_stat(groups, sum(len(g) for g in groups), bounds=stats.UNIT)


def difference(mine: list[np.ndarray], theirs: list[np.ndarray]) -> stats.Stat:
    return stats.mover_stat(mine, theirs, sum(len(g) for g in mine), test=False)


#: interval kind -> (what it needs: "mean" or "difference", the metric, overall or tier)
KINDS: dict[str, tuple[str, str, bool]] = {
    "success rate, overall": ("mean", "success", False),
    "success rate, tier": ("mean", "success", True),
    "mean score, overall": ("mean", "score", False),
    "mean score, tier": ("mean", "score", True),
    "pass^2, overall": ("mean", "pass^2", False),
    "success difference, overall": ("difference", "success", False),
    "score difference, overall": ("difference", "score", False),
}


def coverage(
    shape: str,
    rate: float,
    replicates: int,
    seed: int,
    mean: Callable[[list[np.ndarray]], stats.Stat] = mean_stat,
    diff: Callable[[list[np.ndarray], list[np.ndarray]], stats.Stat] = difference,
) -> dict[str, float | None]:
    """Coverage of every interval kind at one shape and true rate (None: the kind does not apply,
    pass^2 with one sample per seed)."""
    scenarios, seeds, samples, tier = SHAPES[shape]
    rng = np.random.default_rng(seed)
    mine_rates = scenario_rates(scenarios, rate, 1)
    theirs_rates = scenario_rates(scenarios, REFERENCE[rate], 2)
    mine_truth, theirs_truth = truths(mine_rates), truths(theirs_rates)
    hits = dict.fromkeys(KINDS, 0)
    for _ in range(replicates):
        uniforms = rng.random((scenarios, seeds))
        mine, theirs = draw(rng, mine_rates, uniforms, samples), draw(rng, theirs_rates, uniforms, samples)
        for kind, (what, metric, on_tier) in KINDS.items():
            if metric == "pass^2" and samples < 2:
                continue
            keep = slice(0, tier if on_tier else scenarios)
            values = {"mine": mine.pass_k(2) if metric == "pass^2" else mine.means(metric)}
            if what == "mean":
                stat, truth = mean(values["mine"][keep]), float(mine_truth[metric][keep].mean())
            else:
                stat = diff(values["mine"][keep], theirs.means(metric)[keep])
                truth = float(mine_truth[metric][keep].mean() - theirs_truth[metric][keep].mean())
            hits[kind] += bool(stat.has_interval and stat.ci_low <= truth <= stat.ci_high)
    return {
        kind: None if KINDS[kind][1] == "pass^2" and samples < 2 else count / replicates
        for kind, count in hits.items()
    }


def table(replicates: int, seed: int) -> str:
    """The Markdown coverage table: a row per interval kind and shape, a column per true rate."""
    columns = [f"rate {r:g} (difference: vs {REFERENCE[r]:g})" for r in RATES]
    lines = [
        "| interval | shape | " + " | ".join(columns) + " |",
        "| --- | --- | " + " | ".join("---" for _ in RATES) + " |",
    ]
    results = {(shape, r): coverage(shape, r, replicates, seed) for shape in SHAPES for r in RATES}
    for kind in KINDS:
        for shape in SHAPES:
            cells = [results[shape, r][kind] for r in RATES]
            if all(c is None for c in cells):
                continue
            text = ["n/a" if c is None else f"{c:.3f}" for c in cells]
            lines.append(f"| {kind} | {shape} | " + " | ".join(text) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000, help="data sets per shape and rate")
    parser.add_argument("--seed", type=int, default=2026, help="seed of numpy's generator")
    args = parser.parse_args()
    print(table(args.replicates, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
