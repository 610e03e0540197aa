"""`POST /v1/traces` over real HTTP to the bot's WSGI app served in this process (tests.bot_harness: its tasks run
inline, on real Redis and databases). The sender is a bot as bots are instrumented (tests/otel_app.py in a process
of its own): the real openai SDK calling the fake OpenAI server, traced by opentelemetry-instrumentation-openai-v2
or openinference-instrumentation-openai, exported by the SDK's OTLP/HTTP exporter. What relmon stores is what the
same exchange POSTed to /v1/exchanges becomes. The conversion's many shapes: tests/unit/test_otlp_exchanges.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from sqlalchemy import func, select

from store.exchange_models import Exchange
from store.models import Pair, PairSource, PairStatus
from tests.bot_harness import BotServer
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.slack_server import FakeSlack
from tests.otlp_spans import chat_request

pytestmark = pytest.mark.slow

TOKEN = "otlp-token"
ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [{"text": "Passwords are reset under Settings > Security.", "id": "kb-7", "source": "kb/security.md"}]


def run_app(bot_url: str, openai_url: str, instrumentation: str, *questions: str, documents: list | None = None):
    """tests/otel_app.py exporting to the bot: the trace ids of its answers."""
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OTEL_")},
        "PYTHONPATH": str(ROOT),
        "OTEL_SERVICE_NAME": "helpdesk",
        "OTEL_RESOURCE_ATTRIBUTES": "service.version=2.3.1",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{bot_url}/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_HEADERS": f"Authorization=Bearer%20{TOKEN}",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
    }
    command = [sys.executable, "-m", "tests.otel_app", "--instrumentation", instrumentation, "--openai-url", openai_url]
    if documents:
        command += ["--documents", json.dumps(documents)]
    done = subprocess.run([*command, *questions], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


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
        traces = run_app(bot.base_url, llm.base_url, instrumentation, *questions, documents=documents)
        rows = stored(bot)
    assert len(rows) == 2, [row[0].client_id for row in rows]
    (first, first_pair), (second, pair) = rows
    assert first.client_id.startswith(f"otlp-{traces[0]}-") and second.client_id.startswith(f"otlp-{traces[1]}-")
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
