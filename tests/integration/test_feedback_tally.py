"""The feedback tally (pure) and its storage (real SQLite and PostgreSQL)."""

from __future__ import annotations

import pytest

from common.feedback import VOTE_FOR_ACTION, Tally, describe_votes, tally
from store.feedback import record_vote, votes_for
from store.models import Judgment, Pair


@pytest.mark.parametrize(
    ("votes", "expected"),
    [
        ([], Tally(0, 0)),
        ([("U1", "right")], Tally(1, 0)),
        ([("U1", "right"), ("U2", "wrong"), ("U3", "wrong")], Tally(1, 2)),
        ([("U1", "right"), ("U1", "wrong")], Tally(0, 1)),  # a changed vote counts once, as the latest
        ([("U1", "wrong"), ("U2", "right"), ("U1", "right")], Tally(2, 0)),
        ([("U1", "maybe"), ("U2", "right")], Tally(1, 0)),  # unknown votes ignored
    ],
)
def test_tally_counts_each_persons_latest_vote(votes, expected):
    assert tally(votes) == expected


def test_describe():
    assert describe_votes(Tally()) == "No feedback yet: was the judge right?"
    assert describe_votes(Tally(1, 2)) == "Feedback: 1 says the judge was right · 2 say it was wrong"


def test_agreement():
    assert Tally(3, 1).agreement == 0.75
    assert Tally().agreement is None


def test_each_feedback_button_is_a_vote():
    assert VOTE_FOR_ACTION == {"feedback_right": "right", "feedback_wrong": "wrong"}


def test_one_vote_per_person_changeable(database):
    database_session = database.session
    with database_session() as session:
        pair = Pair(channel_id="C1", answer_ts="1.1", question_text="q", answer_text="a", status="judged")
        session.add(pair)
        session.flush()
        judgment = Judgment(pair_id=pair.id, judge="relevancy", status="ok", score=1, max_score=4)
        session.add(judgment)
        session.flush()
        judgment_id = judgment.id
    with database_session() as session:
        assert record_vote(session, judgment_id, "U1", "right")
        assert record_vote(session, judgment_id, "U2", "right")
    with database_session() as session:
        assert record_vote(session, judgment_id, "U1", "wrong")  # changes U1's vote
        assert not record_vote(session, judgment_id + 999, "U1", "wrong")  # no such judgment
    with database_session() as session:
        votes = votes_for(session, judgment_id)
    assert sorted(votes) == [("U1", "wrong"), ("U2", "right")]
    assert tally(votes) == Tally(right=1, wrong=1)
