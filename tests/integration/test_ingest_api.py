"""The ingest API over real HTTP to the bot's WSGI app served in this process (tests.bot_harness: its tasks run
inline, on real Redis and real databases): what is accepted is stored once as a pending pair with its exchange,
what is refused gets its 4xx and leaves nothing behind, tokens and their rate, and an outage of Redis bridged by
the spool. With relmon's own processes (judged, alerted): tests/system/test_ingest_processes.py."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy import func, select

from common import task_names, task_notes
from common.celery_app import QUEUE_JUDGE
from common.exchanges import MAX_BATCH
from store import exchanges as exchange_store
from store.db import Database
from store.exchange_models import Exchange
from store.models import Pair, PairSource, PairStatus
from store.retention import delete_pairs_batch
from tests.bot_harness import BotServer, redis_calls, redis_calls_since
from tests.fakes.slack_server import FakeSlack
from tests.processes import wait_for
from tests.services import RedisProcess
from workers.ingesting import ingest_all
from workers.judging.queued import queued_notes
from workers.tasks.ingest import ingest_exchanges

pytestmark = pytest.mark.slow

TOKEN, ROTATED = "ingest-token-one", "ingest-token-two"


def exchange(id: str = "ex-1", **fields: object) -> dict:
    return {
        "id": id,
        "bot": "helpdesk",
        "conversation_id": "conv-1",
        "turn": 1,
        "question": "How do I reset my password?",
        "answer": "Open Settings > Security > Reset.",
        "earlier_turns": [{"role": "user", "text": "Hello"}, {"role": "assistant", "text": "Hi! How can I help?"}],
        "documents": [{"text": "Passwords are reset under Settings > Security.", "source": "kb/security.md"}],
        "bot_version": "1.4.0",
        "asked_at": "2026-12-07T08:00:00Z",
        "answered_at": "2026-12-07T08:00:02Z",
        "visibility": "dm",
        "asker": "U0ASKER",
        **fields,
    }


def post(base_url: str, body: object, token: str | None = TOKEN, **headers: str) -> httpx.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    sent = {"Content-Type": "application/json", **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return httpx.post(base_url + "/v1/exchanges", content=data, headers=sent, timeout=10)


def noted_calls(client: redis.Redis) -> list[task_notes.Call]:
    return [task_notes.Call.from_json(raw) for raw in client.hgetall(task_notes.KEY).values()]


def spooled(data_dir: Path) -> int:
    """The entries waiting in the bot's spool files (bot.spool)."""
    total = 0
    for path in (data_dir / "spool").glob("bot-*.sqlite3"):
        with sqlite3.connect(path) as connection:
            total += connection.execute("SELECT count(*) FROM entries").fetchone()[0]
    return total


def counts(database: Database) -> tuple[int, int]:
    with database.session() as session:
        return (
            session.scalar(select(func.count()).select_from(Pair)),
            session.scalar(select(func.count()).select_from(Exchange)),
        )


@pytest.fixture
def slack() -> FakeSlack:
    with FakeSlack() as fake:
        yield fake


