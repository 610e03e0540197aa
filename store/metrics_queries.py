"""The database's side of the metrics (`common.metrics.StateCollector` reads them at each scrape): counts grouped by
a bounded set of labels, never a text or a user. Each is one aggregate statement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from store.models import Alert, Judgment, JudgmentStatus, OutcomeSignal, Pair, PairStatus

# Upper bounds of the score histogram (normalised scores, 0..1) and of the LLM latency histogram (seconds).
SCORE_BUCKETS = (0.2, 0.4, 0.6, 0.8, 1.0)
LATENCY_BUCKETS = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)
UNJUDGED = (PairStatus.SETTLING, PairStatus.PENDING)


@dataclass
class Histogram:
    """Cumulative bucket counts (same order as the bounds), the count and the sum."""

    buckets: list[int]
    count: int
    total: float


@dataclass
class TokenCounts:
    prompt: int = 0
    cached: int = 0
    completion: int = 0
    batch_prompt: int = 0  # of prompt, judged through the Batch API (half price)
    batch_cached: int = 0
    batch_completion: int = 0


@dataclass
class State:
    pairs: dict[tuple[str, str], int] = field(default_factory=dict)  # (status, channel id) -> pairs
    judgments: dict[tuple[str, str], int] = field(default_factory=dict)  # (judge, status) -> judgments
    scores: dict[str, Histogram] = field(default_factory=dict)  # judge -> normalised scores
    confirmations: dict[str, int] = field(default_factory=dict)  # outcome -> judgments
    alerts: dict[tuple[str, str, str], int] = field(default_factory=dict)  # (kind, status, channel id) -> alerts
    llm_calls: dict[str, int] = field(default_factory=dict)  # judge -> calls made (not reused verdicts)
    llm_latency: Histogram | None = None
    llm_errors: dict[str, int] = field(default_factory=dict)  # error text's first 60 characters -> judgments
    tokens: TokenCounts = field(default_factory=TokenCounts)
    outcome_signals: dict[str, int] = field(default_factory=dict)  # signal name -> pairs
    oldest_unjudged: datetime | None = None


def _histogram(column, bounds: Sequence[float]) -> list:
    return [func.sum(case((column <= bound, 1), else_=0)) for bound in bounds] + [func.count(column), func.sum(column)]


def _read_histogram(row: Sequence, bounds: Sequence[float], scale: float = 1.0) -> Histogram:
    return Histogram(
        [int(value or 0) for value in row[: len(bounds)]], int(row[len(bounds)] or 0), float(row[-1] or 0) * scale
    )


def read_state(session: Session) -> State:
    state = State()
    for status, channel, count in session.execute(
        select(Pair.status, Pair.channel_id, func.count()).group_by(Pair.status, Pair.channel_id)
    ):
        state.pairs[(status, channel)] = count
    for judge, status, count in session.execute(
        select(Judgment.judge, Judgment.status, func.count()).group_by(Judgment.judge, Judgment.status)
    ):
        state.judgments[(judge, status)] = count
    scored = Judgment.normalized_score
    for judge, *row in session.execute(
        select(Judgment.judge, *_histogram(scored, SCORE_BUCKETS))
        .where(Judgment.status == JudgmentStatus.OK, scored.is_not(None))
        .group_by(Judgment.judge)
    ):
        state.scores[judge] = _read_histogram(row, SCORE_BUCKETS)
    for outcome, count in session.execute(
        select(Judgment.confirmation_status, func.count())
        .where(Judgment.confirmation_status.is_not(None))
        .group_by(Judgment.confirmation_status)
    ):
        state.confirmations[outcome] = count
    for kind, status, channel, count in session.execute(
        select(Alert.kind, Alert.status, Alert.source_channel_id, func.count()).group_by(
            Alert.kind, Alert.status, Alert.source_channel_id
        )
    ):
        state.alerts[(kind, status, channel or "")] = count
    _read_llm(session, state)
    for name, count in session.execute(select(OutcomeSignal.name, func.count()).group_by(OutcomeSignal.name)):
        state.outcome_signals[name] = count
    state.oldest_unjudged = session.scalar(select(func.min(Pair.created_at)).where(Pair.status.in_(UNJUDGED)))
    return state


def _read_llm(session: Session, state: State) -> None:
    """Calls made (a verdict reused from the cache made none), their latency, tokens and errors."""
    called = Judgment.cached.is_(False)
    for judge, count in session.execute(select(Judgment.judge, func.count()).where(called).group_by(Judgment.judge)):
        state.llm_calls[judge] = count
    seconds = Judgment.latency_ms / 1000.0
    row = session.execute(select(*_histogram(seconds, LATENCY_BUCKETS)).where(called, Judgment.latency_ms > 0)).one()
    state.llm_latency = _read_histogram(row, LATENCY_BUCKETS)
    for batch, prompt, cached, completion in session.execute(
        select(
            Judgment.batch,
            func.sum(Judgment.prompt_tokens),
            func.sum(Judgment.cached_tokens),
            func.sum(Judgment.completion_tokens),
        )
        .where(called)
        .group_by(Judgment.batch)
    ):
        tokens = state.tokens
        tokens.prompt += int(prompt or 0)
        tokens.cached += int(cached or 0)
        tokens.completion += int(completion or 0)
        if batch:
            tokens.batch_prompt, tokens.batch_cached, tokens.batch_completion = (
                int(prompt or 0),
                int(cached or 0),
                int(completion or 0),
            )
    prefix = func.substr(func.coalesce(Judgment.error, ""), 1, 60)
    for text, count in session.execute(
        select(prefix, func.count()).where(Judgment.status == JudgmentStatus.ERROR).group_by(prefix)
    ):
        state.llm_errors[text] = state.llm_errors.get(text, 0) + count
