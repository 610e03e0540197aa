"""Digest and App Home statistics: the report's figures (each judge's, each channel's, the week's change, the
days), as the running tallies of `common.reports.tallies` leave them and the messages read them.

Nothing here reads a database, a clock or Slack, so every figure is tested directly, including empty weeks and weeks
where every judgment failed.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date

from common.reports.agreement import AgreementReport
from common.reports.costs import Tokens
from common.reports.golden import GoldenFigures
from common.reports.intervals import (
    Estimate,
    Interval,
    Shift,
    bootstrap_mean,
    mean_change,
    proportion,
    proportion_change,
)
from common.reports.outcomes import OutcomeReport
from common.reports.period import Period
from common.reports.trust import Trust
from common.reports.weighted import (
    Weights,
    weighted_mean,
    weighted_mean_change,
    weighted_proportion,
    weighted_proportion_change,
)
from judges.names import CORRECTNESS, GROUNDED, JUDGE_NAMES, RELEVANCY

# The score scale of each judge (docs/judges.md); a judge not listed uses what it stored.
SCALES: dict[str, tuple[int, int]] = {RELEVANCY: (0, 4), CORRECTNESS: (0, 2), GROUNDED: (1, 5)}
PRIMARY_JUDGE = RELEVANCY


def is_team_judge(name: str) -> bool:
    """A team's own judge (judges.d), not one of the seeds: the reports show its pass rate."""
    return name not in JUDGE_NAMES


@dataclass(frozen=True)
class JudgeStats:
    judge: str
    scored: int  # ok judgments
    nulls: int  # the judge said it cannot score (grounded: no document)
    errors: int
    mean: float | None  # on the judge's own scale
    distribution: dict[int, int]  # score -> count, every score of the scale present
    low: int  # scored at or below the channel's threshold
    thresholds: tuple[float, ...]  # the thresholds in force (several when channels differ)
    # Sampled answers (RELMON_SAMPLE): each scored answer's weight 1/π, when they differ; None: every weight 1.
    weights: Weights | None = None
    # A team judge's scale from its file (the seed judges' are `SCALES`); not compared: a figure, not a verdict.
    scale_of_file: tuple[int, int] | None = field(default=None, compare=False)

    @property
    def share_low(self) -> float | None:
        if self.weights is not None:
            return self.low_estimate.value
        return self.low / self.scored if self.scored else None

    @property
    def weighted_mean(self) -> float | None:
        """The mean score, reweighted when the answers were sampled (`mean` is the judged answers' own)."""
        return self.mean_estimate.value if self.weights is not None else self.mean

    @property
    def mean_estimate(self) -> Estimate:
        """The mean score with its n and bootstrap interval (from the distribution: scores are whole numbers);
        reweighted for sampling (common.reports.weighted)."""
        if self.weights is not None:
            return weighted_mean(self.weights)
        return bootstrap_mean(self.distribution)

    @property
    def low_estimate(self) -> Estimate:
        """The share at or below the threshold with its n and Wilson interval; reweighted for sampling (the Hájek
        share, Wilson at the estimator's effective n: common.reports.weighted)."""
        if self.weights is not None:
            return weighted_proportion(self.weights)
        return proportion(self.low, self.scored)

    def as_weights(self) -> Weights:
        """Its weights, every one 1 when not sampled: to compare a sampled week with an unsampled one."""
        return self.weights if self.weights is not None else Weights.of_counts(self.low, self.distribution)

    @property
    def pass_estimate(self) -> Estimate:
        """The share above the threshold (passed) with its n and Wilson interval: a team judge's headline;
        reweighted for sampling (the complement of the weighted low share)."""
        if self.weights is not None:
            low = self.low_estimate
            if low.value is None or low.interval is None:
                return low
            interval = Interval(1 - low.interval.high, 1 - low.interval.low)
            return Estimate(1 - low.value, low.n, interval, effective_n=low.effective_n)
        return proportion(self.scored - self.low, self.scored)

    @property
    def team(self) -> bool:
        return is_team_judge(self.judge)

    @property
    def active(self) -> bool:
        """Whether it gave any verdict here (a team judge runs only where its rules say)."""
        return bool(self.scored or self.nulls or self.errors)

    @property
    def scale(self) -> tuple[int, int]:
        if self.scale_of_file is not None:
            return self.scale_of_file
        return SCALES.get(self.judge, (min(self.distribution, default=0), max(self.distribution, default=0)))


@dataclass(frozen=True)
class WorstAnswer:
    pair_id: int
    channel_id: str | None
    channel_is_private: bool
    answer_ts: str | None
    thread_ts: str | None
    judge: str
    score: float
    max_score: float | None
    normalized_score: float


