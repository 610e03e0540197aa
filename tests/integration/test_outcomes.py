"""Outcome signals through signed events: the bot hands people's messages and reactions after a watched answer
to the workers (run in-process here); re-asks, takeovers, thanks and reactions are signalled for the answer they
concern, a teammate's reply becomes the reference, and the window closes resolved or not, once. The fixtures and
helpers: tests/outcome_helpers.py. Redelivery and retries: test_outcome_redelivery.py; the window's read of the
conversation log: test_outcome_log_reads.py; the export: test_outcome_export.py."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

from capture.conversation_log import ConversationLog
from capture.outcome_watches import WatchBoard
from common import task_names
from store.models import Pair, PairStatus
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.outcome_helpers import C, answered, run, send, sent, signals, slack
from workers import outcome_watching
from workers.pairs.settling import settle

__all__ = ["sent", "slack"]  # the shared fixtures (tests.outcome_helpers), for this module's tests


def close(bot: ServedBot, pair_id: int) -> str:
    return outcome_watching.close_window_in(bot.runtime, pair_id, now=datetime.now(UTC) + timedelta(hours=1))


def reasked_then_taken_over(bot: ServedBot, sent: list) -> Pair:
    """The asker asks again in the answer's thread, then a teammate replies there; the observations run."""
    q, _answer, pair = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "Where is Settings?", thread_ts=q["ts"]))
    reply = sr.human_message(C, sr.next_ts(), "Top right, under your avatar.", user="U_AGENT", thread_ts=q["ts"])
    send(bot, reply)
    run(bot, sent)
    return pair


def test_a_reask_in_the_thread_then_a_teammates_reply_are_both_signalled(make_bot, sent) -> None:
    bot = make_bot()
    pair = reasked_then_taken_over(bot, sent)
    assert signals(bot, pair.id) == {"reask", "human_takeover"}


def test_a_window_with_a_reask_closes_unresolved(make_bot, sent) -> None:
    bot = make_bot()
    pair = reasked_then_taken_over(bot, sent)
    assert close(bot, pair.id) == "unresolved"
    assert signals(bot, pair.id) == {"reask", "human_takeover"}


def test_a_teammates_reply_becomes_the_reference_for_the_correctness_judge(make_bot, sent) -> None:
    bot = make_bot()
    reasked_then_taken_over(bot, sent)
    [stored] = bot.pairs()
    assert stored.reference_text == "Top right, under your avatar."
    assert stored.judges == ["relevancy", "correctness"]


def test_the_teammate_reference_sends_a_judged_pair_back_to_the_correctness_judge(make_bot, sent) -> None:
    bot = make_bot(redact_pii=True)
    q, _answer, pair = answered(bot, sent)
    with bot.runtime.db.session() as session:
        session.get(Pair, pair.id).status = PairStatus.JUDGED
    send(bot, sr.human_message(C, sr.next_ts(), "Mail me at ana@example.com", user="U_AGENT", thread_ts=q["ts"]))
    [(_name, args)] = sent
    run(bot, sent)
    [stored] = bot.pairs()
    assert stored.status == PairStatus.PENDING and "ana@example.com" not in stored.reference_text
    with bot.runtime.db.session() as session:
        session.get(Pair, pair.id).status = PairStatus.JUDGED  # the correctness judge ran
    outcome_watching.observe_message_in(bot.runtime, *args)  # the task retried: the reference is set once
    # (the alerts' follow-up is handed on again: it is idempotent, and the first send may have been lost)
    assert [(task, ids) for task, ids in sent if task != task_names.FOLLOW_UP_OUTCOME] == []
    assert bot.pairs()[0].status == PairStatus.JUDGED


def test_a_support_group_limits_who_takes_over(make_bot, sent) -> None:
    bot = make_bot(support_team=["S_SUPPORT"])
    q, _, pair = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "same problem here", user="U_OTHER", thread_ts=q["ts"]))
    run(bot, sent)
    assert signals(bot, pair.id) == set()
    send(bot, sr.human_message(C, sr.next_ts(), "<!subteam^S_SUPPORT|@support> please help", thread_ts=q["ts"]))
    send(bot, sr.human_message(C, sr.next_ts(), "On it.", user="U_AGENT", thread_ts=q["ts"]))
    run(bot, sent)
    assert signals(bot, pair.id) == {"escalation", "human_takeover"}


def thanked_with_a_thumbs_up(bot: ServedBot, sent: list) -> Pair:
    """The asker thanks in the answer's thread and gives it 👍; the observations run."""
    q, answer, pair = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "thanks!", thread_ts=q["ts"]))
    send(bot, sr.reaction(answer, "+1"))
    run(bot, sent)
    return pair


def test_thanks_with_a_positive_reaction_are_both_signalled(make_bot, sent) -> None:
    bot = make_bot()
    pair = thanked_with_a_thumbs_up(bot, sent)
    assert signals(bot, pair.id) == {"thanked", "positive_reaction"}


