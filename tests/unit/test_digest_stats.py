"""The digest's period logic and statistics: what the week's answers count up to, pure functions tested directly."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from common.messages.digest import digest_message, digest_text
from common.reports.period import latest_slot, period_for, scheduled_key
from common.reports.stats import ChannelStats, Report
from tests.report_tallies import build_report, daily_series
from tests.stats_rows import NOW, PERIOD, PRICES, pair, thresholds_for, verdict


def test_period_is_the_seven_days_up_to_now_keyed_by_the_iso_week_sent_in():
    assert PERIOD.key == "2026-W48"
    assert PERIOD.end == NOW and PERIOD.start == NOW - timedelta(days=7)
    assert PERIOD.previous_start == NOW - timedelta(days=14)
    # Sunday 23:30 UTC is already Monday in Tokyo: the week is the digest time zone's.
    sunday_night = datetime(2026, 11, 22, 23, 30, tzinfo=UTC)
    assert period_for(sunday_night, "UTC").key == "2026-W47"
    assert period_for(sunday_night, "Asia/Tokyo").key == "2026-W48"
    # ISO years: 31 Dec 2026 (Thursday) belongs to 2026-W53, 1 Jan 2027 too.
    assert period_for(datetime(2027, 1, 1, 12, tzinfo=UTC)).key == "2026-W53"
    forced = period_for(NOW, force=True)
    assert forced.key.startswith("2026-W48+force-") and forced.week_key == "2026-W48"
    with pytest.raises(ValueError):
        period_for(datetime(2026, 11, 23, 9, 0))


def test_a_scheduled_run_is_keyed_by_its_slot_not_by_when_it_runs():
    sunday_slot = datetime(2026, 11, 29, 23, 0, tzinfo=UTC)  # Sunday 23:00, the last hour of 2026-W48
    assert latest_slot(sunday_slot, "sun", 23) == sunday_slot
    assert latest_slot(sunday_slot - timedelta(seconds=1), "sun", 23) == sunday_slot - timedelta(days=7)
    late = sunday_slot + timedelta(hours=2)  # Monday 01:00: ISO week 49
    assert period_for(late).key == "2026-W49"
    assert scheduled_key(late, "sun", 23) == "2026-W48"
    # a worker whose clock is a minute behind beat's, which sent the task at the slot: still this week's slot
    assert scheduled_key(datetime(2026, 11, 23, 8, 59, tzinfo=UTC), "mon", 9) == "2026-W48"
    assert scheduled_key(NOW, "mon", 9) == "2026-W48" == scheduled_key(NOW + timedelta(days=6), "mon", 9)
    # The slot is local: Monday 09:00 in Tokyo is Monday 00:00 UTC.
    assert latest_slot(NOW, "mon", 9, "Asia/Tokyo") == datetime(2026, 11, 23, 0, 0, tzinfo=UTC)
    assert scheduled_key(datetime(2026, 11, 22, 23, 40, tzinfo=UTC), "mon", 9, "Asia/Tokyo") == "2026-W47"
    # Across daylight saving (New York falls back on 1 Nov 2026), Monday 09:00 stays 09:00 local.
    assert latest_slot(datetime(2026, 11, 3, tzinfo=UTC), "mon", 9, "America/New_York") == datetime(
        2026, 11, 2, 14, 0, tzinfo=UTC
    )


def test_an_empty_week_has_no_figures():
    report = build_report(PERIOD, [], [], thresholds_for, PRICES)
    assert report.empty
    assert report.overall.seen == 0 and report.overall.judged == 0 and report.overall.errors == 0
    assert report.overall.judges == {} and report.overall.worst == [] and report.overall.agreement is None
    assert [point.answers for point in report.daily] == [0] * 8  # Mon 16 09:00 to Mon 23 09:00: eight days
    assert all(point.mean is None for point in report.daily)


def test_an_empty_week_renders_a_short_message():
    report = build_report(PERIOD, [], [], thresholds_for, PRICES)
    message = digest_message(report, {}, {})
    assert "No answers were captured" in message["blocks"][-1]["text"]["text"]
    assert "No answers were captured" in digest_text(report, {}, {})


def overall(rows) -> ChannelStats:
    """Every channel's figures of this week's rows, as the digest builds them (common.reports.builder)."""
    return build_report(PERIOD, rows, [], thresholds_for, PRICES).overall


def test_a_week_of_only_errors_has_no_score():
    rows = [pair(judgments=[verdict(None, status="error", tokens=(50, 0))]) for _ in range(4)]
    stats = overall(rows)
    assert stats.seen == 4 and stats.judged == 0 and stats.errored == 4 and stats.errors == 4
    relevancy = stats.judge("relevancy")
    assert relevancy.scored == 0 and relevancy.mean is None and relevancy.share_low is None
    assert relevancy.distribution == {0: 0, 1: 0, 2: 0, 3: 0, 4: 0}
    assert stats.worst == []
    assert stats.tokens.prompt == 200 and stats.tokens.completion == 0
    report = build_report(PERIOD, rows, [], thresholds_for, PRICES)
    text = digest_text(report, {}, {})
    assert "Judge errors: 4" in text and "no scores" in text


def a_mixed_week_in_two_channels() -> ChannelStats:
    """Scored, errored, null, skipped, merged, cached and /judge answers in C1 (threshold 2) and C2 (threshold 3)."""
    rows = [
        pair("C1", judgments=[verdict(4, right=2)]),
        pair("C1", judgments=[verdict(2, wrong=1)]),  # low in C1 (threshold 2)
        pair("C1", judgments=[verdict(3, tokens=(999, 99), cached=True)]),  # cached: no tokens spent
        pair("C2", judgments=[verdict(3, right=1)]),  # low in C2 (threshold 3)
        pair("C2", judgments=[verdict(None, status="error")]),
        pair("C2", judgments=[verdict(None, judge="grounded", status="null", top=5)]),
        pair("C1", status="skipped_sampling"),
        pair("C1", status="skipped_budget"),
        pair("C1", status="no_question"),
        pair("C1", status="merged"),  # absorbed into another answer: not an answer of its own
        pair("C1", source="command", judgments=[verdict(0, tokens=(300, 30))]),  # a /judge request
    ]
    return overall(rows)


def test_answers_are_counted_by_what_became_of_them():
    stats = a_mixed_week_in_two_channels()
    assert stats.seen == 9
    assert stats.judged == 5  # four scored, one null (grounded "no document")
    assert (stats.skipped_sampling, stats.skipped_budget, stats.not_judged, stats.errored) == (1, 1, 1, 1)
    relevancy = stats.judge("relevancy")
    assert relevancy.scored == 4 and relevancy.errors == 1
    assert stats.judge("grounded").nulls == 1 and stats.judge("grounded").scored == 0


def test_scores_are_summed_up_as_a_mean_over_a_distribution():
    relevancy = a_mixed_week_in_two_channels().judge("relevancy")
    assert relevancy.mean == pytest.approx(3.0)
    assert relevancy.distribution == {0: 0, 1: 0, 2: 1, 3: 2, 4: 1}


def test_a_score_is_low_against_its_own_channels_threshold():
    relevancy = a_mixed_week_in_two_channels().judge("relevancy")
    assert relevancy.low == 2 and relevancy.share_low == pytest.approx(0.5)
    assert relevancy.thresholds == (2.0, 3.0)


def test_votes_give_the_share_of_alerts_people_agreed_with():
    stats = a_mixed_week_in_two_channels()
    assert (stats.votes_right, stats.votes_wrong) == (3, 1) and stats.agreement == pytest.approx(0.75)


def test_tokens_count_every_judgment_not_served_from_cache():
    stats = a_mixed_week_in_two_channels()
    # The /judge request's included.
    assert stats.tokens.prompt == 100 * 5 + 300 and stats.tokens.completion == 10 * 5 + 30
    assert stats.tokens.cost_usd == pytest.approx(800 / 1e6 * 0.15 + 80 / 1e6 * 0.60)


def test_the_worst_answers_are_captured_ones_lowest_first():
    stats = a_mixed_week_in_two_channels()
    # Lowest normalized score first; the /judge request's 0 is not among them.
    assert [w.score for w in stats.worst] == [2.0, 3.0, 3.0]


def a_week_with_a_rejudged_answer() -> ChannelStats:
    rows = [
        pair("C1", judgments=[verdict(4, tokens=(2000, 200))], superseded=[verdict(1, tokens=(1000, 100))]),
        pair("C1", judgments=[verdict(2)]),
    ]
    return overall(rows)


def test_a_rejudged_answer_scores_only_the_current_judgment():
    stats = a_week_with_a_rejudged_answer()
    relevancy = stats.judge("relevancy")
    assert relevancy.scored == 2 and relevancy.mean == pytest.approx(3.0)  # (4 + 2) / 2: the 1 is superseded
    assert relevancy.low == 1 and [w.score for w in stats.worst] == [2.0, 4.0]
    assert stats.judged == 2 and stats.seen == 2


def test_a_rejudged_answer_costs_both_judgments():
    stats = a_week_with_a_rejudged_answer()
    assert (stats.tokens.prompt, stats.tokens.completion) == (3100, 310)
    assert stats.tokens.cost_usd == pytest.approx(3100 / 1e6 * 0.15 + 310 / 1e6 * 0.60)


def a_better_week_than_the_last() -> Report:
    previous = [pair("C1", at=NOW - timedelta(days=10), judgments=[verdict(s)]) for s in (1, 2, 4, 4)]
    current = [pair("C1", judgments=[verdict(s)]) for s in (3, 4, 4, 4)]
    return build_report(PERIOD, current, previous, thresholds_for, PRICES)


def test_the_overall_change_against_the_previous_week():
    report = a_better_week_than_the_last()
    change = report.change(report.overall, "relevancy")
    assert change.mean == pytest.approx(3.75 - 2.75)
    assert change.share_low == pytest.approx(0.0 - 0.5)


def test_a_channels_change_against_the_previous_week():
    report = a_better_week_than_the_last()
    assert report.change(report.channels[0], "relevancy").mean == pytest.approx(1.0)


def test_the_dry_run_shows_the_change_against_the_previous_week():
    previous = [pair("C1", at=NOW - timedelta(days=10), judgments=[verdict(s)]) for s in (1, 2, 4, 4) * 3]
    current = [pair("C1", judgments=[verdict(s)]) for s in (3, 4, 4, 4) * 3]
    text = digest_text(build_report(PERIOD, current, previous, thresholds_for, PRICES), {}, {})
    assert "▲ 2.75 → 3.75 (significant)" in text and "▼ 50% → 0% (significant)" in text


def test_the_dry_run_says_noise_is_no_clear_change():
    previous = [pair("C1", at=NOW - timedelta(days=10), judgments=[verdict(s)]) for s in (2, 3, 4, 4) * 3]
    current = [pair("C1", judgments=[verdict(s)]) for s in (3, 3, 4, 4) * 3]
    text = digest_text(build_report(PERIOD, current, previous, thresholds_for, PRICES), {}, {})
    assert "no clear change (n=12 vs 12)" in text and "▲" not in text and "▼" not in text


def test_too_few_scores_show_no_rate_and_no_change():
    text = digest_text(a_better_week_than_the_last(), {}, {})
    assert "mean too few (n=4) · ≤ 2: too few (n=4)" in text and "significant" not in text


def test_daily_series_puts_answers_on_their_calendar_day():
    rows = [
        pair(at=PERIOD.start + timedelta(hours=1), judgments=[verdict(4)]),  # Mon 16 10:00
        pair(at=PERIOD.start + timedelta(hours=14, minutes=59), judgments=[verdict(2)]),  # Mon 16 23:59
        pair(at=PERIOD.start + timedelta(hours=15), judgments=[verdict(1)]),  # Tue 17 00:00, not Monday's slice
        pair(at=PERIOD.start + timedelta(days=6, hours=23), judgments=[verdict(None, status="error")]),  # Mon 23 08:00
        pair(at=PERIOD.start - timedelta(minutes=1), judgments=[verdict(0)]),  # the week before
    ]
    points = daily_series(rows, PERIOD, "relevancy")
    assert [p.day for p in points] == [date(2026, 11, 16) + timedelta(days=i) for i in range(8)]
    assert (points[0].answers, points[0].scored, points[0].mean) == (2, 2, 3.0)
    assert (points[1].answers, points[1].mean) == (1, 1.0)
    assert (points[7].answers, points[7].scored, points[7].mean) == (1, 0, None)
    assert sum(p.answers for p in points) == 4


def three_channels_one_quiet_one_unwatched() -> Report:
    """C1 answered, C9 configured but quiet, CX answered but no longer watched."""
    rows = [pair("C1", judgments=[verdict(4)]), pair("CX", judgments=[verdict(0)])]
    return build_report(
        PERIOD, rows, [], thresholds_for, PRICES, channels=["C9"], is_watched=lambda channel: channel != "CX"
    )


def test_a_configured_channel_appears_even_when_quiet():
    report = three_channels_one_quiet_one_unwatched()
    assert [stats.channel_id for stats in report.channels] == ["C1", "C9"]
    assert report.channels[1].seen == 0


def test_an_unwatched_channel_never_appears():
    report = three_channels_one_quiet_one_unwatched()
    assert "CX" not in [stats.channel_id for stats in report.channels]
    assert report.overall.seen == 1