@dataclass(frozen=True)
class ChannelStats:
    channel_id: str | None  # None: every channel together
    seen: int  # answers captured
    judged: int  # answers with at least one usable verdict (ok or null)
    skipped_sampling: int
    skipped_budget: int
    not_judged: int  # no question found, empty or deleted answer
    waiting: int  # still settling or queued
    errored: int  # answers whose every judgment failed
    judges: dict[str, JudgeStats]
    votes_right: int
    votes_wrong: int
    worst: list[WorstAnswer]
    tokens: Tokens
    # Sampling (RELMON_SAMPLE): unsignalled answers judged and decided on (judged or skipped by sampling), and
    # whether any judged answer had a chance below 1 (its figures are then weighted).
    unsignalled_judged: int = 0
    unsignalled_decided: int = 0
    sampled: bool = False

    @property
    def sampled_share(self) -> float | None:
        """The share of the unsignalled answers that were judged, when sampling was in force."""
        if not self.sampled or not self.unsignalled_decided:
            return None
        return self.unsignalled_judged / self.unsignalled_decided

    @property
    def errors(self) -> int:
        return sum(stats.errors for stats in self.judges.values())

    @property
    def agreement(self) -> float | None:
        """Share of feedback votes that said the judge was right."""
        votes = self.votes_right + self.votes_wrong
        return self.votes_right / votes if votes else None

    @property
    def agreement_estimate(self) -> Estimate:
        return proportion(self.votes_right, self.votes_right + self.votes_wrong)

    def judge(self, name: str) -> JudgeStats | None:
        return self.judges.get(name)


@dataclass(frozen=True)
class Change:
    """This week against the week before, for one judge (None when either week has no scores). `no_previous`:
    this week has scores and the week before none, which the reader is told instead of a change. The shifts say
    whether the change is significant (`common.reports.intervals`); None when there is nothing to compare."""

    mean: float | None
    share_low: float | None
    no_previous: bool = False
    mean_shift: Shift | None = None
    share_shift: Shift | None = None
    pass_shift: Shift | None = field(default=None, compare=False)  # the pass rate's (a team judge's headline)


@dataclass(frozen=True)
class DailyPoint:
    day: date  # a calendar day in the report's time zone
    answers: int  # captured answers that day
    scored: int
    mean: float | None  # mean score of the primary judge that day


@dataclass(frozen=True)
class Report:
    period: Period
    overall: ChannelStats
    previous_overall: ChannelStats
    channels: list[ChannelStats]
    previous_channels: dict[str | None, ChannelStats]
    daily: list[DailyPoint]
    primary_judge: str
    thresholds: dict[str | None, dict[str, float]] = field(default_factory=dict)
    trust: Trust = field(default_factory=Trust)
    outcomes: OutcomeReport = field(default_factory=OutcomeReport)
    golden: GoldenFigures | None = None  # the golden set's growth and last regress run (the digest)
    agreement: AgreementReport = field(default_factory=AgreementReport)  # each judge against the team's labels

    def change(self, stats: ChannelStats, judge: str) -> Change:
        """Against the week before, only when the same judge model and prompt scored both weeks."""
        if not self.trust.comparable(judge):
            return Change(mean=None, share_low=None)
        previous = self.previous_overall if stats.channel_id is None else self.previous_channels.get(stats.channel_id)
        return judge_change(stats.judge(judge), previous.judge(judge) if previous else None)

    @property
    def empty(self) -> bool:
        return self.overall.seen == 0 and self.overall.tokens.total == 0


def ordered_judges(names: Iterable[str]) -> list[str]:
    """Judge names, the primary judge first, then in scale order."""
    order = list(SCALES)
    return sorted(set(names), key=lambda name: (order.index(name) if name in order else len(order), name))


def primary_judge(names: Iterable[str]) -> str:
    """The judge the report leads with, of those that judged answers."""
    ordered = ordered_judges(names)
    return PRIMARY_JUDGE if PRIMARY_JUDGE in ordered or not ordered else ordered[0]


def judge_change(current: JudgeStats | None, previous: JudgeStats | None) -> Change:
    if current is None or not current.scored:
        return Change(mean=None, share_low=None)
    if previous is None or not previous.scored:
        return Change(mean=None, share_low=None, no_previous=True)
    if current.weights is not None or previous.weights is not None:
        before, after = previous.as_weights(), current.as_weights()
        mean_shift, share_shift = weighted_mean_change(before, after), weighted_proportion_change(before, after)
        return Change(
            mean=mean_shift.after.value - mean_shift.before.value,
            share_low=share_shift.after.value - share_shift.before.value,
            mean_shift=mean_shift,
            share_shift=share_shift,
        )
    mean = current.mean - previous.mean if current.mean is not None and previous.mean is not None else None
    share = (
        current.share_low - previous.share_low
        if current.share_low is not None and previous.share_low is not None
        else None
    )
    return Change(
        mean=mean,
        share_low=share,
        mean_shift=mean_change(previous.distribution, current.distribution),
        share_shift=proportion_change((previous.low, previous.scored), (current.low, current.scored)),
        pass_shift=proportion_change(
            (previous.scored - previous.low, previous.scored), (current.scored - current.low, current.scored)
        ),
    )
