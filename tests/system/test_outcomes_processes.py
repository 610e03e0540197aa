"""Outcome signals through real processes: signed events to a real `relmon bot` (or the bot served in-process),
the tasks run by real `relmon worker`s, on the fake Slack and LLM; one worker is SIGKILLed in the middle of
recording a message's signals. In-process: tests/integration/test_outcomes.py and test_outcome_alerts.py."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import redis
from sqlalchemy import select, text

from common import task_notes
from store.db import Database
from store.models import Feedback, Judgment, OutcomeSignal, OutcomeWindow, Pair, PairStatus
from tests import slack_requests as sr
from tests.broker import wait_until_idle
from tests.builders import SECRET
from tests.conftest import IN_CI
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.running_system import ALERTS, CHANNEL, System, add_support_channel, relmon_processes

pytestmark = pytest.mark.slow

WINDOW_SECONDS = 12  # RELMON_OUTCOME_WINDOW, short so the window closes within the test


def missed_alerts(slack: FakeSlack) -> tuple[int, int]:
    """Missed-failure alerts: chat.postMessage calls, and messages Slack holds."""
    calls = [p for p in slack.posted(ALERTS) if str(p.get("text", "")).startswith("Missed failure in")]
    with slack._lock:
        held = [m for m in slack.messages.get(ALERTS, {}).values() if m["text"].startswith("Missed failure in")]
    return len(calls), len(held)


def test_a_missed_failure_seen_by_its_reask_with_a_thumbs_down_is_alerted_once_with_a_12s_window(
    redis_url: str, db_url: str, tmp_path: Path
) -> None:
    """A well-scored answer (relevancy 4 from the fake LLM), then the asker asks again in the thread and reacts
    👎, each event delivered twice as Slack retries it (same event_id): the signals `reask` and
    `negative_reaction` are recorded once each, the window (RELMON_OUTCOME_WINDOW=12 s) closes unresolved, and
    one missed-failure alert is posted, once, although the signals and the window's close each follow it up."""
    with FakeSlack() as slack:
        add_support_channel(slack)
        slack.add_channel(ALERTS, "alerts", members=["U_RELMON"])
        with relmon_processes(
            redis_url=redis_url,
            database_url=db_url,
            directory=tmp_path,
            slack=slack,
            start=("bot", "worker", "beat"),  # beat closes the window
            RELMON_SETTLE_SECONDS="0.5",
            RELMON_OUTCOME_WINDOW=WINDOW_SECONDS,
        ) as system:
            database = Database(db_url)
            try:
                question = sr.human_message(CHANNEL, sr.next_ts(), "How do I reset my password?")
                answer = sr.bot_message(
                    CHANNEL, sr.next_ts(), "Open Settings > Security > Reset password.", thread_ts=question["ts"]
                )
                for event in (question, answer):
                    assert system.post_event(event).status_code == 200

                def judged() -> Judgment | None:
                    with database.session() as session:
                        return session.execute(select(Judgment)).scalar()

                judgment = wait_for(judged, timeout=45, what="the answer judged")
                assert judgment.status == "ok" and judgment.score == 4  # well scored: no low-score alert
                with database.session() as session:
                    pair = session.execute(select(Pair)).scalar_one()
                    assert session.get(OutcomeWindow, pair.id) is not None  # watched (opened before judging)

                reask = sr.human_message(CHANNEL, sr.next_ts(), "Where is the Security tab?", thread_ts=question["ts"])
                thumbs_down = sr.reaction(answer, "-1")
                for event, event_id in ((reask, "EvOUT_REASK"), (thumbs_down, "EvOUT_NEG")):
                    for _ in range(2):  # Slack's retry of a delivery that worked
                        body = sr.envelope(event, event_id=event_id)
                        assert sr.post(system.base_url + "/slack/events", body, SECRET).status_code == 200

                wait_for(lambda: missed_alerts(slack) == (1, 1), timeout=30, what="one missed-failure alert")

                def closed() -> bool:
                    with database.session() as session:
                        return session.get(OutcomeWindow, pair.id).closed_at is not None

                wait_for(closed, timeout=WINDOW_SECONDS + 30, what="the outcome window closed")
                wait_until_idle(redis_url)  # the close's follow-up (and any duplicate) has run
                with database.session() as session:
                    names = session.execute(
                        select(OutcomeSignal.name).where(OutcomeSignal.pair_id == pair.id).order_by(OutcomeSignal.id)
                    ).scalars()
                    assert sorted(names) == ["negative_reaction", "reask"]  # once each, and not resolved
                    votes = session.execute(select(Feedback.user_id, Feedback.vote)).all()
                    assert [tuple(v) for v in votes] == [("relmon:outcomes", "wrong")]  # the judge disagreement
                assert missed_alerts(slack) == (1, 1)
                alerts = slack.posted(ALERTS)
                assert len(alerts) == 1, [a.get("text") for a in alerts]  # nothing else was alerted
                assert f"<#{CHANNEL}>" in alerts[0]["text"]
            finally:
                database.dispose()


