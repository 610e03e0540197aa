"""Outcome signals through signed events: the bot hands people's messages and reactions after a watched answer
to the workers (run in-process here), signals are recorded once under redelivery and retries, a late one
changes nothing, the window closes resolved or not, and a teammate's reply becomes the reference."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest
import redis
from sqlalchemy import select

from capture.conversation_log import ConversationLog
from capture.outcome_watches import WatchBoard, decoded_watches
from capture.pairing import Author, LoggedMessage
from common import celery_app, task_names
from store import outcomes as store
from store.models import OutcomeSignal, Pair, PairStatus
from tests import slack_requests as sr
from tests.bot_harness import ServedBot, log_message, redis_calls, redis_calls_since
from tests.builders import SECRET
from tests.fakes.slack_server import FakeSlack
from workers import outcome_watching
from workers.pairs.settling import settle
from workers.tasks import outcomes

C = "C_SUPPORT"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_user("U_ASKER", "ana", "Ana Diaz")
        fake.add_user("U_AGENT", "sam", "Sam Lee")
        fake.add_usergroup("S_SUPPORT", ["U_AGENT"])
        fake.add_channel(C, "support", members=["U_ASKER", "U_AGENT", "U_RELMON"])
        # The alert channel's members are staff when RELMON_SUPPORT_TEAM is unset (capture.teammates).
        fake.add_channel("C_ALERTS", "alerts", members=["U_AGENT", "U_RELMON"])
        yield fake


@pytest.fixture
def sent(monkeypatch) -> list[tuple[str, list]]:
    """The tasks the workers send by name, not queued: the test runs them. The bot's hand-on of each event
    (capture_event) is run at once by the bot's harness (tests.bot_harness.InlineWorker), so it is not listed."""
    tasks: list[tuple[str, list]] = []

    def record(name, args=None, **kwargs):
        if name not in (task_names.CAPTURE_EVENT, task_names.JUDGE_PAIR):  # judging is not what these tests watch
            tasks.append((name, list(args or [])))

    monkeypatch.setattr(celery_app.celery, "send_task", record)
    return tasks


def send(bot: ServedBot, event: dict, event_id: str | None = None) -> None:
    response = sr.post(bot.url, sr.envelope(event, event_id=event_id), SECRET)
    assert response.status_code == 200, response.text


def run(bot: ServedBot, sent: list) -> None:
    """Run the observation tasks sent so far, as a worker would."""
    while sent:
        name, args = sent.pop(0)
        if name == task_names.OBSERVE_MESSAGE:
            outcome_watching.observe_message_in(bot.runtime, *args)
        elif name == task_names.OBSERVE_REACTION:
            outcome_watching.observe_reaction_in(bot.runtime, *args)


def answered(bot: ServedBot, sent: list, question: str = "How do I rotate my key?") -> tuple[dict, dict, Pair]:
    q = sr.human_message(C, sr.next_ts(), question)
    answer = sr.bot_message(C, sr.next_ts(), "Press Rotate in Settings.", thread_ts=q["ts"])
    send(bot, q)
    send(bot, answer)
    [pair] = bot.pairs()
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    run(bot, sent)
    return q, answer, pair


def signals(bot: ServedBot, pair_id: int) -> set[str]:
    with bot.runtime.db.session() as session:
        return store.signal_names(session, pair_id)


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
    assert settle(bot.runtime, first.id, first.version) == PairStatus.PENDING  # reads the question and the thanks
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
            assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING  # its log read: no reply yet
        return queue_record(log, pipe, channel, message)

    monkeypatch.setattr(ConversationLog, "queue_record", window_opens_first)
    send(bot, reply)
    assert [name for name, _ in sent].count(task_names.OBSERVE_MESSAGE) == 1  # the bot saw the watch
    run(bot, sent)
    assert signals(bot, pair.id) == {"reask"}


