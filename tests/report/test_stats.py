"""The report's intervals and tests against an independent implementation (scipy), and their
coverage of the stated estimand on synthetic data shaped like the benchmark's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sp

from schemashift.report import distributions as dist
from schemashift.report import stats

pytestmark = pytest.mark.timeout(300)

probabilities = st.floats(0.001, 0.999)
dfs = st.floats(0.5, 500.0)


@settings(max_examples=200, deadline=None)
@given(x=st.floats(0.0, 1.0), a=st.floats(0.05, 400.0), b=st.floats(0.05, 400.0))
def test_incomplete_beta_agrees_with_scipy(x: float, a: float, b: float) -> None:
    assert dist.beta_cdf(x, a, b) == pytest.approx(sp.beta.cdf(x, a, b), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(q=st.floats(0.5001, 0.9999), df=dfs)
def test_t_quantile_and_tail_agree_with_scipy(q: float, df: float) -> None:
    t = dist.t_ppf(q, df)
    assert t == pytest.approx(sp.t.ppf(q, df), rel=1e-7, abs=1e-7)
    assert dist.t_sf2(t, df) == pytest.approx(2 * sp.t.sf(t, df), abs=1e-9)


@settings(max_examples=200, deadline=None)
@given(data=st.data(), n=st.integers(1, 400))
def test_clopper_pearson_agrees_with_scipy(data, n: int) -> None:
    c = data.draw(st.integers(0, n))
    expected = sp.binomtest(c, n).proportion_ci(0.95, method="exact")
    low, high = dist.clopper_pearson(c, n)
    assert (low, high) == pytest.approx((expected.low, expected.high), abs=1e-9)


@settings(max_examples=100, deadline=None)
@given(n=st.floats(1.0, 200.0), share=st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.001, 0.999)))
def test_fractional_clopper_pearson_is_scipys_beta_quantiles(n: float, share: float) -> None:
    x = share * n
    low, high = dist.clopper_pearson(x, n)
    assert low == (0.0 if x == 0 else pytest.approx(sp.beta.ppf(0.025, x, n - x + 1), abs=1e-9))
    assert high == (1.0 if x == n else pytest.approx(sp.beta.ppf(0.975, x + 1, n - x), abs=1e-9))


@settings(max_examples=100, deadline=None)
@given(positive=st.integers(0, 60), negative=st.integers(0, 60))
def test_sign_test_agrees_with_scipy(positive: int, negative: int) -> None:
    expected = 1.0 if positive + negative == 0 else sp.binomtest(positive, positive + negative).pvalue
    assert dist.sign_test_p(positive, negative) == pytest.approx(expected, abs=1e-12)


def _scipy_stratified(groups: list[np.ndarray]) -> tuple[float, float, float]:
    """Stratified mean over fixed strata, its t interval (Welch-Satterthwaite df) and p against 0,
    written from the textbook formulas with scipy's t distribution."""
    k = len(groups)
    mean = np.mean([g.mean() for g in groups])
    v = np.array([g.var(ddof=1) / len(g) for g in groups])
    se = math.sqrt(v.sum()) / k
    df = v.sum() ** 2 / sum(vi**2 / (len(g) - 1) for vi, g in zip(v, groups, strict=True))
    half = sp.t.ppf(0.975, df) * se
    return mean - half, mean + half, 2 * sp.t.sf(abs(mean / se), df)


groups_strategy = st.lists(
    st.lists(st.floats(-1.0, 1.0, allow_nan=False), min_size=2, max_size=12).map(np.array),
    min_size=1,
    max_size=7,
).filter(lambda gs: sum(float(g.var(ddof=1)) for g in gs) > 1e-6)


@settings(max_examples=150, deadline=None)
@given(groups=groups_strategy)
def test_stratified_t_interval_and_p_value_agree_with_the_textbook(groups: list[np.ndarray]) -> None:
    low, high, p = _scipy_stratified(groups)
    stat = stats.difference_stat(groups, sum(len(g) for g in groups))
    assert stat.method == "t"
    assert (stat.ci_low, stat.ci_high) == pytest.approx((low, high), abs=1e-7)
    assert stat.p_value == pytest.approx(p, abs=1e-7)


def test_one_stratum_is_scipys_one_sample_t_test() -> None:
    values = np.array([0.2, 0.9, 0.4, 0.75, 0.1])
    stat = stats.difference_stat([values], len(values))
    interval = sp.ttest_1samp(values, 0.0).confidence_interval(0.95)
    assert (stat.ci_low, stat.ci_high) == pytest.approx((interval.low, interval.high))
    assert stat.p_value == pytest.approx(sp.ttest_1samp(values, 0.0).pvalue)


