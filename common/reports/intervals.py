"""How sure a rate is, and whether it changed: 95% intervals and a change rule that calls noise noise.

Pure functions over counts and scores (docs/statistics.md defines each):

- `wilson`: the Wilson score interval of a proportion (failed, resolved, precision, low-score shares).
- `bootstrap_mean`: the percentile bootstrap interval of a mean score, with a fixed seed so the same data always
  prints the same interval. Scores are few distinct values (0–4, 1–5), so resampling n scores with replacement is
  drawing their counts from a multinomial: the same bootstrap at the cost of the distinct values, not of n, which
  keeps a backfill's year as cheap as a week.
- `proportion_change` / `mean_change`: "up" or "down" only when the 95% interval of the difference excludes 0
  (Newcombe's hybrid score interval for proportions, the bootstrap interval of the difference for means); else
  no clear change. Below `MIN_N` on either side a figure is "too few".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import numpy as np

# numpy is imported where a bootstrap runs, not here: alerts and the bot import this module for Wilson intervals,
# and numpy's import starts OpenBLAS's native threads and costs each serving process its memory.


CONFIDENCE = 0.95
MIN_N = 10  # below this many observations a rate is "too few", not a number
RESAMPLES = 2_000
SEED = 47  # fixed: the same scores give the same interval in every digest, Home refresh and test

Direction = Literal["up", "down", "none", "too_few"]


@dataclass(frozen=True)
class Interval:
    low: float
    high: float


@dataclass(frozen=True)
class Estimate:
    """A rate or a mean with its n and its interval (None without observations)."""

    value: float | None
    n: int
    interval: Interval | None
    # Kish's effective sample size when the figure is reweighted for sampling (common.reports.weighted); else None.
    effective_n: float | None = None

    @property
    def enough(self) -> bool:
        return self.n >= MIN_N and self.value is not None

    @property
    def low(self) -> float | None:
        return self.interval.low if self.interval else None

    @property
    def high(self) -> float | None:
        return self.interval.high if self.interval else None

    def as_json(self) -> dict[str, float | int | None]:
        """`value`, `n`, `low` and `high` (and `effective_n` when reweighted), for `--json`."""
        found: dict[str, float | int | None] = {"value": self.value, "n": self.n, "low": self.low, "high": self.high}
        if self.effective_n is not None:
            found["effective_n"] = round(self.effective_n, 1)
        return found


@dataclass(frozen=True)
class Shift:
    """A figure before and after, and what the change rule says of it."""

    before: Estimate
    after: Estimate
    direction: Direction
    difference: Interval | None  # the 95% interval of after − before

    @property
    def significant(self) -> bool:
        return self.direction in ("up", "down")


def z_of(confidence: float) -> float:
    """The normal quantile of a two-sided interval: 1.96 for 95%."""
    if not 0 < confidence < 1:
        raise ValueError("confidence must be between 0 and 1")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson(successes: int, n: int, confidence: float = CONFIDENCE) -> Interval | None:
    """The Wilson score interval of `successes` out of `n`; None when n is 0."""
    if n <= 0:
        return None
    if not 0 <= successes <= n:
        raise ValueError("successes must be between 0 and n")
    z = z_of(confidence)
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    # The exact ends at 0 and n (rounding would leave 1e-17 outside the point estimate).
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return Interval(low, high)


def proportion(successes: int, n: int, confidence: float = CONFIDENCE) -> Estimate:
    return Estimate(successes / n if n > 0 else None, max(n, 0), wilson(successes, n, confidence))


def _counts(values: Iterable[float] | Mapping[float, int]) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, how many of each), from scores or from a score → count mapping."""
    import numpy as np  # on first use: see the module's note

    if isinstance(values, Mapping):
        pairs = [(float(v), int(c)) for v, c in values.items() if c > 0]
        return np.array([v for v, _ in pairs], dtype=float), np.array([c for _, c in pairs], dtype=np.int64)
    distinct, counts = np.unique(np.asarray(list(values), dtype=float), return_counts=True)
    return distinct, counts.astype(np.int64)


def _resampled_means(distinct: np.ndarray, counts: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    n = int(counts.sum())
    drawn = rng.multinomial(n, counts / n, size=resamples)  # each row: one resample's count of each value
    return drawn @ distinct / n


def _percentile(samples: np.ndarray, confidence: float) -> Interval:
    import numpy as np  # on first use: see the module's note

    tail = (1 - confidence) / 2
    low, high = np.quantile(samples, [tail, 1 - tail])
    return Interval(float(low), float(high))


def bootstrap_mean(
    values: Iterable[float] | Mapping[float, int],
    confidence: float = CONFIDENCE,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Estimate:
    """The mean of `values` (scores, or a score → count mapping such as a judge's distribution) with its
    percentile bootstrap interval."""
    import numpy as np  # on first use: see the module's note

    distinct, counts = _counts(values)
    n = int(counts.sum())
    if n == 0:
        return Estimate(None, 0, None)
    mean = float(distinct @ counts / n)
    samples = _resampled_means(distinct, counts, resamples, np.random.default_rng(seed))
    interval = _percentile(samples, confidence)
    # Quantiles of floating-point means can land a hair outside the mean itself when every resample is equal.
    return Estimate(mean, n, Interval(min(interval.low, mean), max(interval.high, mean)))


def _direction(before: Estimate, after: Estimate, difference: Interval | None) -> Direction:
    if not (before.enough and after.enough) or difference is None:
        return "too_few"
    if difference.low > 0:
        return "up"
    if difference.high < 0:
        return "down"
    return "none"


def newcombe(before: tuple[int, int], after: tuple[int, int], confidence: float = CONFIDENCE) -> Interval | None:
    """Newcombe's hybrid score interval (his method 10) of p_after − p_before, from (successes, n) of each."""
    (x1, n1), (x2, n2) = before, after
    first, second = wilson(x1, n1, confidence), wilson(x2, n2, confidence)
    if first is None or second is None:
        return None
    p1, p2 = x1 / n1, x2 / n2
    difference = p2 - p1
    low = difference - math.sqrt((p2 - second.low) ** 2 + (first.high - p1) ** 2)
    high = difference + math.sqrt((second.high - p2) ** 2 + (p1 - first.low) ** 2)
    return Interval(low, high)


def proportion_change(before: tuple[int, int], after: tuple[int, int], confidence: float = CONFIDENCE) -> Shift:
    """Whether a proportion moved, from (successes, n) before and after: up or down only when Newcombe's interval
    of the difference excludes 0."""
    estimates = proportion(*before, confidence), proportion(*after, confidence)
    difference = newcombe(before, after, confidence)
    return Shift(*estimates, _direction(*estimates, difference), difference)


def mean_change(
    before: Iterable[float] | Mapping[float, int],
    after: Iterable[float] | Mapping[float, int],
    confidence: float = CONFIDENCE,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
) -> Shift:
    """Whether a mean moved: up or down only when the percentile bootstrap interval of the difference of means
    (each period resampled on its own) excludes 0."""
    import numpy as np  # on first use: see the module's note

    first, second = _counts(before), _counts(after)
    estimates = (
        bootstrap_mean(dict(zip(*first, strict=True)), confidence, resamples=resamples, seed=seed),
        bootstrap_mean(dict(zip(*second, strict=True)), confidence, resamples=resamples, seed=seed),
    )
    difference = None
    if estimates[0].n and estimates[1].n:
        rng = np.random.default_rng(seed)
        samples = _resampled_means(*second, resamples, rng) - _resampled_means(*first, resamples, rng)
        difference = _percentile(samples, confidence)
    return Shift(*estimates, _direction(*estimates, difference), difference)
