"""The trust figures: Wilson interval, alert precision, the threshold the votes suggest, like with like."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

import pytest

from common.messages.trust import precision_text
from common.reports.intervals import wilson
from common.reports.trust import Vote, precision, suggest_from_counts
from store.stats_queries import JudgmentRow, PairRow
from tests.report_tallies import like_with_like, second_opinions, voted_alerts

AT = datetime(2026, 12, 1, tzinfo=UTC)


def test_wilson_interval_matches_the_textbook():
    interval = wilson(8, 10, confidence=0.90)  # z = 1.645: 0.5408 – 0.9315
    assert interval.low == pytest.approx(0.5408, abs=1e-3) and interval.high == pytest.approx(0.9315, abs=1e-3)
    interval = wilson(8, 10)  # the 95% the reports show: z = 1.96, 0.4902 – 0.9433
    assert interval.low == pytest.approx(0.4902, abs=1e-3) and interval.high == pytest.approx(0.9433, abs=1e-3)
    assert wilson(0, 0) is None
    assert wilson(0, 5).low == 0.0 and wilson(5, 5).high == pytest.approx(1.0)
    assert wilson(5, 5, confidence=0.90).low == pytest.approx(0.6486, abs=1e-3)


VOTES = [Vote("C1", "relevancy", 1, True), Vote("C1", "relevancy", 2, False), Vote("C2", "relevancy", 0, True)]


def test_precision_is_counted_per_judge_overall_as_well_as_per_channel():
    found = {(p.channel_id, p.judge): (p.agreed, p.voted) for p in precision(VOTES)}
    assert found == {(None, "relevancy"): (2, 3), ("C1", "relevancy"): (1, 2), ("C2", "relevancy"): (1, 1)}


def test_the_precision_text_gives_the_agreement_with_its_interval():
    overall = next(p for p in precision(VOTES) if p.channel_id is None)
    assert precision_text(overall) == "2 of 3 voted alerts agreed with (too few for a rate)"


def row(pair_id, *judgments, channel="C1"):
    return PairRow(pair_id, channel, AT, "judged", judgments=tuple(judgments))


def test_the_majority_of_the_votes_decides():
    rows = [
        row(1, JudgmentRow(1, "relevancy", "ok", 1, votes_right=2, votes_wrong=1)),
        row(3, JudgmentRow(3, "relevancy", "ok", 2, votes_wrong=1)),
    ]
    assert voted_alerts(rows) == [Vote("C1", "relevancy", 1, True), Vote("C1", "relevancy", 2, False)]


def test_a_tie_says_nothing():
    assert voted_alerts([row(2, JudgmentRow(2, "relevancy", "ok", 1, votes_right=1, votes_wrong=1))]) == []


def suggested(votes: list[tuple[int, bool]], current: float, lowest: int) -> tuple[float, float, float] | None:
    """The threshold suggested from these (score, agreed) votes, counted as the digest's tally counts them."""
    return suggest_from_counts(Counter(votes), current, lowest)


def test_a_stricter_threshold_is_suggested_when_it_misses_no_bad_answer():
    # Every alert at 2 was wrong; people agreed with those at 0 and 1.
    pairs = [(2, False)] * 10 + [(1, True)] * 6 + [(0, True)] * 4
    assert suggested(pairs, 2, 0) == (1.0, 1.0, 0.5)


def test_no_suggestion_under_twenty_votes_or_when_it_would_miss_bad_answers():
    assert suggested([(2, False)] * 10 + [(1, True)] * 9, 2, 0) is None  # 19 votes
    # Stricter would drop answers people marked bad (agreed at 2): nothing to suggest.
    assert suggested([(2, True)] * 5 + [(2, False)] * 5 + [(1, True)] * 10, 2, 0) is None
    assert suggested([(1, True)] * 20, 2, 0) is None  # already as precise as it gets


def week(*versions):
    """A week of relevancy judgments, one per (model, prompt version)."""
    return [
        row(i, JudgmentRow(i, "relevancy", "ok", 3, model=m, prompt_version=p)) for i, (m, p) in enumerate(versions)
    ]


def test_weeks_judged_by_the_same_model_with_the_same_prompt_are_comparable():
    same = like_with_like(week(("m1", "p1")), week(("m1", "p1")), "relevancy")
    assert same.comparable and same.note is None


def test_a_model_change_during_the_week_is_not_like_with_like():
    changed = like_with_like(week(("m1", "p1"), ("m2", "p1")), week(("m1", "p1")), "relevancy")
    assert not changed.comparable and "model changed during the week" in changed.note


def test_a_prompt_change_since_last_week_is_not_like_with_like():
    new_prompt = like_with_like(week(("m1", "p2")), week(("m1", "p1")), "relevancy")
    assert not new_prompt.comparable and "prompt differs from last week's" in new_prompt.note


def test_a_week_with_nothing_to_compare_with_is_comparable():
    assert like_with_like(week(("m1", "p1")), [], "relevancy").comparable


def test_disputed_low_scores_are_counted_with_both_scores():
    rows = [
        row(1, JudgmentRow(1, "relevancy", "ok", 1, confirmation_status="disputed", confirmation_score=4)),
        row(2, JudgmentRow(2, "relevancy", "ok", 0, confirmation_status="confirmed", confirmation_score=0)),
        row(3, JudgmentRow(3, "relevancy", "ok", 1, confirmation_status="unconfirmed")),
    ]
    disputed, confirmed, unconfirmed = second_opinions(rows)
    assert [(d.pair_id, d.score, d.second_score) for d in disputed] == [(1, 1, 4)]
    assert (confirmed, unconfirmed) == (1, 1)