def test_a_window_with_only_good_signs_closes_resolved(make_bot, sent) -> None:
    bot = make_bot()
    pair = thanked_with_a_thumbs_up(bot, sent)
    assert close(bot, pair.id) == "resolved"
    assert signals(bot, pair.id) == {"thanked", "positive_reaction", "resolved"}


def test_a_closed_window_is_not_closed_again(make_bot, sent) -> None:
    bot = make_bot()
    pair = thanked_with_a_thumbs_up(bot, sent)
    close(bot, pair.id)
    assert close(bot, pair.id) == "closed"
    assert signals(bot, pair.id) == {"thanked", "positive_reaction", "resolved"}  # the second close changed nothing


def test_a_rephrased_question_at_top_level_is_a_reask(make_bot, sent) -> None:
    bot = make_bot()
    _, _, pair = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "How can I rotate an API key?"))
    run(bot, sent)
    assert signals(bot, pair.id) == {"reask"}


def settled_answer(bot: ServedBot, sent: list, question: dict, text: str = "Press Rotate.") -> Pair:
    """The support bot answers `question` in its thread, and the answer settles (its window opens)."""
    send(bot, sr.bot_message(C, sr.next_ts(), text, thread_ts=question["ts"]))
    pair = bot.pairs()[-1]
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    run(bot, sent)
    return pair


def observe_tasks(sent: list) -> list[list]:
    return [args for name, args in sent if name == task_names.OBSERVE_MESSAGE]


def test_one_task_hands_on_a_message_for_every_answer_of_its_thread(make_bot, sent) -> None:
    """Two answers in one thread: a teammate's reply is one task carrying both pairs, and takes over both."""
    bot = make_bot()
    q, _answer, first = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "And on Android?", thread_ts=q["ts"]))
    run(bot, sent)
    second = settled_answer(bot, sent, q, "Same on Android: Settings, then Rotate.")
    sent.clear()
    send(bot, sr.human_message(C, sr.next_ts(), "Use the Keys tab.", user="U_AGENT", thread_ts=q["ts"]))
    assert [args[0] for args in observe_tasks(sent)] == [[first.id, second.id]]
    run(bot, sent)
    assert signals(bot, first.id) == {"reask", "human_takeover"}
    assert signals(bot, second.id) == {"human_takeover"}
    assert {p.id: p.reference_text for p in bot.pairs()} == {
        first.id: "Use the Keys tab.",
        second.id: "Use the Keys tab.",
    }


def test_a_top_level_message_is_news_for_the_askers_latest_answer_only(make_bot, sent) -> None:
    """Three questions at top level, each answered: the second and third re-ask the answer before them, and a
    top-level "thanks" thanks the last answer only (not every answer of the window)."""
    bot = make_bot()
    pairs = []
    for i in range(3):
        question = sr.human_message(C, sr.next_ts(), f"How do I rotate key number {i}?")
        send(bot, question)
        assert [args[0] for args in observe_tasks(sent)] == ([[pairs[-1].id]] if pairs else [])
        run(bot, sent)
        pairs.append(settled_answer(bot, sent, question))
    send(bot, sr.human_message(C, sr.next_ts(), "thanks!"))
    assert [args[0] for args in observe_tasks(sent)] == [[pairs[-1].id]]
    run(bot, sent)
    assert [signals(bot, p.id) for p in pairs] == [{"reask"}, {"reask"}, {"thanked"}]


def test_a_message_before_the_answer_settled_is_read_by_the_same_rule(make_bot, sent) -> None:
    """Answers at top level: the asker's messages come while their first answer is still settling. When its
    window opens it reads them by the bot's rule: the next question re-asks it (its latest answer then), the
    thanks after the second answer does not (it is news for that one)."""
    bot = make_bot()
    q1 = sr.human_message(C, sr.next_ts(), "How do I rotate my key?")
    for event in (q1, sr.bot_message(C, sr.next_ts(), "Press Rotate.")):
        send(bot, event)
    [first] = bot.pairs()  # not settled yet
    send(bot, sr.human_message(C, sr.next_ts(), "How do I delete a key?"))
    send(bot, sr.bot_message(C, sr.next_ts(), "Press Delete."))
    second = bot.pairs()[-1]
    assert settle(bot.runtime, second.id, second.version) == PairStatus.PENDING
    run(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "thanks!"))
    run(bot, sent)
    assert signals(bot, second.id) == {"thanked"}
    # It reads the question and the thanks.
    assert settle(bot.runtime, first.id, first.version) == PairStatus.PENDING
    run(bot, sent)
    assert signals(bot, first.id) == {"reask"}
    assert signals(bot, second.id) == {"thanked"}


def test_a_top_level_reask_before_a_threaded_answer_settled_is_read(make_bot, sent) -> None:
    """The answer is in the question's thread; before it settles the asker asks again at top level. The bot had
    no watch to hand it to: the window, once open, reads the channel's top level too."""
    bot = make_bot()
    q = sr.human_message(C, sr.next_ts(), "How do I rotate my key?")
    send(bot, q)
    send(bot, sr.bot_message(C, sr.next_ts(), "Press Rotate.", thread_ts=q["ts"]))
    [pair] = bot.pairs()  # not settled yet
    send(bot, sr.human_message(C, sr.next_ts(), "Rotate does nothing, how do I rotate a key?"))
    send(bot, sr.human_message(C, sr.next_ts(), "unrelated chatter", user="U_OTHER"))
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    run(bot, sent)
    assert signals(bot, pair.id) == {"reask"}


