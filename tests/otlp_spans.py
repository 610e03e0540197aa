"""Hand-built OTLP trace requests (opentelemetry-proto's classes) for tests and the bench: spans shaped as the
semantic conventions, their older span events and OpenInference record a chat call, and spans that are no chat."""

from __future__ import annotations

import json
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.resource.v1.resource_pb2 import Resource
from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

TRACE = bytes.fromhex("5b8efff798038103d269b633813fc60c")
START_NS = 1_796_631_300_000_000_000  # 2026-12-07T08:15:00Z


def any_value(value: Any) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    if isinstance(value, dict):
        return AnyValue(kvlist_value=KeyValueList(values=key_values(value)))
    if isinstance(value, list | tuple):
        return AnyValue(array_value=ArrayValue(values=[any_value(item) for item in value]))
    return AnyValue(string_value=str(value))


def key_values(values: dict[str, Any]) -> list[KeyValue]:
    return [KeyValue(key=key, value=any_value(value)) for key, value in values.items()]


def span(
    name: str,
    attributes: dict[str, Any],
    *,
    span_id: int = 1,
    trace_id: bytes = TRACE,
    start_s: float = 0.0,
    end_s: float = 2.0,
    events: list[tuple[str, dict[str, Any]]] = (),
) -> Span:
    return Span(
        trace_id=trace_id,
        span_id=span_id.to_bytes(8, "big"),
        name=name,
        kind=Span.SPAN_KIND_CLIENT,
        start_time_unix_nano=START_NS + int(start_s * 1e9),
        end_time_unix_nano=START_NS + int(end_s * 1e9),
        attributes=key_values(attributes),
        events=[Span.Event(name=event, time_unix_nano=START_NS, attributes=key_values(a)) for event, a in events],
    )


def request(*spans: Span, service: str = "helpdesk", **resource: Any) -> ExportTraceServiceRequest:
    attributes = key_values({"service.name": service, **resource})
    scope = ScopeSpans(spans=list(spans))
    return ExportTraceServiceRequest(
        resource_spans=[ResourceSpans(resource=Resource(attributes=attributes), scope_spans=[scope])]
    )


def parts(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def semconv_chat(question: str = "How do I reset my password?", answer: str = "Open Settings.", **more: Any) -> dict:
    """A chat span's attributes as the semantic conventions record them (gen_ai.input/output.messages)."""
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.input.messages": json.dumps(
            [
                parts("system", "You are the helpdesk bot."),
                parts("user", "Hello"),
                parts("assistant", "Hi!"),
                parts("user", question),
            ]
        ),
        "gen_ai.output.messages": json.dumps([{**parts("assistant", answer), "finish_reason": "stop"}]),
        **more,
    }


def http_span(span_id: int = 9) -> Span:
    return span("GET /kb", {"http.request.method": "GET", "url.full": "https://kb.example/x"}, span_id=span_id)


def chat_request(**resource: Any) -> ExportTraceServiceRequest:
    """One semconv chat span and one HTTP span."""
    return request(span("chat gpt-4o-mini", semconv_chat()), http_span(), **resource)
