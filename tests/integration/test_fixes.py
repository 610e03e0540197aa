"""Fixes that worked (#47), end to end on the store, the topics and the fake Slack: a topic marked fixed from the
digest's button whose failures drop the week after is "improved" in the next digest's "Fixes" section and in a
thread reply under the marked digest, told once (the other outcomes: tests/unit/test_fix_verdict.py)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from sqlalchemy import select

from common.messages.fixes import MARK_BLOCK_ID
from relmon.digest_cli import _dry_run
from store.topic_models import TopicFix
from tests import digest_helpers
from tests.digest_helpers import DIGEST_CHANNEL
from tests.topics_corpus import FAILING_TOPIC, START, corpus, corpus_questions, store_questions
from workers.digest.delivery import deliver_digest
from workers.fixes import follow, mark

digest_services = digest_helpers.digest_services  # the fixture
DIGEST = DIGEST_CHANNEL
WEEK = timedelta(days=7)
NOW = START + WEEK


def week(number: int, failing: str | None) -> list:
    """The corpus asked again in week `number` (0: the first), new pairs; `failing`: the topic that mostly fails."""
    size = len(corpus())
    return [
        replace(
            q,
            pair_id=q.pair_id + number * size,
            ts=f"{1764000000 + number * size + q.pair_id}.000100",
            created_at=q.created_at + number * WEEK,
        )
        for q in corpus_questions(failing=failing or "none")
    ]


def mark_buttons(blocks: list[dict]) -> list[dict]:
    found = next(block for block in blocks if block.get("block_id") == MARK_BLOCK_ID)
    return found["elements"]


def refunds_key(runtime) -> str:
    """The key of the topic most of the planted failing questions fell in (the digest's first button's)."""
    from collections import Counter

    from store.topic_models import PairTopic

    refunds = [i for i, row in enumerate(corpus(), start=1) if row["topic"] == FAILING_TOPIC]
    with runtime.db.reading() as session:
        keys = session.scalars(select(PairTopic.topic_key).where(PairTopic.pair_id.in_(refunds))).all()
    return Counter(keys).most_common(1)[0][0]


def test_a_fix_whose_failures_drop_is_improved_in_the_digest_and_its_thread(digest_services, capsys):
    runtime, slack, _llm = digest_services
    store_questions(runtime.db, week(0, FAILING_TOPIC))
    first = deliver_digest(runtime, NOW)
    assert first.status == "sent"
    key = refunds_key(runtime)
    buttons = mark_buttons(slack.posted(DIGEST)[0]["blocks"])
    assert buttons[0]["value"] == key and buttons[0]["text"]["text"].startswith("Mark fixed: ")

    # The lead clicks "Mark fixed" on the digest (the task's work): the first verdict goes in its thread.
    fix, found = mark(runtime, key, NOW, "U_LEAD", NOW, channel_id=DIGEST, message_ts=first.message_ts)
    assert found.outcome == "no_evidence" and found.needed and found.shift.before.n >= 20
    replies = [p for p in slack.posted(DIGEST) if p.get("thread_ts") == first.message_ts]
    assert len(replies) == 1 and "no evidence yet" in replies[0]["text"]
    assert "more answers needed" in str(replies[0]["blocks"])

    # The week after the fix: the refund questions are asked again and mostly answered well.
    store_questions(runtime.db, week(1, None))
    second = deliver_digest(runtime, NOW + WEEK)
    assert second.status == "sent"
    digests = [p for p in slack.posted(DIGEST) if not p.get("thread_ts")]
    assert len(digests) == 2
    digest = digests[1]
    fixes = next(b for b in digest["blocks"] if b.get("type") == "section" and "*Fixes*" in b["text"]["text"])
    assert "improved" in fixes["text"]["text"] and "before →" in fixes["text"]["text"]
    replies = [p for p in slack.posted(DIGEST) if p.get("thread_ts") == first.message_ts]
    assert len(replies) == 2 and "improved" in replies[1]["text"]
    assert "failed" in str(replies[1]["blocks"]) and "n=" in str(replies[1]["blocks"])
    with runtime.db.reading() as session:
        assert session.get(TopicFix, fix.id).verdict == "improved"

    # Followed again (the daily run): the verdict has not changed, so nothing more is posted.
    lines = follow(runtime, NOW + WEEK + timedelta(hours=1))
    assert [line.verdict.outcome for line in lines] == ["improved"]
    again = [p for p in slack.posted(DIGEST) if p.get("thread_ts") == first.message_ts]
    assert len(again) == 2

    # The digest's dry run lists it too, and tells nothing.
    capsys.readouterr()
    assert _dry_run(runtime, NOW + WEEK + timedelta(hours=2)) == 0
    printed = capsys.readouterr().out
    assert "== Fixes ==" in printed and ": improved · failed " in printed
    assert len([p for p in slack.posted(DIGEST) if p.get("thread_ts") == first.message_ts]) == 2
