"""common.otlp_exchanges on hand-built spans of every shape it reads (tests/otlp_spans.py): the semantic
conventions' messages, their older span events, OpenInference's flattened messages and values, retrievals, and the
spans it drops or rejects."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from common.otlp_exchanges import convert
from tests.otlp_spans import TRACE, http_span, parts, request, semconv_chat, span


def only(converted):
    assert not converted.rejected, converted.rejected
    assert len(converted.exchanges) == 1
    return converted.exchanges[0]


def test_a_semconv_chat_span_is_one_exchange_with_its_history_times_and_identity() -> None:
    attrs = semconv_chat(**{"gen_ai.conversation.id": "conv-77"})
    exchange = only(
        convert(
            request(span("chat gpt-4o-mini", attrs, span_id=0xAB), service="helpdesk", **{"service.version": "2.3.1"})
        )
    )
    assert exchange.id == f"otlp-{TRACE.hex()}-00000000000000ab"
    assert (exchange.bot, exchange.bot_version, exchange.conversation_id) == ("helpdesk", "2.3.1", "conv-77")
    assert (exchange.question, exchange.answer, exchange.turn) == ("How do I reset my password?", "Open Settings.", 1)
    assert [(t.role, t.text) for t in exchange.earlier_turns] == [("user", "Hello"), ("assistant", "Hi!")]  # no system
    assert exchange.asked_at == datetime(2026, 12, 7, 8, 15, tzinfo=UTC)
    assert exchange.answered_at == datetime(2026, 12, 7, 8, 15, 2, tzinfo=UTC)
    assert exchange.visibility == "private"  # nothing in a span says who could read it: never quoted
    assert (exchange.trace.trace_id, exchange.trace.span_id) == (TRACE.hex(), "00000000000000ab")  # its verdict's


def test_the_same_span_converts_to_the_same_exchange_and_the_trace_is_the_default_conversation() -> None:
    batch = request(span("chat", semconv_chat()))
    first, again = only(convert(batch)), only(convert(batch))
    assert first == again
    assert first.conversation_id == TRACE.hex()


def test_non_chat_spans_are_dropped_not_rejected() -> None:
    embeddings = span("embeddings", {"gen_ai.operation.name": "embeddings", "gen_ai.input.messages": "[]"}, span_id=3)
    agent = span("invoke_agent", {**semconv_chat(), "gen_ai.operation.name": "invoke_agent"}, span_id=4)
    db = span("SELECT", {"db.system.name": "postgresql"}, span_id=5)
    tool = span("tool", {"openinference.span.kind": "TOOL", "input.value": "x"}, span_id=6)
    converted = convert(request(http_span(), embeddings, agent, db, tool))
    assert (converted.exchanges, converted.rejected) == ([], [])


def test_multimodal_parts_keep_their_text_and_the_first_spoken_answer_wins() -> None:
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.input.messages": json.dumps(
            [
                {
                    "role": "user",
                    "parts": [
                        {"type": "text", "content": "What is on"},
                        {"type": "blob", "modality": "image", "content": "aGk="},
                        {"type": "text", "content": "this receipt?"},
                    ],
                }
            ]
        ),
        "gen_ai.output.messages": json.dumps(
            [
                {"role": "assistant", "parts": [{"type": "tool_call", "name": "ocr", "arguments": {}}]},
                parts("assistant", "A refund of 12 EUR."),
            ]
        ),
    }
    exchange = only(convert(request(span("chat", attrs))))
    assert (exchange.question, exchange.answer, exchange.turn) == (
        "What is on\nthis receipt?",
        "A refund of 12 EUR.",
        0,
    )


def test_the_older_span_events_are_read() -> None:
    events = [
        ("gen_ai.system.message", {"content": "You are the helpdesk bot."}),
        ("gen_ai.user.message", {"content": "Hi"}),
        ("gen_ai.assistant.message", {"content": "Hello!"}),
        ("gen_ai.user.message", {"content": "Where is my parcel?"}),
        (
            "gen_ai.choice",
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "On its way."}},
        ),
    ]
    exchange = only(convert(request(span("chat", {"gen_ai.operation.name": "chat"}, events=events))))
    assert (exchange.question, exchange.answer, exchange.turn) == ("Where is my parcel?", "On its way.", 1)
    assert [(t.role, t.text) for t in exchange.earlier_turns] == [("user", "Hi"), ("assistant", "Hello!")]


def test_span_events_with_json_string_bodies_are_read() -> None:
    events = [
        ("gen_ai.user.message", {"content": json.dumps([{"type": "text", "text": "Cancel my order"}])}),
        ("gen_ai.choice", {"message": json.dumps({"content": "Done: order 12 is cancelled."})}),
    ]
    exchange = only(convert(request(span("chat", {"gen_ai.operation.name": "text_completion"}, events=events))))
    assert (exchange.question, exchange.answer) == ("Cancel my order", "Done: order 12 is cancelled.")


def test_openinference_flattened_messages_and_session() -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "session.id": "web-session-9",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": "Be brief.",
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": "Hi",
        "llm.input_messages.2.message.role": "assistant",
        "llm.input_messages.2.message.content": "Hello",
        "llm.input_messages.10.message.role": "user",  # ordered by number, not as text
        "llm.input_messages.10.message.content": "Opening hours?",
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": "9 to 5.",
    }
    exchange = only(convert(request(span("ChatCompletion", attrs))))
    assert (exchange.question, exchange.answer, exchange.conversation_id) == (
        "Opening hours?",
        "9 to 5.",
        "web-session-9",
    )
    assert exchange.turn == 1


def test_openinference_multimodal_contents() -> None:
    attrs = {
        "openinference.span.kind": "LLM",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.contents.0.message_content.type": "text",
        "llm.input_messages.0.message.contents.0.message_content.text": "Read this",
        "llm.input_messages.0.message.contents.1.message_content.type": "image",
        "llm.input_messages.0.message.contents.1.message_content.image.image.url": "https://x/y.png",
        "output.value": "It says hello.",
    }
    exchange = only(convert(request(span("llm", attrs))))
    assert (exchange.question, exchange.answer) == ("Read this", "It says hello.")


def test_openinference_values_as_chat_json_or_plain_text() -> None:
    as_json = {
        "openinference.span.kind": "LLM",
        "input.value": json.dumps({"model": "m", "messages": [{"role": "user", "content": "Refund?"}]}),
        "input.mime_type": "application/json",
        "output.value": json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "Yes."}}]}),
    }
    as_text = {"openinference.span.kind": "LLM", "input.value": "Refund?", "output.value": "Yes."}
    for attrs in (as_json, as_text):
        exchange = only(convert(request(span("llm", attrs))))
        assert (exchange.question, exchange.answer) == ("Refund?", "Yes.")


def test_a_retriever_span_of_the_same_trace_gives_the_documents() -> None:
    retrieved = {
        "openinference.span.kind": "RETRIEVER",
        "retrieval.documents.0.document.content": "Refunds take five days.",
        "retrieval.documents.0.document.id": "kb-12",
        "retrieval.documents.0.document.metadata": json.dumps({"source": "kb/refunds.md"}),
        "retrieval.documents.1.document.content": "Returns are free.",
    }
    later = {**retrieved, "retrieval.documents.0.document.content": "Retrieved after the answer."}
    other_trace = span("retrieve", retrieved, span_id=7, trace_id=b"\x01" * 16, end_s=0.5)
    spans = [
        span("retrieve", retrieved, span_id=2, start_s=0.0, end_s=0.5),
        span("retrieve", later, span_id=8, start_s=2.5, end_s=3.0),
        other_trace,
        span("chat", semconv_chat(), span_id=3, start_s=0.6, end_s=2.0),
    ]
    exchange = only(convert(request(*spans)))
    assert [(d.text, d.source, d.id) for d in exchange.documents] == [
        ("Refunds take five days.", "kb/refunds.md", "kb-12"),
        ("Returns are free.", "retrieve", None),
    ]


def test_visibility_and_version_from_attributes() -> None:
    public = semconv_chat(**{"relmon.visibility": "public"})
    odd = semconv_chat(**{"relmon.visibility": "everyone"})
    assert only(convert(request(span("chat", public)))).visibility == "public"
    assert only(convert(request(span("chat", odd)))).visibility == "private"
    from_resource = only(convert(request(span("chat", semconv_chat()), **{"relmon.visibility": "dm"})))
    assert (from_resource.visibility, from_resource.bot_version) == ("dm", None)


def test_chat_spans_without_content_are_rejected_with_a_hint_and_the_rest_kept() -> None:
    no_content = {"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini"}
    too_long = semconv_chat(answer="x" * 40_001)
    converted = convert(
        request(
            span("chat", no_content, span_id=1),
            span("chat", too_long, span_id=2),
            span("chat", semconv_chat(), span_id=3),
        )
    )
    assert [exchange.id[-2:] for exchange in converted.exchanges] == ["03"]
    assert len(converted.rejected) == 2
    assert "no question text" in converted.rejected[0]
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" in converted.rejected[0]
    assert "answer" in converted.rejected[1] and "40000" in converted.rejected[1]


def test_bad_ids_and_garbage_attributes_are_rejected_not_raised() -> None:
    bad_id = span("chat", semconv_chat())
    bad_id.trace_id = b"\x01\x02"
    garbage = span(
        "chat",
        {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": "{not json",
            "gen_ai.output.messages": "[1, null, {}]",
        },
        span_id=2,
    )
    nested = span(
        "chat",
        {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([{"role": "user", "parts": {"a": [1]}}])},
        span_id=3,
    )
    converted = convert(request(bad_id, garbage, nested))
    assert converted.exchanges == []
    assert len(converted.rejected) == 3
    assert "trace id" in converted.rejected[0]


def test_earlier_turns_are_capped_to_the_last_fifty() -> None:
    history = [parts("user" if n % 2 == 0 else "assistant", f"turn {n}") for n in range(80)]
    attrs = semconv_chat()
    attrs["gen_ai.input.messages"] = json.dumps([*history, parts("user", "last?")])
    exchange = only(convert(request(span("chat", attrs))))
    assert len(exchange.earlier_turns) == 50 and exchange.earlier_turns[-1].text == "turn 79"
    assert exchange.turn == 40  # the user's earlier messages counted, not the kept ones


KEYS = [
    "gen_ai.operation.name", "gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.conversation.id",
    "openinference.span.kind", "input.value", "output.value", "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content", "llm.output_messages.0.message.content", "session.id",
    "llm.input_messages.1.message.contents.0.message_content.text", "relmon.visibility",
    "retrieval.documents.0.document.content", "retrieval.documents.0.document.metadata", "role", "content", "message",
]  # fmt: skip
FIELDS = st.sampled_from(["role", "parts", "content", "type", "text", "message", "choices", "messages"])
SCALARS = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=20)
)
WORDS = st.sampled_from(["chat", "LLM", "RETRIEVER", "user", "text", "public", "[]", "{}", '[{"role": "user"}]'])
JSONISH = st.recursive(
    SCALARS | WORDS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(FIELDS, inner, max_size=3),
    max_leaves=8,
)
VALUES = JSONISH | JSONISH.map(json.dumps)
ATTRIBUTES = st.dictionaries(st.sampled_from(KEYS), VALUES.filter(lambda v: v is not None), max_size=8)
EVENTS = st.lists(st.tuples(st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "other"]), ATTRIBUTES), max_size=3)


@settings(max_examples=150, deadline=None)
@given(spans=st.lists(st.tuples(ATTRIBUTES, EVENTS), max_size=4), resource=ATTRIBUTES)
def test_any_attributes_convert_without_raising(spans, resource) -> None:
    built = [span("s", attrs, span_id=n + 1, events=events) for n, (attrs, events) in enumerate(spans)]
    converted = convert(request(*built, **resource))
    assert len(converted.exchanges) + len(converted.rejected) <= len(spans)