@dataclass
class AnsweredInAThread:
    """A channel's conversation log (on the test's Redis) holding a question at top level, the asker's next
    message, and the bot's answer in the question's thread; read as a window opens on that answer."""

    client: redis.Redis
    log: ConversationLog
    now: float
    root: LoggedMessage
    answer: LoggedMessage
    watched: list[object] = field(default_factory=list)

    def logged(self, at: float, **kwargs) -> LoggedMessage:
        return log_message(self.log, C, at, **kwargs)

    def since_led_by_the_watch(self) -> tuple[list, dict[str, int]]:
        """As a window opens (workers.outcome_watching): the watch's command first, then the index reads. What
        was read, and the Redis commands it took."""
        calls_before = redis_calls(self.client)
        pipe = self.client.pipeline(transaction=True)
        pipe.set("relmon:test:watch", "up")
        self.watched.append(pipe)
        count = self.log.queue_since(pipe, C, self.answer, until=self.now + 1, asker="U_ASKER")
        since = self.log.since_from(C, pipe.execute()[-count:])
        return since, redis_calls_since(self.client, calls_before)

    def later(self) -> tuple[LoggedMessage, list[LoggedMessage]]:
        """What comes after the answer: a reply in its thread, the asker's two top-level messages, someone else's
        three, a message after the window's end. Returns the reply and the asker's top-level messages."""
        reply = self.logged(self.now - 20, thread=self.root.ts)
        later = [self.logged(self.now - 10), self.logged(self.now - 5)]  # top level, after
        for ago in (9, 8, 7):  # someone else's top-level messages, after the answer too
            message = LoggedMessage(ts=f"{self.now - ago:.6f}", thread_ts=None, author=Author.HUMAN, user="U_OTHER")
            self.log.record(C, message)
        self.logged(self.now + 100)  # after the window's end
        return reply, later


@pytest.fixture
def answered_in_a_thread(redis_url) -> AnsweredInAThread:
    client = redis.Redis.from_url(redis_url)
    log = ConversationLog(client, 3600)
    now = time.time()
    root = log_message(log, C, now - 50)
    log_message(log, C, now - 40)  # top level, before the answer
    answer = log_message(log, C, now - 30, thread=root.ts, author=Author.MONITORED_BOT)
    return AnsweredInAThread(client, log, now, root, answer)


def test_the_windows_read_of_the_log_is_one_transaction_led_by_the_watch(answered_in_a_thread) -> None:
    """`since_answer`, as a window opens on an answer in a thread, reads in one transaction led by the commands
    queued first (the watch); none of the messages when nothing came after the answer."""
    thread = answered_in_a_thread
    since, made = thread.since_led_by_the_watch()
    assert since == []
    # Nothing came after the answer: one transaction (the watch, the thread's index, the asker's index), no MGET.
    assert made == {"multi": 1, "set": 1, "zrangebyscore": 2, "exec": 1}
    assert thread.client.get("relmon:test:watch") == b"up" and thread.watched


def test_the_windows_read_of_what_came_after_the_answer_takes_one_mget_more(answered_in_a_thread) -> None:
    thread = answered_in_a_thread
    thread.later()
    _, made = thread.since_led_by_the_watch()
    assert made == {"multi": 1, "set": 1, "zrangebyscore": 2, "exec": 1, "mget": 1}


def test_the_windows_read_of_the_log_reads_only_what_came_after_in_the_thread_or_from_the_asker(
    answered_in_a_thread,
) -> None:
    """The thread's later messages and the asker's later top-level ones up to the window's end. Other people's
    top-level messages, and anything before the answer, are not read at all: in a busy channel that read grew
    with the channel's traffic."""
    thread = answered_in_a_thread
    reply, later = thread.later()
    since, _ = thread.since_led_by_the_watch()
    assert [m.ts for m in since] == [reply.ts] + [m.ts for m in later]
    read = thread.log.since_answer(C, thread.answer, until=thread.now + 1, asker="U_ASKER")
    assert [m.ts for m in read] == [m.ts for m in since]


def test_the_window_of_a_top_level_answer_reads_no_top_level_message_but_the_askers(answered_in_a_thread) -> None:
    thread = answered_in_a_thread
    _, later = thread.later()
    # An answer at top level: its own thread, and nothing of the channel's top level but the asker's.
    top_answer = thread.logged(thread.now - 6, author=Author.MONITORED_BOT)
    read = thread.log.since_answer(C, top_answer, until=thread.now + 1, asker="U_ASKER")
    assert [m.ts for m in read] == [later[1].ts]


