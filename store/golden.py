"""The golden set in SQL: items added from pairs (once per asked question), edited and removed in Slack, forgotten
when a message they quote is deleted, read for export and regress. Rules in store.golden_rules."""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.orm import Session

from store.db import insert_or_ignore, insert_or_ignore_returning
from store.golden_models import GoldenItem, GoldenSource
from store.golden_rules import (
    Occurrence,
    after_deletion,
    dedupe_key,
    keeps_without_sources,
    visible_to,
)
from store.models import Pair, utcnow
from store.topic_models import PairTopic, TopicRecord

PAIR_FIELDS = (
    "id",
    "channel_id",
    "channel_is_private",
    "question_ts",
    "answer_ts",
    "question_text",
    "answer_text",
    "reference_text",
    "context_text",
)


def pair_fields(session: Session, pair_id: int) -> dict[str, Any] | None:
    """The pair's fields an occurrence is made of (`golden_rules.occurrence_of_pair`), with its topic if it has one."""
    columns = [getattr(Pair, name) for name in PAIR_FIELDS]
    row = session.execute(select(*columns).where(Pair.id == pair_id)).first()
    if row is None:
        return None
    return dict(zip(PAIR_FIELDS, row, strict=True)) | {"topic": topics_of_pairs(session, [pair_id]).get(pair_id)}


def topics_of_pairs(session: Session, pair_ids: Collection[int]) -> dict[int, str]:
    """The name of the topic each pair's question fell in at the latest topics run (topics/), where it has one and
    whoever reads the pair may read it too: made from public questions only, or from the pair's own channel alone
    (`topics.audience`; a name of unknown sources waits for the run that names it again)."""
    if not pair_ids:
        return {}
    query = (
        select(PairTopic.pair_id, TopicRecord.name, TopicRecord.name_sources, Pair.channel_id)
        .join(TopicRecord, TopicRecord.key == PairTopic.topic_key)
        .join(Pair, Pair.id == PairTopic.pair_id)
        .where(PairTopic.pair_id.in_(list(pair_ids)))
    )
    return {
        pair_id: name
        for pair_id, name, sources, channel in session.execute(query).tuples().all()
        if sources is not None and set(sources) <= {channel}
    }


def fill_topics(session: Session) -> int:
    """Items without a topic get their question's, once the topics run has named it (topics come weekly, after
    most items joined). Returns how many got one."""
    rows = session.execute(
        select(GoldenSource.item_id, GoldenSource.pair_id)
        .join(GoldenItem, GoldenItem.id == GoldenSource.item_id)
        .where(GoldenItem.topic.is_(None), GoldenItem.removed_at.is_(None), GoldenSource.pair_id.is_not(None))
    ).all()
    names = topics_of_pairs(session, {pair_id for _item, pair_id in rows})
    filled = {item_id: names[pair_id] for item_id, pair_id in rows if pair_id in names}
    for item_id, name in filled.items():
        session.execute(update(GoldenItem).where(GoldenItem.id == item_id).values(topic=name[:200]))
    return len(filled)


def _message_key(occurrence: Occurrence) -> str | None:
    """The source's key: its Slack message, or, for a pair with none (an ingested exchange), the pair itself (so
    the exchange's deletion finds what it gave the set: store.golden.forget_sources_of_pair)."""
    ts = occurrence.question_ts or occurrence.answer_ts
    if occurrence.channel_id and ts:
        return f"{occurrence.channel_id}:{ts}"
    return f"pair:{occurrence.pair_id}" if occurrence.pair_id is not None else None


def item_by_key(session: Session, key: str) -> GoldenItem | None:
    return session.execute(select(GoldenItem).where(GoldenItem.dedupe_key == key).with_for_update()).scalar()


def new_item(session: Session, key: str, occurrence: Occurrence, now: datetime) -> GoldenItem:
    """The item of this question, inserted if missing (a twin worker's insert wins harmlessly), locked."""
    values = {
        "dedupe_key": key,
        "question": occurrence.question,
        "context": occurrence.context,
        "expected": occurrence.expected,
        "bot_answer": occurrence.bot_answer,
        "topic": occurrence.topic,
        "channel_id": occurrence.channel_id,
        "channel_is_private": occurrence.private,
        "permalink": occurrence.permalink,
        "origin": occurrence.origin,
        "times": 0 if _message_key(occurrence) else 1,  # counted from its sources as they come
        "created_at": now,
        "updated_at": now,
    }
    session.execute(insert_or_ignore(session, GoldenItem, ["dedupe_key"], values))
    item = item_by_key(session, key)
    assert item is not None
    return item


