"""The report's accumulators fed whole lists of rows: how tests drive them. The digest feeds the same accumulators
row by row from a streamed query (common.reports.builder.ReportBuilder, workers.digest.delivery); these helpers only
loop, so every figure a test checks is computed by the production code."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from common.reports.builder import ReportBuilder
from common.reports.costs import Prices
from common.reports.outcomes import OutcomeStats, OutcomeTally
from common.reports.period import Period
from common.reports.stats import DailyPoint, Report
from common.reports.tallies import DailyTally, ThresholdsFor
from common.reports.trust import (
    Comparability,
    Disputed,
    SecondOpinionTally,
    VersionTally,
    Vote,
    comparability,
    row_votes,
)
from store.stats_queries import PairRow


def build_report(
    period: Period,
    current: Iterable[PairRow],
    previous: Iterable[PairRow],
    thresholds_for: ThresholdsFor,
    prices: Prices,
    **options: Any,
) -> Report:
    """The whole digest from this week's rows and the week before's (`options`: ReportBuilder's)."""
    builder = ReportBuilder(period, thresholds_for, prices, **options)
    for row in current:
        builder.add_current(row)
    for row in previous:
        builder.add_previous(row)
    return builder.report()


def daily_series(rows: Iterable[PairRow], period: Period, judge: str) -> list[DailyPoint]:
    """Answers and the judge's mean score on each of the period's calendar days (its time zone)."""
    tally = DailyTally(period)
    for row in rows:
        tally.add(row)
    return tally.points(judge)


def outcome_stats(channel_id: str | None, rows: Iterable[PairRow], judge: str) -> OutcomeStats:
    """The figures of these answers (captured answers only, `tallies.is_answer`)."""
    tally = OutcomeTally()
    for row in rows:
        tally.add(row)
    return tally.stats(channel_id, judge)


def voted_alerts(rows: Iterable[PairRow]) -> list[Vote]:
    """The voted alerts of these answers."""
    return [vote for row in rows for vote in row_votes(row)]


def second_opinions(rows: Iterable[PairRow]) -> tuple[list[Disputed], int, int]:
    """Every low score a second opinion disputed (with both scores), and how many were confirmed and unconfirmed."""
    tally = SecondOpinionTally(keep=None)
    for row in rows:
        tally.add(row)
    return tally.disputed, tally.confirmed, tally.unconfirmed


def like_with_like(current: Iterable[PairRow], previous: Iterable[PairRow], judge: str) -> Comparability:
    """Whether the two weeks were judged by the same model and prompt version."""

    def versions(rows: Iterable[PairRow]):
        tally = VersionTally()
        for row in rows:
            tally.add(row)
        return tally.of(judge)

    return comparability(judge, versions(current), versions(previous))
