"""Figures of sampled answers, reweighted: when RELMON_SAMPLE judges every signalled answer and a share of the rest,
the judged answers over-represent failures, and a plain share of them would overstate the failure rate. Each judged
answer counts 1/π, π its inclusion probability (workers.sampling; 1 for a signalled answer, the rate for the rest).

Pure functions (docs/statistics.md, "Sampled answers"):

- `hajek` / `weighted_proportion`: the Hájek ratio estimator Σ wᵢyᵢ / Σ wᵢ of a share (the Horvitz–Thompson total
  of the failures over the Horvitz–Thompson count of the answers), with a Wilson interval at the effective sample
  size n_eff = p(1 − p) / v, v the estimator's linearised variance Σ wᵢ²(yᵢ − p)² / (Σ wᵢ)² (`Weights.share_n`;
  Kish's (Σ w)² / Σ w² when the weights do not depend on the outcome): unequal weights carry less information
  than as many equal ones, so the interval widens. The n shown stays the judged n; `Estimate.effective_n` keeps
  n_eff.
- `weighted_mean`: the weighted mean score, its percentile bootstrap drawn at its n_eff from the weighted shares.
- `weighted_proportion_change` / `weighted_mean_change`: the change rule (common.reports.intervals) at n_eff.

With every weight 1 each of these is the unweighted figure exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from common.reports.intervals import (
    CONFIDENCE,
    RESAMPLES,
    SEED,
    Estimate,
    Interval,
    Shift,
    _direction,
    _percentile,
    newcombe,
    z_of,
)


@dataclass
class Weights:
    """Running sums of one weighted figure: the judged n, Σw and Σw², Σw and Σw² over the 'hits' (failed answers),
    and Σw and Σw² per score (for a mean)."""

    n: int = 0
    total: float = 0.0
    squares: float = 0.0
    hits: float = 0.0
    hit_squares: float = 0.0
    scores: dict[float, float] = field(default_factory=dict)
    score_squares: dict[float, float] = field(default_factory=dict)

    def add(self, weight: float, hit: bool = False, score: float | None = None) -> None:
        if weight <= 0 or not math.isfinite(weight):
            raise ValueError("a weight is 1/probability: positive and finite")
        self.n += 1
        self.total += weight
        self.squares += weight * weight
        if hit:
            self.hits += weight
            self.hit_squares += weight * weight
        if score is not None:
            self.scores[score] = self.scores.get(score, 0.0) + weight
            self.score_squares[score] = self.score_squares.get(score, 0.0) + weight * weight

    @classmethod
    def of_counts(cls, hits: int, distribution: Mapping[float, int]) -> Weights:
        """The weights of an unsampled figure (every weight 1): `hits` of the distribution's answers."""
        n = sum(distribution.values())
        scores = {float(score): float(count) for score, count in distribution.items() if count}
        return cls(n, float(n), float(n), float(hits), float(hits), scores, dict(scores))

    @classmethod
    def of_share(cls, hits: int, n: int) -> Weights:
        """The weights of an unsampled share (every weight 1): `hits` of `n` answers."""
        return cls(n, float(n), float(n), float(hits), float(hits))

    def as_json(self) -> dict:
        """What a share's estimate needs (stored with a topics run; the scores' sums are not kept)."""
        names = ("total", "squares", "hits", "hit_squares")
        return {"n": self.n} | {name: getattr(self, name) for name in names}

    @classmethod
    def of_json(cls, data: Mapping | None) -> Weights | None:
        if not data:
            return None
        return cls(int(data["n"]), *(float(data[k]) for k in ("total", "squares", "hits", "hit_squares")))

    @property
    def effective_n(self) -> float:
        """Kish's effective sample size (Σ w)² / Σ w²."""
        return kish_n(self.total, self.squares)

    @property
    def share_n(self) -> float:
        """The effective n of the weighted share: p(1 − p) over the share's linearised variance
        v = Σ wᵢ²(yᵢ − p)² / (Σ wᵢ)², so that Wilson's interval at this n has the estimator's own variance.
        Kish's n_eff assumes the weights unrelated to the outcome; here they are not (failures are judged for
        certain, weight 1), and this n is larger where his would overstate the variance. Kish's when p is 0 or 1."""
        if self.n == 0 or self.total <= 0:
            return 0.0
        p = self.hits / self.total
        spread = self.hit_squares * (1 - 2 * p) + p * p * self.squares  # Σ w²(y − p)²
        if not 0 < p < 1 or spread <= 0:
            return self.effective_n
        return p * (1 - p) * self.total * self.total / spread

    @property
    def mean_n(self) -> float:
        """The effective n of the weighted mean, as `share_n`: the weighted variance of the scores over the mean's
        linearised variance Σ wᵢ²(xᵢ − m)² / (Σ wᵢ)²; Kish's when every score is the same."""
        if not self.scores:
            return 0.0
        total = sum(self.scores.values())
        mean = sum(score * weight for score, weight in self.scores.items()) / total
        variance = sum(weight * (score - mean) ** 2 for score, weight in self.scores.items()) / total
        spread = sum(weight * (score - mean) ** 2 for score, weight in self.score_squares.items())
        if variance <= 0 or spread <= 0:
            return kish_n(total, sum(self.score_squares.values()))
        return variance * total * total / spread

    @property
    def unequal(self) -> bool:
        """Whether the weights differ (equal weights give the unweighted figures)."""
        return self.n > 0 and not math.isclose(self.total * self.total, self.n * self.squares, rel_tol=1e-12)


