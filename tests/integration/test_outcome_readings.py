"""Whose answer a signal concerns, and threads that resume, through the Bolt app and the outcome tasks run in
process (the fixtures and helpers of test_outcomes.py). End to end with real workers:
tests/system/test_conversation_reading_processes.py."""

from __future__ import annotations

from common import task_names
from tests import slack_requests as sr
from tests.integration.test_outcomes import (  # noqa: F401 (fixtures)
    C,
    answered,
    close,
    run,
    send,
    sent,
    settled_answer,
    signals,
    slack,
)


def stored(bot, pair):
    """The pair as it is stored now."""
    return next(p for p in bot.pairs() if p.id == pair.id)


def test_a_teammate_replying_to_the_askers_second_question_does_not_touch_the_first_answer(make_bot, sent) -> None:  # noqa: F811
    """Ana asks something new in the thread ("new_question" on the first answer: no failure), the bot answers it,
    and a teammate replies to that: the second answer's takeover and reference; the first answer closes resolved,
    with no missed failure to follow up."""
    bot = make_bot()
    q, _answer, first = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "How do I export my invoices as CSV?", thread_ts=q["ts"]))
    run(bot, sent)
    assert signals(bot, first.id) == {"new_question"}
    second = stored(bot, settled_answer(bot, sent, q, "Billing > Invoices > Export."))
    assert second.question_text == "How do I export my invoices as CSV?"
    send(bot, sr.human_message(C, sr.next_ts(), "The CSV button is top right.", user="U_AGENT", thread_ts=q["ts"]))
    run(bot, sent)
    assert signals(bot, first.id) == {"new_question"}
    assert signals(bot, second.id) == {"human_takeover"}
    follow_ups = [args for name, args in sent if name == task_names.FOLLOW_UP_OUTCOME]
    assert [first.id] not in follow_ups
    assert close(bot, first.id) == "resolved"
    by_id = {p.id: p for p in bot.pairs()}
    assert (by_id[first.id].reference_text, by_id[second.id].reference_text) == (None, "The CSV button is top right.")


def test_a_thread_that_resumes_after_its_window_closed(make_bot, sent) -> None:  # noqa: F811
    """The first answer's window closed resolved; later the asker asks again in the thread: the closed window's
    outcome does not change, and the new answer is judged with the thread's earlier turns."""
    bot = make_bot()
    q, _answer, first = answered(bot, sent)
    assert close(bot, first.id) == "resolved"
    send(bot, sr.human_message(C, sr.next_ts(), "And how do I rotate it from the CLI?", thread_ts=q["ts"]))
    run(bot, sent)
    second = stored(bot, settled_answer(bot, sent, q, "Run `relmon keys rotate`."))
    assert signals(bot, first.id) == {"resolved"}
    assert second.context_text == "[customer] How do I rotate my key?\n[bot] Press Rotate in Settings."


def test_a_thread_that_resumes_after_the_log_forgot_it_reads_its_stored_turns(make_bot, sent) -> None:  # noqa: F811
    """A day later the conversation log has let the thread's first turns go (RELMON_QUESTION_TTL): the question
    asked in the thread is judged with the thread's stored answer and its question, bounded as from the log."""
    bot = make_bot()
    q, answer, first = answered(bot, sent)
    assert close(bot, first.id) == "resolved"
    bot.runtime.redis.delete(f"relmon:msg:{C}:{q['ts']}", f"relmon:msg:{C}:{answer['ts']}")  # expired
    send(bot, sr.human_message(C, sr.next_ts(), "And from the CLI?", thread_ts=q["ts"]))
    run(bot, sent)
    second = stored(bot, settled_answer(bot, sent, q, "Run `relmon keys rotate`."))
    assert second.question_text == "And from the CLI?"
    assert second.context_text == "[customer] How do I rotate my key?\n[bot] Press Rotate in Settings."
    assert signals(bot, first.id) == {"resolved"}


def test_someone_who_answered_three_other_threads_lately_is_staff_by_evidence(make_bot, sent) -> None:  # noqa: F811
    """U_HELPER is not in the alert channel: their first replies in other people's threads are no takeover, but
    after three threads answered (kept in Redis, 14 days), their reply in a fourth thread is a teammate's."""
    bot = make_bot()
    for i in range(4):
        q = sr.human_message(C, sr.next_ts(), f"How do I rotate key number {i}?", user=f"U_ASKER{i}")
        send(bot, q)
        pair = settled_answer(bot, sent, q, "Press Rotate in Settings.")
        send(bot, sr.human_message(C, sr.next_ts(), "Open Keys, then Rotate.", user="U_HELPER", thread_ts=q["ts"]))
        run(bot, sent)
        assert signals(bot, pair.id) == ({"human_takeover"} if i == 3 else set()), i
    assert stored(bot, pair).reference_text == "Open Keys, then Rotate."
