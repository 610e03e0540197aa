"""Pending pairs as the settle task leaves them, and beat's sweep run in this process: shared by the judging tests
that run `relmon worker` processes and those that run the tasks in-process (tests/system/test_pipeline.py,
tests/integration/test_judging_tasks.py), with their fake OpenAI server (`fake_openai`, bound by both)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, insert, select, update

from store.db import Database
from store.models import JudgingFailure, Judgment, Pair, PairStatus
from tests.builders import installed_runtime, make_settings
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """The fake OpenAI server, answering after 20 ms."""
    with FakeOpenAI(latency_ms=20) as fake:
        yield fake


def add_pairs(
    database: Database,
    count: int,
    *,
    channel: str = "C_SUPPORT",
    source: str = "capture",
    question: str | None = None,
    answer: str | None = None,
    start: int = 0,
) -> list[int]:
    now = datetime.now(UTC)
    rows = [
        {
            "source": source,
            "channel_id": channel,
            "answer_ts": f"1700000000.{start + i:06d}",
            "thread_ts": "1700000000.000000",
            "question_text": question or f"How do I reset my password on device {start + i}?",
            "answer_text": answer or f"Open Settings, then Security, then Reset, on device {start + i}.",
            "status": PairStatus.PENDING,
            "version": 1,
            "created_at": now,
            "updated_at": now,
        }
        for i in range(count)
    ]
    with database.session() as session:
        session.execute(insert(Pair), rows)
        ids = session.scalars(
            select(Pair.id).where(Pair.channel_id == channel, Pair.answer_ts.in_([r["answer_ts"] for r in rows]))
        ).all()
    return sorted(ids)


def statuses(database: Database, pair_ids: list[int]) -> Counter[str]:
    with database.session() as session:
        return Counter(session.scalars(select(Pair.status).where(Pair.id.in_(pair_ids))).all())


def judgments_per_pair(database: Database) -> Counter[int]:
    with database.session() as session:
        return Counter(session.scalars(select(Judgment.pair_id)).all())


def count_judgments(database: Database) -> int:
    with database.session() as session:
        return session.scalar(select(func.count(Judgment.id))) or 0


def sweep_as_beat_would(
    database: Database, *, broker_url: str, db_url: str, pair_ids: list[int], age_failures: bool = True
) -> int:
    """Age the pairs past the sweeper's threshold (and their counted failures with them, unless told not to: a
    failure just now) and run requeue_stale here, on the test Redis and database."""
    from workers.tasks.sweeper import requeue_stale

    with installed_runtime(make_settings(redis_url=broker_url, database_url=db_url)) as runtime:
        with database.session() as session:
            aged = datetime.now(UTC) - timedelta(seconds=runtime.settings.sweep_after_seconds, minutes=1)
            session.execute(update(Pair).where(Pair.id.in_(pair_ids)).values(updated_at=aged))
            if age_failures:
                session.execute(
                    update(JudgingFailure).where(JudgingFailure.pair_id.in_(pair_ids)).values(updated_at=aged)
                )
        return requeue_stale.apply().get()
