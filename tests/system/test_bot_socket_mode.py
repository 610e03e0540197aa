"""End to end over Socket Mode: `relmon bot` with SLACK_APP_TOKEN (and no signing secret) opens its connection
through `apps.connections.open` on the fake Slack, receives a question and an answer as Socket Mode envelopes
from the fake websocket endpoint, acknowledges each one once it is captured, reconnects when Slack asks it to,
skips a redelivery, takes an exchange on its --port's ingest API (no public URL for Slack, but the bot's side
reaches relmon from its own network), and a real `relmon worker` started afterwards judges both pairs."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
import pytest
import redis
from sqlalchemy import select

from common.celery_app import QUEUE_JUDGE
from store.db import Database
from store.exchange_models import Exchange
from store.models import Judgment, Pair, PairSource, PairStatus
from tests import slack_requests as sr
from tests.fakes.slack_server import FakeSlack
from tests.fakes.socket_mode_server import FakeSocketMode
from tests.processes import RelmonProcess, WaitTimeout, relmon_env, wait_for
from tests.running_system import relmon_processes
from tests.services import free_port
from tests.system.test_ingest_processes import TOKEN, exchange, post
from workers.judging.queued import note_of

pytestmark = pytest.mark.slow

APP_TOKEN = "xapp-test-token"
ACK_TIMEOUT = 60.0  # seconds; generous: the machine may be busy with other test runs


def start_socket_mode_bot(
    env: dict[str, str], socket_mode: FakeSocketMode, log_dir: Path, port: int | None = None
) -> RelmonProcess:
    """A `relmon bot` connected to the fake Socket Mode endpoint (fails early, with its output, if it exits). Its
    /healthz listens on 127.0.0.1:`port` (a free one by default)."""
    port = port or free_port()
    bot = RelmonProcess("bot", "--host", "127.0.0.1", "--port", str(port), env=env, log_dir=log_dir).start()
    deadline = time.monotonic() + 60
    try:
        while not socket_mode.wait_for_connection(timeout=0.5):
            if not bot.running():
                raise WaitTimeout(f"relmon bot exited ({bot.process.returncode}):\n{bot.tail()}")
            if time.monotonic() > deadline:
                raise WaitTimeout(f"relmon bot did not connect over Socket Mode within 60s:\n{bot.tail()}")
    except BaseException:
        bot.stop()
        raise
    return bot


def deliver(socket_mode: FakeSocketMode, bot: RelmonProcess, body: dict, **retry: object) -> None:
    """Push one Events API body as an envelope and wait for the bot's acknowledgement of it."""
    envelope_id = socket_mode.push_event(body, **retry)
    ack = socket_mode.wait_for_ack(envelope_id, timeout=ACK_TIMEOUT)
    assert ack is not None, f"envelope {envelope_id} was never acknowledged:\n{bot.tail()}"
    assert ack == {"envelope_id": envelope_id}  # no response payload for Events API envelopes


