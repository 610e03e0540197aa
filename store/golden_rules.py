"""The golden set's rules, plain functions over plain data: which conversations make an item, when two questions
are the same item, who may see or change an item, and what is left of an item when one of its messages is deleted.

An item joins the set by itself when
- a teammate answered in the thread after the bot (`store.signals.HUMAN_TAKEOVER`, one of the failure
  signals: the bot's answer did not settle the question): the teammate's reply is the expected answer;
- people voted "the judge was right" on a low-score alert: the bot's answer failed, and the expected answer is the
  pair's teammate reply if it has one (else empty, to write in the "Add to test set" modal);
and by hand: the alert's "Add to test set" button, or `relmon golden import`.

In the store, below the golden set's tools (`golden/`) and the workers: `store.golden` applies the duplicates,
visibility and deletion rules in its SQL, and the store imports nothing above it.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from store.signals import HUMAN_TAKEOVER

ORIGIN_TAKEOVER = "takeover"  # a teammate answered after the bot
ORIGIN_VOTE = "vote"  # "the judge was right" on a low-score alert
ORIGIN_BUTTON = "button"  # "Add to test set" on an alert
ORIGIN_IMPORT = "import"  # relmon golden import

_WORDS = re.compile(r"[\w']+")


def normalized_question(text: str) -> str:
    """The question as compared for duplicates: case, accents' composition, punctuation and spacing do not count
    ("How do I reset my password?" and "how do i reset my  password" are the same question)."""
    folded = unicodedata.normalize("NFKC", text).casefold().replace("’", "'")
    return " ".join(_WORDS.findall(folded))


def dedupe_key(question: str, *, channel_id: str | None, private: bool) -> str:
    """One item per question. A private channel's question is one item per channel: merging it with another
    channel's would show one channel's words to the other's members."""
    scope = f"private:{channel_id or ''}" if private else "public"
    return hashlib.sha256(f"{scope}\n{normalized_question(question)}".encode()).hexdigest()


@dataclass(frozen=True)
class Occurrence:
    """One time the question was asked and failed, with the messages it quotes (Slack ts in its channel)."""

    channel_id: str | None
    question_ts: str | None
    answer_ts: str | None
    reference_ts: str | None  # the teammate's reply, when it is the expected answer
    question: str
    context: str | None  # the earlier turns (judges.context.format_turns)
    bot_answer: str | None
    expected: str | None
    permalink: str | None
    private: bool
    origin: str
    pair_id: int | None = None
    topic: str | None = None


def occurrence_of_pair(
    pair: dict, *, origin: str, permalink: str | None, reference_ts: str | None = None
) -> Occurrence:
    """An occurrence from a stored pair's fields (store.golden.PAIR_FIELDS)."""
    return Occurrence(
        channel_id=pair.get("channel_id"),
        question_ts=pair.get("question_ts"),
        answer_ts=pair.get("answer_ts"),
        reference_ts=reference_ts,
        question=(pair.get("question_text") or "").strip(),
        context=pair.get("context_text") or None,
        bot_answer=pair.get("answer_text") or None,
        expected=(pair.get("reference_text") or "").strip() or None,
        permalink=permalink,
        private=bool(pair.get("channel_is_private")),
        origin=origin,
        pair_id=pair.get("id"),
        topic=pair.get("topic"),
    )


def joins_from_takeover(signals: Collection[str], reference: str | None) -> bool:
    """A teammate answered after the bot: the conversation's signals hold a takeover and the pair its reply."""
    return HUMAN_TAKEOVER in set(signals) and bool((reference or "").strip())


def joins_from_vote(vote: str, alert_kind: str | None) -> bool:
    """People said the judge was right about a low score: the bot's answer failed."""
    return vote == "right" and alert_kind == "low_score"


def may_join(question: str | None) -> bool:
    """Only a question with words can be a test: a screenshot alone cannot be replayed."""
    return bool(normalized_question(question or ""))


def visible_to(private: bool, channel_id: str | None, allowed_channels: Collection[str] | None) -> bool:
    """Whether an export for someone may hold the item: a public channel's item always, a private channel's only
    when that channel is among `allowed_channels` (the channels they are a member of); None: everything (the
    workspace admin who runs `relmon golden export --include-private`)."""
    if not private or allowed_channels is None:
        return True
    return channel_id is not None and channel_id in allowed_channels


def may_change_item(private: bool, *, member_of_channel: bool, member_of_alert_channel: bool) -> bool:
    """Who may add, edit or remove an item (the alert's button and modal, a "judge was right" vote): anyone for a
    public channel's question; for a private (or Slack Connect) channel's, its members, or the members of the
    alert channel its OWN rule names (chosen to read its text). A person in neither cannot put its words in the
    set, nor change or take out what its members wrote."""
    return not private or member_of_channel or member_of_alert_channel


@dataclass(frozen=True)
class Refill:
    """What an item becomes after one of its occurrences went (a message deleted)."""

    delete_item: bool
    source: Occurrence | None = None  # the occurrence whose texts the item now shows


def after_deletion(remaining: Sequence[Occurrence], *, imported: bool) -> Refill:
    """An item whose last occurrence went leaves the set (an imported item has none: it stays until removed);
    otherwise it shows the newest remaining occurrence."""
    if not remaining:
        return Refill(delete_item=not imported)
    return Refill(delete_item=False, source=remaining[-1])


def keeps_without_sources(origin: str, private: bool) -> bool:
    """An item that stays when its last source goes: one imported from a team's file (the file is its source).
    Never a private channel's: an import makes only public items of its own, so a private one it made holds the
    channel's words, and leaves with its last message."""
    return origin == ORIGIN_IMPORT and not private


def split_links(occurrences: Sequence[Occurrence]) -> tuple[list[Occurrence], list[Occurrence]]:
    """The pairs that asked an imported question, as (public, private) occurrences, each in the given order. Only
    the public ones may join the imported item: every export holds it, so a private channel's channel, bot answer
    and permalink go to that channel's own item (a private channel's question is never merged with another's)."""
    public = [occurrence for occurrence in occurrences if not occurrence.private]
    return public, [occurrence for occurrence in occurrences if occurrence.private]
