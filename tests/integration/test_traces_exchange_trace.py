"""An ingested exchange's verdict goes back onto the trace it named (`trace` on POST /v1/exchanges, or the chat span's
own ids over POST /v1/traces): Langfuse scores and OTLP evaluation events land on that trace (and span), without a
read of Slack, whatever RELMON_TRACE_ID_FROM says. Exchanges stored by the worker's own path (workers.ingesting,
store.exchanges) and judged as real rows in SQLite and PostgreSQL; the send tasks run eagerly."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

from langfuse import Langfuse

from common.exchanges import Exchange
from common.otlp_exchanges import convert
from common.runtime import Runtime
from store import exchanges as exchange_store
from store.models import Judgment
from tests.fakes.langfuse_server import FakeLangfuse
from tests.fakes.otlp_receiver import FakeOtlpReceiver
from tests.fakes.slack_server import FakeSlack
from tests.otlp_spans import TRACE, request, semconv_chat, span
from tests.trace_helpers import signalled
from workers.ingesting import rows_of
from workers.tasks.traces import send_langfuse_outcome, send_langfuse_scores, send_otlp_evaluations

TRACE_ID, SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


def exchange(**fields: object) -> Exchange:
    return Exchange.model_validate(
        {
            "id": "ex-1",
            "bot": "helpdesk",
            "conversation_id": "conv-1",
            "turn": 0,
            "question": "How do I reset my password?",
            "answer": "Our office is open 9 to 5.",
            "asked_at": "2026-12-07T08:00:00Z",
            "answered_at": "2026-12-07T08:00:02Z",
            "visibility": "dm",
            **fields,
        }
    )


def stored_and_judged(runtime: Runtime, ingested: Exchange) -> int:
    """The exchange stored as the worker stores it, and its pair judged 1 out of 4: the judgment's id."""
    row, pair = rows_of(ingested, runtime.settings)
    with runtime.db.session() as session:
        stored = exchange_store.record(session, row, pair)
        judgment = Judgment(
            pair_id=stored.pair_id,
            judge="relevancy",
            status="ok",
            score=1,
            max_score=4,
            normalized_score=0.25,
            reasoning="The answer talks about opening hours, not passwords.",
            model="test-model",
            created_at=datetime.now(UTC),
        )
        session.add(judgment)
        session.flush()
        return judgment.id


def test_a_verdict_goes_onto_the_trace_and_span_the_exchange_named_without_reading_slack(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    """Even where the trace id is read from the messages' metadata: the exchange's own trace wins, unread."""
    with FakeSlack() as slack, FakeOtlpReceiver() as otlp:
        runtime = runtime_on(langfuse.url, slack.api_url, trace_id_from="metadata", otlp_endpoint=otlp.url)
        judgment_id = stored_and_judged(
            runtime,
            exchange(
                slack={"channel": "C0SUPPORT", "ts": "1765094400.000100"},
                trace={"trace_id": TRACE_ID, "span_id": SPAN_ID},
            ),
        )
        assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"
        pair_id = signalled(runtime, judgment_id)
        assert send_langfuse_outcome.apply(args=[pair_id, "reask"]).get() == "sent"
        records = otlp.log_records()
        reads = [call for call in slack.calls if call[0].startswith("conversations.")]
    stored = langfuse.stored()
    assert stored[f"relmon-{judgment_id}-score"]["traceId"] == TRACE_ID
    assert {score["traceId"] for score in stored.values()} == {TRACE_ID}  # the outcome signal's too
    assert records and {(trace, span) for trace, span, _, _ in records} == {(TRACE_ID, SPAN_ID)}
    assert reads == []


def test_without_a_trace_an_exchange_in_slack_keeps_the_derived_trace(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    runtime = runtime_on(langfuse.url)
    judgment_id = stored_and_judged(runtime, exchange(slack={"channel": "C0SUPPORT", "ts": "1765094400.000100"}))
    assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
    derived = Langfuse.create_trace_id(seed="C0SUPPORT:1765094400.000100")
    assert langfuse.stored()[f"relmon-{judgment_id}-score"]["traceId"] == derived != TRACE_ID


def test_an_otlp_ingested_spans_verdict_lands_on_its_own_trace_and_span(
    langfuse: FakeLangfuse, runtime_on: Callable[..., Runtime]
) -> None:
    [ingested] = convert(request(span("chat gpt-4o-mini", semconv_chat(), span_id=0xAB))).exchanges
    with FakeOtlpReceiver() as otlp:
        runtime = runtime_on(langfuse.url, otlp_endpoint=otlp.url)
        judgment_id = stored_and_judged(runtime, ingested)
        assert send_langfuse_scores.apply(args=[judgment_id]).get() == "sent"
        assert send_otlp_evaluations.apply(args=[judgment_id]).get() == "sent"
        records = otlp.log_records()
    assert langfuse.stored()[f"relmon-{judgment_id}-score"]["traceId"] == TRACE.hex()
    assert records and {(trace, span) for trace, span, _, _ in records} == {(TRACE.hex(), "00000000000000ab")}
