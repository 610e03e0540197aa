"""Outcome signals recorded once, through signed events with the workers run in-process: a retried observation
task, events Slack redelivers, a reaction taken back or toggled, a reaction on any part of the answer or during a
broker outage; and the alerts' follow-up sent only when an alert may change."""

from __future__ import annotations

import time

from sqlalchemy import select

from common import task_names
from store.models import OutcomeSignal, Pair, PairStatus
from tests import slack_requests as sr
from tests.bot_harness import ServedBot
from tests.outcome_helpers import C, answered, run, send, sent, signals, slack
from workers import outcome_watching
from workers.pairs.settling import settle_and_judge
from workers.tasks import outcomes

__all__ = ["sent", "slack"]  # the shared fixtures (tests.outcome_helpers), for this module's tests


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


def test_a_reaction_on_any_message_of_a_multi_message_answer_counts(make_bot, sent) -> None:
    bot = make_bot()
    q = sr.human_message(C, sr.next_ts(), "How do I rotate my key?")
    first = sr.bot_message(C, sr.next_ts(), "Open Settings.", thread_ts=q["ts"])
    second = sr.bot_message(C, sr.next_ts(), "Then press Rotate.", thread_ts=q["ts"])
    for event in (q, first, second):
        send(bot, event)
    [pair] = bot.pairs()
    assert pair.answer_ts == first["ts"]
    assert settle_and_judge(bot.runtime, pair.id, pair.version) == PairStatus.PENDING
    run(bot, sent)
    send(bot, sr.reaction(second, "-1"))
    assert [name for name, _ in sent] == [task_names.OBSERVE_REACTION]
    run(bot, sent)
    assert signals(bot, pair.id) == {"negative_reaction"}


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
