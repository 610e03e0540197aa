"""The ingest API end to end with relmon's own processes: `relmon bot` (gunicorn) takes exchanges over real HTTP,
a `relmon worker` stores them and judges them with the fake LLM, and an off-topic answer alerts in the alert
channel: a `dm` exchange's alert names its bot and scores, never its words. With Redis down the bot still answers
202 (its spool), and the exchanges (one, and a batch sent twice with an id twice in it) are stored once each when
Redis is back. The bot's handoff with a person's reply makes a
missed-failure alert and a golden item, and its deletion leaves no copy in the database or Redis. Refusals in
detail: tests/integration/test_ingest_api.py and tests/integration/test_ingest_signals.py."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy import MetaData, func, select

from store.db import Database
from store.exchange_models import Exchange
from store.golden_models import GoldenItem
from store.models import Judgment, JudgmentStatus, OutcomeSignal, Pair, PairSource, PairStatus
from store.signals import ESCALATION, HUMAN_TAKEOVER
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
        batch = {"exchanges": [exchange("batch-1"), exchange("batch-2"), exchange("batch-1")]}
        redis_server.stop()
        try:
            for body in (exchange("while-down"), batch, batch):  # the batch sent again: a client's retry
                response = post(system.base_url, body)
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
            wait_for(lambda: len(judged_pairs(database)) == 3 or None, timeout=60, what="the batch stored")
            assert set(judged_pairs(database)) == {"while-down", "batch-1", "batch-2"}
            with database.session() as session:
                assert session.scalar(select(func.count()).select_from(Pair)) == 3
        finally:
            database.dispose()


MARK = "SMARK4418Z"  # planted in an exchange then deleted: in no table and no Redis key after


def redis_blob(client: redis.Redis) -> bytes:
    """Every key of Redis and every value under it, as one blob."""
    blob = []
    for key in client.scan_iter(count=1000):
        blob.append(key)
        kind = client.type(key)
        if kind == b"string":
            blob.append(client.get(key) or b"")
        elif kind == b"list":
            blob.extend(client.lrange(key, 0, -1))
        elif kind == b"hash":
            for field, value in client.hgetall(key).items():
                blob.extend((field, value))
        elif kind in (b"set", b"zset"):
            blob.extend(client.smembers(key) if kind == b"set" else client.zrange(key, 0, -1))
    return b"\n".join(blob)


def table_values(database: Database) -> str:
    metadata = MetaData()
    metadata.reflect(database.engine)
    with database.engine.connect() as connection:
        return "\n".join(repr(row) for table in metadata.sorted_tables for row in connection.execute(select(table)))


def test_the_bots_handoff_alerts_and_collects_and_its_deletion_leaves_no_copy(
    redis_url: str, fresh_db_url: str, tmp_path: Path
) -> None:
    answered = datetime.now(UTC) - timedelta(seconds=30)
    times = {"asked_at": (answered - timedelta(seconds=2)).isoformat(), "answered_at": answered.isoformat()}
    reply = f"A teammate: order {MARK} is refunded today."
    with FakeSlack() as slack:
        add_support_channel(slack)
        slack.add_channel(ALERTS, "alerts", members=["U_RELMON"])
        with relmon_processes(
            redis_url=redis_url,
            database_url=fresh_db_url,
            directory=tmp_path,
            slack=slack,
            RELMON_INGEST_TOKENS=TOKEN,
            RELMON_JUDGES="relevancy",
            RELMON_CONFIRM="off",
            RELMON_DEGRADATION_WINDOW_MINUTES=0,
        ) as system:
            url, headers = system.base_url, {"Authorization": f"Bearer {TOKEN}"}
            planted = exchange("handed", question=f"Refund for order {MARK}?", documents=[], **times)
            assert post(url, planted).status_code == 202
            database = Database(fresh_db_url)
            client = redis.Redis.from_url(redis_url)
            try:
                found = wait_for(
                    lambda: (judged_pairs(database).get("handed") or ("", {}))[0] == PairStatus.JUDGED or None,
                    timeout=90,
                    what="the exchange judged",
                )
                assert found and judged_pairs(database)["handed"][1]["relevancy"] == 4  # well scored: no alert
                body = {"bot": "helpdesk", "type": "handoff", "reply": reply}
                answer = httpx.post(f"{url}/v1/exchanges/handed/signals", json=body, headers=headers, timeout=15)
                assert answer.status_code == 202, answer.text
                # The worker records it as a channel's signals: a missed-failure alert, a golden item.
                missed = wait_for(lambda: slack.posted(ALERTS) or None, timeout=60, what="a missed-failure alert")
                assert "bot helpdesk (public)" in json.dumps(missed)
                with database.session() as session:
                    pair_id = session.scalar(select(Exchange.pair_id).where(Exchange.client_id == "handed"))
                    names = set(session.scalars(select(OutcomeSignal.name).where(OutcomeSignal.pair_id == pair_id)))
                    assert names == {ESCALATION, HUMAN_TAKEOVER}
                    assert session.scalar(select(GoldenItem.expected)) == reply
                assert MARK in table_values(database)

                before = len(slack.calls_to("chat.update"))  # the alert's redraws with its signals so far
                gone = httpx.delete(f"{url}/v1/exchanges/handed?bot=helpdesk", headers=headers, timeout=15)
                assert gone.status_code == 202, gone.text
                wait_for(lambda: MARK not in table_values(database), timeout=60, what="the exchange scrubbed")
                wait_for(lambda: MARK.encode() not in redis_blob(client), timeout=60, what="Redis without it")
                redrawn = wait_for(
                    lambda: slack.calls_to("chat.update")[before:] or None, timeout=60, what="the alert redrawn"
                )
                assert MARK not in json.dumps(redrawn) and "deleted by the bot's side" in json.dumps(redrawn)
                with database.session() as session:
                    assert session.scalar(select(func.count()).select_from(GoldenItem)) == 0
            finally:
                client.close()
                database.dispose()