def test_bounded_means_get_clopper_pearson_on_the_effective_seeds() -> None:
    groups = [np.array([1.0, 0.0, 1.0, 1.0]), np.array([0.0, 0.0, 1.0, 0.0])]
    stat = stats.stratified_stat(groups, 8, bounds=stats.UNIT)
    expected = sp.binomtest(4, 8).proportion_ci(0.95, method="exact")
    assert stat.method == "bounded" and stat.mean == 0.5
    assert (stat.ci_low, stat.ci_high) == pytest.approx((expected.low, expected.high))
    # unequal seed counts: Kish's effective size 2^2 / (1/4 + 1/3) and the stratified mean
    uneven = stats.stratified_stat([groups[0], groups[1][:3]], 7, bounds=stats.UNIT)
    n = 4 / (1 / 4 + 1 / 3)
    x = (0.75 + 1 / 3) / 2 * n
    assert (uneven.ci_low, uneven.ci_high) == pytest.approx(
        (sp.beta.ppf(0.025, x, n - x + 1), sp.beta.ppf(0.975, x + 1, n - x))
    )
    # all successes with four samples per seed: a bound, never "no variation"
    solved = stats.stratified_stat([np.ones(3), np.ones(3)], 24, bounds=stats.UNIT)
    assert solved.ci_high == 1.0 and solved.ci_low == pytest.approx(0.025 ** (1 / 6))
    # a value outside [0, 1] (a shaped reward, say) falls back to the t interval
    assert (
        stats.stratified_stat([np.array([1.5, 0.2]), np.array([0.1, 0.3])], 4, bounds=stats.UNIT).method
        == "t"
    )


def _mover_reference(a: list[np.ndarray], b: list[np.ndarray], level: float) -> tuple[float, float]:
    """Newcombe's square-and-add from each side's Clopper-Pearson on its Kish effective size,
    with scipy's beta quantiles."""

    def side(groups: list[np.ndarray]) -> tuple[float, float, float]:
        n = len(groups) ** 2 / sum(1 / len(g) for g in groups)
        m = float(np.mean([g.mean() for g in groups]))
        x, q = m * n, (1 - level) / 2
        low = 0.0 if x == 0 else sp.beta.ppf(q, x, n - x + 1)
        high = 1.0 if x == n else sp.beta.ppf(1 - q, x + 1, n - x)
        return m, low, high

    (pa, la, ua), (pb, lb, ub) = side(a), side(b)
    d = pa - pb
    return max(-1.0, d - math.hypot(pa - la, ub - pb)), min(1.0, d + math.hypot(ua - pa, pb - lb))


cells01 = st.lists(st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]), min_size=1, max_size=6).map(np.array)


@settings(max_examples=60, deadline=None)
@given(pairs=st.lists(st.tuples(cells01, cells01), min_size=1, max_size=4))
def test_mover_differences_agree_with_scipy_and_their_p_value_inverts_them(pairs) -> None:
    a = [x for x, _ in pairs]
    b = [y[: len(x)] if len(y) >= len(x) else np.resize(y, len(x)) for x, y in pairs]
    stat = stats.mover_stat(a, b, sum(len(g) for g in a))
    assert stat.method == "mover"
    assert (stat.ci_low, stat.ci_high) == pytest.approx(_mover_reference(a, b, 0.95), abs=1e-7)
    # the test and the interval agree: p < 0.05 exactly where the 95% interval leaves out 0
    low, high = _mover_reference(a, b, 0.95)
    if stat.p_value < 0.049:
        assert not low <= 0.0 <= high
    if stat.p_value > 0.051:
        assert low <= 0.0 <= high


