"""The reweighted figures of sampled answers (common.reports.weighted), tested directly: against the unweighted
ones at equal weights, against statsmodels' Wilson interval at Kish's effective n, and on simulated weeks where
signalled answers fail far more often than the rest."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from statsmodels.stats.proportion import proportion_confint

from common.reports.intervals import bootstrap_mean, proportion, proportion_change
from common.reports.tallies import ChannelTally
from common.reports.weighted import (
    Weights,
    hajek,
    kish_n,
    weight_of,
    weighted_mean,
    weighted_proportion,
    weighted_proportion_change,
    wilson_at,
)
from store.signals import NEGATIVE_REACTION, REASK
from tests.stats_rows import NOW, PRICES, pair, thresholds_for, verdict
from workers import sampling


def _weights(items):
    found = Weights()
    for weight, hit in items:
        found.add(weight, hit=hit, score=0.0 if hit else 4.0)
    return found


def test_equal_weights_give_the_unweighted_figures():
    items = [(1.0, i < 7) for i in range(40)]
    found = weighted_proportion(_weights(items))
    plain = proportion(7, 40)
    assert found.value == pytest.approx(plain.value)
    assert found.low == pytest.approx(plain.low) and found.high == pytest.approx(plain.high)
    assert found.effective_n == pytest.approx(40) and found.n == 40
    assert not _weights(items).unequal
    # Every weight 5 (a plain 20% sample): the same share and interval, nothing unequal.
    assert weighted_proportion(_weights([(5.0, hit) for _, hit in items])).high == pytest.approx(plain.high)
    mean = weighted_mean(_weights(items))
    assert mean.value == pytest.approx(bootstrap_mean({0: 7, 4: 33}).value)
    assert mean.interval == bootstrap_mean({0: 7, 4: 33}).interval
    assert _weights(items).share_n == pytest.approx(40) and _weights(items).mean_n == pytest.approx(40)


def test_the_hajek_share_and_kish_n():
    # 10 signalled answers (weight 1), 8 failed; 20 sampled at 20% (weight 5), 2 failed.
    items = [(1.0, i < 8) for i in range(10)] + [(5.0, i < 2) for i in range(20)]
    weights = _weights(items)
    assert weights.total == 110 and weights.hits == 18
    assert weighted_proportion(weights).value == pytest.approx(18 / 110)
    assert weights.effective_n == pytest.approx(110**2 / (10 + 20 * 25)) == kish_n(110, 510)
    assert hajek([1.0 if h else 0.0 for _, h in items], [1 / w for w, _ in items]) == pytest.approx(18 / 110)
    # The share's linearised variance, by hand: Σ w²(y − p)² / (Σ w)², and the n at which Wilson has it.
    p = 18 / 110
    variance = sum(w * w * ((1.0 if hit else 0.0) - p) ** 2 for w, hit in items) / 110**2
    assert weights.share_n == pytest.approx(p * (1 - p) / variance)
    found = weighted_proportion(weights)
    assert found.n == 30  # the judged n is shown; the interval is at n_eff
    assert found.effective_n == pytest.approx(weights.share_n)
    low, high = proportion_confint(p * weights.share_n, weights.share_n, method="wilson")
    assert (found.low, found.high) == (pytest.approx(low), pytest.approx(high))
    # Kish's n (the weights taken as unrelated to the outcome) would overstate the variance here: the failures are
    # the certain, weight-1 answers.
    assert weights.effective_n < weights.share_n


@pytest.mark.parametrize(("p", "n"), [(0.0, 12.5), (1.0, 7.3), (0.31, 48.0), (0.05, 200.7)])
def test_wilson_at_a_fractional_n_is_statsmodels(p, n):
    low, high = proportion_confint(p * n, n, method="wilson")
    found = wilson_at(p, n)
    assert found.low == pytest.approx(low, abs=1e-12) and found.high == pytest.approx(high, abs=1e-12)


def test_weights_are_checked():
    assert weight_of(None) == 1.0 and weight_of(0.25) == 4.0
    for bad in (0.0, 1.5, -0.2):
        with pytest.raises(ValueError):
            weight_of(bad)
    with pytest.raises(ValueError):
        Weights().add(float("inf"))
    assert weighted_proportion(Weights()).value is None


def test_a_weighted_change_widens_with_the_weights():
    before = _weights([(1.0, i < 10) for i in range(100)])
    after = _weights([(1.0, i < 25) for i in range(100)])
    assert weighted_proportion_change(before, after).direction == "up"
    weighted_difference = weighted_proportion_change(before, after).difference
    plain_difference = proportion_change((10, 100), (25, 100)).difference
    assert weighted_difference.low == pytest.approx(plain_difference.low)
    assert weighted_difference.high == pytest.approx(plain_difference.high)
    # The same shares from a sample of very unequal weights: too little information to call it.
    uneven = _weights([(1.0, i < 3) for i in range(30)] + [(20.0, i < 3) for i in range(12)])
    assert uneven.effective_n < 20
    assert weighted_proportion_change(uneven, before).direction == "none"


# A simulated week ------------------------------------------------------------------------------------------------

RATE = 0.2
SIGNALLED_SHARE, SIGNALLED_FAILS, QUIET_FAILS = 0.15, 0.7, 0.08  # signalled answers fail far more often


def _week(seed: int, answers_per_day: int = 300):
    """A week of answers with the truth known: (failed, signalled, sampling point) of each."""
    rng = np.random.default_rng(seed)
    n = 7 * answers_per_day
    signalled = rng.random(n) < SIGNALLED_SHARE
    failed = np.where(signalled, rng.random(n) < SIGNALLED_FAILS, rng.random(n) < QUIET_FAILS)
    points = [sampling.sample_point("C1", f"{1_700_000_000 + seed * 10**6 + i}.000100") for i in range(n)]
    return failed, signalled, points


def _judged_rows(failed, signalled, points):
    """What relmon stores of the week: every signalled answer judged for certain, the rest at RATE, each judged
    answer's probability kept (workers.sampling's rules); a failed answer scores 1, another 4 (threshold 2)."""
    rows = []
    for i, (bad, signal, point) in enumerate(zip(failed, signalled, points, strict=True)):
        probability = sampling.inclusion_probability(RATE, source="capture", signalled=bool(signal))
        if not sampling.chosen(point, probability):
            rows.append(pair(status="skipped_sampling", at=NOW - timedelta(minutes=i)))
            continue
        row = pair(at=NOW - timedelta(minutes=i), judgments=[verdict(1 if bad else 4)])
        signals = (REASK, NEGATIVE_REACTION) if signal else ()
        rows.append(replace(row, signals=signals, inclusion_probability=None if probability >= 1 else probability))
    return rows


def _report(rows):
    tally = ChannelTally(thresholds_for, PRICES)
    for row in rows:
        tally.add(row)
    return tally.stats("C1")


def test_on_a_simulated_week_the_weighted_rate_is_the_populations_and_the_unweighted_one_is_not():
    failed, signalled, points = _week(seed=1)
    truth = failed.mean()  # the failure rate of every answer of the week
    stats = _report(_judged_rows(failed, signalled, points))
    relevancy = stats.judge("relevancy")
    unweighted = proportion(relevancy.low, relevancy.scored)
    weighted = relevancy.low_estimate
    # Signalled answers are all judged, a fifth of the rest: the judged answers over-represent failures.
    assert not (unweighted.low <= truth <= unweighted.high)
    assert unweighted.value > truth + 0.1
    assert weighted.low <= truth <= weighted.high
    assert abs(weighted.value - truth) < 0.02
    assert weighted.n == relevancy.scored  # the judged n
    assert weighted.effective_n == pytest.approx(relevancy.weights.share_n)
    assert stats.sampled and stats.sampled_share == pytest.approx(RATE, abs=0.02)


def test_the_weighted_interval_covers_the_rate_95_percent_of_weeks():
    """Over 400 simulated weeks: the interval covers the traffic's failure rate (what the week's answers are drawn
    from) about 95% of the time, as a 95% interval must, and the week's own rate at least as often; no bias."""
    process = SIGNALLED_SHARE * SIGNALLED_FAILS + (1 - SIGNALLED_SHARE) * QUIET_FAILS
    covered_process = covered_week = 0
    errors = []
    weeks = 400
    for seed in range(weeks):
        failed, signalled, points = _week(seed=seed + 1_000, answers_per_day=100)
        weights = Weights()
        for bad, signal, point in zip(failed, signalled, points, strict=True):
            probability = sampling.inclusion_probability(RATE, source="capture", signalled=bool(signal))
            if sampling.chosen(point, probability):
                weights.add(weight_of(probability), hit=bool(bad))
        found = weighted_proportion(weights)
        covered_process += found.low <= process <= found.high
        covered_week += found.low <= failed.mean() <= found.high
        errors.append(found.value - failed.mean())
    assert 0.92 <= covered_process / weeks <= 0.98
    assert covered_week >= covered_process
    assert abs(np.mean(errors)) < 0.005  # no bias


def test_the_daily_means_are_reweighted_too():
    from common.reports.tallies import DailyTally
    from tests.stats_rows import PERIOD

    tally = DailyTally(PERIOD)
    at = PERIOD.end - timedelta(hours=1)
    certain = replace(pair(at=at, judgments=[verdict(0)]), signals=(REASK,))  # signalled: weight 1
    sampled = replace(pair(at=at, judgments=[verdict(4)]), inclusion_probability=0.25)  # weight 4
    for row in (certain, sampled):
        tally.add(row)
    last = tally.points("relevancy")[-1]
    assert last.scored == 2 and last.mean == pytest.approx((0 * 1 + 4 * 4) / 5)
