"""Digest and App Home statistics: pure functions over plain rows (`store.stats_queries.PairRow`).

Nothing here reads a database, a clock or Slack, so every figure is tested directly, including empty weeks
and weeks where every judgment failed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from common.reports.outcomes import OutcomeReport, outcome_report
from common.reports.period import Period, day_slices
from common.reports.trust import CanaryPoint, Trust, trust_report
from store.models import JudgmentStatus, PairStatus
from store.stats_queries import JudgmentRow, PairRow

# The score scale of each judge (docs/judges.md); a judge not listed uses what it stored.
SCALES: dict[str, tuple[int, int]] = {"relevancy": (0, 4), "correctness": (0, 2), "grounded": (1, 5)}
PRIMARY_JUDGE = "relevancy"
# Pairs that were never a separate answer to report on.
_NOT_AN_ANSWER = {PairStatus.MERGED}
_NOT_JUDGED_STATUSES = {PairStatus.NO_QUESTION, PairStatus.EMPTY, PairStatus.DELETED}
_WAITING_STATUSES = {PairStatus.SETTLING, PairStatus.PENDING}

ThresholdsFor = Callable[[str | None], Mapping[str, float]]


@dataclass(frozen=True)
class Prices:
    """USD per million tokens, for the estimated cost. Cached input (read from the provider's prompt cache)
    costs half the input price unless `cached_input_per_million` says otherwise."""

    input_per_million: float = 0.0
    output_per_million: float = 0.0
    cached_input_per_million: float | None = None

    @property
    def cached_input(self) -> float:
        if self.cached_input_per_million is None:
            return self.input_per_million / 2
        return self.cached_input_per_million


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

    @property
    def share_low(self) -> float | None:
        return self.low / self.scored if self.scored else None

    @property
    def scale(self) -> tuple[int, int]:
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
class Tokens:
    prompt: int = 0  # every input token, the cached ones included
    completion: int = 0
    cost_usd: float = 0.0
    cached: int = 0  # of prompt, read from the provider's prompt cache

    @property
    def total(self) -> int:
        return self.prompt + self.completion


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

    @property
    def errors(self) -> int:
        return sum(stats.errors for stats in self.judges.values())

    @property
    def agreement(self) -> float | None:
        """Share of feedback votes that said the judge was right."""
        votes = self.votes_right + self.votes_wrong
        return self.votes_right / votes if votes else None

    def judge(self, name: str) -> JudgeStats | None:
        return self.judges.get(name)


@dataclass(frozen=True)
class Change:
    """This week against the week before, for one judge (None when either week has no scores)."""

    mean: float | None
    share_low: float | None


@dataclass(frozen=True)
class DailyPoint:
    start: datetime
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

    def change(self, stats: ChannelStats, judge: str) -> Change:
        """Against the week before, only when the same judge model and prompt scored both weeks."""
        if not self.trust.comparable(judge):
            return Change(mean=None, share_low=None)
        previous = self.previous_overall if stats.channel_id is None else self.previous_channels.get(stats.channel_id)
        return compare(stats.judge(judge), previous.judge(judge) if previous else None)

    @property
    def empty(self) -> bool:
        return self.overall.seen == 0 and self.overall.tokens.total == 0


# Building blocks -------------------------------------------------------------------------------


# Captured live, or read from Slack's history or an export (`relmon backfill`, `relmon import`).
ANSWER_SOURCES = frozenset({"capture", "backfill", "import"})


def captured(rows: Iterable[PairRow]) -> list[PairRow]:
    """The support bot's answers: captured pairs that stand on their own (not on-demand /judge requests)."""
    return [row for row in rows if row.source in ANSWER_SOURCES and row.status not in _NOT_AN_ANSWER]


def token_use(rows: Iterable[PairRow], prices: Prices) -> Tokens:
    """LLM tokens actually spent (cached verdicts cost nothing) and their estimated cost, the input the provider
    read from its prompt cache at the cached rate. Every judgment made counts, those a re-judged answer's newer
    version superseded too: they were paid for."""
    prompt = cached = completion = 0
    cost = 0.0
    for row in rows:
        for judgment in (*row.judgments, *row.superseded):
            if not judgment.cached:
                prompt += judgment.prompt_tokens
                cached += min(judgment.cached_tokens, judgment.prompt_tokens)
                completion += judgment.completion_tokens
                cost += judgment_cost(judgment, prices)
    return Tokens(prompt=prompt, completion=completion, cost_usd=cost, cached=cached)


BATCH_DISCOUNT = 0.5  # the Batch API bills half the online price


def judgment_cost(judgment: JudgmentRow, prices: Prices) -> float:
    """USD of one judgment's tokens (the cached input at its rate; a batch judgment at half price)."""
    cached = min(judgment.cached_tokens, judgment.prompt_tokens)
    cost = (
        (judgment.prompt_tokens - cached) / 1e6 * prices.input_per_million
        + cached / 1e6 * prices.cached_input
        + judgment.completion_tokens / 1e6 * prices.output_per_million
    )
    return cost * BATCH_DISCOUNT if judgment.batch else cost


def judge_stats(judge: str, rows: Iterable[PairRow], thresholds_for: ThresholdsFor) -> JudgeStats:
    """One judge's figures over these pairs; "low" uses each pair's own channel threshold."""
    scored = nulls = errors = low = 0
    total = 0.0
    counts: Counter[int] = Counter()
    thresholds: set[float] = set()
    for row in rows:
        for judgment in row.judgments:
            if judgment.judge != judge:
                continue
            if judgment.status == JudgmentStatus.ERROR:
                errors += 1
            elif judgment.status == JudgmentStatus.NULL or judgment.score is None:
                nulls += 1
            else:
                scored += 1
                total += judgment.score
                counts[round(judgment.score)] += 1
                threshold = thresholds_for(row.channel_id).get(judge)
                if threshold is not None:
                    thresholds.add(float(threshold))
                    if judgment.score <= threshold:
                        low += 1
    low_end, high_end = SCALES.get(judge, (min(counts, default=0), max(counts, default=0)))
    distribution = {score: counts.get(score, 0) for score in range(low_end, high_end + 1)}
    return JudgeStats(
        judge=judge,
        scored=scored,
        nulls=nulls,
        errors=errors,
        mean=total / scored if scored else None,
        distribution=distribution,
        low=low,
        thresholds=tuple(sorted(thresholds)),
    )


def _worst_judgment(row: PairRow) -> JudgmentRow | None:
    usable = [j for j in row.judgments if j.status == JudgmentStatus.OK and j.normalized_score is not None]
    return min(usable, key=lambda j: j.normalized_score, default=None)


def worst_answers(rows: Iterable[PairRow], count: int = 3) -> list[WorstAnswer]:
    """The `count` lowest-scored answers (by normalized score, so judges compare), one entry per answer."""
    candidates = []
    for row in rows:
        judgment = _worst_judgment(row)
        if judgment is not None:
            candidates.append((judgment.normalized_score, row.id, row, judgment))
    candidates.sort(key=lambda item: (item[0], item[1]))
    return [
        WorstAnswer(
            pair_id=row.id,
            channel_id=row.channel_id,
            channel_is_private=row.channel_is_private,
            answer_ts=row.answer_ts,
            thread_ts=row.thread_ts,
            judge=judgment.judge,
            score=float(judgment.score if judgment.score is not None else 0.0),
            max_score=judgment.max_score,
            normalized_score=float(normalized),
        )
        for normalized, _, row, judgment in candidates[:count]
    ]


def judges_seen(rows: Iterable[PairRow]) -> list[str]:
    """Judge names with any judgment, the primary judge first, then in scale order."""
    names = {judgment.judge for row in rows for judgment in row.judgments}
    order = list(SCALES)
    return sorted(names, key=lambda name: (order.index(name) if name in order else len(order), name))


def channel_stats(
    channel_id: str | None,
    rows: Sequence[PairRow],
    thresholds_for: ThresholdsFor,
    prices: Prices,
    *,
    judges: Sequence[str] | None = None,
    worst: int = 3,
) -> ChannelStats:
    """Figures for one channel (or, with channel_id None, for all the rows given)."""
    answers = captured(rows)
    judged = errored = 0
    statuses = Counter(row.status for row in answers)
    for row in answers:
        usable = any(j.status in (JudgmentStatus.OK, JudgmentStatus.NULL) for j in row.judgments)
        if usable:
            judged += 1
        elif row.judgments and all(j.status == JudgmentStatus.ERROR for j in row.judgments):
            errored += 1
    names = list(judges) if judges is not None else judges_seen(answers)
    votes_right = sum(j.votes_right for row in answers for j in row.judgments)
    votes_wrong = sum(j.votes_wrong for row in answers for j in row.judgments)
    return ChannelStats(
        channel_id=channel_id,
        seen=len(answers),
        judged=judged,
        skipped_sampling=statuses[PairStatus.SKIPPED_SAMPLING],
        skipped_budget=statuses[PairStatus.SKIPPED_BUDGET],
        not_judged=sum(statuses[s] for s in _NOT_JUDGED_STATUSES),
        waiting=sum(statuses[s] for s in _WAITING_STATUSES),
        errored=errored,
        judges={name: judge_stats(name, answers, thresholds_for) for name in names},
        votes_right=votes_right,
        votes_wrong=votes_wrong,
        worst=worst_answers(answers, worst),
        # Tokens count every LLM call, on-demand /judge requests included: they are on the same bill.
        tokens=token_use(rows, prices),
    )


def compare(current: JudgeStats | None, previous: JudgeStats | None) -> Change:
    if current is None or previous is None:
        return Change(mean=None, share_low=None)
    mean = current.mean - previous.mean if current.mean is not None and previous.mean is not None else None
    share = (
        current.share_low - previous.share_low
        if current.share_low is not None and previous.share_low is not None
        else None
    )
    return Change(mean=mean, share_low=share)


def daily_series(rows: Iterable[PairRow], period: Period, judge: str) -> list[DailyPoint]:
    """Answers and the judge's mean score in each of the period's seven 24-hour slices."""
    answers = captured(rows)
    points = []
    for start, end in day_slices(period):
        day = [row for row in answers if start <= row.created_at < end]
        scores = [
            j.score
            for row in day
            for j in row.judgments
            if j.judge == judge and j.status == JudgmentStatus.OK and j.score is not None
        ]
        points.append(
            DailyPoint(
                start=start, answers=len(day), scored=len(scores), mean=sum(scores) / len(scores) if scores else None
            )
        )
    return points


def primary_judge(rows: Iterable[PairRow]) -> str:
    names = judges_seen(rows)
    return PRIMARY_JUDGE if PRIMARY_JUDGE in names or not names else names[0]


def build_report(
    period: Period,
    current: Sequence[PairRow],
    previous: Sequence[PairRow],
    thresholds_for: ThresholdsFor,
    prices: Prices,
    *,
    channels: Iterable[str] = (),
    is_watched: Callable[[str], bool] = lambda _channel: True,
    worst: int = 3,
    canary_runs: Sequence[CanaryPoint] = (),
) -> Report:
    """The whole digest: overall and per channel, this week and the one before, and the daily series.

    `channels` are reported even without data (a watched channel that went quiet is news);
    channels `is_watched` rejects are left out entirely.
    """
    current = [row for row in current if row.channel_id is None or is_watched(row.channel_id)]
    previous = [row for row in previous if row.channel_id is None or is_watched(row.channel_id)]
    judges = judges_seen([*captured(current), *captured(previous)])
    ids = {row.channel_id for row in captured(current)} | {c for c in channels if is_watched(c)}
    channel_ids = sorted(c for c in ids if c is not None)

    def stats(channel: str | None, rows: Sequence[PairRow]) -> ChannelStats:
        mine = rows if channel is None else [row for row in rows if row.channel_id == channel]
        return channel_stats(channel, mine, thresholds_for, prices, judges=judges, worst=worst)

    main = primary_judge(captured(current)) if judges else PRIMARY_JUDGE
    return Report(
        period=period,
        overall=stats(None, current),
        previous_overall=stats(None, previous),
        channels=[stats(channel, current) for channel in channel_ids],
        previous_channels={channel: stats(channel, previous) for channel in channel_ids},
        daily=daily_series(current, period, main),
        primary_judge=main,
        thresholds={channel: dict(thresholds_for(channel)) for channel in [None, *channel_ids]},
        trust=trust_report(captured(current), captured(previous), judges, thresholds_for, SCALES, canary_runs),
        outcomes=outcome_report(period, captured(current), captured(previous), channel_ids, main),
    )