def add_occurrence(session: Session, occurrence: Occurrence, now: datetime | None = None) -> tuple[int, bool]:
    """Add one asked-and-failed question to the set: a new item, or one more time for the item of the same
    question. Idempotent per asked question (a retried task, a takeover and a vote on the same question add it
    once). Returns (item id, whether this call added something); an item a person removed stays removed."""
    now = now or utcnow()
    key = dedupe_key(occurrence.question, channel_id=occurrence.channel_id, private=occurrence.private)
    item = item_by_key(session, key) or new_item(session, key, occurrence, now)
    if item.removed_at is not None:
        return item.id, False
    added = False
    message_key = _message_key(occurrence)
    if message_key is not None:
        source = _source_values(occurrence) | {"item_id": item.id, "message_key": message_key, "created_at": now}
        added = session.execute(insert_or_ignore_returning(session, GoldenSource, ["message_key"], "id"), source)
        added = added.scalar_one_or_none() is not None
        item.times = _count_sources(session, item.id)
    # Fill what the item lacks; a person's edit of the expected answer is kept.
    if occurrence.expected and not item.expected_edited and not item.expected:
        item.expected, added = occurrence.expected, True
    for name in ("context", "bot_answer", "permalink", "topic"):
        if getattr(item, name) is None and getattr(occurrence, name):
            setattr(item, name, getattr(occurrence, name))
    item.updated_at = now
    return item.id, added


def _source_values(occurrence: Occurrence) -> dict[str, Any]:
    return {
        "channel_id": occurrence.channel_id,
        "question_ts": occurrence.question_ts,
        "answer_ts": occurrence.answer_ts,
        "reference_ts": occurrence.reference_ts,
        "pair_id": occurrence.pair_id,
        "question": occurrence.question,
        "context": occurrence.context,
        "bot_answer": occurrence.bot_answer,
        "expected": occurrence.expected,
        "permalink": occurrence.permalink,
        "topic": occurrence.topic,
        "channel_is_private": occurrence.private,
        "origin": occurrence.origin,
    }


def _count_sources(session: Session, item_id: int) -> int:
    return session.scalar(select(func.count(GoldenSource.id)).where(GoldenSource.item_id == item_id)) or 0


def set_expected(session: Session, item_id: int, expected: str, user: str | None, now: datetime | None = None) -> bool:
    """A person wrote or edited the expected answer (the alert's modal)."""
    item = session.get(GoldenItem, item_id, with_for_update=True)
    if item is None or item.removed_at is not None:
        return False
    item.expected, item.expected_edited, item.edited_by = expected, True, user
    item.updated_at = now or utcnow()
    return True


def remove_item(session: Session, item_id: int, user: str | None, now: datetime | None = None) -> bool:
    """A person took the item out of the set: its texts and sources go; the row stays so it does not come back."""
    item = session.get(GoldenItem, item_id, with_for_update=True)
    if item is None or item.removed_at is not None:
        return False
    session.execute(delete(GoldenSource).where(GoldenSource.item_id == item_id))
    item.removed_at, item.removed_by = now or utcnow(), user
    item.question, item.context, item.expected, item.bot_answer, item.permalink = "", None, None, None, None
    return True


def _occurrence(source: GoldenSource) -> Occurrence:
    return Occurrence(
        channel_id=source.channel_id,
        question_ts=source.question_ts,
        answer_ts=source.answer_ts,
        reference_ts=source.reference_ts,
        question=source.question,
        context=source.context,
        bot_answer=source.bot_answer,
        expected=source.expected,
        permalink=source.permalink,
        private=source.channel_is_private,
        origin=source.origin,
        pair_id=source.pair_id,
        topic=source.topic,
    )


def forget_sources_quoting(session: Session, channel_id: str, ts: str) -> int:
    """A message was deleted in Slack: every source quoting it goes, and an item left without sources leaves the
    set (store.golden_rules.after_deletion); one that keeps some shows the newest. Returns how many sources went."""
    quoting = or_(GoldenSource.question_ts == ts, GoldenSource.answer_ts == ts, GoldenSource.reference_ts == ts)
    return _forget_sources(session, and_(GoldenSource.channel_id == channel_id, quoting))


def forget_sources_of_pair(session: Session, pair_id: int) -> int:
    """An exchange was deleted by the bot's side: the sources taken from its pair go, as a deleted message's do."""
    return _forget_sources(session, GoldenSource.pair_id == pair_id)


