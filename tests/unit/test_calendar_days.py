"""The chart's days are calendar days in the team's time zone: each answer counted on the local day it came,
labelled by that day, across daylight-saving changes (`common.reports.period`, pure: datetimes and a zone in)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from common.reports.period import DayIndex, calendar_days, count_per_day, period_for
from tests.report_tallies import build_report, daily_series
from tests.stats_rows import PRICES, pair, thresholds_for, verdict

LOS_ANGELES = ZoneInfo("America/Los_Angeles")
PARIS = ZoneInfo("Europe/Paris")


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)


def test_a_question_at_02_utc_on_saturday_is_friday_evening_in_los_angeles():
    days = [date(2026, 12, 3), date(2026, 12, 4), date(2026, 12, 5)]
    moments = [utc(2026, 12, 5, 2, 0), utc(2026, 12, 5, 7, 59), utc(2026, 12, 5, 8, 0), utc(2026, 12, 4, 7, 59)]
    # 02:00 and 07:59 UTC Saturday are Friday 18:00 and 23:59 PST; 08:00 UTC is Saturday midnight; 07:59 UTC
    # Friday is Thursday 23:59.
    assert count_per_day(moments, LOS_ANGELES, days) == {days[0]: 1, days[1]: 2, days[2]: 1}
    # In UTC the same moments fall on Friday once and Saturday three times.
    assert count_per_day(moments, UTC, days) == {days[0]: 0, days[1]: 1, days[2]: 3}
    # Moments on days not asked for are left out; every day asked for is there, in order, zeros included.
    assert count_per_day([utc(2026, 1, 1)], UTC, days) == dict.fromkeys(days, 0)
    assert list(count_per_day([], UTC, days)) == days


def test_a_day_across_the_autumn_change_lasts_25_hours_and_keeps_its_answers():
    # Paris falls back on Sunday 25 October 2026 (03:00 CEST -> 02:00 CET): that day runs from 22:00 UTC on the
    # 24th to 23:00 UTC on the 25th.
    day = date(2026, 10, 25)
    moments = [utc(2026, 10, 24, 22, 0), utc(2026, 10, 25, 0, 30), utc(2026, 10, 25, 1, 30), utc(2026, 10, 25, 22, 59)]
    counts = count_per_day([*moments, utc(2026, 10, 24, 21, 59), utc(2026, 10, 25, 23, 0)], PARIS, [day])
    assert counts == {day: 4}
    # A week of 24-hour slices from Monday 19 October 00:00 CEST drifts an hour from midnight after the change:
    # Monday 26 October 00:30 CET (23:30 UTC Sunday) is Monday's, not Sunday's.
    monday = utc(2026, 10, 25, 23, 30)
    assert count_per_day([monday], PARIS, [day, date(2026, 10, 26)]) == {day: 0, date(2026, 10, 26): 1}


def test_a_day_across_the_spring_change_lasts_23_hours():
    day = date(2026, 3, 8)  # Los Angeles springs forward at 02:00 PST: 08:00 UTC to 07:00 UTC next day
    inside = [utc(2026, 3, 8, 8, 0), utc(2026, 3, 9, 6, 59)]
    outside = [utc(2026, 3, 8, 7, 59), utc(2026, 3, 9, 7, 0)]
    assert count_per_day(inside + outside, LOS_ANGELES, [day]) == {day: 2}


def test_the_calendar_days_a_period_touches():
    # Monday 09:00 to Monday 09:00: eight days, both Mondays in part.
    days = calendar_days(utc(2026, 11, 16, 9), utc(2026, 11, 23, 9), UTC)
    assert days == [date(2026, 11, 16) + timedelta(days=i) for i in range(8)]
    # Midnight to midnight: seven, the end excluded.
    assert len(calendar_days(utc(2026, 11, 16), utc(2026, 11, 23), UTC)) == 7
    # The same UTC instants in Los Angeles: Monday 01:00 PST to Monday 01:00 PST.
    assert calendar_days(utc(2026, 11, 16, 9), utc(2026, 11, 23, 9), LOS_ANGELES)[0] == date(2026, 11, 16)
    # Across the autumn change, a local week from midnight to midnight is still seven days.
    start = datetime(2026, 10, 19, tzinfo=PARIS).astimezone(UTC)
    end = datetime(2026, 10, 26, tzinfo=PARIS).astimezone(UTC)
    assert end - start == timedelta(days=7, hours=1)
    assert calendar_days(start, end, PARIS) == [date(2026, 10, 19) + timedelta(days=i) for i in range(7)]


def test_the_day_index_places_a_moment_as_count_per_day_does():
    period = period_for(utc(2026, 12, 7, 17), "America/Los_Angeles")  # Monday 09:00 PST
    index = DayIndex(period)
    assert index.days[0] == date(2026, 11, 30) and index.days[-1] == date(2026, 12, 7) and len(index.days) == 8
    moments = [period.start + timedelta(hours=5 * i) for i in range(7 * 24 // 5 + 1)]
    counts = count_per_day(moments, LOS_ANGELES, index.days)
    placed = [0] * len(index.days)
    for moment in moments:
        placed[index.of(moment)] += 1
    assert placed == list(counts.values())
    assert index.of(period.start - timedelta(days=1)) is None and index.of(period.end + timedelta(days=1)) is None


def test_the_report_counts_each_answer_on_its_local_day():
    """The digest's daily series in Los Angeles: Friday evening's answers are Friday's, not Saturday's."""
    period = period_for(utc(2026, 12, 7, 17), "America/Los_Angeles")
    rows = [
        pair(at=utc(2026, 12, 5, 2, 0), judgments=[verdict(1)]),  # Friday 18:00 PST
        pair(at=utc(2026, 12, 5, 7, 30), judgments=[verdict(3)]),  # Friday 23:30 PST
        pair(at=utc(2026, 12, 5, 8, 30), judgments=[verdict(4)]),  # Saturday 00:30 PST
        pair(at=utc(2026, 12, 7, 16, 59), judgments=[verdict(2)]),  # Monday 08:59 PST, the period's last minute
    ]
    points = {point.day: point for point in daily_series(rows, period, "relevancy")}
    assert (points[date(2026, 12, 4)].answers, points[date(2026, 12, 4)].mean) == (2, 2.0)
    assert (points[date(2026, 12, 5)].answers, points[date(2026, 12, 5)].mean) == (1, 4.0)
    assert points[date(2026, 12, 7)].answers == 1
    report = build_report(period, rows, [], thresholds_for, PRICES)
    assert [p.day for p in report.daily] == list(points) and [p.day for p in report.outcomes.daily] == list(points)
    assert report.period.before == "the week before"


def test_an_answer_counts_on_the_day_its_question_was_asked():
    """A question asked at 23:58 and answered at 00:03 is the evening's; one asked before the period's first day
    (answered in it) counts on the answer's day, the first; a pair without a question ts on its own time."""
    period = period_for(utc(2026, 12, 7, 9), "UTC")  # Monday 30 November 09:00 to Monday 7 December 09:00
    late = pair(at=utc(2026, 12, 3, 0, 3), judgments=[verdict(2)])
    late = replace(late, question_ts=f"{utc(2026, 12, 2, 23, 58).timestamp():.6f}")
    early = pair(at=utc(2026, 11, 30, 9, 1), judgments=[verdict(4)])
    early = replace(early, question_ts=f"{utc(2026, 11, 29, 23, 0).timestamp():.6f}")
    plain = pair(at=utc(2026, 12, 3, 0, 3), judgments=[verdict(0)])
    odd = replace(pair(at=utc(2026, 12, 4, 12), judgments=[verdict(1)]), question_ts="not a ts")
    assert late.asked_at == utc(2026, 12, 2, 23, 58) and odd.asked_at == odd.created_at
    points = {point.day: point for point in daily_series([late, early, plain, odd], period, "relevancy")}
    assert (points[date(2026, 12, 2)].answers, points[date(2026, 12, 2)].mean) == (1, 2.0)
    assert (points[date(2026, 12, 3)].answers, points[date(2026, 12, 3)].mean) == (1, 0.0)
    assert points[date(2026, 11, 30)].answers == 1 and points[date(2026, 12, 4)].answers == 1
    closed = [replace(row, window_closed=True, signals=("resolved",)) for row in (late, plain)]
    outcomes = {p.day: p for p in build_report(period, closed, [], thresholds_for, PRICES).outcomes.daily}
    assert outcomes[date(2026, 12, 2)].closed == 1 and outcomes[date(2026, 12, 3)].closed == 1