def test_accepted_exchanges_are_stored_once_as_pending_pairs(settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=f"{TOKEN},{ROTATED}")
    with BotServer(settings) as bot:
        single = post(bot.base_url, exchange(trace={"trace_id": "4bf92f3577b34da6a3ce929d0e0e4736"}))
        assert single.status_code == 202, single.text
        assert single.json() == {"accepted": 1, "ids": ["ex-1"]}
        batch = {"exchanges": [exchange(f"b{n}", turn=n, visibility="public") for n in range(3)]}
        assert post(bot.base_url, batch, ROTATED).status_code == 202  # either token of a rotation
        # The same ids again (a client's retry): accepted, stored once.
        assert post(bot.base_url, exchange()).status_code == 202
        assert post(bot.base_url, batch).status_code == 202
        database = bot.runtime.db
        assert counts(database) == (4, 4)
        with database.session() as session:
            row = session.execute(select(Exchange).where(Exchange.client_id == "ex-1")).scalar_one()
            pair = session.get(Pair, row.pair_id)
            assert (row.bot, row.conversation_id, row.turn, row.visibility, row.asker, row.bot_version) == (
                "helpdesk", "conv-1", 1, "dm", "U0ASKER", "1.4.0",
            )  # fmt: skip
            assert (row.trace_id, row.span_id) == ("4bf92f3577b34da6a3ce929d0e0e4736", None)  # its verdicts' trace
            assert row.documents == [
                {"text": "Passwords are reset under Settings > Security.", "source": "kb/security.md"}
            ]
            assert (pair.source, pair.status, pair.channel_id, pair.channel_is_private) == (
                PairSource.INGEST, PairStatus.PENDING, None, True,
            )  # fmt: skip
            assert pair.question_text == "How do I reset my password?"
            assert pair.context_text == "[customer] Hello\n[bot] Hi! How can I help?"
            assert "kb/security.md" in pair.reference_text  # the grounded judge's source
        # Every task that carried them ended: no note is left for the orphan check.
        assert not bot.runtime.redis.hlen(task_notes.KEY)


def test_a_batch_is_one_noted_task_and_each_id_is_stored_once(settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)
    batch = {"exchanges": [exchange(f"n{n}", turn=n) for n in range(MAX_BATCH - 1)] + [exchange("n0", turn=99)]}
    with BotServer(settings) as bot:
        client = bot.runtime.redis
        with bot.worker.paused():  # sent, not run: what the hand-off left in Redis
            before = redis_calls(client)
            answer = post(bot.base_url, batch)
            made = redis_calls_since(client, before)
            assert answer.status_code == 202, answer.text
            assert answer.json()["accepted"] == MAX_BATCH
            # A hundred exchanges, one note and one message (before: a note and a message each).
            assert (made.get("hsetnx"), made.get("lpush")) == (1, 1), made
            [call] = noted_calls(client)
            assert call.task == task_names.INGEST_EXCHANGES
            ids = [item["id"] for item in call.kwargs["exchanges"]]
            assert ids == [f"n{n}" for n in range(MAX_BATCH - 1)]  # n0 twice in the batch: handed on once, the first
            assert queued_notes(client, QUEUE_JUDGE) == {call.id}  # the orphan check finds its message: not resent
            # The same batch again (a client's retry): the same call, the same note.
            assert post(bot.base_url, batch).status_code == 202
            assert [c.id for c in noted_calls(client)] == [call.id]
            assert counts(bot.runtime.db) == (0, 0)
            # Its message run twice (the retry's, the first one's): stored once.
            for _ in range(2):
                assert ingest_exchanges.apply(kwargs=call.kwargs, task_id=call.id, throw=True).get()
        assert counts(bot.runtime.db) == (MAX_BATCH - 1, MAX_BATCH - 1)
        assert not client.hlen(task_notes.KEY)  # the task ended: its note dropped
        with bot.runtime.db.session() as session:
            assert session.scalar(select(Exchange.turn).where(Exchange.client_id == "n0")) == 0  # the first n0
        # Across batches: a new batch holding ids stored before stores only the new one.
        again = {"exchanges": [exchange("n5"), exchange("n-new"), exchange("n7")]}
        assert post(bot.base_url, again).status_code == 202
        assert counts(bot.runtime.db) == (MAX_BATCH, MAX_BATCH)
        assert not client.hlen(task_notes.KEY)


def test_an_exchange_a_worker_cannot_store_does_not_stop_the_rest_of_its_call(settings_for, slack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)
    broken = exchange("broken", answered_at="2026-12-07T07:00:00Z")  # answered before asked: refused
    with BotServer(settings) as bot:
        done = ingest_all(bot.runtime, [exchange("fine-1"), broken, exchange("fine-2"), exchange("fine-1")])
        assert done == "duplicate: 1, failed: 1, stored: 2"
        with bot.runtime.db.session() as session:
            assert set(session.scalars(select(Exchange.client_id))) == {"fine-1", "fine-2"}