def _forget_sources(session: Session, quoting) -> int:
    gone = session.execute(select(GoldenSource).where(quoting)).scalars().all()
    gone_of: dict[int, list[Occurrence]] = {}
    for source in gone:
        gone_of.setdefault(source.item_id, []).append(_occurrence(source))
    for item_id in sorted(gone_of):
        item = session.get(GoldenItem, item_id, with_for_update=True)
        if item is None:
            continue
        session.execute(delete(GoldenSource).where(GoldenSource.item_id == item_id, quoting))
        rest = session.execute(
            select(GoldenSource).where(GoldenSource.item_id == item_id).order_by(GoldenSource.id)
        ).scalars()
        imported = keeps_without_sources(item.origin, item.channel_is_private)
        refill = after_deletion([_occurrence(source) for source in rest], imported=imported)
        if refill.delete_item:
            session.delete(item)
        elif imported:  # the file's question and expected answer stay; what its linked pairs showed is redrawn
            _show_linked(item, refill.source, gone_of[item_id])
            item.times = max(1, _count_sources(session, item_id))
        elif refill.source is not None:
            kept = item.expected if item.expected_edited else refill.source.expected
            item.question, item.context, item.expected = refill.source.question, refill.source.context, kept
            item.bot_answer, item.permalink = refill.source.bot_answer, refill.source.permalink
            item.times = _count_sources(session, item_id)
    return len(gone)


def _show_linked(item: GoldenItem, newest: Occurrence | None, gone: list[Occurrence]) -> None:
    """An imported item after one of its linked pairs' messages was deleted: it shows the newest pair left, or,
    with none left, none of the deleted messages' texts (those the file gave, it keeps)."""
    for name in ("bot_answer", "context"):
        if getattr(item, name) is not None and getattr(item, name) in {getattr(source, name) for source in gone}:
            setattr(item, name, getattr(newest, name) if newest is not None else None)
    item.channel_id = newest.channel_id if newest is not None else None
    item.permalink = newest.permalink if newest is not None else None


def item_of_pair(session: Session, pair_id: int) -> GoldenItem | None:
    """The item a pair's question is in (the alert's modal shows its expected answer)."""
    found = select(GoldenSource.item_id).where(GoldenSource.pair_id == pair_id).limit(1).scalar_subquery()
    return session.execute(select(GoldenItem).where(GoldenItem.id == found, GoldenItem.removed_at.is_(None))).scalar()


def active_items(session: Session, allowed_channels: Collection[str] | None = None) -> list[GoldenItem]:
    """The items of the set, oldest first, that an export for someone may hold (store.golden_rules.visible_to)."""
    items = session.execute(select(GoldenItem).where(GoldenItem.removed_at.is_(None)).order_by(GoldenItem.id)).scalars()
    return [item for item in items if visible_to(item.channel_is_private, item.channel_id, allowed_channels)]


def grown_since(session: Session, since: datetime) -> int:
    """Items that joined the set since then and are still in it (the digest's line)."""
    query = select(func.count(GoldenItem.id)).where(GoldenItem.created_at >= since, GoldenItem.removed_at.is_(None))
    return session.scalar(query) or 0


def size(session: Session) -> int:
    return session.scalar(select(func.count(GoldenItem.id)).where(GoldenItem.removed_at.is_(None))) or 0


def item_pairs(session: Session, items: Collection[GoldenItem]) -> dict[int, int]:
    """Each item's pair: the source that gave the bot's answer the item shows (the newest such), else the newest
    source from a pair."""
    shown = {item.id: item.bot_answer for item in items}
    found: dict[int, tuple[bool, int]] = {}
    ids = sorted(shown)
    for start in range(0, len(ids), 500):
        query = (
            select(GoldenSource.item_id, GoldenSource.pair_id, GoldenSource.bot_answer)
            .where(GoldenSource.item_id.in_(ids[start : start + 500]), GoldenSource.pair_id.is_not(None))
            .order_by(GoldenSource.id)
        )
        for item_id, pair_id, bot_answer in session.execute(query):
            same = bot_answer is not None and bot_answer == shown[item_id]
            if same or not found.get(item_id, (False, 0))[0]:
                found[item_id] = (same, pair_id)
    return {item_id: pair_id for item_id, (_same, pair_id) in found.items()}


def judge_verdicts(session: Session, pair_ids: Collection[int], judges: Collection[str]) -> dict[int, dict[str, Any]]:
    """The current verdicts of these judges (the team's, for the exports) on the pairs golden items came from: pair id
    → judge → status, score, max_score, prompt_version (no reasoning: it may quote the texts)."""
    from store.judgments import is_current
    from store.models import Judgment

    ids, names = sorted(set(pair_ids)), sorted(set(judges))
    found: dict[int, dict[str, Any]] = {}
    if not ids or not names:
        return found
    columns = (Judgment.pair_id, Judgment.judge, Judgment.status, Judgment.score, Judgment.max_score,
               Judgment.prompt_version)  # fmt: skip
    for start in range(0, len(ids), 500):
        query = select(*columns).where(
            Judgment.pair_id.in_(ids[start : start + 500]), Judgment.judge.in_(names), is_current()
        )
        for pair_id, judge, status, score, max_score, version in session.execute(query):
            found.setdefault(pair_id, {})[judge] = {
                "status": status, "score": score, "max_score": max_score, "prompt_version": version,
            }  # fmt: skip
    return found