def test_the_window_of_an_answer_without_an_asker_reads_only_its_thread(answered_in_a_thread) -> None:
    thread = answered_in_a_thread
    reply, _ = thread.later()
    calls_before = redis_calls(thread.client)
    assert [m.ts for m in thread.log.since_answer(C, thread.answer, until=thread.now + 1, asker=None)] == [reply.ts]
    assert redis_calls_since(thread.client, calls_before)["zrangebyscore"] == 1


def test_a_retried_observe_message_records_nothing_twice(make_bot, sent) -> None:
    bot = make_bot()
    q, _answer, pair = answered(bot, sent)
    reask = sr.human_message(C, sr.next_ts(), "Where is Settings?", thread_ts=q["ts"])
    send(bot, reask)
    sent.clear()
    assert outcomes.observe_message([pair.id], C, reask["ts"]) == {pair.id: ["reask"]}
    assert outcomes.observe_message([pair.id], C, reask["ts"]) == {}  # retried: nothing twice
    assert signals(bot, pair.id) == {"reask"}


def test_a_redelivered_reaction_is_recorded_once(make_bot, sent) -> None:
    bot = make_bot()
    _, answer, pair = answered(bot, sent)
    added = sr.reaction(answer, "-1")
    send(bot, added, event_id="EvNEG1")
    send(bot, added, event_id="EvNEG1")  # Slack's retry of a delivery that worked
    assert [name for name, _ in sent] == [task_names.OBSERVE_REACTION]
    task = sent[0]
    run(bot, sent)
    outcome_watching.observe_reaction_in(bot.runtime, *task[1])  # the task retried
    with bot.runtime.db.session() as session:
        rows = session.execute(select(OutcomeSignal).where(OutcomeSignal.pair_id == pair.id)).scalars().all()
        assert [r.name for r in rows] == ["negative_reaction"]


def thumbed_down(bot: ServedBot, sent: list) -> tuple[dict, Pair]:
    """The asker gives the answer 👎; the observation runs."""
    _, answer, pair = answered(bot, sent)
    send(bot, sr.reaction(answer, "-1"))
    run(bot, sent)
    return answer, pair


def test_a_reaction_taken_back_still_counts_as_given(make_bot, sent) -> None:
    bot = make_bot()
    answer, pair = thumbed_down(bot, sent)
    send(bot, sr.reaction(answer, "-1", added=False))  # taken back: a person's reaction counts once, as given
    run(bot, sent)
    assert signals(bot, pair.id) == {"negative_reaction"}


def test_a_reaction_that_means_nothing_adds_no_signal(make_bot, sent) -> None:
    bot = make_bot()
    answer, pair = thumbed_down(bot, sent)
    send(bot, sr.reaction(answer, "eyes"))
    run(bot, sent)
    assert signals(bot, pair.id) == {"negative_reaction"}


def test_the_alerts_follow_up_is_sent_only_when_an_alert_may_change(make_bot, sent) -> None:
    """After new signals, the follow-up (workers.alerts.outcomes) has work only when the signals say the answer
    failed (a missed-failure alert may be due) or an alert about the pair exists (to be redrawn): else no task."""
    from store.models import Alert, Judgment

    def observed(event: dict) -> list[str]:
        """The tasks the observation of `event` sent."""
        send(bot, event)
        (name, args), *_ = sent
        sent.clear()
        if name == task_names.OBSERVE_MESSAGE:
            outcome_watching.observe_message_in(bot.runtime, *args)
        else:
            outcome_watching.observe_reaction_in(bot.runtime, *args)
        names = [name for name, _ in sent]
        sent.clear()
        return names

    bot = make_bot()
    q, answer, pair = answered(bot, sent)
    sent.clear()
    assert observed(sr.human_message(C, sr.next_ts(), "And the other key?", thread_ts=q["ts"])) == []
    assert signals(bot, pair.id) == {"reask"}  # a reask alone may be a new question: nothing failed, no alert

    with bot.runtime.db.session() as session:
        judgment = Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=1, pair_version=pair.version)
        session.add(judgment)
        session.flush()
        alert = Alert(dedupe_key=f"low:{judgment.id}", kind="low_score", judgment_id=judgment.id, status="held")
        session.add(alert)
    # An alert about the pair (held for the hour's summary, or posted) shows the signals: it is redrawn.
    assert observed(sr.human_message(C, sr.next_ts(), "Thanks!", thread_ts=q["ts"])) == [task_names.FOLLOW_UP_OUTCOME]
    with bot.runtime.db.session() as session:
        session.delete(session.get(Alert, alert.id))
    assert observed(sr.reaction(answer, "-1")) == [task_names.FOLLOW_UP_OUTCOME]  # failed: a missed failure?
    assert signals(bot, pair.id) == {"reask", "thanked", "negative_reaction"}


