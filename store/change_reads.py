"""What the change alerts read (`workers.alerts.changes`): the judgments made since the last look, in order, with
what groups their answer (its channel, its bot when it happened in no channel, its stored topic) and the names of
topics. One bounded read per look: the worker's tick stays cheap however many groups there are."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Select, func, select
from sqlalchemy.orm import Session

from store.exchange_models import Exchange
from store.models import ALERTING_SOURCES, Judgment, Pair
from store.sampling import in_uniform_sample
from store.topic_models import PairTopic, TopicRecord


@dataclass(frozen=True)
class JudgedAnswer:
    """One judgment of an answer that alerts can be about (captured or ingested), as the change detector reads it."""

    judgment_id: int
    pair_id: int
    score: float
    judged_at: datetime
    channel_id: str | None
    channel_is_private: bool
    answer_ts: str | None
    bot: str | None  # the ingested exchange's bot (its first exchange), None for a captured answer
    visibility: str | None  # the exchange's visibility (public | private | dm), None for a captured answer
    topic_key: str | None  # the pair's stored topic, when a topics run assigned one
    exchange_answered_at: datetime | None = None  # when the bot answered, as its exchange says
    pair_created_at: datetime | None = None

    @property
    def at(self) -> datetime:
        """When the answer was given (the detector's clock: "since Tue 10:00" is the answers' time, not the judge's):
        its Slack message's ts, else its exchange's time, else when relmon stored it, else when it was judged."""
        if self.answer_ts:
            try:
                return datetime.fromtimestamp(float(self.answer_ts), UTC)
            except (ValueError, OverflowError, OSError):
                pass
        return self.exchange_answered_at or self.pair_created_at or self.judged_at


def _answers() -> Select:
    """The columns of a `JudgedAnswer`: a judgment, its pair, the pair's exchanges (none for a captured answer, one
    row each otherwise: joined by `ix_exchanges_pair`, no scan of the table) and its stored topic."""
    return (
        select(
            Judgment.id,
            Judgment.pair_id,
            Judgment.score,
            Judgment.created_at,
            Pair.channel_id,
            Pair.channel_is_private,
            Pair.answer_ts,
            Exchange.bot,
            Exchange.visibility,
            PairTopic.topic_key,
            Exchange.answered_at,
            Pair.created_at,
        )
        .join(Pair, Pair.id == Judgment.pair_id)
        .outerjoin(Exchange, Exchange.pair_id == Pair.id)
    )


def _scored(judge: str) -> tuple:
    return (
        Judgment.judge == judge,
        Judgment.status == "ok",
        Judgment.score.is_not(None),
        Pair.source.in_(sorted(ALERTING_SOURCES)),
        in_uniform_sample(),  # under sampling: not the judged answers, which lean to failures (store.sampling)
    )


def judged_since(session: Session, after_id: int, judge: str, *, limit: int) -> list[JudgedAnswer]:
    """Scored judgments by `judge` with an id above `after_id`, oldest first, at most `limit` rows read (a pair with
    several exchanges: its first one's)."""
    query = (
        _answers()
        .outerjoin(PairTopic, PairTopic.pair_id == Pair.id)
        .where(Judgment.id > after_id, *_scored(judge))
        .order_by(Judgment.id, Exchange.id)
        .limit(limit)
    )
    found: dict[int, JudgedAnswer] = {}
    for row in session.execute(query):
        found.setdefault(row[0], JudgedAnswer(*row))
    return list(found.values())


def topical_since(session: Session, after_pair_id: int, judge: str, *, limit: int) -> list[JudgedAnswer]:
    """Pairs with a stored topic and an id above `after_pair_id`, each once with its newest scored judgment by
    `judge`, lowest pair id first. A topics run assigns a period's pairs together, a day or so after they were
    answered: a topic's detector is fed them then, each pair once (a later run re-assigning it is not read again)."""
    query = (
        _answers()
        .join(PairTopic, PairTopic.pair_id == Pair.id)
        .where(PairTopic.pair_id > after_pair_id, *_scored(judge))  # a range of pair_topics' key
        .order_by(Pair.id, Judgment.id, Exchange.id)
        .limit(limit)
    )
    found: dict[int, JudgedAnswer] = {}
    for row in session.execute(query):
        answer = JudgedAnswer(*row)
        kept = found.get(answer.pair_id)
        if kept is None or answer.judgment_id > kept.judgment_id:  # the newest verdict, its first exchange
            found[answer.pair_id] = answer
    return list(found.values())


def first_judgment_since(session: Session, since: datetime) -> int:
    """The id just before the first judgment made at or after `since` (where a first look starts), 0 for none."""
    found = session.scalar(select(func.min(Judgment.id)).where(Judgment.created_at >= since))
    return found - 1 if found is not None else session.scalar(select(func.max(Judgment.id))) or 0


def first_pair_since(session: Session, since: datetime) -> int:
    """The id just before the first pair stored at or after `since` (where the topics' first look starts)."""
    found = session.scalar(select(func.min(Pair.id)).where(Pair.created_at >= since))
    return found - 1 if found is not None else session.scalar(select(func.max(Pair.id))) or 0


def topic_names(session: Session, keys: Collection[str]) -> dict[str, str]:
    if not keys:
        return {}
    query = select(TopicRecord.key, TopicRecord.name).where(TopicRecord.key.in_(sorted(keys)))
    return {row.key: row.name for row in session.execute(query)}


def answers_of(session: Session, pair_ids: Sequence[int]) -> dict[int, tuple[str | None, str | None, bool]]:
    """Each pair's (channel, answer ts, private): where an example links to."""
    if not pair_ids:
        return {}
    query = select(Pair.id, Pair.channel_id, Pair.answer_ts, Pair.channel_is_private).where(Pair.id.in_(pair_ids))
    return {row.id: (row.channel_id, row.answer_ts, row.channel_is_private) for row in session.execute(query)}
