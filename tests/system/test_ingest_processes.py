"""The ingest API end to end with relmon's own processes: `relmon bot` (gunicorn) takes exchanges over real HTTP,
a `relmon worker` stores them and judges them with the fake LLM, and an off-topic answer alerts in the alert
channel: a `dm` exchange's alert names its bot and scores, never its words. With Redis down the bot still answers
202 (its spool), and the exchange is stored once Redis is back. Refusals in detail:
tests/integration/test_ingest_api.py."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from store.db import Database
from store.exchange_models import Exchange
from store.models import Judgment, JudgmentStatus, Pair, PairSource, PairStatus
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.running_system import ALERTS, add_support_channel, relmon_processes
from tests.services import RedisProcess

pytestmark = pytest.mark.slow

TOKEN = "ingest-system-token"
QUESTION = "Can I get a refund for order 4471?"
OFFTOPIC = "offtopic: our office has a lovely garden with tulips"
DOCUMENT = "Refunds are issued within five days of a return."


def exchange(id: str, **fields: object) -> dict:
    return {
        "id": id,
        "bot": "helpdesk",
        "conversation_id": f"conv-{id}",
        "turn": 1,
        "question": QUESTION,
        "answer": "Yes: refunds are issued within five days of the return.",
        "documents": [{"text": DOCUMENT, "source": "kb/refunds.md"}],
        "asked_at": "2026-12-07T08:00:00Z",
        "answered_at": "2026-12-07T08:00:02Z",
        "visibility": "public",
        **fields,
    }


def post(base_url: str, body: object, token: str = TOKEN) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(base_url + "/v1/exchanges", json=body, headers=headers, timeout=15)


def judged_pairs(database: Database) -> dict[str, tuple[str, dict[str, float | None]]]:
    """Each exchange's pair status and its judgments' scores, by the exchange's id."""
    with database.session() as session:
        rows = session.execute(select(Exchange.client_id, Pair.id, Pair.status).join(Pair)).all()
        scores = {}
        for client_id, pair_id, status in rows:
            judgments = session.execute(select(Judgment).where(Judgment.pair_id == pair_id)).scalars()
            scores[client_id] = (status, {j.judge: j.score for j in judgments if j.status == JudgmentStatus.OK})
        return scores


def test_ingested_exchanges_are_judged_and_a_dm_alerts_without_its_words(
    redis_url: str, fresh_db_url: str, tmp_path: Path
) -> None:
    with FakeSlack() as slack:
        add_support_channel(slack)
        slack.add_channel(ALERTS, "alerts", members=["U_RELMON"])
        with relmon_processes(
            redis_url=redis_url,
            database_url=fresh_db_url,
            directory=tmp_path,
            slack=slack,
            RELMON_INGEST_TOKENS=f"old-token,{TOKEN}",
            RELMON_JUDGES="relevancy,grounded",
            RELMON_CONFIRM="off",
            RELMON_DEGRADATION_WINDOW_MINUTES=0,
        ) as system:
            # Refused before anything is kept: nothing of these is ever stored.
            assert post(system.base_url, exchange("x", turn="one")).status_code == 400
            assert post(system.base_url, exchange("y"), token="wrong").status_code == 401
            single = post(system.base_url, exchange("dm-1", answer=OFFTOPIC, visibility="dm", asker="U0ASKER"))
            assert single.status_code == 202, single.text
            batch = {"exchanges": [exchange(f"pub-{n}", turn=n) for n in range(3)]}
            assert post(system.base_url, batch, token="old-token").status_code == 202
            assert post(system.base_url, exchange("dm-1", answer=OFFTOPIC, visibility="dm")).status_code == 202

            database = Database(fresh_db_url)
            try:

                def all_judged() -> dict | None:
                    found = judged_pairs(database)
                    done = len(found) == 4 and all(status == PairStatus.JUDGED for status, _ in found.values())
                    return found if done else None

                found = wait_for(all_judged, timeout=90, what="the four exchanges judged")
                assert set(found) == {"dm-1", "pub-0", "pub-1", "pub-2"}  # the resend is the same exchange
                assert found["dm-1"][1]["relevancy"] == 0 and found["pub-0"][1]["relevancy"] == 4
                assert set(found["pub-0"][1]) == {"relevancy", "grounded"}  # the documents: a grounded verdict
                with database.session() as session:
                    assert session.scalar(select(func.count()).select_from(Pair)) == 4
                    sources = set(session.scalars(select(Pair.source)))
                assert sources == {PairSource.INGEST}
                # The grounded judge read the retrieved document as its source text.
                prompts = [json.dumps(request) for request in system.llm.requests]
                assert any(DOCUMENT in prompt and "Answer 2" in prompt for prompt in prompts)

                alerts = wait_for(lambda: slack.posted(ALERTS) or None, timeout=60, what="an alert")
                wait_for(lambda: len(slack.posted(ALERTS)) >= 2, timeout=30, what="both judges' alerts")
                alerts = slack.posted(ALERTS)
                text = json.dumps(alerts)
                assert "bot helpdesk (dm)" in text and "Low relevancy score" in text
                for words in (QUESTION, "tulips", DOCUMENT, "refund"):
                    assert words not in text, words  # a dm is never quoted: scores, bot and verdict only
            finally:
                database.dispose()


def test_with_redis_down_the_bot_still_accepts_and_the_worker_stores_it_later(
    redis_server: RedisProcess, redis_url: str, fresh_db_url: str, tmp_path: Path
) -> None:
    with relmon_processes(
        redis_url=redis_url,
        database_url=fresh_db_url,
        directory=tmp_path,
        RELMON_INGEST_TOKENS=TOKEN,
        RELMON_CONFIRM="off",
    ) as system:
        redis_server.stop()
        try:
            response = post(system.base_url, exchange("while-down"))
            assert response.status_code == 202, response.text
        finally:
            redis_server.start()
        database = Database(fresh_db_url)
        try:
            found = wait_for(
                lambda: judged_pairs(database).get("while-down", (None,))[0] == PairStatus.JUDGED or None,
                timeout=90,
                what="the spooled exchange stored and judged",
            )
            assert found
            assert len(judged_pairs(database)) == 1
        finally:
            database.dispose()
