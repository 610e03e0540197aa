"""Queries of the topics (`topics.service` is their one caller): the period's questions with their texts,
stored embeddings, topics and their runs, each pair's topic, and the topics' LLM spend."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from store.db import dialect_insert
from store.models import Pair, as_utc, utcnow
from store.stats_queries import PairRow, stream_pair_rows
from store.topic_models import PairTopic, QuestionEmbedding, TopicPeriod, TopicRecord, TopicRun, TopicSpend

_CHUNK = 500


@dataclass(frozen=True)
class QuestionText:
    question: str | None
    question_ts: str | None
    reference: str | None  # a teammate's reply, when one stepped in


def _chunks(items: Sequence, size: int = _CHUNK) -> Iterator[Sequence]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


def texts_of(session: Session, pair_ids: Sequence[int]) -> dict[int, QuestionText]:
    found: dict[int, QuestionText] = {}
    for chunk in _chunks(sorted(set(pair_ids))):
        query = select(Pair.id, Pair.question_text, Pair.question_ts, Pair.reference_text).where(Pair.id.in_(chunk))
        for row in session.execute(query):
            found[row.id] = QuestionText(row.question_text, row.question_ts, row.reference_text)
    return found


def stream_questions(session: Session, start: datetime, end: datetime) -> Iterator[tuple[PairRow, QuestionText]]:
    """The pairs of [start, end) (`store.stats_queries.stream_pair_rows`: judgments, signals, window) with their
    question's text, a batch at a time."""
    batch: list[PairRow] = []
    for row in stream_pair_rows(session, start, end):
        batch.append(row)
        if len(batch) == _CHUNK:
            yield from _with_texts(session, batch)
            batch = []
    if batch:
        yield from _with_texts(session, batch)


def _with_texts(session: Session, batch: list[PairRow]) -> Iterator[tuple[PairRow, QuestionText]]:
    texts = texts_of(session, [row.id for row in batch])
    for row in batch:
        yield row, texts.get(row.id, QuestionText(None, None, None))


# Embeddings ------------------------------------------------------------------------------------------------


def stored_embeddings(session: Session, pair_ids: Sequence[int], model: str) -> Iterator[tuple[int, str, bytes]]:
    """(pair id, text sha, float16 bytes) of the embeddings stored for `model`, a batch of ids at a time (the
    caller copies each into its matrix: the bytes of every question are never held at once)."""
    for chunk in _chunks(sorted(set(pair_ids))):
        query = select(QuestionEmbedding.pair_id, QuestionEmbedding.text_sha, QuestionEmbedding.vector).where(
            QuestionEmbedding.pair_id.in_(chunk), QuestionEmbedding.model == model
        )
        for pair_id, sha, vector in session.execute(query):
            yield pair_id, sha, bytes(vector)


def store_embeddings(session: Session, rows: Sequence[dict]) -> None:
    """Insert or replace (pair_id, model, text_sha, vector) rows; a pair deleted meanwhile is skipped."""
    if not rows:
        return
    alive = set(session.scalars(select(Pair.id).where(Pair.id.in_([row["pair_id"] for row in rows]))))
    rows = [row | {"created_at": utcnow()} for row in rows if row["pair_id"] in alive]
    if not rows:
        return
    insert = dialect_insert(session)(QuestionEmbedding)
    statement = insert.on_conflict_do_update(
        index_elements=["pair_id"],
        set_={name: insert.excluded[name] for name in ("model", "text_sha", "vector", "created_at")},
    )
    session.execute(statement, rows)


# Topics and runs -------------------------------------------------------------------------------------------


def known_topics(session: Session, limit: int = 200) -> list[TopicRecord]:
    """The topics most recently seen: a new run's topics may continue them."""
    query = select(TopicRecord).order_by(TopicRecord.updated_at.desc(), TopicRecord.key).limit(limit)
    topics = list(session.scalars(query))
    session.expunge_all()
    return topics


def save_topics(session: Session, rows: Sequence[dict]) -> None:
    """Insert or update (key, name, named_by, name_sources, anchors) rows."""
    if not rows:
        return
    now = utcnow()
    insert = dialect_insert(session)(TopicRecord)
    statement = insert.on_conflict_do_update(
        index_elements=["key"],
        set_={name: insert.excluded[name] for name in ("name", "named_by", "name_sources", "anchors", "updated_at")},
    )
    session.execute(statement, [row | {"created_at": now, "updated_at": now} for row in rows])