def weight_of(probability: float | None) -> float:
    """An answer's weight: 1/π; None (judged for certain) is 1."""
    if probability is None:
        return 1.0
    if not 0 < probability <= 1:
        raise ValueError("an inclusion probability is in (0, 1]")
    return 1.0 / probability


def kish_n(total: float, squares: float) -> float:
    """Kish's effective sample size (Σ w)² / Σ w²: n for equal weights, less for unequal ones."""
    return total * total / squares if squares > 0 else 0.0


def hajek(values: Iterable[float], probabilities: Iterable[float | None]) -> float | None:
    """The Hájek estimate of a population mean (a share, for 0/1 values): Σ yᵢ/πᵢ over Σ 1/πᵢ."""
    weights = Weights()
    weighted = 0.0
    for value, probability in zip(values, probabilities, strict=True):
        weight = weight_of(probability)
        weights.add(weight)
        weighted += weight * value
    return weighted / weights.total if weights.n else None


def wilson_at(p: float, n: float, confidence: float = CONFIDENCE) -> Interval | None:
    """The Wilson score interval of a share `p` observed on a sample worth `n` (not necessarily whole)."""
    if n <= 0:
        return None
    if not 0 <= p <= 1:
        raise ValueError("a share is between 0 and 1")
    z = z_of(confidence)
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    low = 0.0 if p == 0 else max(0.0, centre - half)
    high = 1.0 if p == 1 else min(1.0, centre + half)
    return Interval(min(low, p), max(high, p))


def weighted_proportion(weights: Weights, confidence: float = CONFIDENCE) -> Estimate:
    """The Hájek share of hits with a Wilson interval at Kish's n_eff; n is the judged n."""
    if weights.n == 0 or weights.total <= 0:
        return Estimate(None, 0, None)
    p = min(1.0, max(0.0, weights.hits / weights.total))
    n_eff = weights.share_n
    return Estimate(p, weights.n, wilson_at(p, n_eff, confidence), effective_n=n_eff)


def _distribution(weights: Weights):
    import numpy as np  # on first use: see common.reports.intervals' note

    distinct = np.array(sorted(weights.scores), dtype=float)
    shares = np.array([weights.scores[v] for v in sorted(weights.scores)], dtype=float)
    return distinct, shares / shares.sum()


def _resampled(distinct, shares, size: int, resamples: int, rng):
    drawn = rng.multinomial(size, shares, size=resamples)
    return drawn @ distinct / size


def weighted_mean(
    weights: Weights, confidence: float = CONFIDENCE, *, resamples: int = RESAMPLES, seed: int = SEED
) -> Estimate:
    """The weighted mean score, with the percentile bootstrap of a sample of n_eff drawn from the weighted shares
    of each score (at equal weights: the plain bootstrap of `intervals.bootstrap_mean`)."""
    import numpy as np

    if weights.n == 0 or not weights.scores:
        return Estimate(None, 0, None)
    distinct, shares = _distribution(weights)
    mean = float(distinct @ shares)
    n_eff = weights.mean_n
    samples = _resampled(distinct, shares, max(1, round(n_eff)), resamples, np.random.default_rng(seed))
    interval = _percentile(samples, confidence)
    return Estimate(mean, weights.n, Interval(min(interval.low, mean), max(interval.high, mean)), effective_n=n_eff)


def weighted_proportion_change(before: Weights, after: Weights, confidence: float = CONFIDENCE) -> Shift:
    """Up or down only when Newcombe's interval of the difference, each side taken at its n_eff, excludes 0."""
    estimates = weighted_proportion(before, confidence), weighted_proportion(after, confidence)
    difference = None
    if all(e.value is not None for e in estimates):
        sides = [(e.value * e.effective_n, e.effective_n) for e in estimates]
        difference = newcombe(sides[0], sides[1], confidence)
    return Shift(*estimates, _direction(*estimates, difference), difference)


def weighted_mean_change(
    before: Weights, after: Weights, confidence: float = CONFIDENCE, *, resamples: int = RESAMPLES, seed: int = SEED
) -> Shift:
    """Up or down only when the bootstrap interval of the difference of weighted means (each at its n_eff) excludes
    0."""
    import numpy as np

    estimates = (
        weighted_mean(before, confidence, resamples=resamples, seed=seed),
        weighted_mean(after, confidence, resamples=resamples, seed=seed),
    )
    difference = None
    if estimates[0].n and estimates[1].n:
        rng = np.random.default_rng(seed)
        second, first = _distribution(after), _distribution(before)
        samples = _resampled(*second, max(1, round(after.mean_n)), resamples, rng) - _resampled(
            *first, max(1, round(before.mean_n)), resamples, rng
        )
        difference = _percentile(samples, confidence)
    return Shift(*estimates, _direction(*estimates, difference), difference)
