"""The distributions behind the report's intervals and tests, in pure Python (the report depends
on neither scipy nor numpy for them): the incomplete beta function and its inverse, Student's t,
Clopper-Pearson bounds (also for a fractional count of successes, which `stats.bounded_interval`
uses for means of values in [0, 1]), the exact sign test and the normal quantile."""

from __future__ import annotations

import math
from math import comb
from statistics import NormalDist

LEVEL = 0.95


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


def clopper_pearson(successes: float, n: float, level: float = LEVEL) -> tuple[float, float]:
    """Exact binomial bounds of a success rate; `successes` and `n` may be fractional (the beta
    quantiles take real parameters), as for a mean of values in [0, 1] over `n` effective units."""
    if not 0 <= successes <= n or n <= 0:
        raise ValueError(f"Clopper-Pearson needs 0 <= successes <= n and n > 0, got {successes}/{n}")
    alpha = 1.0 - level
    low = 0.0 if successes <= 0 else beta_ppf(alpha / 2.0, successes, n - successes + 1)
    high = 1.0 if successes >= n else beta_ppf(1.0 - alpha / 2.0, successes + 1, n - successes)
    return low, high


def z_ppf(q: float) -> float:
    """Quantile of the standard normal distribution."""
    return NormalDist().inv_cdf(q)


def sign_test_p(positive: int, negative: int) -> float:
    """Exact two-sided sign test of `positive` against `negative` non-zero differences."""
    n = positive + negative
    if n == 0:
        return 1.0
    k = min(positive, negative)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)
