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
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.processes import relmon_env, start_bot, start_worker, wait_for

pytestmark = pytest.mark.slow

SECRET = "test-signing-secret"  # relmon_env's SLACK_SIGNING_SECRET


def test_question_and_answer_events_become_a_judgment(redis_url: str, db_url: str, tmp_path: Path) -> None:
    with FakeSlack() as slack, FakeOpenAI() as openai:
        slack.add_user("U_ASKER", "ana", "Ana Diaz")
        slack.add_channel("C_SUPPORT", "support", members=["U_ASKER", "U_RELMON"])
        env = relmon_env(
            redis_url=redis_url,
            database_url=db_url,
            slack_api_url=slack.api_url,
            openai_base_url=openai.base_url,
            data_dir=tmp_path / "data",
            RELMON_SETTLE_SECONDS="0.5",
        )
        bot, base_url = start_bot(env, log_dir=tmp_path)
        worker = start_worker(env, log_dir=tmp_path)
        with bot, worker:
            health = httpx.get(base_url + "/healthz", timeout=5).json()
            assert health == {"status": "ok", "checks": {"redis": "ok"}}
            question = sr.human_message("C_SUPPORT", sr.next_ts(), "How do I reset my password?")
            answer = sr.bot_message(
                "C_SUPPORT", sr.next_ts(), "Open Settings > Security > Reset password.", thread_ts=question["ts"]
            )
            for event in (question, answer):
                response = sr.post(base_url + "/slack/events", sr.envelope(event), SECRET)
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