def test_replays_are_one_episode_not_many_trials() -> None:
    """legacy-like: five seeds replay one episode per scenario; n counts 2 distinct episodes and no
    interval is given; a stochastic policy's distinct attempts keep theirs, over its attempts."""
    import pandas as pd

    replay = pd.DataFrame(
        {"scenario": ["a"] * 5 + ["b"] * 5, "seed": list(range(5)) * 2, "success": [1.0] * 5 + [0.0] * 5}
    )
    replay["score"] = replay["success"]
    stat = stats.metric_stat(replay, "success", ["a", "b"], seeds_vary_task=False)
    assert (stat.mean, stat.n, stat.ci_low, stat.note) == (0.5, 2, None, stats.REPLAYS)
    # the same rows where the seeds are tasks: ten cells and a bounded interval
    assert stats.metric_stat(replay, "success", ["a", "b"]).method == "bounded"
    attempts = replay.assign(success=[1.0, 0.0, 1.0, 1.0, 1.0, 0.0, 0.0, 1.0, 0.0, 0.0])
    attempts["score"] = attempts["success"]
    varied = stats.metric_stat(attempts, "success", ["a", "b"], seeds_vary_task=False)
    assert varied.method == "bounded" and varied.n == 4  # two distinct episodes per scenario
    # units: two per scenario, not five: the bounds of 0.5 over 2^2 / (1/2 + 1/2) = 4 units
    assert varied.ci_low == pytest.approx(sp.beta.ppf(0.025, 2.0, 3.0))
    both = stats.paired_stat(replay, replay.assign(success=0.0), "success", ["a", "b"], seeds_vary_task=False)
    assert both.mean == 0.5 and both.p_value is None and stats.verdict(both) == "no test (replays)"


def test_a_comparison_that_is_not_significant_says_what_it_could_have_detected() -> None:
    diff = stats.Stat(0.1, -0.2, 0.4, 30, method="mover", p_value=0.5)
    (alone,) = stats.adjust([diff], "f")
    z = sp.norm.ppf
    assert alone.detectable == pytest.approx((z(0.975) + z(0.8)) * 0.6 / (2 * z(0.975)))
    family = stats.adjust([diff] * 4, "f")
    assert family[0].detectable == pytest.approx((z(1 - 0.05 / 8) + z(0.8)) * 0.6 / (2 * z(0.975)))
    assert family[0].family == "f" and family[0].p_adjusted == 1.0
    assert (
        stats.verdict(family[0]) == f"not separable at this size (detectable >= {family[0].detectable:.2f})"
    )
    assert stats.verdict(stats.Stat(0.3, 0.1, 0.5, 30, p_value=0.01)) == "beats"


def test_no_variation_and_one_seed_give_no_interval_and_say_why() -> None:
    same = stats.stratified_stat([np.array([0.5, 0.5, 0.5]), np.array([0.9, 0.9])], 5)
    assert (same.mean, same.ci_low, same.ci_high, same.note) == (0.7, None, None, stats.NO_VARIATION)
    lone = stats.stratified_stat([np.array([0.5]), np.array([0.1, 0.9])], 3)
    assert lone.ci_low is None and lone.note == stats.ONE_SEED
    # a difference without variation still gets a p-value: the exact sign test over its cells
    diff = stats.difference_stat([np.array([0.2] * 6)], 6)
    assert diff.note == stats.NO_VARIATION and diff.p_value == pytest.approx(2 * 0.5**6)


@settings(max_examples=200, deadline=None)
@given(ps=st.lists(st.one_of(st.none(), st.floats(0.0, 1.0)), max_size=12))
def test_holm_agrees_with_the_step_down_definition(ps: list[float | None]) -> None:
    present = [p for p in ps if p is not None]
    m = len(present)
    order = sorted(range(m), key=lambda i: present[i])
    expected = [0.0] * m
    for i in range(m):
        rank = order.index(i)
        # the largest (m - j) * p_(j) over the ranks up to this one, capped at 1
        expected[i] = min(1.0, max((m - j) * present[order[j]] for j in range(rank + 1)))
    adjusted = [p for p in stats.holm(ps) if p is not None]
    assert adjusted == pytest.approx(expected)
    assert [p is None for p in stats.holm(ps)] == [p is None for p in ps]


def test_generalisation_interval_needs_enough_scenarios() -> None:
    few = stats.generalisation_stat([0.1, 0.5, 0.9], 30)
    assert few.ci_low is None and "too few" in few.note
    means = [0.1, 0.5, 0.9, 0.3, 0.6, 0.8]
    stat = stats.generalisation_stat(means, 60)
    interval = sp.ttest_1samp(means, 0.0).confidence_interval(0.95)
    assert stat.method == "generalisation"
    assert (stat.ci_low, stat.ci_high) == pytest.approx((interval.low, interval.high))
    # a rate over new scenarios stays a rate
    cut = stats.generalisation_stat([0.0, 0.0, 0.0, 0.0, 1.0], 50, bounds=stats.UNIT)
    assert cut.ci_low == 0.0 and cut.ci_high < 1.0


