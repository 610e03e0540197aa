"""OpenTelemetry `gen_ai.evaluation.result` events in their span form (RELMON_OTLP_EVENTS_AS=spans), for backends
that read traces only (Phoenix, Jaeger, Tempo): each evaluation a span of its own in the bot's trace, with the
event on it (the spans are built in `workers.traces.evaluation_spans`), exported over OTLP/HTTP (`/v1/traces`)
with the SDK's trace exporter, synchronously (SimpleSpanProcessor), as the log records are (`workers.otlp_events`).

The spans are started through the SDK's tracer, as its documentation shows, with their IDs given: the bot's trace
ID and a span ID derived from the evaluation, so that a resend is the same span. Phoenix keeps the first span of an
ID and ignores a repeat (its spans are unique by span ID: insert, on conflict do nothing); Jaeger and Tempo store
what comes and show a repeat once per ID."""

from __future__ import annotations

import time
from functools import cache

from workers.otlp_events import TRACES_PATH, Exported, export_lock, relmon_resource, status_keeping
from workers.traces import EVALUATION_EVENT, EvaluationSpan


@cache
def _pipeline(endpoint: str):
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.id_generator import IdGenerator
    from opentelemetry.sdk.trace.sampling import ALWAYS_ON

    class Given(IdGenerator):
        """The IDs of the span being started (set under the export lock): the bot's trace, the derived span ID."""

        trace_id = span_id = 0

        def generate_trace_id(self) -> int:
            return self.trace_id

        def generate_span_id(self) -> int:
            return self.span_id

    exporter = status_keeping(OTLPSpanExporter, endpoint.rstrip("/") + TRACES_PATH)
    ids = Given()
    # ALWAYS_ON: an OTEL_TRACES_SAMPLER meant for some other tracing in the process drops no evaluation.
    provider = TracerProvider(sampler=ALWAYS_ON, resource=relmon_resource(), id_generator=ids)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("relmon.evaluations"), ids, exporter


def _parent(span: EvaluationSpan):
    """The context a span starts in: under the span the bot named, else empty (a root of the bot's trace, whose
    ID the ID generator gives)."""
    from opentelemetry.context import Context
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

    if not span.parent_span_id:
        return Context()
    parent = SpanContext(
        int(span.trace_id, 16), int(span.parent_span_id, 16), is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED)
    )
    return set_span_in_context(NonRecordingSpan(parent))


def export_evaluation_spans(endpoint: str, spans: list[EvaluationSpan]) -> Exported:
    """Export each span, stopping at the first that fails."""
    tracer, ids, exporter = _pipeline(endpoint)
    with export_lock:
        for span in spans:
            ids.trace_id, ids.span_id = int(span.trace_id, 16), int(span.span_id, 16)
            exporter.last = None
            now = time.time_ns()  # a moment, not a duration: the evaluation ran before, in the judging task
            started = tracer.start_span(span.name, context=_parent(span), attributes=span.attributes, start_time=now)
            started.add_event(EVALUATION_EVENT, span.attributes, timestamp=now)
            started.end(end_time=now)
            if not (exported := exporter.outcome()).sent:
                return exported
    return Exported(True, exporter.status)
