"""`relmon golden import` in SQL: a team's existing set joins the golden set, and each imported question that relmon
holds in a captured pair is linked to it, as if the set had collected it (rules in store.golden_rules).

The linking is one pass over the stored pairs' questions for the whole file, compared as the set compares
duplicates (`normalized_question`): exact, whatever the database's own text functions do with case or Unicode."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from store.golden import PAIR_FIELDS, add_occurrence, item_by_key, new_item, topics_of_pairs
from store.golden_models import GoldenItem, GoldenSource
from store.golden_rules import (
    ORIGIN_IMPORT,
    Occurrence,
    dedupe_key,
    normalized_question,
    occurrence_of_pair,
    split_links,
)
from store.models import Pair, utcnow

# Looks up a message's permalink in Slack (channel, ts) -> link or None; the CLI's, when Slack is configured.
PermalinkLookup = Callable[[str | None, str | None], str | None]
SCAN_BATCH = 2000  # pairs read per round trip in the one pass over the stored questions


class Imported(NamedTuple):
    added: int  # new items
    updated: int  # known items that took the imported expected answer
    linked: int  # asked questions (pairs) linked to an item by this import, public and private


def import_items(
    session: Session,
    rows: Iterable[dict[str, Any]],
    now: datetime | None = None,
    permalink_for: PermalinkLookup | None = None,
) -> Imported:
    """A team's existing set (golden.formats.read_any): new questions become items, known ones get the imported
    expected answer unless a person edited theirs; then every stored pair that asked one of them is linked
    (`link_pairs`)."""
    now = now or utcnow()
    added = updated = 0
    imported: dict[str, dict[str, Any]] = {}  # the normalised question -> its (last) row
    for row in rows:
        question = row["question"]
        normal = normalized_question(question)
        if not normal:
            continue
        key = dedupe_key(question, channel_id=None, private=False)
        item = item_by_key(session, key)
        if item is None:
            item = new_item(session, key, imported_occurrence(row), now)
            item.external_id = row.get("external_id")
            added += 1
        elif item.removed_at is None and not item.expected_edited and row.get("expected"):
            item.expected, item.updated_at = row["expected"], now
            updated += 1
        imported[normal] = row
    linked = link_pairs(session, imported, now, permalink_for or (lambda _channel, _ts: None))
    return Imported(added, updated, linked)


def imported_occurrence(row: dict[str, Any]) -> Occurrence:
    """An imported item's texts, as an occurrence with no Slack message."""
    texts = {name: row.get(name) for name in ("context", "bot_answer", "expected", "topic")}
    return Occurrence(
        None, None, None, None, row["question"], permalink=None, private=False, origin=ORIGIN_IMPORT, **texts
    )


def pairs_asking(session: Session, questions: Iterable[str]) -> dict[str, list[dict[str, Any]]]:
    """The stored pairs whose question is one of these normalised questions, oldest first, by question."""
    wanted = set(questions)
    found: dict[str, list[dict[str, Any]]] = {}
    if not wanted:
        return found
    columns = [getattr(Pair, name) for name in PAIR_FIELDS]
    query = select(*columns).where(Pair.question_text.is_not(None)).order_by(Pair.created_at, Pair.id)
    for row in session.execute(query.execution_options(yield_per=SCAN_BATCH)):
        pair = dict(zip(PAIR_FIELDS, row, strict=True))
        normal = normalized_question(pair["question_text"])
        if normal in wanted:
            found.setdefault(normal, []).append(pair)
    return found


def link_pairs(
    session: Session, imported: dict[str, dict[str, Any]], now: datetime, permalink_for: PermalinkLookup
) -> int:
    """Each pair that asked an imported question becomes a source of an item, once (the set's per-message key):
    a public channel's, of the imported item (which shows the newest one's channel, bot answer and permalink where
    the file gave none); a private channel's, of that channel's own item (made if missing, with the imported
    expected answer), never of the imported one, which every export holds. Returns how many were linked."""
    matched = pairs_asking(session, imported)
    topics = topics_of_pairs(session, [pair["id"] for pairs in matched.values() for pair in pairs])
    linked = 0
    for normal, pairs in matched.items():
        row = imported[normal]
        occurrences = [
            _linked_occurrence(session, pair | {"topic": topics.get(pair["id"])}, row, permalink_for) for pair in pairs
        ]
        public, private = split_links(occurrences)
        item = item_by_key(session, dedupe_key(row["question"], channel_id=None, private=False))
        if item is not None and item.removed_at is None and public:
            _show_newest(item, public)
            linked += sum(_link(session, item, occurrence, now) for occurrence in public)
        for occurrence in private:
            linked += _added_private(session, occurrence, row, now)
    return linked


def _linked_occurrence(
    session: Session, pair: dict[str, Any], row: dict[str, Any], permalink_for: PermalinkLookup
) -> Occurrence:
    occurrence = occurrence_of_pair(pair, origin=ORIGIN_IMPORT, permalink=None)
    ts = occurrence.question_ts or occurrence.answer_ts
    stored = session.scalar(
        select(GoldenSource.permalink)
        .where(GoldenSource.message_key == f"{occurrence.channel_id}:{ts}", GoldenSource.permalink.is_not(None))
        .limit(1)
    )
    link = stored or permalink_for(occurrence.channel_id, ts)
    expected = row.get("expected") or occurrence.expected
    return replace(occurrence, permalink=link, expected=expected)


def _show_newest(item: GoldenItem, public: list[Occurrence]) -> None:
    """The imported item shows where its question was last asked (a public channel: `split_links`): the newest
    asking with a permalink, else the newest; a link the item has is not traded for none. The texts the file gave
    (its question, expected answer, context, bot answer) stay the file's."""
    shown = next((occurrence for occurrence in reversed(public) if occurrence.permalink), public[-1])
    if shown.permalink is not None or item.permalink is None:
        item.channel_id, item.channel_is_private, item.permalink = shown.channel_id, False, shown.permalink
    if item.bot_answer is None:
        item.bot_answer = shown.bot_answer


def _link(session: Session, item: GoldenItem, occurrence: Occurrence, now: datetime) -> bool:
    """The pair as one more source of the imported item (add_occurrence's: the pair's question has the item's key,
    the same words whatever their case or punctuation)."""
    item_id, added = add_occurrence(session, occurrence, now)
    return added and item_id == item.id


def _added_private(session: Session, occurrence: Occurrence, row: dict[str, Any], now: datetime) -> bool:
    """A private channel's pair joins its channel's own item; that item takes the imported expected answer as an
    imported known question does (unless a person edited it)."""
    item_id, added = add_occurrence(session, occurrence, now)
    item = session.get(GoldenItem, item_id)
    if item is not None and item.removed_at is None and not item.expected_edited and row.get("expected"):
        item.expected = row["expected"]
    return added