def signal_rows(database: Database) -> Counter[tuple[int, str]]:
    with database.session() as session:
        return Counter(tuple(row) for row in session.execute(select(OutcomeSignal.pair_id, OutcomeSignal.name)))


def waiting_on_a_lock(database: Database) -> bool:
    """A backend of this database waits for a row lock (PostgreSQL's view of its sessions)."""
    with database.session() as session:
        query = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        return session.execute(text(query)).scalar_one() > 0


def needs_postgres(db_url: str) -> None:
    if not db_url.startswith("postgresql"):
        if IN_CI:
            pytest.fail("PostgreSQL is required in CI (set RELMON_TEST_POSTGRES_URL)")
        pytest.skip("holds a row lock: needs PostgreSQL (set RELMON_TEST_POSTGRES_URL)")


def answered_in_thread(system: System, question: dict, answer: str) -> Pair:
    """The support bot answers in the question's thread; returns the pair once it is judged and watched."""
    event = sr.bot_message(CHANNEL, sr.next_ts(), answer, thread_ts=question.get("thread_ts", question["ts"]))
    system.send(event)

    def watched() -> Pair | None:
        with system.database.session() as session:
            pair = session.execute(select(Pair).where(Pair.answer_ts == event["ts"])).scalar()
            judged = pair is not None and session.execute(select(Judgment).where(Judgment.pair_id == pair.id)).first()
            return pair if judged and session.get(OutcomeWindow, pair.id) is not None else None

    return wait_for(watched, timeout=30, what="the answer judged and its window open")


@pytest.mark.postgres
def test_a_worker_killed_mid_observation_records_each_signal_with_its_alert_exactly_once(
    make_system, fresh_db_url: str, redis_url: str
) -> None:
    """Two answers in one thread (the second after the asker asked again), both watched and well scored. A
    teammate's reply is one task for both pairs: the worker records the first pair's takeover, then waits for the
    second pair's window, which the test holds locked (PostgreSQL), and is SIGKILLed there: one signal row
    written, the task not acknowledged. A new worker takes the task over when its lease lapses: each signal is one
    row per (pair, name), both references are set, and the first pair's missed failure (a re-ask and a takeover on
    a well-scored answer) is posted exactly once, though both attempts followed it up."""
    needs_postgres(fresh_db_url)
    # One task at a time, so the killed worker holds nothing else; the shortest lease, so the task comes back soon.
    system = make_system(workers=1, concurrency=1, RELMON_VISIBILITY_TIMEOUT=10)
    question = sr.human_message(CHANNEL, sr.next_ts(), "How do I reset my password?")
    system.send(question)
    first = answered_in_thread(system, question, "Open Settings > Security > Reset password.")
    again = sr.human_message(CHANNEL, sr.next_ts(), "Where is the Security tab?", thread_ts=question["ts"])
    system.send(again)
    second = answered_in_thread(system, again, "Security is the third tab in Settings.")
    wait_for(lambda: signal_rows(system.database) == {(first.id, "reask"): 1}, timeout=20, what="the re-ask")

    with system.database.engine.connect() as lock, lock.begin():
        lock.execute(select(OutcomeWindow).where(OutcomeWindow.pair_id == second.id).with_for_update())
        reply = sr.human_message(
            CHANNEL, sr.next_ts(), "It is under your avatar, top right.", user="U_AGENT", thread_ts=question["ts"]
        )
        system.send(reply)
        wait_for(lambda: waiting_on_a_lock(system.database), timeout=20, what="the worker at the second pair")
        assert signal_rows(system.database) == {(first.id, "reask"): 1, (first.id, "human_takeover"): 1}
        victim = system.workers.pop()
        victim.kill()  # the first pair's signal is written, the task not acknowledged
        # The lock is released: the killed worker's transaction (its session, waiting on it) is rolled back.
    system.start_workers(1)

    def done() -> bool:
        judged = all(p.status == PairStatus.JUDGED and p.reference_text for p in system.pairs())
        return (
            judged
            and (second.id, "human_takeover") in signal_rows(system.database)
            and missed_alerts(system.slack) == (1, 1)
        )

    wait_for(done, timeout=40, what="the task taken over, the missed failure posted")
    # Every follow-up ran: a duplicate (the first pair's second follow-up, taken, running) has landed by now.
    wait_until_idle(redis_url)
    rows = signal_rows(system.database)
    assert set(rows.values()) == {1}, rows
    assert set(rows) == {(first.id, "reask"), (first.id, "human_takeover"), (second.id, "human_takeover")}
    assert missed_alerts(system.slack) == (1, 1)
    [alert] = system.slack.posted(ALERTS)  # nothing else was alerted
    assert alert["text"].startswith("Missed failure in")
    with system.slack._lock:
        [shown] = system.slack.messages[ALERTS].values()
    assert "asked again" in str(shown["blocks"]) and "a teammate replied" in str(shown["blocks"])
    assert {p.id: p.reference_text for p in system.pairs()} == {
        first.id: "It is under your avatar, top right.",
        second.id: "It is under your avatar, top right.",
    }


