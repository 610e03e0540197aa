"""Digest and App Home statistics: running tallies fed plain rows (`store.stats_queries.PairRow`) one at a time.

A tally keeps counts, sums and the few worst answers, never the rows: the report of a backfill's year holds as
much as a week's (`common.reports.builder` streams the rows through). Nothing here reads a database, a clock or
Slack, so every figure is tested directly, including empty weeks and weeks where every judgment failed.
"""

from __future__ import annotations

from bisect import insort
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date

from common.reports.agreement import AgreementReport
from common.reports.costs import Prices, Tokens, TokenTally
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
from common.reports.period import DayIndex, Period
from common.reports.trust import Trust
from common.reports.weighted import (
    Weights,
    weight_of,
    weighted_mean,
    weighted_mean_change,
    weighted_proportion,
    weighted_proportion_change,
)
from judges.names import CORRECTNESS, GROUNDED, JUDGE_NAMES, RELEVANCY
from store.models import ANSWER_SOURCES, JudgmentStatus, PairStatus
from store.sampling import probability_of
from store.signals import ALWAYS_JUDGED
from store.stats_queries import JudgmentRow, PairRow

# The score scale of each judge (docs/judges.md); a judge not listed uses what it stored.
SCALES: dict[str, tuple[int, int]] = {RELEVANCY: (0, 4), CORRECTNESS: (0, 2), GROUNDED: (1, 5)}
PRIMARY_JUDGE = RELEVANCY
# Pairs that were never a separate answer to report on.
_NOT_AN_ANSWER = {PairStatus.MERGED}
_NOT_JUDGED_STATUSES = {PairStatus.NO_QUESTION, PairStatus.EMPTY, PairStatus.DELETED}
_WAITING_STATUSES = {PairStatus.SETTLING, PairStatus.PENDING}

ThresholdsFor = Callable[[str | None], Mapping[str, float]]
Scales = Mapping[str, tuple[int, int]]


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


# Captured live, or read from Slack's history or an export (`relmon backfill`, `relmon import`).


def answer_probability(row: PairRow) -> float | None:
    """The chance the answer had of being judged: None (certain) once its conversation signalled a failure, whatever
    was stored when it was sampled (workers.sampling)."""
    return probability_of(row.signals, row.inclusion_probability)


def is_answer(row: PairRow) -> bool:
    """One of the support bot's answers: a captured pair that stands on its own (not an on-demand /judge request)."""
    return row.source in ANSWER_SOURCES and row.status not in _NOT_AN_ANSWER


class JudgeTally:
    """One judge's figures so far; "low" uses each answer's own channel threshold."""

    def __init__(self, judge: str, scale: tuple[int, int] | None = None) -> None:
        self.judge, self.scale = judge, scale
        self.scored = self.nulls = self.errors = self.low = 0
        self.total = 0.0
        self.counts: Counter[int] = Counter()  # scores are discrete: a count per score of the scale
        self.thresholds: set[float] = set()
        self.weights = Weights()  # each scored answer's weight 1/π (sampling)

    def add(self, judgment: JudgmentRow, threshold: float | None, weight: float = 1.0) -> None:
        if judgment.status == JudgmentStatus.ERROR:
            self.errors += 1
        elif judgment.status == JudgmentStatus.NULL or judgment.score is None:
            self.nulls += 1
        else:
            self.scored += 1
            self.total += judgment.score
            self.counts[round(judgment.score)] += 1
            low = threshold is not None and judgment.score <= threshold
            if threshold is not None:
                self.thresholds.add(float(threshold))
                if low:
                    self.low += 1
            self.weights.add(weight, hit=low, score=float(round(judgment.score)))

    def stats(self) -> JudgeStats:
        counts = self.counts
        observed = (min(counts, default=0), max(counts, default=0))
        low_end, high_end = self.scale or SCALES.get(self.judge, observed)
        return JudgeStats(
            judge=self.judge,
            scored=self.scored,
            nulls=self.nulls,
            errors=self.errors,
            mean=self.total / self.scored if self.scored else None,
            distribution={score: counts.get(score, 0) for score in range(low_end, high_end + 1)},
            low=self.low,
            thresholds=tuple(sorted(self.thresholds)),
            weights=self.weights if self.weights.unequal else None,
            scale_of_file=self.scale,
        )


def _worst_judgment(row: PairRow) -> JudgmentRow | None:
    usable = [j for j in row.judgments if j.status == JudgmentStatus.OK and j.normalized_score is not None]
    return min(usable, key=lambda j: j.normalized_score, default=None)


class WorstTally:
    """The `count` lowest-scored answers so far (by normalized score, so judges compare; the older answer first
    on a tie), one entry per answer."""

    def __init__(self, count: int = 3) -> None:
        self.count = count
        self.kept: list[tuple[float, int, WorstAnswer]] = []  # ordered, at most `count`

    def add(self, row: PairRow) -> None:
        judgment = _worst_judgment(row)
        if judgment is None or self.count <= 0:
            return
        key = (judgment.normalized_score, row.id)
        if len(self.kept) >= self.count and key >= self.kept[-1][:2]:
            return
        answer = WorstAnswer(
            pair_id=row.id,
            channel_id=row.channel_id,
            channel_is_private=row.channel_is_private,
            answer_ts=row.answer_ts,
            thread_ts=row.thread_ts,
            judge=judgment.judge,
            score=float(judgment.score if judgment.score is not None else 0.0),
            max_score=judgment.max_score,
            normalized_score=float(judgment.normalized_score),
        )
        insort(self.kept, (*key, answer), key=lambda entry: entry[:2])
        del self.kept[self.count :]

    def answers(self) -> list[WorstAnswer]:
        return [answer for _, _, answer in self.kept]


