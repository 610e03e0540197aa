"""Alerts follow outcome signals, in-process against FakeSlack, real Redis and SQLite/PostgreSQL: a posted
low-score alert is redrawn with the signals so far, and a well-scored answer the conversation says failed gets
one missed-failure alert (under repeats and a retried post) that counts as a judge disagreement."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from common.feedback import tally
from store import outcomes as outcome_store
from store.feedback import votes_for
from store.models import Alert, Judgment, Pair
from tests.alert_helpers import ALERTS, add_judgment
from tests.sql_capture import statements_run
from workers.alerts import delivery
from workers.alerts.outcomes import OUTCOME_VOTER, FollowedUp, follow_up
from workers.tasks import slack as tasks


def watched(runtime, judgment_id: int) -> int:
    """Open the judged pair's outcome window; returns the pair's id."""
    with runtime.db.session() as session:
        pair = session.get(Pair, session.get(Judgment, judgment_id).pair_id)
        outcome_store.insert_window(
            session,
            pair_id=pair.id,
            channel_id=pair.channel_id,
            answer_ts=pair.answer_ts,
            thread_key=pair.answer_ts,
            asker="U_ASKER",
            closes_at=datetime.now(UTC) + timedelta(hours=1),
        )
        return pair.id


def signal(runtime, pair_id: int, name: str, minutes: float) -> None:
    with runtime.db.session() as session:
        window = outcome_store.get_window(session, pair_id)
        at = datetime.fromtimestamp(float(window.answer_ts), UTC) + timedelta(minutes=minutes)
        assert outcome_store.record_signals(session, pair_id, [name], at=at)


def blocks_text(message: dict) -> str:
    blocks = message["blocks"]
    return json.dumps(json.loads(blocks) if isinstance(blocks, str) else blocks, ensure_ascii=False)


def test_a_low_score_alert_is_redrawn_with_the_signals_so_far(runtime, fake):
    judgment_id = add_judgment(runtime, score=1)
    pair_id = watched(runtime, judgment_id)
    assert delivery.consider(runtime, judgment_id).low == "posted"
    [posted] = fake.posted(ALERTS)
    assert "After the answer" not in blocks_text(posted)
    signal(runtime, pair_id, "reask", 2)
    assert follow_up(runtime, pair_id) == FollowedUp("not_failed", 1)
    [update] = fake.calls_to("chat.update")
    assert update["channel"] == ALERTS
    assert "asked again 2 min later" in blocks_text(update)
    signal(runtime, pair_id, "human_takeover", 5)
    tasks.follow_up_outcome(pair_id)  # the task body, as a worker runs it
    text = blocks_text(fake.calls_to("chat.update")[-1])
    assert "asked again 2 min later · a teammate replied 5 min later" in text
    assert len(fake.posted(ALERTS)) == 1  # a low score that failed is no missed failure: it was alerted on


def test_a_well_scored_answer_that_failed_is_alerted_once_as_a_disagreement(runtime, fake):
    judgment_id = add_judgment(runtime, score=4)
    pair_id = watched(runtime, judgment_id)
    assert delivery.consider(runtime, judgment_id).low == "above_threshold"
    signal(runtime, pair_id, "reask", 1)
    assert follow_up(runtime, pair_id) == FollowedUp("not_failed", 0)  # a reask alone may be a new question
    signal(runtime, pair_id, "negative_reaction", 3)
    fake.drop_method("chat.postMessage")  # Slack takes the post, the worker never hears back
    with pytest.raises(Exception):  # noqa: B017 - the connection error, whichever the client raises
        follow_up(runtime, pair_id)
    tasks.follow_up_outcome(pair_id)  # the retry finds the post
    follow_up(runtime, pair_id)  # and any later signal's follow-up
    [posted] = fake.posted(ALERTS)
    text = blocks_text(posted)
    assert "Missed failure: relevancy 4 / 4" in text
    assert "asked again 1 min later" in text and "reacted negatively 3 min later" in text
    with runtime.db.session() as session:
        [row] = session.scalars(select(Alert).where(Alert.kind == "missed_failure")).all()
        assert (row.status, row.dedupe_key, row.judgment_id) == ("posted", f"missed:{pair_id}", judgment_id)
        votes = votes_for(session, judgment_id)
    assert votes == [(OUTCOME_VOTER, "wrong")] and tally(votes).wrong == 1
    assert "1 says it was wrong" in blocks_text(fake.calls_to("chat.update")[-1])


def test_a_missed_failure_is_claimed_and_drawn_from_one_read_of_its_pair(runtime, fake):
    """The follow-up reads the pair once for the claim and the post; the redraw of the pair's posted alerts, which
    follows and may be deferred to a task of its own, reads it for itself."""
    judgment_id = add_judgment(runtime, score=4)
    pair_id = watched(runtime, judgment_id)
    signal(runtime, pair_id, "reask", 1)
    signal(runtime, pair_id, "negative_reaction", 3)
    with statements_run(runtime.db.engine) as statements:
        assert follow_up(runtime, pair_id) == FollowedUp("posted", 1)
    assert len([s for s in statements if "pairs.question_text" in s]) == 2  # the follow-up's, the redraw's
    assert "Missed failure: relevancy 4 / 4" in blocks_text(fake.posted(ALERTS)[0])