@pytest.mark.postgres
def test_a_worker_killed_after_recording_a_signal_before_queueing_its_sends_still_puts_it_on_the_trace_once(
    make_system, fresh_db_url: str, redis_url: str
) -> None:
    """Langfuse configured. A teammate's reply: the worker records the answer's `human_takeover`, then waits to set
    the pair's reference on its row, which the test holds (FOR NO KEY UPDATE: the signal's insert goes through),
    and is SIGKILLed there: the signal committed, its send not queued. The task's replay finds the signal recorded,
    not new, and queues nothing; the send's note, made before the commit, is what beat's orphan check sends again
    once a lease old. The score lands on the answer's trace, posted exactly once, and no note is left."""
    needs_postgres(fresh_db_url)
    with FakeLangfuse() as langfuse:
        system = make_system(
            workers=1,
            concurrency=1,
            RELMON_VISIBILITY_TIMEOUT=10,
            RELMON_TRACE_ID_FROM="slack_ts",
            RELMON_LANGFUSE_HOST=langfuse.url,
            RELMON_LANGFUSE_PUBLIC_KEY="pk-lf-test",  # the keys a FakeLangfuse() takes
            RELMON_LANGFUSE_SECRET_KEY="sk-lf-test",
        )
        question = sr.human_message(CHANNEL, sr.next_ts(), "How do I reset my password?")
        system.send(question)
        pair = answered_in_thread(system, question, "Open Settings > Security > Reset password.")
        wait_for(langfuse.stored, timeout=30, what="the verdict's score in Langfuse")
        takeover = f"relmon-pair-{pair.id}-human_takeover"

        with system.database.engine.connect() as lock, lock.begin():
            lock.execute(select(Pair).where(Pair.id == pair.id).with_for_update(key_share=True))
            reply = sr.human_message(
                CHANNEL, sr.next_ts(), "It is under your avatar, top right.", user="U_AGENT", thread_ts=question["ts"]
            )
            system.send(reply)
            wait_for(lambda: waiting_on_a_lock(system.database), timeout=20, what="the worker at the pair's row")
            assert signal_rows(system.database) == {(pair.id, "human_takeover"): 1}
            victim = system.workers.pop()
            victim.kill()  # the signal is committed, its send not queued
        assert takeover not in langfuse.stored()
        system.start_workers(1)

        wait_for(lambda: takeover in langfuse.stored(), timeout=60, what="the takeover's score, sent again")
        wait_until_idle(redis_url)  # a second send (the replay's, a second resend) would have landed by now
        assert langfuse.posts[takeover] == 1
        with redis.Redis.from_url(redis_url) as broker:
            assert broker.hlen(task_notes.KEY) == 0