def test_a_redelivered_message_event_is_handed_on_once(make_bot, sent) -> None:
    bot = make_bot()
    q, _, pair = answered(bot, sent)
    event = sr.human_message(C, sr.next_ts(), "still stuck", thread_ts=q["ts"])
    send(bot, event, event_id="EvRE1")
    send(bot, event, event_id="EvRE1")
    assert [name for name, _ in sent] == [task_names.OBSERVE_MESSAGE]
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


def exported_rows(bot: ServedBot, sent: list) -> list[dict]:
    """The asker escalates, a teammate replies (the reference), and the pair is judged for relevancy and
    correctness: the export's rows, with their signals."""
    from relmon.export import with_signals
    from store.judgments import export_rows
    from store.models import Judgment

    q, _, pair = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "Still broken, help", thread_ts=q["ts"]))
    send(bot, sr.human_message(C, sr.next_ts(), "Use the Keys tab.", user="U_AGENT", thread_ts=q["ts"]))
    run(bot, sent)
    with bot.runtime.db.session() as session:
        for judge in ("relevancy", "correctness"):
            session.add(Judgment(pair_id=pair.id, judge=judge, status="ok", score=1, pair_version=pair.version))
    with bot.runtime.db.session() as session:
        return list(with_signals(session, export_rows(session)))


def test_export_gives_every_row_its_pairs_signals(make_bot, sent) -> None:
    import io

    from relmon.export import write_csv, write_jsonl

    rows = exported_rows(make_bot(), sent)
    assert [(r["judge"], r["signals"]) for r in rows] == [
        ("relevancy", ["escalation", "human_takeover"]),
        ("correctness", ["escalation", "human_takeover"]),
    ]
    text = io.StringIO()
    write_csv(rows, text)
    assert "escalation;human_takeover" in text.getvalue()
    lines = io.StringIO()
    write_jsonl(rows, lines)
    assert '"signals": ["escalation", "human_takeover"]' in lines.getvalue()


def test_export_gives_the_correctness_row_the_teammates_reply_as_its_reference(make_bot, sent) -> None:
    rows = exported_rows(make_bot(), sent)
    assert [(r["judge"], r["reference"]) for r in rows] == [("relevancy", None), ("correctness", "Use the Keys tab.")]


