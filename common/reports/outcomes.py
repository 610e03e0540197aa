"""Outcome figures for the digest and App Home: running tallies over plain rows (`store.stats_queries.PairRow`),
fed one at a time.

What the customers did next (`capture.outcomes`), per channel and overall, against the week before: the share
of answers resolved, re-asked, taken over by a teammate and escalated, the reactions, how the judge's scores
agree with the outcomes (its mean score on resolved and on failed answers) and how often the correctness judge
gave the top score where a teammate's reply became the reference.

Every figure counts only captured answers whose outcome window has closed: an open window's signals are not
final (a reaction may be taken back, `resolved` comes when the window closes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date

from capture.outcomes import failed
from capture.resolution import OPEN, RESOLVED_ALONE, Resolution
from common.reports.intervals import Estimate, Shift, proportion, proportion_change
from common.reports.period import DayIndex, Period
from common.reports.resolution import ResolutionStats, ResolutionTally, resolution_changes
from judges.names import CORRECTNESS, RELEVANCY
from store.models import JudgmentStatus
from store.signals import ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION, POSITIVE_REACTION, REASK, RESOLVED
from store.stats_queries import PairRow


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
    failed: int = 0  # `capture.outcomes.failed`: a re-ask confirmed by a takeover, an escalation or a 👎; or
    # "did not help" and a teammate stepping in
    score_resolved: ScoreMean = ScoreMean()  # the report's judge on resolved answers
    score_failed: ScoreMean = ScoreMean()  # ... and on failed ones
    teammate_judged: int = 0  # correctness verdicts on answers a teammate's reply is the reference of
    teammate_correct: int = 0  # of those, at the top score
    tiers: ResolutionStats = field(default_factory=ResolutionStats)  # the resolution tiers (common.reports.resolution)

    def rate(self, name: str) -> float | None:
        """The share of closed windows with one of the `RATED` counts."""
        return getattr(self, name) / self.closed if self.closed else None

    def count(self, name: str) -> tuple[int, int]:
        """(answers with that outcome, closed windows): a `RATED` rate's counts."""
        return getattr(self, name), self.closed

    def estimate(self, name: str) -> Estimate:
        """A `RATED` rate with its n (closed windows) and Wilson interval."""
        return proportion(getattr(self, name), self.closed)

    @property
    def teammate_correct_rate(self) -> float | None:
        """Share of correctness verdicts at the top score, on answers with a teammate's reference."""
        return self.teammate_correct / self.teammate_judged if self.teammate_judged else None


# The counts of `OutcomeStats` reported as rates, in the order shown.
RATED = ("resolved", "reasked", "taken_over", "escalated")


@dataclass(frozen=True)
class OutcomeChange:
    """Against the week before: each `RATED` rate's change in shares, the reactions' in answers. Nothing when this
    week has no closed window; `no_previous` when only the week before had none."""

    rates: Mapping[str, float] = field(default_factory=dict)
    positive: int | None = None
    negative: int | None = None
    no_previous: bool = False  # closed windows this week, none the week before: said instead of a change
    shifts: Mapping[str, Shift] = field(default_factory=dict)  # each rate's change and whether it is significant
    tiers: Mapping[str, Shift] = field(default_factory=dict)  # each resolution tier's share's change


def outcome_change(current: OutcomeStats, previous: OutcomeStats) -> OutcomeChange:
    if not current.closed:
        return OutcomeChange()
    if not previous.closed:
        return OutcomeChange(no_previous=True)
    return OutcomeChange(
        rates={name: current.rate(name) - previous.rate(name) for name in RATED},
        positive=current.positive - previous.positive,
        negative=current.negative - previous.negative,
        shifts={name: proportion_change(previous.count(name), current.count(name)) for name in RATED},
        tiers=resolution_changes(current.tiers, previous.tiers),
    )


@dataclass(frozen=True)
class DailyOutcome:
    """One calendar day (the report's time zone): the answers made then whose window is over, and how many of them
    were resolved without help (the first resolution tier, `capture.resolution`)."""

    day: date
    closed: int
    resolved: int

    @property
    def resolution_rate(self) -> float | None:
        return self.resolved / self.closed if self.closed else None


