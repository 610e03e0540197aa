"""Settling a captured answer opens its outcome window with it (store.pairs.settle): on PostgreSQL in the settle's
own statement, elsewhere in a second one; only for a pending capture with its question, only once, and never for
a settle that lost to a newer version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import insert, select

from store import pairs
from store.models import OutcomeWindow, Pair, PairStatus
from tests.sql_capture import statements_run

CLOSES = datetime(2026, 12, 2, 12, 30, tzinfo=UTC)


def _pair(database, answer_ts: str, *, thread_ts: str | None = None, source: str = "capture") -> int:
    with database.engine.begin() as connection:
        return connection.execute(
            insert(Pair).returning(Pair.id),
            {"channel_id": "C1", "answer_ts": answer_ts, "thread_ts": thread_ts, "source": source},
        ).scalar_one()


def _settle(database, pair_id: int, *, version: int = 1, status: str = PairStatus.PENDING, question: bool = True):
    with statements_run(database.engine) as statements, database.autocommit() as connection:
        settled = pairs.settle(
            connection,
            pair_id,
            version,
            status=status,
            answer_text="Open Billing, then Export.",
            question_ts="1790000000.000100" if question else None,
            question_user="U_ASKER" if question else None,
            question_text="How do I export invoices?" if question else None,
            window_closes_at=CLOSES,
        )
    return settled, statements


def _windows(database) -> list[OutcomeWindow]:
    with database.session() as session:
        return list(session.execute(select(OutcomeWindow).order_by(OutcomeWindow.pair_id)).scalars())


def test_a_pending_capture_gets_its_window_with_the_settle(database) -> None:
    threaded = _pair(database, "1790000001.000200", thread_ts="1790000000.000100")
    top_level = _pair(database, "1790000002.000300")
    settled, statements = _settle(database, threaded)
    assert settled is not None and settled.id == threaded and settled.status == PairStatus.PENDING
    assert settled.question_user == "U_ASKER"  # the settle's row, as judging and the watch read it
    assert len(statements) == (1 if database.engine.dialect.name == "postgresql" else 2)
    _settle(database, top_level)

    windows = _windows(database)
    assert [(w.pair_id, w.channel_id, w.answer_ts, w.thread_key, w.asker) for w in windows] == [
        (threaded, "C1", "1790000001.000200", "1790000000.000100", "U_ASKER"),
        (top_level, "C1", "1790000002.000300", "1790000002.000300", "U_ASKER"),  # its own thread key
    ]
    assert all(abs(w.closes_at.replace(tzinfo=UTC) - CLOSES) < timedelta(seconds=1) for w in windows)


def test_no_window_without_a_question_for_a_lost_settle_or_outside_capture(database) -> None:
    no_question = _pair(database, "1790000003.000100")
    stale = _pair(database, "1790000004.000100")
    on_demand = _pair(database, "1790000005.000100", source="command")
    settled, _ = _settle(database, no_question, status=PairStatus.NO_QUESTION, question=False)
    assert settled is not None and settled.status == PairStatus.NO_QUESTION
    lost, _ = _settle(database, stale, version=2)  # a newer edit's settle decides
    assert lost is None
    _settle(database, on_demand)
    assert _windows(database) == []


def test_a_second_settle_keeps_the_first_window(database) -> None:
    pair_id = _pair(database, "1790000006.000100")
    _settle(database, pair_id)
    with database.engine.begin() as connection:  # an edit re-opens the answer: version 2, settling again
        connection.execute(Pair.__table__.update().values(version=2, status=PairStatus.SETTLING))
    with database.autocommit() as connection:
        again = pairs.settle(
            connection,
            pair_id,
            2,
            status=PairStatus.PENDING,
            answer_text="Open Billing, then Export as CSV.",
            question_ts="1790000000.000100",
            question_user="U_OTHER",
            question_text="How do I export invoices?",
            window_closes_at=CLOSES + timedelta(hours=1),
        )
    assert again is not None and again.version == 2
    windows = _windows(database)
    assert [(w.pair_id, w.asker) for w in windows] == [(pair_id, "U_ASKER")]