def test_each_bad_request_gets_its_4xx_and_leaves_nothing(settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN, ingest_max_bytes=20_000)
    missing = exchange()
    del missing["answer"]
    bad_batch = {"exchanges": [exchange("ok-1"), exchange("ok-2"), exchange("ok-3"), missing]}
    with BotServer(settings) as bot:
        url = bot.base_url
        refusals = {
            "no token": (post(url, exchange(), token=None), 401),
            "unknown token": (post(url, exchange(), token="guess"), 401),
            "not JSON": (post(url, b"{not json", Authorization=f"Bearer {TOKEN}"), 400),
            "not JSON content": (post(url, exchange(), **{"Content-Type": "text/plain"}), 415),
            "wrong type": (post(url, exchange(turn="one")), 400),
            "missing field": (post(url, missing), 400),
            "one bad in a batch": (post(url, bad_batch), 400),
            "giant field in a giant body": (post(url, exchange(answer="x" * 40_001)), 413),
            "giant body": (post(url, {"exchanges": [exchange(f"g{n}") for n in range(60)]}), 413),
            "too many": (post(url, {"exchanges": [{"id": str(n)} for n in range(MAX_BATCH + 1)]}), 400),
            "a list": (post(url, [exchange()]), 400),
            "NUL": (post(url, exchange(question="a\x00b")), 400),
            "lone surrogate": (post(url, b'{"id": "\\ud800"}', Authorization=f"Bearer {TOKEN}"), 400),
            "deep nesting": (post(url, b"[" * 100_00 + b"]" * 100_00), 400),
            "GET": (httpx.get(url + "/v1/exchanges", headers={"Authorization": f"Bearer {TOKEN}"}), 405),
        }
        for what, (response, status) in refusals.items():
            assert response.status_code == status, f"{what}: {response.status_code} {response.text}"
            assert response.json()["error"], what
        assert refusals["no token"][0].headers["WWW-Authenticate"] == "Bearer"
        assert refusals["missing field"][0].json()["error"] == "answer: field required"
        assert refusals["one bad in a batch"][0].json()["error"] == "exchanges[3].answer: field required"
        assert refusals["wrong type"][0].json()["error"] == "turn: input should be a valid integer"
        assert "at most 100 items" in refusals["too many"][0].json()["error"]
        assert "RELMON_INGEST_MAX_BYTES" in refusals["giant body"][0].json()["error"]
        assert counts(bot.runtime.db) == (0, 0)
        assert not bot.runtime.redis.hlen(task_notes.KEY)
    # A field over its own bound, in a body under the byte limit (1 MB by default): 400 naming it.
    with BotServer(settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)) as bot:
        long_answer = post(bot.base_url, exchange(answer="x" * 40_001))
        assert long_answer.status_code == 400
        assert long_answer.json()["error"] == "answer: string should have at most 40000 characters"
        assert counts(bot.runtime.db) == (0, 0)


def test_ingest_is_off_without_tokens(settings_for, slack: FakeSlack) -> None:
    with BotServer(settings_for(slack_api_url=slack.api_url)) as bot:
        response = post(bot.base_url, exchange())
        assert response.status_code == 404
        assert "RELMON_INGEST_TOKENS" in response.json()["error"]
        assert counts(bot.runtime.db) == (0, 0)


def test_each_token_has_its_own_rate(settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=f"{TOKEN},{ROTATED}", ingest_per_minute=3)
    with BotServer(settings) as bot:
        # Three a minute: a fourth is refused, unless the minute turned meanwhile (then within four more).
        statuses = [post(bot.base_url, exchange(f"r{n}")).status_code for n in range(8)]
        assert 429 in statuses and statuses[:3] == [202, 202, 202]
        refused = post(bot.base_url, exchange("late"))
        if refused.status_code == 429:
            assert 1 <= int(refused.headers["Retry-After"]) <= 60
            assert "3 requests a minute" in refused.json()["error"]
        assert post(bot.base_url, exchange("other"), ROTATED).status_code == 202  # the other token's own minute
        with bot.runtime.db.session() as session:
            stored = set(session.scalars(select(Exchange.client_id)))
        assert "other" in stored and len(stored) == statuses.count(202) + 1 + (refused.status_code == 202)


