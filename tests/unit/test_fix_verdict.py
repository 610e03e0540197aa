"""The verdict on a fix (common.reports.fixes): each outcome from counts alone, and the answers still needed checked
against statsmodels' power solver (a test dependency only)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from statsmodels.stats.power import NormalIndPower

from common.reports.fixes import (
    IMPROVED,
    MIN_FOLLOW,
    NO_EVIDENCE,
    NOT_IMPROVED,
    WORSE,
    GoldenRerun,
    answers_needed,
    cohens_h,
    verdict,
)
from common.reports.intervals import newcombe, wilson

MARK = datetime(2026, 11, 2, 10, tzinfo=UTC)
LATER = MARK + timedelta(days=14)


def test_a_significant_fall_is_improved_with_both_intervals() -> None:
    found = verdict((30, 100), (5, 100), marked_at=MARK, now=LATER)
    assert found.outcome == IMPROVED and found.needed is None
    assert found.shift.before.interval == wilson(30, 100) and found.shift.after.interval == wilson(5, 100)
    assert found.shift.difference == newcombe((30, 100), (5, 100))
    assert found.shift.difference.high < 0


def test_a_significant_rise_is_worse() -> None:
    assert verdict((10, 100), (30, 100), marked_at=MARK, now=LATER).outcome == WORSE


def test_enough_answers_and_a_week_without_a_fall_is_not_improved() -> None:
    # 30% before; halving it to 15% needs fewer than the 150 answers after, whose rate stayed at 30%.
    enough = answers_needed((60, 200), 0.15)
    assert enough is not None and enough < 150
    found = verdict((60, 200), (45, 150), marked_at=MARK, now=LATER)
    assert found.outcome == NOT_IMPROVED and not found.shift.significant


def test_enough_answers_within_the_first_week_waits_for_the_week() -> None:
    found = verdict((60, 200), (45, 150), marked_at=MARK, now=MARK + timedelta(days=3))
    assert found.outcome == NO_EVIDENCE and found.needed == 0 and found.wait_until == MARK + MIN_FOLLOW


def test_too_few_answers_after_is_no_evidence_with_the_n_still_needed() -> None:
    found = verdict((60, 200), (3, 12), marked_at=MARK, now=LATER)
    assert found.outcome == NO_EVIDENCE
    # The observed fall (25%) is smaller than the target (15%): the target's n, less the 12 answers in.
    assert found.needed == answers_needed((60, 200), 0.15) - 12
    bigger_fall = verdict((60, 200), (1, 12), marked_at=MARK, now=LATER)  # 8%: a larger fall needs fewer
    assert bigger_fall.outcome == NO_EVIDENCE and bigger_fall.needed < found.needed


def test_no_answer_yet_needs_at_least_the_minimum() -> None:
    found = verdict((60, 200), (0, 0), marked_at=MARK, now=MARK)
    assert found.outcome == NO_EVIDENCE and found.needed == answers_needed((60, 200), 0.15)


def test_too_few_before_cannot_be_shown_either_way() -> None:
    found = verdict((2, 5), (0, 40), marked_at=MARK, now=LATER)
    assert found.outcome == NO_EVIDENCE and found.needed is None


def test_nothing_failing_before_has_nothing_to_improve() -> None:
    found = verdict((0, 80), (0, 80), marked_at=MARK, now=LATER)
    assert found.outcome == NO_EVIDENCE and found.needed is None


@pytest.mark.parametrize(("before", "p_after"), [((60, 200), 0.15), ((30, 100), 0.1), ((100, 1000), 0.05)])
def test_answers_needed_matches_statsmodels(before: tuple[int, int], p_after: float) -> None:
    failed, n1 = before
    h = abs(cohens_h(failed / n1, p_after))
    ratio = NormalIndPower().solve_power(effect_size=h, nobs1=n1, alpha=0.05, power=0.8, ratio=None)
    expected = ratio * n1
    needed = answers_needed(before, p_after)
    # statsmodels also counts the far tail's (negligible) power: within one answer or 1%.
    assert needed == pytest.approx(expected, rel=0.01, abs=1.0)


def test_answers_needed_is_none_when_the_period_before_is_too_small() -> None:
    # 3 of 10 before: no number of answers after can show a fall to 25% at 80% power.
    assert answers_needed((3, 10), 0.25) is None
    assert answers_needed((3, 10), 0.3) is None  # no difference at all


def test_the_golden_rerun_travels_with_the_verdict() -> None:
    rerun = GoldenRerun(run_id=4, passed=3, total=4)
    assert verdict((30, 100), (5, 100), marked_at=MARK, now=LATER, golden=rerun).golden == rerun


def test_now_before_the_mark_is_an_error() -> None:
    with pytest.raises(ValueError):
        verdict((30, 100), (5, 100), marked_at=MARK, now=MARK - timedelta(seconds=1))
