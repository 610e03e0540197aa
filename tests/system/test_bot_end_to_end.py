"""End to end with real processes: `relmon bot` (gunicorn) and `relmon worker`, a question event and an
answer event signed as Slack sends them → a stored judgment for the pair."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from sqlalchemy import select

from store.db import Database
from store.models import Judgment, Pair, PairStatus
from tests import slack_requests as sr
from tests.processes import wait_for
from tests.running_system import relmon_processes

pytestmark = pytest.mark.slow


def test_the_events_of_an_exchange_become_a_judgment(redis_url: str, db_url: str, tmp_path: Path) -> None:
    with relmon_processes(
        redis_url=redis_url, database_url=db_url, directory=tmp_path, RELMON_SETTLE_SECONDS="0.5"
    ) as system:
        health = httpx.get(system.base_url + "/healthz", timeout=5).json()
        assert health == {"status": "ok", "checks": {"redis": "ok"}}
        question = sr.human_message("C_SUPPORT", sr.next_ts(), "How do I reset my password?")
        answer = sr.bot_message(
            "C_SUPPORT", sr.next_ts(), "Open Settings > Security > Reset password.", thread_ts=question["ts"]
        )
        for event in (question, answer):
            response = system.post_event(event)
            assert response.status_code == 200, response.text

        database = Database(db_url)
        try:

            def judged() -> Judgment | None:
                with database.session() as session:
                    return session.execute(select(Judgment)).scalar()

            judgment = wait_for(judged, timeout=60, what="a stored judgment")
            with database.session() as session:
                pair = session.execute(select(Pair)).scalar_one()
            assert judgment.judge == "relevancy"
            assert judgment.status == "ok"
            assert judgment.pair_id == pair.id
            assert (pair.question_text, pair.answer_text) == (
                "How do I reset my password?",
                "Open Settings > Security > Reset password.",
            )
            assert pair.question_ts == question["ts"]
            wait_for(lambda: _status(database, pair.id) == PairStatus.JUDGED, timeout=30, what="pair judged")
        finally:
            database.dispose()


def _status(database: Database, pair_id: int) -> str:
    with database.session() as session:
        return session.get(Pair, pair_id).status
