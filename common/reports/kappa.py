"""How far a judge agrees with people, and its failure rate corrected by what people said: pure functions over
counts (docs/statistics.md, "A judge you can check").

- `cohen_kappa`: Cohen's kappa of a confusion table, plain (pass/fail) or weighted (linear or quadratic, for
  ordinal scales such as 1..5), with its analytic standard error (Fleiss, Cohen & Everitt 1969, the large-sample
  variance; unweighted kappa is its special case) and the normal 95% interval, clipped to −1..1.
- `kappa_fall`: whether this week's kappa is significantly below last week's: the 95% interval of the difference
  (the two weeks' answers are different answers, so their variances add) lies wholly below 0.
- `ppi_mean`: prediction-powered inference (Angelopoulos et al. 2023): the judge's mean over every judged answer
  plus the mean residual (label − judge) over the labelled ones, variance var(judge)/N + var(residual)/n.
- `ppi_failure_rate`: the same for a failure rate when the labelled answers are not a random sample of them (votes
  come only on alerts, the answers the judge failed): the residual is averaged within each of the judge's verdicts
  and weighted by that verdict's share of every judged answer (stratified PPI, Fisch et al. 2024). With labels
  drawn at random it is the plain estimate, up to the sampling of the labels. Under sampling (RELMON_SAMPLE) each
  verdict's share of every judged answer is the weighted one (each answer 1/π, the Hájek share of
  `common.reports.weighted`), its variance at that share's effective n: the judged answers over-represent the
  signalled ones, which the judge fails far more often than the traffic's.

Nothing here imports numpy: these are tables of at most a scale's size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from common.reports.intervals import CONFIDENCE, Estimate, Interval, z_of
from common.reports.weighted import Weights as AnswerWeights

Weights = Literal["linear", "quadratic"] | None
MIN_LABELS = 10  # below this many labelled answers a kappa or a corrected rate is "too few"
MIN_PER_VERDICT = (
    5  # ...and below this many among the answers the judge failed (or passed), when it failed (passed) any
)


@dataclass(frozen=True)
class Kappa:
    """Cohen's kappa with its n (labelled answers), standard error and interval; value None when undefined (no
    answers, or both raters always said the same thing, so chance explains all agreement)."""

    value: float | None
    n: int
    se: float | None
    interval: Interval | None
    weights: Weights = None

    @property
    def enough(self) -> bool:
        return self.value is not None and self.n >= MIN_LABELS


def confusion(pairs: Sequence[tuple[int, int]], categories: Sequence[int]) -> list[list[int]]:
    """table[i][k]: how many items the first rater put in categories[i] and the second in categories[k]."""
    index = {category: i for i, category in enumerate(categories)}
    table = [[0] * len(categories) for _ in categories]
    for first, second in pairs:
        table[index[first]][index[second]] += 1
    return table


def _agreement_weights(k: int, weights: Weights) -> list[list[float]]:
    """1 on the diagonal, less the further apart two categories are (0 for the ends of the scale)."""
    if weights is None:
        return [[1.0 if i == j else 0.0 for j in range(k)] for i in range(k)]
    if weights not in ("linear", "quadratic"):
        raise ValueError("weights must be None, 'linear' or 'quadratic'")
    power = 1 if weights == "linear" else 2
    span = max(k - 1, 1)
    return [[1.0 - (abs(i - j) / span) ** power for j in range(k)] for i in range(k)]


def cohen_kappa(table: Sequence[Sequence[int]], weights: Weights = None, confidence: float = CONFIDENCE) -> Kappa:
    """Kappa of a square table of counts (rows: one rater, columns: the other, categories in scale order)."""
    k = len(table)
    if any(len(row) != k for row in table):
        raise ValueError("the table must be square")
    n = sum(sum(row) for row in table)
    if n == 0 or k < 2:
        return Kappa(None, n, None, None, weights)
    w = _agreement_weights(k, weights)
    p = [[cell / n for cell in row] for row in table]
    rows = [sum(row) for row in p]
    cols = [sum(p[i][j] for i in range(k)) for j in range(k)]
    observed = sum(w[i][j] * p[i][j] for i in range(k) for j in range(k))
    expected = sum(w[i][j] * rows[i] * cols[j] for i in range(k) for j in range(k))
    if expected >= 1 - 1e-12:
        return Kappa(None, n, None, None, weights)
    kappa = (observed - expected) / (1 - expected)
    # Fleiss, Cohen & Everitt (1969): the variance of weighted kappa, with w̄ the weights' means by row and column.
    row_means = [sum(cols[j] * w[i][j] for j in range(k)) for i in range(k)]
    col_means = [sum(rows[i] * w[i][j] for i in range(k)) for j in range(k)]
    spread = sum(
        p[i][j] * (w[i][j] - (row_means[i] + col_means[j]) * (1 - kappa)) ** 2 for i in range(k) for j in range(k)
    )
    variance = (spread - (kappa - expected * (1 - kappa)) ** 2) / ((1 - expected) ** 2 * n)
    se = math.sqrt(max(variance, 0.0))
    half = z_of(confidence) * se
    return Kappa(kappa, n, se, Interval(max(-1.0, kappa - half), min(1.0, kappa + half)), weights)


@dataclass(frozen=True)
class KappaFall:
    """This week's kappa against last week's: the difference with its 95% interval, and whether it fell."""

    before: Kappa
    after: Kappa
    difference: float
    interval: Interval

    @property
    def fell(self) -> bool:
        return self.interval.high < 0


def kappa_fall(before: Kappa, after: Kappa, confidence: float = CONFIDENCE) -> KappaFall | None:
    """The change after − before with the interval of a difference of independent estimates; None when either
    week has too few labels or an undefined kappa."""
    if not (before.enough and after.enough) or before.se is None or after.se is None:
        return None
    difference = after.value - before.value  # type: ignore[operator]  # both defined: `enough`
    half = z_of(confidence) * math.hypot(before.se, after.se)
    return KappaFall(before, after, difference, Interval(difference - half, difference + half))


def _variance(values: Sequence[float]) -> float:
    """The sample variance (n − 1); 0 for fewer than two values."""
    if len(values) < 2:
        return 0.0
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / (len(values) - 1)


def ppi_mean(
    predictions: Sequence[float],
    labelled_predictions: Sequence[float],
    labels: Sequence[float],
    confidence: float = CONFIDENCE,
    *,
    min_labels: int = MIN_LABELS,
) -> Estimate:
    """The prediction-powered mean: mean(predictions over all N) + mean(labels − their predictions over the n
    labelled), with the normal interval of variance var(predictions)/N + var(residuals)/n. Its n is the labelled
    count; below `min_labels` the estimate has no value ("too few")."""
    if len(labelled_predictions) != len(labels):
        raise ValueError("each label needs the judge's value of the same answer")
    n, total = len(labels), len(predictions)
    if n < min_labels or total == 0:
        return Estimate(None, n, None)
    residuals = [y - f for y, f in zip(labels, labelled_predictions, strict=True)]
    value = sum(predictions) / total + sum(residuals) / n
    se = math.sqrt(_variance(predictions) / total + _variance(residuals) / n)
    half = z_of(confidence) * se
    return Estimate(value, n, Interval(value - half, value + half))


@dataclass(frozen=True)
class Corrected:
    """The judge's failure rate and the rate corrected by the team's labels (`ppi_failure_rate`)."""

    judged: int  # N: every answer the judge scored
    judge_failed: int  # of those, how many it failed
    rate: Estimate  # the corrected rate; no value below the minimum of labels ("too few")
    weighted_rate: float | None = None  # under sampling: the judge's failure rate weighted by 1/π (Hájek)

    @property
    def judge_rate(self) -> float | None:
        if self.weighted_rate is not None:
            return self.weighted_rate
        return self.judge_failed / self.judged if self.judged else None


def ppi_failure_rate(
    judged: int,
    judge_failed: int,
    table: Sequence[Sequence[int]],
    confidence: float = CONFIDENCE,
    *,
    min_labels: int = MIN_LABELS,
    min_per_verdict: int = MIN_PER_VERDICT,
    weights: AnswerWeights | None = None,
) -> Corrected:
    """The failure rate corrected by labels, from counts: `judged` answers, `judge_failed` of them failed by the
    judge, and the labelled ones as a 2×2 table [[judge fail & team fail, judge fail & team pass], [judge pass &
    team fail, judge pass & team pass]].

    Within each of the judge's verdicts the judge's value is constant, so judge + mean residual is the share the
    team failed there; the verdicts are weighted by their share w of all N. Variance: Σ w² p̃(1 − p̃)/n_v (p̃ the
    team's share with one failure and one pass added, Agresti–Caffo, so a verdict whose few labels all agree does
    not claim certainty) + (Σ w p² − rate²)/N for the weights estimated from N.

    `weights`: the judged answers' weights 1/π under sampling, the judge's failures its hits: the verdicts' shares
    are then the Hájek ones and N their effective n (`Weights.share_n`)."""
    if not 0 <= judge_failed <= judged:
        raise ValueError("judge_failed must be between 0 and judged")
    (fail_fail, fail_pass), (pass_fail, pass_pass) = table
    labelled = fail_fail + fail_pass + pass_fail + pass_pass
    share, size = (judge_failed / judged if judged else 0.0), float(judged)
    weighted = weights is not None and weights.unequal
    if weighted:
        share, size = weights.hits / weights.total, weights.share_n
    strata = (share, 1 - share) if judged else (0.0, 0.0)
    verdicts = ((fail_fail, fail_fail + fail_pass), (pass_fail, pass_fail + pass_pass))
    short = any(weight > 0 and count < min_per_verdict for weight, (_, count) in zip(strata, verdicts, strict=True))
    if not judged or labelled < min_labels or short:
        return Corrected(judged, judge_failed, Estimate(None, labelled, None), share if weighted else None)
    shares = [failed / count if count else 0.0 for failed, count in verdicts]
    value = sum(w * p for w, p in zip(strata, shares, strict=True))
    variance = sum(
        w * w * ((failed + 1) / (count + 2)) * (1 - (failed + 1) / (count + 2)) / count
        for w, (failed, count) in zip(strata, verdicts, strict=True)
        if w > 0
    )
    variance += max(sum(w * p * p for w, p in zip(strata, shares, strict=True)) - value * value, 0.0) / size
    half = z_of(confidence) * math.sqrt(variance)
    interval = Interval(max(0.0, value - half), min(1.0, value + half))
    return Corrected(judged, judge_failed, Estimate(value, labelled, interval), share if weighted else None)
