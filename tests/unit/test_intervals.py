"""The intervals and the change rule against reference implementations (statsmodels, scipy) and by their
properties."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import bootstrap
from statsmodels.stats.proportion import confint_proportions_2indep, proportion_confint

from common.reports.intervals import (
    MIN_N,
    bootstrap_mean,
    mean_change,
    newcombe,
    proportion,
    proportion_change,
    wilson,
)


@pytest.mark.parametrize(
    ("successes", "n"), [(0, 1), (1, 1), (0, 10), (3, 10), (23, 48), (48, 48), (1, 1000), (500, 1000), (7, 12)]
)
@pytest.mark.parametrize("confidence", [0.95, 0.9, 0.99])
def test_wilson_matches_statsmodels(successes: int, n: int, confidence: float) -> None:
    low, high = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    found = wilson(successes, n, confidence)
    assert found is not None
    assert found.low == pytest.approx(low, abs=1e-12)
    assert found.high == pytest.approx(high, abs=1e-12)


def test_no_observations_no_interval() -> None:
    assert wilson(0, 0) is None
    assert proportion(0, 0).value is None and proportion(0, 0).interval is None
    assert bootstrap_mean([]).interval is None and bootstrap_mean([]).n == 0


def test_impossible_counts_refused() -> None:
    with pytest.raises(ValueError):
        wilson(5, 4)
    with pytest.raises(ValueError):
        wilson(1, 4, confidence=1.0)


@pytest.mark.parametrize(
    ("before", "after"), [((3, 33), (15, 48)), ((10, 20), (10, 20)), ((0, 12), (12, 12)), ((40, 100), (30, 100))]
)
def test_newcombe_matches_statsmodels(before: tuple[int, int], after: tuple[int, int]) -> None:
    low, high = confint_proportions_2indep(*after, *before, method="newcomb", compare="diff", alpha=0.05)
    found = newcombe(before, after)
    assert found is not None
    assert found.low == pytest.approx(low, abs=1e-12)
    assert found.high == pytest.approx(high, abs=1e-12)


@pytest.mark.parametrize(
    "scores",
    [
        [0, 1, 2, 3, 4, 4, 4, 3, 2, 4, 1, 0, 3, 3],
        [4] * 40 + [0] * 5 + [2] * 15,
        [1, 5, 5, 4, 3, 5, 2, 5, 4, 4, 5, 1, 3, 3, 5, 5, 4, 2, 5, 5],
    ],
)
def test_bootstrap_mean_close_to_scipy(scores: list[int]) -> None:
    """Both are Monte Carlo estimates of the same percentile interval: they agree within resampling noise."""
    reference = bootstrap(
        (np.array(scores, dtype=float),),
        np.mean,
        confidence_level=0.95,
        n_resamples=20_000,
        method="percentile",
        rng=np.random.default_rng(1),
    ).confidence_interval
    found = bootstrap_mean(scores)
    spread = reference.high - reference.low
    assert found.value == pytest.approx(np.mean(scores))
    assert found.n == len(scores)
    assert found.low == pytest.approx(reference.low, abs=0.08 * spread)
    assert found.high == pytest.approx(reference.high, abs=0.08 * spread)


def test_bootstrap_is_stable_and_takes_counts() -> None:
    scores = [0, 1, 1, 2, 2, 2, 3, 4, 4, 4, 4]
    assert bootstrap_mean(scores) == bootstrap_mean(scores)
    assert bootstrap_mean({0: 1, 1: 2, 2: 3, 3: 1, 4: 4}) == bootstrap_mean(scores)
    assert bootstrap_mean({0: 1, 1: 2, 2: 3, 3: 1, 4: 4, 9: 0}) == bootstrap_mean(scores)


def test_change_says_up_or_down_only_when_significant() -> None:
    up = proportion_change((3, 33), (15, 48))
    assert up.direction == "up" and up.significant
    assert proportion_change((15, 48), (3, 33)).direction == "down"
    noise = proportion_change((4, 12), (6, 12))
    assert noise.direction == "none" and not noise.significant
    assert proportion_change((0, MIN_N - 1), (MIN_N - 1, MIN_N - 1)).direction == "too_few"
    assert proportion_change((0, 0), (5, 20)).direction == "too_few"


def test_mean_change_rule() -> None:
    assert mean_change({2: 10, 3: 10}, {3: 10, 4: 10}).direction == "up"
    assert mean_change({3: 10, 4: 10}, {2: 10, 3: 10}).direction == "down"
    assert mean_change({2: 10, 3: 10}, {2: 9, 3: 11}).direction == "none"
    assert mean_change([4] * 5, [0] * 20).direction == "too_few"
    assert mean_change([], [0] * 20).difference is None


def test_change_false_positive_rate_is_about_five_percent() -> None:
    """With no real change (both periods drawn from the same rate), the rule calls a change about 5% of the time
    or less: the rate docs/statistics.md states."""
    rng = np.random.default_rng(7)
    trials, n, rate = 2_000, 60, 0.3
    calls = sum(
        proportion_change((int(rng.binomial(n, rate)), n), (int(rng.binomial(n, rate)), n)).significant
        for _ in range(trials)
    )
    assert calls / trials <= 0.065


counts = st.integers(min_value=1, max_value=5_000).flatmap(lambda n: st.tuples(st.integers(0, n), st.just(n)))


@given(counts)
def test_wilson_contains_the_rate_within_0_1(found: tuple[int, int]) -> None:
    successes, n = found
    interval = wilson(successes, n)
    assert interval is not None
    assert 0.0 <= interval.low <= successes / n <= interval.high <= 1.0


@given(st.integers(1, 200), st.floats(0.0, 1.0))
def test_wilson_narrows_with_n(n: int, share: float) -> None:
    successes = round(share * n)
    small, large = wilson(successes, n), wilson(successes * 4, n * 4)
    assert small is not None and large is not None
    assert large.high - large.low < small.high - small.low


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 4), min_size=1, max_size=300))
def test_bootstrap_contains_the_mean_within_the_scale(scores: list[int]) -> None:
    found = bootstrap_mean(scores)
    assert found.interval is not None and found.value is not None
    assert 0 <= found.interval.low <= found.value <= found.interval.high <= 4
