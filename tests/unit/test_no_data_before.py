"""A comparison with a week (or a backfill's period) that had no data says so, "no data the week before", never a
change against nothing ("+3 vs the week before" when that week was empty): the judges' lines, the outcome lines,
the topics' figures and the digest's line about its chart, rendered directly from reports."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from common.messages.digest import digest_message, digest_text, judge_line, period_text
from common.messages.outcomes import outcome_line, resolution_line
from common.messages.topics import figures_text, topics_text
from common.reports.topics import TopicLine, TopicsView
from relmon.backfill.report import backfill_period
from tests.report_tallies import build_report, outcome_stats
from tests.stats_rows import NOW, PERIOD, PRICES, pair, thresholds_for, verdict
from topics.figures import Figures

NO_DATA = "no data the week before"


def this_week(scores=(3, 4, 1)):
    return [pair("C1", judgments=[verdict(s)]) for s in scores]


def last_week(scores=(1, 2)):
    return [pair("C1", at=NOW - timedelta(days=10), judgments=[verdict(s)]) for s in scores]


def test_a_judge_line_against_an_empty_week_says_so():
    report = build_report(PERIOD, this_week(), [], thresholds_for, PRICES)
    change = report.change(report.overall, "relevancy")
    assert change.no_previous and change.mean is None and change.share_low is None
    line = judge_line(report.overall.judge("relevancy"), change)
    assert line == f"mean too few (n=3) · ≤ 2: too few (n=3) · {NO_DATA}"
    # A week before whose judgments all failed has no scores to compare either.
    errored = [pair("C1", at=NOW - timedelta(days=10), judgments=[verdict(None, status="error")])]
    report = build_report(PERIOD, this_week(), errored, thresholds_for, PRICES)
    assert judge_line(report.overall.judge("relevancy"), report.change(report.overall, "relevancy")).endswith(NO_DATA)
    # With a week before, the change and nothing about missing data.
    report = build_report(PERIOD, this_week(), last_week(), thresholds_for, PRICES)
    line = judge_line(report.overall.judge("relevancy"), report.change(report.overall, "relevancy"))
    assert line == "mean too few (n=3) · ≤ 2: too few (n=3)" and "no data" not in line
    # With enough scores both weeks: the figures' intervals and whether they changed.
    report = build_report(PERIOD, this_week((3, 4, 1) * 10), last_week((1, 2) * 10), thresholds_for, PRICES)
    line = judge_line(report.overall.judge("relevancy"), report.change(report.overall, "relevancy"))
    assert line.startswith("mean 2.67 / 4 (") and ", n=30), ▲ 1.50 → 2.67 (significant)" in line
    assert "33% ≤ 2 (19–51%, n=30), ▼ 100% → 33% (significant)" in line and "no data" not in line
    # No scores this week: nothing to compare, nothing said about the week before.
    empty = build_report(PERIOD, [], last_week(), thresholds_for, PRICES)
    assert not empty.change(empty.overall, "relevancy").no_previous


def test_the_digest_says_it_in_every_place_a_change_would_be():
    report = build_report(PERIOD, this_week(), [], thresholds_for, PRICES)
    text = digest_text(report, {}, {})
    assert text.count(NO_DATA) == 1  # one channel: its block is the "All channels: #C1 only" block, printed once
    assert "(+" not in text and "(−" not in text
    blocks = str(digest_message(report, {}, {})["blocks"])
    assert blocks.count(NO_DATA) == 2 and "(+" not in blocks


def test_an_outcome_line_against_a_week_without_closed_windows_says_so():
    closed = [replace(row, window_closed=True, signals=("resolved",)) for row in this_week()]
    before = [replace(row, window_closed=True) for row in last_week()]
    stats = outcome_stats(None, closed, "relevancy")
    report = build_report(PERIOD, closed, [], thresholds_for, PRICES).outcomes
    assert report.change(None).no_previous
    assert outcome_line(stats, report.change(None)) == (
        f"rates: too few (n=3) · reactions 0 positive, 0 negative · of 3 answers · {NO_DATA}"
    )
    compared = build_report(PERIOD, closed, before, thresholds_for, PRICES).outcomes
    line = outcome_line(stats, compared.change(None))
    assert line.startswith("rates: too few (n=3) · reactions 0 positive (+0)") and "no data" not in line
    # Enough closed windows both weeks: the rates, their intervals and a significant change.
    closed = [replace(row, window_closed=True, signals=("resolved",)) for row in this_week((3, 4, 1) * 4)]
    before = [replace(row, window_closed=True) for row in last_week((1, 2) * 6)]
    compared = build_report(PERIOD, closed, before, thresholds_for, PRICES).outcomes
    line = outcome_line(outcome_stats(None, closed, "relevancy"), compared.change(None))
    assert line.startswith("re-asked 0% (0–24%, n=12), no clear change (n=12 vs 12)")
    tiers = resolution_line(compared, None)
    # Scored 1 (at or below the threshold) with no word after it: abandoned, not resolved.
    assert tiers.startswith("resolution (30-min window): resolved without help 67% (39–86%, n=12), ▲ 0% → 67%")
    assert tiers.endswith("unresolved 33% (14–61%, n=12), ▼ 100% → 33% (significant): abandoned 4")
    # No window closed this week: no line at all, whatever the week before.
    assert outcome_line(outcome_stats(None, this_week(), "relevancy"), report.change(None)) == ""


def test_a_topic_against_a_week_without_questions_says_so():
    none_before = TopicLine("Refunds", Figures(questions=5, failed=3), None, None)
    assert figures_text(none_before) == f"3 failed of 5 questions (too few for a rate) ({NO_DATA})"
    some_before = TopicLine("Refunds", Figures(questions=5, failed=3), Figures(questions=4, failed=1), None)
    assert figures_text(some_before) == "3 failed of 5 questions (too few for a rate)"
    # Enough questions: the rate, its interval, and a change only when significant.
    busy = TopicLine("Refunds", Figures(questions=48, failed=15), Figures(questions=33, failed=3), None)
    assert figures_text(busy) == "15 failed of 48 questions: 31% (20–45%, n=48), ▲ 9% → 31% (significant)"
    noisy = TopicLine("Refunds", Figures(questions=12, failed=6), Figures(questions=12, failed=4), None)
    assert figures_text(noisy) == "6 failed of 12 questions: 50% (25–75%, n=12), no clear change (n=12 vs 12)"
    # A topic new this week, in a week before that had questions: nothing to set its rate against.
    new_topic = TopicLine("Refunds", Figures(questions=12, failed=3), Figures(), None)
    assert figures_text(new_topic) == "3 failed of 12 questions: 25% (9–53%, n=12), too few to compare (n=12 vs 0)"
    view = TopicsView(5, 0, "local", (none_before,))
    assert f"1. Refunds: 3 failed of 5 questions (too few for a rate) ({NO_DATA})" in topics_text(view)
    report = build_report(PERIOD, this_week(), [], thresholds_for, PRICES)
    chart_line = str(digest_message(report, {}, {}, chart_in_thread=True, topics=view)["blocks"])
    assert f"failed questions by topic ({NO_DATA})" in chart_line
    compared = TopicsView(5, 0, "local", (some_before,))
    chart_line = str(digest_message(report, {}, {}, chart_in_thread=True, topics=compared)["blocks"])
    assert "failed questions by topic against the week before" in chart_line


def test_a_backfills_period_names_its_own_comparison():
    """A month read by `relmon backfill` is compared with the 30 days before it, and says so."""
    since = NOW - timedelta(days=30)
    period = backfill_period(since, NOW, "UTC", "backfill")
    rows = [pair("C1", at=since + timedelta(days=3), judgments=[verdict(2)])]
    report = build_report(period, rows, [], thresholds_for, PRICES)
    assert period.before == "the 30 days before" and PERIOD.before == "the week before"
    text = digest_text(report, {}, {})
    assert "no data the 30 days before" in text and NO_DATA not in text
    assert period_text(report).endswith("compared with the 30 days before")
    footer = str(digest_message(report, {}, {})["blocks"])
    assert "Changes are against the 30 days before. Figures show their 95% interval and n; ▲/▼ marks only" in footer
