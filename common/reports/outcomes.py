"""Outcome figures for the digest and App Home: pure functions over plain rows (`store.stats_queries.PairRow`).

What the customers did next (`capture.outcomes`), per channel and overall, against the week before: the share
of answers resolved, re-asked, taken over by a teammate and escalated, the reactions, how the judge's scores
agree with the outcomes (its mean score on resolved and on failed answers) and how often the correctness judge
gave the top score where a teammate's reply became the reference.

Every figure counts only captured answers whose outcome window has closed: an open window's signals are not
final (a reaction may be taken back, `resolved` comes when the window closes).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from capture.outcomes import (
    ESCALATION,
    HUMAN_TAKEOVER,
    NEGATIVE_REACTION,
    POSITIVE_REACTION,
    REASK,
    RESOLVED,
    failed,
)
from common.reports.period import Period, day_slices
from store.models import JudgmentStatus
from store.stats_queries import PairRow

CORRECTNESS = "correctness"


@dataclass(frozen=True)
class ScoreMean:
    """The judge's mean score (on its own scale) over some answers."""

    total: float = 0.0
    count: int = 0

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass(frozen=True)
class OutcomeStats:
    channel_id: str | None  # None: every channel together
    open: int = 0  # answers still watched: not counted yet
    closed: int = 0  # answers whose window closed: the base of every figure
    resolved: int = 0
    reasked: int = 0
    taken_over: int = 0
    escalated: int = 0
    positive: int = 0  # answers with a positive reaction
    negative: int = 0
    failed: int = 0  # `capture.outcomes.failed`: a re-ask confirmed by a takeover, an escalation or a 👎
    score_resolved: ScoreMean = ScoreMean()  # the report's judge on resolved answers
    score_failed: ScoreMean = ScoreMean()  # ... and on failed ones
    teammate_judged: int = 0  # correctness verdicts on answers a teammate's reply is the reference of
    teammate_correct: int = 0  # of those, at the top score

    def rate(self, name: str) -> float | None:
        """The share of closed windows with one of the `RATED` counts."""
        return getattr(self, name) / self.closed if self.closed else None

    @property
    def resolution_rate(self) -> float | None:
        return self.rate("resolved")

    @property
    def teammate_correct_rate(self) -> float | None:
        """Share of correctness verdicts at the top score, on answers with a teammate's reference."""
        return self.teammate_correct / self.teammate_judged if self.teammate_judged else None


# The counts of `OutcomeStats` reported as rates, in the order shown.
RATED = ("resolved", "reasked", "taken_over", "escalated")


@dataclass(frozen=True)
class OutcomeChange:
    """Against the week before (nothing when either week has no closed window): each `RATED` rate's change in
    shares, the reactions' in answers."""

    rates: Mapping[str, float] = field(default_factory=dict)
    positive: int | None = None
    negative: int | None = None


def compare(current: OutcomeStats, previous: OutcomeStats) -> OutcomeChange:
    if not current.closed or not previous.closed:
        return OutcomeChange()
    return OutcomeChange(
        rates={name: current.rate(name) - previous.rate(name) for name in RATED},
        positive=current.positive - previous.positive,
        negative=current.negative - previous.negative,
    )


@dataclass(frozen=True)
class DailyOutcome:
    """One 24-hour slice: the answers made then whose window has closed, and how many of them resolved."""

    start: datetime
    closed: int
    resolved: int

    @property
    def resolution_rate(self) -> float | None:
        return self.resolved / self.closed if self.closed else None


