"""Outcome signals through real processes: signed events to a real `relmon bot`, the tasks run by a real
`relmon worker`, on the fake Slack and LLM. In-process: tests/integration/test_outcomes.py and
test_outcome_alerts.py."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import select

from store.db import Database
from store.models import Feedback, Judgment, OutcomeSignal, OutcomeWindow, Pair
from tests import slack_requests as sr
from tests.bot_harness import SECRET
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.running_system import ALERTS, CHANNEL, add_support_channel, relmon_processes

pytestmark = pytest.mark.slow

WINDOW_SECONDS = 12  # RELMON_OUTCOME_WINDOW, short so the window closes within the test


def missed_alerts(slack: FakeSlack) -> tuple[int, int]:
    """Missed-failure alerts: chat.postMessage calls, and messages Slack holds."""
    calls = [p for p in slack.posted(ALERTS) if str(p.get("text", "")).startswith("Missed failure in")]
    with slack._lock:
        held = [m for m in slack.messages.get(ALERTS, {}).values() if m["text"].startswith("Missed failure in")]
    return len(calls), len(held)


def test_a_reask_and_a_thumbs_down_record_signals_once_and_alert_a_missed_failure_once_with_a_12s_window(
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
                time.sleep(2.0)  # the close's follow-up (and any duplicate) lands in this time
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
