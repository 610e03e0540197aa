"""The bot over real HTTP: what an answer is made of and how it changes before it is judged: streamed answers,
edits, deletions, and answers of files, blocks or nothing.

The WSGI app is served in-process; Redis, the database and the fake Slack are real servers. Settling is
run directly with `settle` (the settle task's body)."""

from __future__ import annotations

from store.models import Pair, PairStatus
from tests import slack_requests as sr
from tests.bot_events import C, judged_exchange, send, settle_all
from tests.bot_harness import ServedBot
from workers.pairs.settling import settle


def streamed(bot: ServedBot) -> Pair:
    """The support bot streams an answer: its first word, two edits in progress, then the completed text. The pair."""
    q = sr.human_message(C, sr.next_ts(), "summarise the outage")
    answer = sr.streaming(sr.bot_message(C, sr.next_ts(), "The", thread_ts=q["ts"]), "in_progress")
    send(bot, q)
    send(bot, answer)
    for text in ("The outage", "The outage lasted"):
        send(bot, sr.message_changed(answer, text, streaming_state="in_progress"))
    send(bot, sr.message_changed(answer, "The outage lasted 5 minutes.", streaming_state="completed"))
    [pair] = bot.pairs()
    return pair


def test_streaming_edits_bump_the_version(bot: ServedBot) -> None:
    assert streamed(bot).version == 4


def test_a_completed_stream_settles_at_once(bot: ServedBot, settles: list) -> None:
    pair = streamed(bot)
    assert settles[-1] == ([pair.id, 4], 0)  # the completion's settle task waits for nothing (no quiet time)
    assert settle(bot.runtime, pair.id, 4) == PairStatus.PENDING


def test_a_streamed_answer_settles_once(bot: ServedBot) -> None:
    pair = streamed(bot)
    assert settle(bot.runtime, pair.id, 4) == PairStatus.PENDING
    assert settle(bot.runtime, pair.id, 2) == "stale"  # an older edit's settle does nothing
    assert settle(bot.runtime, pair.id, 4) == "requeued"  # a repeat re-enqueues judging, nothing else
    [pair] = bot.pairs()
    assert pair.answer_text == "The outage lasted 5 minutes."


def test_edit_after_judging_is_ignored_without_rejudgments(make_bot) -> None:
    """RELMON_MAX_REJUDGE=0: a judged answer stays as judged (tests/integration/test_rejudge.py: the default)."""
    bot = make_bot(max_rejudge=0)
    _, answer, _ = judged_exchange(bot, "q", "original")
    send(bot, sr.message_changed(answer, "rewritten"))
    [pair] = bot.pairs()
    # Not judged again; the word the edit took out is not kept either (workers.tasks.forgetting).
    assert (pair.status, pair.answer_text, pair.version) == (PairStatus.JUDGED, "[removed]", 1)


def test_deleted_answer_is_never_judged(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "q")
    answer = sr.bot_message(C, sr.next_ts(), "oops", thread_ts=q["ts"])
    send(bot, q)
    send(bot, answer)
    [pair] = bot.pairs()
    send(bot, sr.message_deleted(answer))
    assert settle(bot.runtime, pair.id, pair.version) == "stale"
    [pair] = bot.pairs()
    assert pair.status == PairStatus.DELETED
    send(bot, sr.message_changed(answer, "edit after delete"))  # late edit: stays deleted
    [pair] = bot.pairs()
    assert pair.status == PairStatus.DELETED


def test_deleting_a_later_part_shortens_the_answer(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "q")
    one = sr.bot_message(C, sr.next_ts(), "one", thread_ts=q["ts"])
    two = sr.bot_message(C, sr.next_ts(), "two", thread_ts=q["ts"])
    for event in (q, one, two):
        send(bot, event)
    send(bot, sr.message_deleted(two))
    settle_all(bot)
    root = next(p for p in bot.pairs() if p.answer_ts == one["ts"])
    assert (root.status, root.answer_text) == (PairStatus.PENDING, "one")


def test_a_files_only_answer(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "where is the guide?")
    files_only = sr.file_share(sr.bot_message(C, sr.next_ts(), "", thread_ts=q["ts"]), "guide.pdf", "Setup guide")
    for event in (q, files_only):
        send(bot, event)
    settle_all(bot)
    texts = {p.question_text: (p.status, p.answer_text) for p in bot.pairs()}
    assert texts["where is the guide?"] == (PairStatus.PENDING, "[file: Setup guide]")


def test_a_blocks_only_answer(bot: ServedBot) -> None:
    q2 = sr.human_message(C, sr.next_ts(), "and pricing?")
    blocks_only = sr.bot_message(
        C,
        sr.next_ts(),
        "",
        thread_ts=q2["ts"],
        blocks=sr.rich_text_blocks(sr.rich_section(sr.text_part("Pro is "), sr.text_part("$10", bold=True))),
    )
    for event in (q2, blocks_only):
        send(bot, event)
    settle_all(bot)
    texts = {p.question_text: (p.status, p.answer_text) for p in bot.pairs()}
    assert texts["and pricing?"] == (PairStatus.PENDING, "Pro is $10")


def test_empty_answer(bot: ServedBot) -> None:
    q = sr.human_message(C, sr.next_ts(), "hello?")
    send(bot, q)
    send(bot, sr.bot_message(C, sr.next_ts(), "", thread_ts=q["ts"]))
    assert list(settle_all(bot).values()) == [PairStatus.EMPTY]