def test_the_savings_bootstrap_is_the_documented_one() -> None:
    """Written out with the same generator: per replicate, per stratum in sorted order, as many
    cells as the stratum has, drawn with replacement; the saving of the replicate's sums."""
    rng_data = np.random.default_rng(4)
    strata = np.array(["b", "a", "b", "a", "a", "c", "b"])
    subject = rng_data.integers(1, 9, strata.size).astype(float)
    reference = rng_data.integers(2, 12, strata.size).astype(float)
    stat = stats.savings_stat(subject, reference, strata, samples=300, seed=9)
    rng = np.random.default_rng(9)
    mine = np.zeros(300)
    theirs = np.zeros(300)
    for stratum in ("a", "b", "c"):
        cells = [i for i in range(strata.size) if strata[i] == stratum]
        draws = rng.integers(0, len(cells), size=(300, len(cells)))
        for r in range(300):
            mine[r] += sum(subject[cells[j]] for j in draws[r])
            theirs[r] += sum(reference[cells[j]] for j in draws[r])
    replicates = sorted(1 - mine / theirs)
    assert stat.mean == pytest.approx(1 - subject.sum() / reference.sum())
    assert (stat.ci_low, stat.ci_high) == pytest.approx(tuple(np.quantile(replicates, [0.025, 0.975])))
    assert stat.method == "bootstrap"


# -- coverage of the stated estimand ---------------------------------------------------------------

#: per scenario: (chance of success, spread of a success's score); a failure scores 0.4 * Beta(2, 8)
#: and a success 0.85 + 0.1 * Beta(5, 2) * spread: the benchmark's mix of failures with low partial
#: credit and successes with a little efficiency spread (tiers: the first two and the rest)
SHAPES = {
    "mixed": [0.1, 0.3, 0.5, 0.7, 0.9, 0.5],
    "hard and easy": [0.02, 0.98, 0.5, 0.5, 0.1, 0.9],
    "mostly failing": [0.2, 0.1, 0.3, 0.05, 0.15, 0.4],
}


def _draw(rng: np.random.Generator, p: float, n: int) -> tuple[np.ndarray, np.ndarray]:
    success = rng.random(n) < p
    score = np.where(success, 0.85 + 0.1 * rng.beta(5, 2, n), 0.4 * rng.beta(2, 8, n))
    return score, success.astype(float)


def _truth(p: float) -> tuple[float, float]:
    return p * (0.85 + 0.1 * 5 / 7) + (1 - p) * 0.4 * 0.2, p


@pytest.mark.slow
@pytest.mark.parametrize("seeds", [30, 64])
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_intervals_cover_the_fixed_scenario_mean(shape: str, seeds: int) -> None:
    """Nominal 95%: at least 93% of the intervals hold the true mean over these scenarios (score
    and success, overall and a two-scenario tier); an interval that is not given counts as a miss."""
    rng = np.random.default_rng(2026)
    ps = SHAPES[shape]
    truths = [_truth(p) for p in ps]
    replicates = 1000
    hits = {"score": 0, "success": 0, "tier score": 0, "tier success": 0}
    for _ in range(replicates):
        drawn = [_draw(rng, p, seeds) for p in ps]
        checks = {
            "score": (
                stats.stratified_stat([d[0] for d in drawn], 0, bounds=stats.UNIT),
                np.mean([t[0] for t in truths]),
            ),
            "success": (
                stats.stratified_stat([d[1] for d in drawn], 0, bounds=stats.UNIT),
                np.mean([t[1] for t in truths]),
            ),
            "tier score": (
                stats.stratified_stat([d[0] for d in drawn[:2]], 0, bounds=stats.UNIT),
                np.mean([t[0] for t in truths[:2]]),
            ),
            "tier success": (
                stats.stratified_stat([d[1] for d in drawn[:2]], 0, bounds=stats.UNIT),
                np.mean([t[1] for t in truths[:2]]),
            ),
        }
        for name, (stat, truth) in checks.items():
            hits[name] += stat.has_interval and stat.ci_low <= truth <= stat.ci_high
    coverage = {name: count / replicates for name, count in hits.items()}
    print(f"{shape}, {seeds} seeds per scenario: coverage {coverage}")
    assert min(coverage.values()) >= 0.93, coverage


