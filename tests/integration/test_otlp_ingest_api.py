"""`POST /v1/traces` over real HTTP to the bot's WSGI app served in this process (tests.bot_harness: its tasks run
inline, on real Redis and databases). The sender is a bot as bots are instrumented (tests/otel_app.py in a process
of its own): the real openai SDK calling the fake OpenAI server, traced by opentelemetry-instrumentation-openai-v2
or openinference-instrumentation-openai, exported by the SDK's OTLP/HTTP exporter. What relmon stores is what the
same exchange POSTed to /v1/exchanges becomes. The conversion's many shapes: tests/unit/test_otlp_exchanges.py."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import httpx
import pytest
from google.protobuf import json_format
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from sqlalchemy import func, select

from bot.publishing import EXCHANGES_PER_TASK
from common import task_names, task_notes
from common.otlp_exchanges import convert
from store.exchange_models import Exchange
from store.models import Pair, PairSource, PairStatus
from tests.bot_harness import BotServer, redis_calls, redis_calls_since
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.integration.test_ingest_api import noted_calls, spooled
from tests.otel_app import run_app
from tests.otlp_spans import TRACE, chat_request, http_span, request, semconv_chat, span
from tests.processes import wait_for
from tests.services import RedisProcess
from workers.tasks.ingest import ingest_exchanges

pytestmark = pytest.mark.slow

TOKEN = "otlp-token"
DOCUMENTS = [{"text": "Passwords are reset under Settings > Security.", "id": "kb-7", "source": "kb/security.md"}]


def chat_batch(count: int) -> ExportTraceServiceRequest:
    """`count` chat spans of `count` traces (each its own conversation), an HTTP span between each two."""
    spans = []
    for n in range(count):
        chat = span("chat", semconv_chat(f"Question {n}?", f"Answer {n}."), span_id=2 * n + 1, trace_id=trace(n))
        other = http_span(2 * n + 2)
        other.trace_id = trace(n)
        spans += [chat, other]
    return request(*spans)


def trace(n: int) -> bytes:
    return (n + 1).to_bytes(16, "big")


def stored(bot) -> list[tuple[Exchange, Pair]]:
    with bot.runtime.db.session() as session:
        rows = session.execute(select(Exchange, Pair).join(Pair, Pair.id == Exchange.pair_id).order_by(Exchange.turn))
        return [(exchange, pair) for exchange, pair in rows.all()]


@pytest.fixture
def slack() -> FakeSlack:
    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def llm() -> FakeOpenAI:
    with FakeOpenAI() as fake:
        yield fake


@pytest.mark.parametrize("instrumentation", ["openai-v2", "openinference"])
def test_an_instrumented_bots_chat_spans_are_stored_as_exchanges(
    settings_for, slack: FakeSlack, llm: FakeOpenAI, instrumentation: str
) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)
    questions = ("Hello", "How do I reset my password?")
    with BotServer(settings) as bot:
        documents = DOCUMENTS if instrumentation == "openinference" else None
        traces = run_app(bot.base_url, llm.base_url, TOKEN, instrumentation, *questions, documents=documents)
        rows = stored(bot)
    assert len(rows) == 2, [row[0].client_id for row in rows]
    (first, first_pair), (second, pair) = rows
    assert first.client_id.startswith(f"otlp-{traces[0]}-") and second.client_id.startswith(f"otlp-{traces[1]}-")
    # Its verdict goes back onto the chat span it came from (workers.trace_sending).
    assert (second.trace_id, f"otlp-{second.trace_id}-{second.span_id}") == (traces[1], second.client_id)
    assert (second.bot, second.bot_version, second.turn, second.visibility) == ("helpdesk", "2.3.1", 1, "private")
    assert second.conversation_id == traces[1]  # no gen_ai.conversation.id: the trace is the conversation
    assert (pair.source, pair.status, pair.channel_is_private) == (PairSource.INGEST, PairStatus.PENDING, True)
    assert pair.question_text == "How do I reset my password?"
    assert pair.answer_text == first_pair.answer_text == "I am a fake language model."
    assert pair.context_text == "[customer] Hello\n[bot] I am a fake language model."
    assert second.answered_at >= second.asked_at
    if documents:
        assert second.documents == [{"text": DOCUMENTS[0]["text"], "source": "kb/security.md", "id": "kb-7"}]
        assert "kb/security.md" in pair.reference_text
    else:
        assert not second.documents


def test_a_resent_batch_is_stored_once_and_bad_bodies_get_400(settings_for, slack: FakeSlack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)
    request = chat_request()  # a chat span and an HTTP span
    protobuf = request.SerializeToString()
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-protobuf"}
    with BotServer(settings) as bot:
        url = bot.base_url + "/v1/traces"
        for _ in range(2):
            answer = httpx.post(url, content=protobuf, headers=headers, timeout=10)
            assert answer.status_code == 200, answer.content
            assert answer.headers["content-type"] == "application/x-protobuf"
            parsed = ExportTraceServiceResponse.FromString(answer.content)
            assert not parsed.HasField("partial_success")
        with bot.runtime.db.session() as session:
            assert session.scalar(select(func.count()).select_from(Exchange)) == 1
        for body, content_type in ((b"\x0a\xff\xff", "application/x-protobuf"), (b"{nope", "application/json")):
            refused = httpx.post(url, content=body, headers={**headers, "Content-Type": content_type}, timeout=10)
            assert refused.status_code == 400
        assert httpx.post(url, content=protobuf, headers={**headers, "Authorization": "Bearer x"}).status_code == 401
        plain = {**headers, "Content-Type": "text/plain"}
        assert httpx.post(url, content=protobuf, headers=plain).status_code == 415
        assert ExportTraceServiceRequest.FromString(protobuf) == request


def test_a_batch_of_chat_spans_is_handed_on_in_a_few_noted_tasks_and_stored_once(settings_for, slack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)
    count = EXCHANGES_PER_TASK + 50
    batch = chat_batch(count)
    batch.resource_spans[0].scope_spans[0].spans.append(batch.resource_spans[0].scope_spans[0].spans[0])  # twice
    body = batch.SerializeToString()
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-protobuf"}
    with BotServer(settings) as bot:
        url, client = bot.base_url + "/v1/traces", bot.runtime.redis
        with bot.worker.paused():  # sent, not run: what the hand-off left in Redis
            before = redis_calls(client)
            answer = httpx.post(url, content=body, headers=headers, timeout=30)
            made = redis_calls_since(client, before)
            assert answer.status_code == 200, answer.content
            # 150 exchanges: two tasks (100 and 50), noted together, one message each (before: 150 of each).
            assert (made.get("hsetnx"), made.get("zadd"), made.get("lpush")) == (2, 2, 2), made
            calls = noted_calls(client)
            assert {call.task for call in calls} == {task_names.INGEST_EXCHANGES}
            ids = sorted(item["id"] for call in calls for item in call.kwargs["exchanges"])
            assert len(ids) == len(set(ids)) == count  # the span sent twice in the request: handed on once
            # The same export again (the SDK's retry): the same calls, the same notes.
            assert httpx.post(url, content=body, headers=headers, timeout=30).status_code == 200
            assert sorted(call.id for call in noted_calls(client)) == sorted(call.id for call in calls)
            for call in calls + calls:  # each message run twice
                ingest_exchanges.apply(kwargs=call.kwargs, task_id=call.id, throw=True)
        assert len(stored(bot)) == count
        assert not client.hlen(task_notes.KEY)


def otlp_json(request: ExportTraceServiceRequest) -> bytes:
    """The request as an OTLP exporter writes JSON (hex ids, int64s as strings)."""
    data = json_format.MessageToDict(request)
    for resource_spans in data["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for item in scope_spans["spans"]:
                item["traceId"] = base64.b64decode(item["traceId"]).hex()
                item["spanId"] = base64.b64decode(item["spanId"]).hex()
    return json.dumps(data).encode()


def row_of(bot, client_id: str) -> tuple[dict, dict]:
    """An exchange's stored fields and its pair's, ids left out."""
    with bot.runtime.db.session() as session:
        exchange = session.execute(select(Exchange).where(Exchange.client_id == client_id)).scalar_one()
        pair = session.get(Pair, exchange.pair_id)
        skip = {"id", "pair_id", "client_id", "created_at", "updated_at"}
        return tuple(
            {c.key: getattr(row, c.key) for c in row.__table__.columns if c.key not in skip} for row in (exchange, pair)
        )


def test_json_gzip_and_partial_success_and_a_span_stored_as_its_posted_exchange(settings_for, slack) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN)
    no_content = span("chat", {"gen_ai.operation.name": "chat"}, span_id=5)
    batch = request(span("chat", semconv_chat(), span_id=1), http_span(), no_content)
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json", "Content-Encoding": "gzip"}
    with BotServer(settings) as bot:
        answer = httpx.post(bot.base_url + "/v1/traces", content=gzip.compress(otlp_json(batch)), headers=headers)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"] == "application/json"
        partial = answer.json()["partialSuccess"]
        assert partial["rejectedSpans"] == "1"
        assert "no question text" in partial["errorMessage"] and "CAPTURE_MESSAGE_CONTENT" in partial["errorMessage"]
        # The same exchange POSTed to /v1/exchanges (another id) is stored exactly as the span was.
        posted = {**convert(batch).exchanges[0].to_task(), "id": "posted-1"}
        sent = httpx.post(bot.base_url + "/v1/exchanges", json=posted, headers={"Authorization": f"Bearer {TOKEN}"})
        assert sent.status_code == 202, sent.text
        assert row_of(bot, "posted-1") == row_of(bot, f"otlp-{TRACE.hex()}-0000000000000001")


def test_refusals_share_the_ingest_apis_limits(settings_for, slack, tmp_path: Path) -> None:
    body = chat_request().SerializeToString()
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-protobuf"}
    with BotServer(settings_for(slack_api_url=slack.api_url)) as bot:  # no tokens: off
        off = httpx.post(bot.base_url + "/v1/traces", content=body, headers=headers)
        assert off.status_code == 404
        assert "RELMON_INGEST_TOKENS" in Status.FromString(off.content).message
    settings = settings_for(
        slack_api_url=slack.api_url, ingest_tokens=TOKEN, ingest_max_bytes=10_000, ingest_per_minute=3
    )
    with BotServer(settings) as bot:
        url = bot.base_url + "/v1/traces"
        big = request(*[span("GET", {"http.route": "/x" * 100}, span_id=n + 1) for n in range(60)]).SerializeToString()
        assert len(big) > 10_000
        too_big = httpx.post(url, content=big, headers=headers)
        assert too_big.status_code == 413
        assert "RELMON_INGEST_MAX_BYTES" in Status.FromString(too_big.content).message
        assert httpx.get(url, headers=headers).status_code == 405
        statuses = [httpx.post(url, content=body, headers=headers).status_code for _ in range(6)]
        assert statuses[:2] == [200, 200] and 429 in statuses  # 3 a minute for the token, the 413 counted


def test_with_redis_down_spans_are_spooled_then_stored(
    redis_server: RedisProcess, settings_for, slack: FakeSlack, tmp_path: Path
) -> None:
    settings = settings_for(slack_api_url=slack.api_url, ingest_tokens=TOKEN, data_dir=tmp_path / "data")
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-protobuf"}
    with BotServer(settings) as bot:
        redis_server.stop()
        try:
            for body in (chat_request(), chat_batch(30), chat_batch(30)):  # the last, the exporter's retry
                answer = httpx.post(bot.base_url + "/v1/traces", content=body.SerializeToString(), headers=headers)
                assert answer.status_code == 200, answer.content
            assert spooled(tmp_path / "data") == 3  # a request's exchanges: one entry
        finally:
            redis_server.start()
        wait_for(lambda: len(stored(bot)) == 31, timeout=30, what="the spooled spans stored")
        wait_for(lambda: not bot.runtime.redis.hlen(task_notes.KEY), timeout=10, what="their notes dropped")
        # The spool hands its entries on one at a time: what it stored (the retry is the same spans) and the notes
        # dropped so far are not yet all it holds handed on.
        wait_for(lambda: spooled(tmp_path / "data") == 0, timeout=30, what="the spool handed on")
        wait_for(lambda: not bot.runtime.redis.hlen(task_notes.KEY), timeout=10, what="the last notes dropped")
        assert len(stored(bot)) == 31  # the retry's spans stored once