def _captured_with_a_reply(bot: ServedBot) -> tuple[Pair, dict]:
    """A question and its answer captured (not settled yet: no window), and the asker's reply, not sent yet."""
    q = sr.human_message(C, sr.next_ts(), "How do I rotate my key?")
    send(bot, q)
    send(bot, sr.bot_message(C, sr.next_ts(), "Press Rotate in Settings.", thread_ts=q["ts"]))
    [pair] = bot.pairs()
    return pair, sr.human_message(C, sr.next_ts(), "Where is Settings?", thread_ts=q["ts"])


def test_a_reply_logged_while_the_window_opens_is_read(make_bot, sent, monkeypatch) -> None:
    """The asker replies in the thread just before the answer's watch goes up: the bot logs the reply but hands
    it on to nobody (no watch yet). The window reads the log after the watch is up, so the reply still counts."""
    bot = make_bot()
    pair, reply = _captured_with_a_reply(bot)
    queue_add = WatchBoard.queue_add

    def reply_then_add(board, pipe, channel, watch) -> None:
        send(bot, reply)
        assert not [name for name, _ in sent if name == task_names.OBSERVE_MESSAGE]  # no watch to hand it to
        queue_add(board, pipe, channel, watch)

    monkeypatch.setattr(WatchBoard, "queue_add", reply_then_add)
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    run(bot, sent)
    assert signals(bot, pair.id) == {"reask"}


def test_a_window_opened_while_the_bot_logs_a_reply_still_gets_it(make_bot, sent, monkeypatch) -> None:
    """The other interleaving: the window opens (watch up, then its read of the log) just before the bot logs the
    asker's reply. The bot logs the reply and reads the board in one transaction, so the reply counts whichever
    comes first: here the window's read misses it, and the bot's read sees the watch. (A bot that read the board
    before logging would have seen no watch, and the reply would count for nothing.)"""
    bot = make_bot()
    pair, reply = _captured_with_a_reply(bot)
    queue_record = ConversationLog.queue_record

    def window_opens_first(log, pipe, channel, message):
        if message.ts == reply["ts"]:
            monkeypatch.setattr(ConversationLog, "queue_record", queue_record)
            # Its log read: no reply yet.
            assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
        return queue_record(log, pipe, channel, message)

    monkeypatch.setattr(ConversationLog, "queue_record", window_opens_first)
    send(bot, reply)
    assert [name for name, _ in sent].count(task_names.OBSERVE_MESSAGE) == 1  # the bot saw the watch
    run(bot, sent)
    assert signals(bot, pair.id) == {"reask"}


def test_a_signal_after_the_window_closed_changes_nothing(make_bot, sent) -> None:
    bot = make_bot()
    q, answer, pair = answered(bot, sent)
    assert close(bot, pair.id) == "resolved"
    assert sent == []  # no alert shows the outcome, nothing failed: no follow-up
    send(bot, sr.reaction(answer, "-1"))
    send(bot, sr.human_message(C, sr.next_ts(), "this does not work", thread_ts=q["ts"]))
    assert sent == []  # the window's watch is gone: the bot hands nothing on
    late = outcome_watching.observe_reaction_in(bot.runtime, pair.id, "U_ASKER", "-1", True, time.time())
    assert late == [] and signals(bot, pair.id) == {"resolved"}


def test_a_close_that_comes_early_waits_for_the_rest(make_bot, sent) -> None:
    bot = make_bot()
    _, _, pair = answered(bot, sent)
    sent.clear()
    assert outcome_watching.close_window_in(bot.runtime, pair.id) == "waiting"  # read due on a clock ahead of this one
    assert sent == []  # the periodic sweep closes it when its time is up


def test_beat_closes_each_window_once_its_time_is_up(make_bot, sent) -> None:
    from store.models import OutcomeWindow
    from workers.outcome_watching import close_due_windows_in

    bot = make_bot()
    _q, _answer, pair = answered(bot, sent)
    sent.clear()
    now = datetime.now(UTC)
    assert close_due_windows_in(bot.runtime, now) == 0  # not over yet
    with bot.runtime.db.session() as session:
        session.get(OutcomeWindow, pair.id).closes_at = now - timedelta(seconds=1)
    assert close_due_windows_in(bot.runtime, now) == 1
    assert signals(bot, pair.id) == {"resolved"}
    assert close_due_windows_in(bot.runtime, now) == 0  # closed: never swept again


def test_beat_sweeps_for_due_windows_every_twentieth_of_the_window_within_1_to_30_seconds() -> None:
    """No window, no sweep."""
    from workers.schedule import close_schedule

    assert close_schedule(1800)["relmon-close-outcome-windows"]["schedule"] == 30.0
    assert close_schedule(12)["relmon-close-outcome-windows"]["schedule"] == 1.0
    assert close_schedule(0) == {}