def test_a_reaction_on_any_message_of_a_multi_message_answer_counts(make_bot, sent) -> None:
    bot = make_bot()
    q = sr.human_message(C, sr.next_ts(), "How do I rotate my key?")
    first = sr.bot_message(C, sr.next_ts(), "Open Settings.", thread_ts=q["ts"])
    second = sr.bot_message(C, sr.next_ts(), "Then press Rotate.", thread_ts=q["ts"])
    for event in (q, first, second):
        send(bot, event)
    [pair] = bot.pairs()
    assert pair.answer_ts == first["ts"]
    assert settle(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    run(bot, sent)
    send(bot, sr.reaction(second, "-1"))
    assert [name for name, _ in sent] == [task_names.OBSERVE_REACTION]
    run(bot, sent)
    assert signals(bot, pair.id) == {"negative_reaction"}


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


def test_a_reaction_during_a_broker_outage_reaches_the_workers_exactly_once(make_bot, sent, redis_server) -> None:
    """The broker (the bot's Redis: the reaction's task is pushed with its mark) is down when the reaction comes:
    Slack still gets 200, and the bot's spool hands the reaction on once the broker is back (the same spool as
    messages, so in order with them)."""
    bot = make_bot()
    _, answer, pair = answered(bot, sent)
    redis_server.stop()
    try:
        send(bot, sr.reaction(answer, "-1"), event_id="EvOUTAGE1")  # 200: spooled
        assert sent == []
    finally:
        redis_server.start()
    deadline = time.time() + 20
    while not sent and time.time() < deadline:
        time.sleep(0.1)
    assert [name for name, _ in sent] == [task_names.OBSERVE_REACTION]
    run(bot, sent)
    send(bot, sr.reaction(answer, "-1"), event_id="EvOUTAGE1")  # Slack's retry of that delivery: already done
    assert sent == []
    assert signals(bot, pair.id) == {"negative_reaction"}


def test_the_bot_reads_only_the_watches_a_message_could_concern(redis_url) -> None:
    """300 open windows in the channel: a reply reads its thread's watches, a top-level message its writer's, a
    reaction the one answer's; what the rule then picks is the same as from every watch of the channel."""
    import redis as redis_client

    from capture.outcome_watches import WatchBoard
    from capture.outcomes import Watch, watching
    from capture.pairing import Author

    board = WatchBoard(redis_client.Redis.from_url(redis_url))
    now = time.time()
    watches = [
        Watch(n, f"{now - 300 + n:.6f}", f"{now - 400 + n // 3:.6f}", f"U{n % 50:03d}", now + 600, parts=(f"p{n}",))
        for n in range(300)
    ]
    for watch in watches:
        board.add(C, watch)
    reply = LoggedMessage(ts=f"{now:.6f}", thread_ts=watches[7].thread_key, author=Author.HUMAN, user="U999")
    top = LoggedMessage(ts=f"{now:.6f}", thread_ts=None, author=Author.HUMAN, user="U007")
    for message, expected_reads in ((reply, 3), (top, 6)):
        pipe = board.redis.pipeline()
        pipe.hvals(board.candidates_key(C, message))  # as the capture reads them, beside its log write
        read = decoded_watches(pipe.execute()[0])
        assert len(read) == expected_reads  # the thread's three answers; U007's six
        assert watching(read, message, now) == watching(watches, message, now)
    assert board.of_answer(C, "p42").pair_id == 42 and board.of_answer(C, watches[42].answer_ts).pair_id == 42
    board.remove(C, 42, thread_key=watches[42].thread_key, asker="U042", answer_ts=watches[42].answer_ts)
    assert board.of_answer(C, watches[42].answer_ts) is None
    assert 42 not in {w.pair_id for w in board.of_asker(C, "U042")}


def test_a_reaction_toggled_many_times_changes_the_outcome_once(make_bot, sent) -> None:
    """The asker gives 👎 and toggles it 21 times more (signed events): the first giving records the signal, and
    nothing after it (taking it back, giving it again) changes the outcome or sends a follow-up (nor any redraw).
    Another person's 👎 is their own first."""
    bot = make_bot()
    q, answer, pair = answered(bot, sent)
    send(bot, sr.human_message(C, sr.next_ts(), "And the other key?", thread_ts=q["ts"]))  # a reask: 👎 then fails it
    run(bot, sent)
    seen: list[set[str]] = []
    follow_ups = []
    for n in range(22):
        send(bot, sr.reaction(answer, "-1", added=n % 2 == 0), event_id=f"EvToggle{n}")
        asked = 0
        while sent:
            name, args = sent.pop(0)
            if name == task_names.OBSERVE_REACTION:
                outcome_watching.observe_reaction_in(bot.runtime, *args)
            asked += name == task_names.FOLLOW_UP_OUTCOME
        follow_ups.append(asked)
        seen.append(signals(bot, pair.id))
    assert all(state == {"reask", "negative_reaction"} for state in seen)  # once, and never taken back
    assert follow_ups[0] == 1 and sum(follow_ups[1:]) == 0  # nor any follow-up after it (so no redraw)
    with bot.runtime.db.session() as session:
        rows = session.execute(select(OutcomeSignal).where(OutcomeSignal.pair_id == pair.id)).scalars().all()
        assert sorted(r.name for r in rows) == ["negative_reaction", "reask"]  # recorded once
    send(bot, sr.reaction(answer, "-1", user="U_AGENT"), event_id="EvOther")
    assert [name for name, _ in sent] == [task_names.OBSERVE_REACTION]
    assert outcomes.observe_reaction_in(bot.runtime, *sent.pop()[1]) == []  # the signal stands: nothing new
