"""Running tallies fed plain rows (`store.stats_queries.PairRow`) one at a time, which leave the figures of
`common.reports.stats`: each judge's, each channel's (or every channel's), the worst answers, the days.

A tally keeps counts, sums and the few worst answers, never the rows: the report of a backfill's year holds as
much as a week's (`common.reports.builder` streams the rows through). Nothing here reads a database, a clock or
Slack, so every figure is tested directly.
"""

from __future__ import annotations

from bisect import insort
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from common.reports.costs import Prices, TokenTally
from common.reports.period import DayIndex, Period
from common.reports.stats import (
    SCALES,
    ChannelStats,
    DailyPoint,
    JudgeStats,
    WorstAnswer,
    is_team_judge,
    ordered_judges,
)
from common.reports.weighted import Weights, weight_of
from store.models import ANSWER_SOURCES, JudgmentStatus, PairStatus
from store.sampling import probability_of
from store.signals import ALWAYS_JUDGED
from store.stats_queries import JudgmentRow, PairRow

# Pairs that were never a separate answer to report on.
_NOT_AN_ANSWER = {PairStatus.MERGED}
_NOT_JUDGED_STATUSES = {PairStatus.NO_QUESTION, PairStatus.EMPTY, PairStatus.DELETED}
_WAITING_STATUSES = {PairStatus.SETTLING, PairStatus.PENDING}

ThresholdsFor = Callable[[str | None], Mapping[str, float]]
Scales = Mapping[str, tuple[int, int]]


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