@dataclass(frozen=True)
class OutcomeReport:
    judge: str = "relevancy"  # whose scores are set against the outcomes
    overall: OutcomeStats = OutcomeStats(None)
    previous_overall: OutcomeStats = OutcomeStats(None)
    channels: dict[str, OutcomeStats] = field(default_factory=dict)
    previous_channels: dict[str, OutcomeStats] = field(default_factory=dict)
    daily: list[DailyOutcome] = field(default_factory=list)

    def of(self, channel_id: str | None) -> OutcomeStats:
        return self.overall if channel_id is None else self.channels.get(channel_id, OutcomeStats(channel_id))

    def change(self, channel_id: str | None) -> OutcomeChange:
        if channel_id is None:
            return compare(self.overall, self.previous_overall)
        return compare(self.of(channel_id), self.previous_channels.get(channel_id, OutcomeStats(channel_id)))

    @property
    def any_closed(self) -> bool:
        return self.overall.closed > 0


def closed(rows: Iterable[PairRow]) -> list[PairRow]:
    return [row for row in rows if row.window_closed]


def _score(row: PairRow, judge: str) -> float | None:
    for judgment in row.judgments:
        if judgment.judge == judge and judgment.status == JudgmentStatus.OK and judgment.score is not None:
            return judgment.score
    return None


def _top_score(score: float, max_score: float | None) -> bool:
    return max_score is not None and score >= max_score


def outcome_stats(channel_id: str | None, rows: Sequence[PairRow], judge: str) -> OutcomeStats:
    """The figures of these answers (the caller passes captured answers only, `stats.captured`)."""
    done = closed(rows)
    counts = {name: sum(1 for row in done if name in row.signals) for name in _COUNTED}
    resolved_scores = [s for row in done if RESOLVED in row.signals and (s := _score(row, judge)) is not None]
    failed_scores = [s for row in done if failed(row.signals) and (s := _score(row, judge)) is not None]
    teammate = [
        j
        for row in done
        if HUMAN_TAKEOVER in row.signals and row.has_reference
        for j in row.judgments
        if j.judge == CORRECTNESS and j.status == JudgmentStatus.OK and j.score is not None
    ]
    return OutcomeStats(
        channel_id=channel_id,
        open=sum(1 for row in rows if row.window_closed is False),
        closed=len(done),
        resolved=counts[RESOLVED],
        reasked=counts[REASK],
        taken_over=counts[HUMAN_TAKEOVER],
        escalated=counts[ESCALATION],
        positive=counts[POSITIVE_REACTION],
        negative=counts[NEGATIVE_REACTION],
        failed=sum(1 for row in done if failed(row.signals)),
        score_resolved=ScoreMean(sum(resolved_scores), len(resolved_scores)),
        score_failed=ScoreMean(sum(failed_scores), len(failed_scores)),
        teammate_judged=len(teammate),
        teammate_correct=sum(1 for j in teammate if _top_score(j.score, j.max_score)),
    )


_COUNTED = (RESOLVED, REASK, HUMAN_TAKEOVER, ESCALATION, POSITIVE_REACTION, NEGATIVE_REACTION)


def daily_outcomes(rows: Iterable[PairRow], period: Period) -> list[DailyOutcome]:
    """Closed windows and resolved answers in each of the period's 24-hour slices (by the answer's time)."""
    done = closed(rows)
    points = []
    for start, end in day_slices(period):
        day = [row for row in done if start <= row.created_at < end]
        points.append(DailyOutcome(start, len(day), sum(1 for row in day if RESOLVED in row.signals)))
    return points


def outcome_report(
    period: Period, current: Sequence[PairRow], previous: Sequence[PairRow], channel_ids: Iterable[str], judge: str
) -> OutcomeReport:
    """The outcome figures of captured answers (`current`, `previous`: `stats.captured` rows), overall and for
    each of `channel_ids`, this week and the one before."""

    def of(channel: str, rows: Sequence[PairRow]) -> OutcomeStats:
        return outcome_stats(channel, [row for row in rows if row.channel_id == channel], judge)

    ids = list(channel_ids)
    return OutcomeReport(
        judge=judge,
        overall=outcome_stats(None, current, judge),
        previous_overall=outcome_stats(None, previous, judge),
        channels={channel: of(channel, current) for channel in ids},
        previous_channels={channel: of(channel, previous) for channel in ids},
        daily=daily_outcomes(current, period),
    )