def test_an_exchange_naming_a_captured_answer_joins_its_pair(db_url: str) -> None:
    database = Database(db_url)
    try:
        with database.session() as session:
            captured = Pair(channel_id="C0SUPPORT", answer_ts="1765094400.000100", answer_text="Open Settings.")
            session.add(captured)
            session.flush()
            captured_id = captured.id
        row = {
            "client_id": "ex-9", "bot": "helpdesk", "conversation_id": "c", "turn": 1, "visibility": "public",
            "asker": None, "documents": None, "bot_version": None,
            "asked_at": "2026-12-07T08:00:00Z", "answered_at": "2026-12-07T08:00:01Z",
        }  # fmt: skip
        row = {
            **row,
            "asked_at": datetime.fromisoformat(row["asked_at"]),
            "answered_at": datetime.fromisoformat(row["answered_at"]),
        }
        pair = {"channel_id": "C0SUPPORT", "answer_ts": "1765094400.000100", "reference_text": "[1] kb\nText"}
        with database.session() as session:
            stored = exchange_store.record(session, row, {**pair, "question_text": "q", "answer_text": "a"})
        assert (stored.pair_id, stored.created, stored.joined) == (captured_id, True, True)
        with database.session() as session:
            again = exchange_store.record(session, row, {**pair, "question_text": "q", "answer_text": "a"})
        assert (again.pair_id, again.created, again.joined) == (captured_id, False, True)
        with database.session() as session:
            assert session.scalar(select(func.count()).select_from(Pair)) == 1
            joined = session.get(Pair, captured_id)
            assert (joined.source, joined.reference_text) == (PairSource.CAPTURE, "[1] kb\nText")
        # Retention deletes the exchange with its pair.
        with database.session() as session:
            assert delete_pairs_batch(session, datetime.now(UTC) + timedelta(days=1), 10) == 1
        assert counts(database) == (0, 0)
    finally:
        database.dispose()


def test_with_redis_down_exchanges_are_spooled_then_stored(
    redis_server: RedisProcess, redis_url: str, settings_for, slack: FakeSlack, tmp_path: Path
) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN, data_dir=tmp_path / "data")
    batch = {"exchanges": [exchange("down-1"), exchange("down-2"), exchange("down-1")]}
    with BotServer(settings) as bot:
        redis_server.stop()
        try:
            for body in (batch, batch, exchange("down-3")):  # the batch, a client's retry of it, one more
                response = post(bot.base_url, body)
                assert response.status_code == 202, response.text
            assert counts(bot.runtime.db) == (0, 0)
            assert spooled(tmp_path / "data") == 3  # a request's exchanges: one entry (fsync'd before the 202)
        finally:
            redis_server.start()
        wait_for(lambda: counts(bot.runtime.db) == (3, 3), timeout=30, what="the spooled exchanges stored")
        wait_for(lambda: not bot.runtime.redis.hlen(task_notes.KEY), timeout=10, what="their notes dropped")
        # The spool hands its entries on one at a time: what it stored (the retry is the same spans) and the notes
        # dropped so far are not yet all it holds handed on.
        wait_for(lambda: spooled(tmp_path / "data") == 0, timeout=30, what="the spool handed on")
        wait_for(lambda: not bot.runtime.redis.hlen(task_notes.KEY), timeout=10, what="the last notes dropped")
        assert counts(bot.runtime.db) == (3, 3)  # the retried batch stored once
    assert redis.Redis.from_url(redis_url).ping()