@dataclass(frozen=True)
class OutcomeReport:
    judge: str = RELEVANCY  # whose scores are set against the outcomes
    overall: OutcomeStats = OutcomeStats(None)
    previous_overall: OutcomeStats = OutcomeStats(None)
    channels: dict[str, OutcomeStats] = field(default_factory=dict)
    previous_channels: dict[str, OutcomeStats] = field(default_factory=dict)
    daily: list[DailyOutcome] = field(default_factory=list)
    bots: dict[str, ResolutionStats] = field(default_factory=dict)  # the tiers of each bot's answers
    previous_bots: dict[str, ResolutionStats] = field(default_factory=dict)
    window_seconds: int | None = None  # how long after an answer its tier waits (RELMON_OUTCOME_WINDOW)

    def of(self, channel_id: str | None) -> OutcomeStats:
        return self.overall if channel_id is None else self.channels.get(channel_id, OutcomeStats(channel_id))

    def change(self, channel_id: str | None) -> OutcomeChange:
        if channel_id is None:
            return outcome_change(self.overall, self.previous_overall)
        return outcome_change(self.of(channel_id), self.previous_channels.get(channel_id, OutcomeStats(channel_id)))

    @property
    def any_closed(self) -> bool:
        return self.overall.closed > 0


def _first_scores(row: PairRow) -> dict[str, float]:
    """Each judge's score of this answer (its first usable verdict)."""
    scores: dict[str, float] = {}
    for judgment in row.judgments:
        if judgment.status == JudgmentStatus.OK and judgment.score is not None:
            scores.setdefault(judgment.judge, judgment.score)
    return scores


def _top_score(score: float, max_score: float | None) -> bool:
    return max_score is not None and score >= max_score


_COUNTED = (RESOLVED, REASK, HUMAN_TAKEOVER, ESCALATION, POSITIVE_REACTION, NEGATIVE_REACTION)


class OutcomeTally:
    """The outcome figures of captured answers so far (the caller feeds captured answers only, `tallies.is_answer`).
    The mean scores are kept for every judge: which one the report sets against the outcomes is known only once
    every answer has been seen."""

    def __init__(self) -> None:
        self.open = self.closed = self.failed = self.teammate_judged = self.teammate_correct = 0
        self.counts = dict.fromkeys(_COUNTED, 0)
        self.scores_resolved: dict[str, list] = {}  # judge -> [total, count]
        self.scores_failed: dict[str, list] = {}
        self.tiers = ResolutionTally()

    def add(self, row: PairRow, resolution: Resolution | None = None) -> None:
        """Count a captured answer; `resolution`: its tier (`ResolutionRules.of`), None when it has none."""
        self.tiers.add(resolution)
        if row.window_closed is False:
            self.open += 1
        if not row.window_closed:
            return
        self.closed += 1
        for name in _COUNTED:
            self.counts[name] += name in row.signals
        resolved, did_fail = RESOLVED in row.signals, failed(row.signals)
        self.failed += did_fail
        for judge, score in _first_scores(row).items():
            for wanted, means in ((resolved, self.scores_resolved), (did_fail, self.scores_failed)):
                if wanted:
                    mean = means.setdefault(judge, [0, 0])
                    mean[0] += score
                    mean[1] += 1
        if HUMAN_TAKEOVER in row.signals and row.has_reference:
            for j in row.judgments:
                if j.judge == CORRECTNESS and j.status == JudgmentStatus.OK and j.score is not None:
                    self.teammate_judged += 1
                    self.teammate_correct += _top_score(j.score, j.max_score)

    def stats(self, channel_id: str | None, judge: str) -> OutcomeStats:
        counts = self.counts
        return OutcomeStats(
            channel_id=channel_id,
            open=self.open,
            closed=self.closed,
            resolved=counts[RESOLVED],
            reasked=counts[REASK],
            taken_over=counts[HUMAN_TAKEOVER],
            escalated=counts[ESCALATION],
            positive=counts[POSITIVE_REACTION],
            negative=counts[NEGATIVE_REACTION],
            failed=self.failed,
            score_resolved=ScoreMean(*self.scores_resolved.get(judge, (0, 0))),
            score_failed=ScoreMean(*self.scores_failed.get(judge, (0, 0))),
            teammate_judged=self.teammate_judged,
            teammate_correct=self.teammate_correct,
            tiers=self.tiers.stats(channel_id),
        )


class DailyOutcomeTally:
    """Answers with a tier (their window over) and those resolved without help on each calendar day of the period,
    in its time zone, by the day the question was asked (`DayIndex.of_answer`)."""

    def __init__(self, period: Period) -> None:
        self.period = period
        self.days = DayIndex(period)
        self.closed = [0] * len(self.days.days)
        self.resolved = [0] * len(self.days.days)

    def add(self, row: PairRow, resolution: Resolution | None) -> None:
        if resolution is None or resolution.tier == OPEN:
            return
        index = self.days.of_answer(row.asked_at, row.created_at)
        if index is not None:
            self.closed[index] += 1
            self.resolved[index] += resolution.tier == RESOLVED_ALONE

    def points(self) -> list[DailyOutcome]:
        return [
            DailyOutcome(day, closed, resolved)
            for day, closed, resolved in zip(self.days.days, self.closed, self.resolved, strict=True)
        ]
