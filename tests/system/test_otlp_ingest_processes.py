"""`POST /v1/traces` end to end with relmon's own processes: a bot instrumented with
openinference-instrumentation-openai (tests/otel_app.py, the real openai SDK calling the fake LLM, a RETRIEVER span
before it) exports its spans over OTLP/HTTP to `relmon bot` (gunicorn); a `relmon worker` stores the exchange and
judges it, the retrieved document read by the grounded judge as its source. Then a batch of 120 chat spans, exported
twice, is stored once (two `ingest_exchanges` tasks, run twice). In detail: tests/integration/test_otlp_ingest_api.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from sqlalchemy import func, select

from store.db import Database
from store.exchange_models import Exchange
from store.models import Judgment, JudgmentStatus, Pair, PairSource, PairStatus
from tests.integration.test_otlp_ingest_api import chat_batch
from tests.otel_app import run_app
from tests.processes import wait_for
from tests.running_system import relmon_processes

pytestmark = pytest.mark.slow

TOKEN = "otlp-system-token"
DOCUMENT = "Refunds are issued within five days of a return."


def first_id(database: Database) -> str | None:
    with database.session() as session:
        return session.scalars(select(Exchange.client_id)).first()


def exchanges(database: Database) -> int:
    with database.session() as session:
        return session.scalar(select(func.count()).select_from(Exchange))


def judged(database: Database, client_id: str) -> tuple[Exchange, Pair, dict[str, float | None]] | None:
    with database.session() as session:
        found = session.execute(select(Exchange, Pair).join(Pair).where(Exchange.client_id == client_id)).first()
        if found is None or found[1].status != PairStatus.JUDGED:
            return None
        judgments = session.execute(select(Judgment).where(Judgment.pair_id == found[1].id)).scalars()
        return found[0], found[1], {j.judge: j.score for j in judgments if j.status == JudgmentStatus.OK}


def test_an_instrumented_bots_trace_is_stored_and_judged(redis_url: str, fresh_db_url: str, tmp_path: Path) -> None:
    with relmon_processes(
        redis_url=redis_url,
        database_url=fresh_db_url,
        directory=tmp_path,
        RELMON_INGEST_TOKENS=TOKEN,
        RELMON_JUDGES="relevancy,grounded",
        RELMON_CONFIRM="off",
    ) as system:
        documents = [{"text": DOCUMENT, "id": "kb-12", "source": "kb/refunds.md"}]
        traces = run_app(
            system.base_url,
            system.llm.base_url,
            TOKEN,
            "openinference",
            "Can I get a refund for order 4471?",
            documents=documents,
            resource="service.version=2.3.1,relmon.visibility=public",
        )
        database = Database(fresh_db_url)
        try:
            client_id = wait_for(lambda: first_id(database), timeout=60, what="the span stored")
            assert client_id.startswith(f"otlp-{traces[0]}-")
            exchange, pair, scores = wait_for(lambda: judged(database, client_id), timeout=90, what="it judged")
            assert (exchange.bot, exchange.bot_version, exchange.visibility) == ("helpdesk", "2.3.1", "public")
            assert (pair.source, pair.question_text) == (PairSource.INGEST, "Can I get a refund for order 4471?")
            assert set(scores) == {"relevancy", "grounded"}  # the RETRIEVER span's document: a grounded verdict
            prompts = [json.dumps(request) for request in system.llm.requests]
            assert any(DOCUMENT in prompt and "Answer 2" in prompt for prompt in prompts)

            body = chat_batch(120).SerializeToString()
            headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/x-protobuf"}
            for _ in range(2):  # the exporter's retry
                answer = httpx.post(system.base_url + "/v1/traces", content=body, headers=headers, timeout=30)
                assert answer.status_code == 200, answer.content
            wait_for(lambda: exchanges(database) == 121 or None, timeout=60, what="the batch's exchanges stored")
        finally:
            database.dispose()
