"""OpenTelemetry `gen_ai.evaluation.result` events, exported over OTLP/HTTP with the SDK's own exporters, in one of
two forms (RELMON_OTLP_EVENTS_AS): `logs`, one log record per evaluation carrying the evaluated trace's ID (the
GenAI convention's event form; here), or `spans`, for backends that read traces only (`workers.otlp_spans`).

The SDK's logs API is still marked private (`opentelemetry.sdk._logs`); it is used as its documentation shows.
One provider per process and endpoint; an export is synchronous (a Simple*Processor) so that the task knows
whether it went through and can retry."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache

from workers.traces import EVALUATION_EVENT

EXPORT_TIMEOUT_SECONDS = 5.0
LOGS_PATH, TRACES_PATH = "/v1/logs", "/v1/traces"  # OTLP/HTTP's, under the base endpoint
# What the endpoint says no to (a wrong key or a body it refuses): sending again would be refused again. The
# exporter itself retries only 429 and 5xx (within its timeout), and so does the task after it. 405: a receiver
# without that signal (Phoenix takes traces, not logs: RELMON_OTLP_EVENTS_AS=spans; `relmon doctor` says so).
REFUSED = frozenset({400, 401, 403, 404, 405, 413, 415})
# One export at a time per process: an exporter's `last` and `status` are those of this one.
export_lock = threading.Lock()


@dataclass(frozen=True)
class Exported:
    sent: bool
    status: int | None = None  # the endpoint's last HTTP answer; None when none came (out of reach)

    @property
    def refused(self) -> bool:
        return not self.sent and self.status in REFUSED


def status_keeping(exporter_class: type, url: str):
    """An instance of one of the SDK's OTLP/HTTP exporters (logs, traces) that keeps the result of its last export
    (a Simple*Processor drops it) and the HTTP status the endpoint last answered (the exporter only logs it): a
    refusal is told from an outage by it."""
    from requests import Session

    class ResultKeeping(exporter_class):
        last = None
        status: int | None = None

        def export(self, batch, *args, **kwargs):
            self.status = None
            self.last = super().export(batch, *args, **kwargs)
            return self.last

        def outcome(self) -> Exported:
            # By name: the result enums were renamed across SDK versions (LogExportResult, LogRecordExportResult).
            return Exported(getattr(self.last, "name", None) == "SUCCESS", self.status)

    session = Session()  # the exporter's own HTTP session (a documented argument), with a hook that sees answers
    exporter = ResultKeeping(endpoint=url, timeout=EXPORT_TIMEOUT_SECONDS, session=session)
    session.hooks["response"].append(
        lambda response, *args, **kwargs: setattr(exporter, "status", response.status_code)
    )
    return exporter


def relmon_resource():
    """relmon's resource; the standard OTEL_RESOURCE_ATTRIBUTES are merged in by the SDK."""
    from opentelemetry.sdk.resources import Resource

    return Resource.create({"service.name": "relmon"})


@cache
def _pipeline(endpoint: str):
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor

    exporter = status_keeping(OTLPLogExporter, endpoint.rstrip("/") + LOGS_PATH)
    provider = LoggerProvider(resource=relmon_resource())
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider.get_logger("relmon.evaluations"), exporter


def export_evaluations(endpoint: str, trace_id: str, events: list[dict], *, span_id: str | None = None) -> Exported:
    """Export each event (its attributes) on the trace `trace_id` (32 hex), parented to the evaluated span
    `span_id` (16 hex) when the bot named one, stopping at the first that fails."""
    from opentelemetry._logs import LogRecord
    from opentelemetry.trace import TraceFlags

    logger, exporter = _pipeline(endpoint)
    with export_lock:
        for attributes in events:
            exporter.last = None
            logger.emit(
                LogRecord(
                    trace_id=int(trace_id, 16),
                    span_id=int(span_id, 16) if span_id else 0,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                    event_name=EVALUATION_EVENT,
                    attributes=attributes,
                )
            )
            if not (exported := exporter.outcome()).sent:
                return exported
    return Exported(True, exporter.status)


def empty_export(endpoint: str, events_as: str) -> Exported:
    """An export of nothing to the path of the form (`logs`, `spans`), as `relmon doctor` sends it: the endpoint
    answers as it would to the events (the OTLP specification takes an empty request) and stores nothing."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    exporter_class, path = (OTLPSpanExporter, TRACES_PATH) if events_as == "spans" else (OTLPLogExporter, LOGS_PATH)
    exporter = status_keeping(exporter_class, endpoint.rstrip("/") + path)
    exporter.export([])
    exporter.shutdown()
    return exporter.outcome()