def ordered_judges(names: Iterable[str]) -> list[str]:
    """Judge names, the primary judge first, then in scale order."""
    order = list(SCALES)
    return sorted(set(names), key=lambda name: (order.index(name) if name in order else len(order), name))


def primary_judge(names: Iterable[str]) -> str:
    """The judge the report leads with, of those that judged answers."""
    ordered = ordered_judges(names)
    return PRIMARY_JUDGE if PRIMARY_JUDGE in ordered or not ordered else ordered[0]


class ChannelTally:
    """One channel's figures so far (or every channel's, fed every row)."""

    def __init__(
        self, thresholds_for: ThresholdsFor, prices: Prices, worst: int = 3, scales: Scales | None = None
    ) -> None:
        self.thresholds_for, self.prices, self.scales = thresholds_for, prices, scales or {}
        self.seen = self.judged = self.errored = self.votes_right = self.votes_wrong = 0
        self.statuses: Counter[str] = Counter()
        self.judges: dict[str, JudgeTally] = {}  # the judges that judged these answers, as first seen
        self.worst = WorstTally(worst)
        self.spent = TokenTally(prices)
        self.unsignalled_judged = self.unsignalled_decided = 0
        self.sampled = False

    def add(self, row: PairRow) -> None:
        # Tokens count every LLM call, on-demand /judge requests included: they are on the same bill. Every
        # judgment made counts, those a re-judged answer's newer version superseded too: they were paid for.
        for judgment in (*row.judgments, *row.superseded):
            self.spent.add(judgment)
        if not is_answer(row):
            return
        self.seen += 1
        self.statuses[row.status] += 1
        if any(j.status in (JudgmentStatus.OK, JudgmentStatus.NULL) for j in row.judgments):
            self.judged += 1
        elif row.judgments and all(j.status == JudgmentStatus.ERROR for j in row.judgments):
            self.errored += 1
        probability = answer_probability(row)
        weight = weight_of(probability)
        self._count_sampling(row, probability)
        thresholds = self.thresholds_for(row.channel_id) if row.judgments else {}
        for judgment in row.judgments:
            if judgment.judge not in self.judges:
                self.judges[judgment.judge] = self._tally(judgment.judge)
            self.judges[judgment.judge].add(judgment, thresholds.get(judgment.judge), weight)
            self.votes_right += judgment.votes_right
            self.votes_wrong += judgment.votes_wrong
        self.worst.add(row)

    def _count_sampling(self, row: PairRow, probability: float | None) -> None:
        if ALWAYS_JUDGED & set(row.signals):
            return  # judged for certain: not part of the sample
        if row.status == PairStatus.SKIPPED_SAMPLING:
            self.unsignalled_decided += 1
            self.sampled = True
        elif row.judgments:
            self.unsignalled_decided += 1
            self.unsignalled_judged += 1
            self.sampled = self.sampled or probability is not None

    def _tally(self, judge: str) -> JudgeTally:
        return JudgeTally(judge, self.scales.get(judge) if is_team_judge(judge) else None)

    def stats(self, channel_id: str | None, judges: Sequence[str] | None = None) -> ChannelStats:
        """The figures, for `judges` (every channel of a report shows the same judges) or those seen."""
        names = list(judges) if judges is not None else ordered_judges(self.judges)
        statuses = self.statuses
        return ChannelStats(
            channel_id=channel_id,
            seen=self.seen,
            judged=self.judged,
            skipped_sampling=statuses[PairStatus.SKIPPED_SAMPLING],
            skipped_budget=statuses[PairStatus.SKIPPED_BUDGET],
            not_judged=sum(statuses[s] for s in _NOT_JUDGED_STATUSES),
            waiting=sum(statuses[s] for s in _WAITING_STATUSES),
            errored=self.errored,
            judges={name: (self.judges.get(name) or self._tally(name)).stats() for name in names},
            votes_right=self.votes_right,
            votes_wrong=self.votes_wrong,
            worst=self.worst.answers(),
            tokens=self.spent.tokens(),
            unsignalled_judged=self.unsignalled_judged,
            unsignalled_decided=self.unsignalled_decided,
            sampled=self.sampled,
        )


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


class DailyTally:
    """Answers and each judge's scores on each calendar day of the period, in its time zone, by the day the question
    was asked (`DayIndex.of_answer`)."""

    def __init__(self, period: Period) -> None:
        self.period = period
        self.days = DayIndex(period)
        self.answers = [0] * len(self.days.days)
        self.scores: dict[str, list[list]] = {}  # judge -> per day [scored, total]

    def add(self, row: PairRow) -> None:
        index = self.days.of_answer(row.asked_at, row.created_at) if is_answer(row) else None
        if index is None:
            return
        self.answers[index] += 1
        weight = weight_of(answer_probability(row))  # a sampled answer's day mean is reweighted as the week's
        for j in row.judgments:
            if j.status == JudgmentStatus.OK and j.score is not None:
                day = self.scores.setdefault(j.judge, [[0, 0.0, 0.0] for _ in self.answers])[index]
                day[0] += 1
                day[1] += weight * j.score
                day[2] += weight

    def points(self, judge: str) -> list[DailyPoint]:
        scores = self.scores.get(judge) or [[0, 0.0, 0.0] for _ in self.answers]
        return [
            DailyPoint(day=day, answers=answers, scored=scored, mean=total / weights if scored else None)
            for day, answers, (scored, total, weights) in zip(self.days.days, self.answers, scores, strict=True)
        ]