def save_pair_topics(session: Session, topic_of_pair: dict[int, str]) -> None:
    """Each pair's latest topic (pairs deleted meanwhile are skipped)."""
    items = sorted(topic_of_pair.items())
    now = utcnow()
    for chunk in _chunks(items):
        alive = set(session.scalars(select(Pair.id).where(Pair.id.in_([pair_id for pair_id, _ in chunk]))))
        rows = [{"pair_id": p, "topic_key": k, "updated_at": now} for p, k in chunk if p in alive]
        if not rows:
            continue
        insert = dialect_insert(session)(PairTopic)
        statement = insert.on_conflict_do_update(
            index_elements=["pair_id"], set_={"topic_key": insert.excluded.topic_key, "updated_at": now}
        )
        session.execute(statement, rows)


def save_run(session: Session, run: dict, periods: Sequence[dict]) -> int:
    """Store a run and its topics' figures, replacing an earlier run of the same key (a retried digest)."""
    session.execute(delete(TopicRun).where(TopicRun.run_key == run["run_key"]))
    session.flush()
    record = TopicRun(**run)
    session.add(record)
    session.flush()
    for period in periods:
        session.add(TopicPeriod(run_id=record.id, **period))
    return record.id


def latest_run(session: Session, since: datetime) -> tuple[TopicRun, list[TopicPeriod]] | None:
    """The newest stored run that ended at or after `since`, with its topics in rank order."""
    run = session.scalars(
        select(TopicRun).where(TopicRun.end >= since).order_by(TopicRun.end.desc(), TopicRun.id.desc()).limit(1)
    ).first()
    if run is None:
        return None
    periods = list(session.scalars(select(TopicPeriod).where(TopicPeriod.run_id == run.id).order_by(TopicPeriod.rank)))
    session.expunge_all()
    return run, periods


def example_texts(session: Session, pair_ids: Sequence[int]) -> dict[int, tuple[str | None, bool, str | None]]:
    """pair id → (question text, private channel, channel) of a run's examples still stored."""
    found: dict[int, tuple[str | None, bool, str | None]] = {}
    for chunk in _chunks(sorted(set(pair_ids))):
        query = select(Pair.id, Pair.question_text, Pair.channel_is_private, Pair.channel_id).where(Pair.id.in_(chunk))
        for row in session.execute(query):
            found[row.id] = (row.question_text, bool(row.channel_is_private), row.channel_id)
    return found


def histories(session: Session, keys: Iterable[str]) -> dict[str, list[dict]]:
    """Each topic's figures in the stored runs (the weekly digests', the daily ones), oldest first."""
    keys = sorted(set(keys))
    found: dict[str, list[dict]] = {key: [] for key in keys}
    for chunk in _chunks(keys):
        query = (
            select(TopicPeriod.topic_key, TopicRun.run_key, TopicRun.start, TopicRun.end, TopicPeriod.questions)
            .add_columns(TopicPeriod.failed, TopicPeriod.name)
            .join(TopicRun, TopicRun.id == TopicPeriod.run_id)
            .where(TopicPeriod.topic_key.in_(chunk))
            .order_by(TopicRun.end, TopicRun.id)
        )
        for key, run_key, start, end, questions, failed, name in session.execute(query):
            found[key].append(
                {
                    "run": run_key,
                    "start": as_utc(start).isoformat(),
                    "end": as_utc(end).isoformat(),
                    "name": name,
                    "questions": questions,
                    "failed": failed,
                }
            )
    return found


# Spend -----------------------------------------------------------------------------------------------------


def record_spend(
    session: Session, kind: str, model: str, calls: int, prompt: int, completion: int, cached: int, at: datetime
) -> None:
    """One run's calls of one kind, dated by the run's `now` (the digest's cost counts its period's)."""
    session.add(
        TopicSpend(
            created_at=at,
            kind=kind,
            model=model,
            calls=calls,
            prompt_tokens=prompt,
            completion_tokens=completion,
            cached_tokens=cached,
        )
    )


@dataclass(frozen=True)
class Spend:
    kind: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int


def spend_between(session: Session, start: datetime, end: datetime) -> list[Spend]:
    """The topics' LLM calls and tokens in [start, end), per kind (embedding, naming)."""
    query = (
        select(
            TopicSpend.kind,
            func.sum(TopicSpend.calls),
            func.sum(TopicSpend.prompt_tokens),
            func.sum(TopicSpend.completion_tokens),
            func.sum(TopicSpend.cached_tokens),
        )
        .where(TopicSpend.created_at >= start, TopicSpend.created_at < end)
        .group_by(TopicSpend.kind)
        .order_by(TopicSpend.kind)
    )
    return [
        Spend(kind, int(c or 0), int(p or 0), int(o or 0), int(h or 0)) for kind, c, p, o, h in session.execute(query)
    ]