def test_socket_mode_events_are_judged_once(redis_url: str, db_url: str, tmp_path: Path) -> None:
    with (
        FakeSocketMode() as socket_mode,
        relmon_processes(
            redis_url=redis_url,
            database_url=db_url,
            directory=tmp_path,
            start=(),  # the bot once it has no signing secret; the worker later
            slack_options={"socket_mode_url": socket_mode.url},
            SLACK_APP_TOKEN=APP_TOKEN,
            RELMON_SETTLE_SECONDS="0.5",
            RELMON_INGEST_TOKENS=TOKEN,
            RELMON_CONFIRM="off",
        ) as system,
    ):
        slack, env = system.slack, system.env
        del env["SLACK_SIGNING_SECRET"]  # Socket Mode needs no signing secret (Settings.missing)

        database = Database(db_url)
        port = free_port()
        bot = start_socket_mode_bot(env, socket_mode, tmp_path, port=port)
        base_url = f"http://127.0.0.1:{port}"
        try:
            # The connection URL came from apps.connections.open (which the fake only answers for xapp- tokens).
            assert slack.calls_to("apps.connections.open")
            assert socket_mode.paths[0].startswith("/link/?ticket=test-ticket")
            # The fake registers the connection a moment before it sends hello.
            assert wait_for(lambda: socket_mode.sent, timeout=10, what="hello")[0]["type"] == "hello"

            question = sr.human_message("C_SUPPORT", sr.next_ts(), "How do I reset my password?")
            answer = sr.bot_message(
                "C_SUPPORT", sr.next_ts(), "Open Settings > Security > Reset password.", thread_ts=question["ts"]
            )
            answer_body = sr.envelope(answer)
            deliver(socket_mode, bot, sr.envelope(question))
            deliver(socket_mode, bot, answer_body)

            # Acknowledged only once handed on (process_before_response): each event waits as a capture task in
            # Redis (bot.publishing). No worker runs yet: nothing is logged, no pair is stored.
            assert _capture_tasks(redis_url) == 2
            assert not redis.Redis.from_url(redis_url).exists(f"relmon:msg:C_SUPPORT:{question['ts']}")
            assert _pairs(database) == []

            # Slack refreshes connections: after its `disconnect` notice the bot opens a new one (a new URL from
            # apps.connections.open), and the next envelope arrives over that.
            socket_mode.disconnect("refresh_requested")
            assert socket_mode.wait_for_connection(timeout=ACK_TIMEOUT, count=2), bot.tail()
            wait_for(lambda: len(slack.calls_to("apps.connections.open")) >= 2, timeout=10, what="a new URL")

            # Slack redelivers the same event (same event_id) after a missed ack: acknowledged, not handed on again.
            deliver(socket_mode, bot, answer_body, retry_attempt=1, retry_reason="timeout")
            assert _capture_tasks(redis_url) == 2
            assert len(socket_mode.acks) == 3
            assert bot.running()

            # The ingest API on --port: the same routes, tokens and refusals as over HTTP (bot.service_wsgi).
            assert post(base_url, exchange("sock-1", documents=[])).status_code == 202
            assert post(base_url, exchange("sock-2"), token="wrong").status_code == 401
            assert post(base_url, exchange("sock-3", turn="one")).status_code == 400
            traces = httpx.post(f"{base_url}/v1/traces", content=b"{}", timeout=10)
            assert traces.status_code == 401 and traces.headers["WWW-Authenticate"] == "Bearer"

            with system.start("worker"):

                def both_judged() -> list | None:
                    pairs = _pairs(database)
                    return pairs if len(pairs) == 2 and all(s == PairStatus.JUDGED for _, s, _ in pairs) else None

                wait_for(both_judged, timeout=90, what="the captured pair and the exchange judged")
            with database.session() as session:
                pair = session.execute(select(Pair).where(Pair.source == PairSource.CAPTURE)).scalar_one()
                judgments = session.execute(select(Judgment.pair_id, Judgment.judge, Judgment.status)).all()
                ingested = session.execute(select(Exchange.client_id, Exchange.pair_id)).all()
            assert [client_id for client_id, _ in ingested] == ["sock-1"]  # the refused ones were never kept
            assert sorted(judgments) == sorted([(pair.id, "relevancy", "ok"), (ingested[0][1], "relevancy", "ok")])
            assert (pair.question_text, pair.answer_text) == (question["text"], answer["text"])
            assert pair.question_ts == question["ts"]
            assert bot.running(), bot.tail()
        finally:
            bot.stop()
            database.dispose()


def _capture_tasks(redis_url: str) -> int:
    """The bot's capture_event messages waiting on the judging queue."""
    client = redis.Redis.from_url(redis_url)
    try:
        return sum(1 for raw in client.lrange(QUEUE_JUDGE, 0, -1) if note_of(json.loads(raw)) is not None)
    finally:
        client.close()


def _pairs(database: Database) -> list[tuple[str, str, int]]:
    with database.session() as session:
        rows = session.execute(select(Pair.answer_ts, Pair.status, Pair.version).order_by(Pair.id)).all()
    return [tuple(row) for row in rows]


def test_socket_mode_answers_healthz_on_its_port_while_connected(redis_url: str, db_url: str, tmp_path: Path) -> None:
    """No Slack endpoint over HTTP in Socket Mode, but the container health check's GET /healthz on --port answers:
    200 while Redis answers and the Socket Mode connection is up, 503 once the connection is gone."""
    socket_mode = FakeSocketMode().start()
    with FakeSlack(socket_mode_url=socket_mode.url) as slack:
        env = relmon_env(
            redis_url=redis_url,
            database_url=db_url,
            slack_api_url=slack.api_url,
            data_dir=tmp_path / "data",
            SLACK_APP_TOKEN=APP_TOKEN,
        )
        del env["SLACK_SIGNING_SECRET"]
        port = free_port()
        health = f"http://127.0.0.1:{port}/healthz"
        bot = start_socket_mode_bot(env, socket_mode, tmp_path, port=port)
        try:
            response = bot.wait_http(health, timeout=30)
            assert response.json() == {"status": "ok", "checks": {"redis": "ok", "socket_mode": "ok"}}
            assert httpx.post(f"http://127.0.0.1:{port}/slack/events", content=b"{}", timeout=5).status_code in (
                404,
                501,
            )  # no Slack endpoint over HTTP
            assert httpx.get(f"http://127.0.0.1:{port}/slack/events", timeout=5).status_code == 404

            socket_mode.stop()  # Slack's end goes away: reconnecting fails, the check says so
            down = wait_for(
                lambda: (r := httpx.get(health, timeout=5)).status_code == 503 and r,
                timeout=30,
                what="/healthz to answer 503",
            )
            assert down.json()["checks"] == {"redis": "ok", "socket_mode": "error: not connected"}
            assert bot.running(), bot.tail()
        finally:
            bot.stop()
            socket_mode.stop()