@pytest.mark.slow
def test_every_interval_kind_covers_at_the_default_and_fixture_shapes() -> None:
    """The coverage check of benchmarks/interval_coverage.py (the report's own functions on data
    shaped like the benchmark's), with fixed seeds: every interval kind the report prints holds its
    true value in at least 93% of 300 data sets at nominal 95%, at the embedded default's and the
    fixture's sizes, for rates near 0, in the middle and near 1."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "interval_coverage.py"
    spec = importlib.util.spec_from_file_location("interval_coverage", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    failing = {}
    for shape in module.SHAPES:
        for rate in module.RATES:
            for kind, covered in module.coverage(shape, rate, replicates=300, seed=2026).items():
                if covered is not None and covered < module.FLOOR:
                    failing[kind, shape, rate] = covered
    assert failing == {}


def test_the_power_benchmark_prints_the_exact_half_width_of_the_configured_cells() -> None:
    """Both seed sets of the embedded default: models 6 x 5 cells per ruleset, v1's rule
    baselines 6 x 67, which meet 0.05 (the default's reason for 67)."""
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]

    def power(*args: str) -> str:
        command = [sys.executable, str(repo / "benchmarks" / "eval_power.py"), *args]
        return subprocess.run(command, capture_output=True, text=True, check=True, timeout=120).stdout

    def half(successes: int, n: int) -> float:
        interval = sp.binomtest(successes, n).proportion_ci(0.95, method="exact")
        return (interval.high - interval.low) / 2

    out = power("--target", "0.1")
    assert f"models    6 scenarios x 5 seeds = 30 cells, half-width {half(15, 30):.3f}" in out
    # 0.1: the fewest seeds per scenario whose 6 x seeds cells reach it, by scipy's bounds
    needed = next(n for n in range(1, 100) if half(6 * n // 2, 6 * n) <= 0.1)
    assert f"needs {needed} seeds per scenario" in out
    assert "one model (API baseline, base model or checkpoint): 60 episodes over all rulesets" in out
    out = power()
    assert half(201, 402) <= 0.05 < half(6 * 66 // 2, 6 * 66)
    v1_baselines = f"baselines 6 scenarios x 67 seeds = 402 cells, half-width {half(201, 402):.3f}"
    assert f"{v1_baselines} (meets <= 0.05)" in out


cell_values = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(-1.0, 1.0, allow_nan=False))


@settings(max_examples=300, deadline=None)
@given(
    groups=st.lists(st.lists(cell_values, min_size=1, max_size=9).map(np.array), min_size=1, max_size=6),
    bounded=st.booleans(),
    difference=st.booleans(),
)
def test_an_interval_is_never_zero_width_and_holds_its_mean(groups, bounded: bool, difference: bool) -> None:
    """Whatever the cells (constant, 0/1, one seed, tiny spreads): either a proper interval around
    the mean, or none with the reason; a difference always carries a p-value in [0, 1]."""
    n = sum(len(g) for g in groups)
    bounds = stats.UNIT if bounded else None
    stat = stats.difference_stat(groups, n) if difference else stats.stratified_stat(groups, n, bounds=bounds)
    assert stat.mean is not None
    if stat.has_interval:
        assert stat.ci_low < stat.ci_high and stat.method in ("bounded", "t")
        assert stat.ci_low <= stat.mean + 1e-12 and stat.mean <= stat.ci_high + 1e-12
    else:
        assert stat.method is None and stat.note in (stats.NO_VARIATION, stats.ONE_SEED)
    if difference:
        assert 0.0 <= stat.p_value <= 1.0


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=8),
    st.lists(st.one_of(st.none(), st.floats(0, 0.5)), min_size=1, max_size=8),
)
def test_repeats_pool_as_an_independent_computation_does(means, ses):
    got = stats.repeats_stat(means, ses, n=10)
    assert got.pooled.mean == pytest.approx(float(np.mean(means)))
    known = [se for se in ses if se is not None]
    if known:
        assert got.evaluation_se == pytest.approx(math.sqrt(np.mean(np.square(known))))
    if len(means) == 1:
        assert got.pooled.ci_low is None and "one training run" in got.pooled.note
        return
    sd = float(np.std(means, ddof=1))
    assert got.between_sd == pytest.approx(sd, abs=1e-12)
    assert got.training_sd == pytest.approx(
        math.sqrt(max(0.0, sd**2 - (got.evaluation_se or 0.0) ** 2)), abs=1e-9
    )
    if got.pooled.ci_low is None:
        assert stats.NO_VARIATION in got.pooled.note
    else:
        low, high = sp.t.interval(0.95, len(means) - 1, loc=np.mean(means), scale=sp.sem(means))
        assert (got.pooled.ci_low, got.pooled.ci_high) == pytest.approx((low, high), rel=1e-6, abs=1e-9)
