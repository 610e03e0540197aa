"""OpenTelemetry `gen_ai.evaluation.result` events, exported over OTLP/HTTP with the SDK's own exporter: one log
record per evaluation, carrying the evaluated trace's ID, so that a tracing backend shows it on that trace.

The SDK's logs API is still marked private (`opentelemetry.sdk._logs`); it is used as its documentation shows.
One provider per process and endpoint; an export is synchronous (SimpleLogRecordProcessor) so that the task
knows whether it went through and can retry."""

from __future__ import annotations

import threading
from functools import cache

from workers.traces import EVALUATION_EVENT

EXPORT_TIMEOUT_SECONDS = 5.0
_lock = threading.Lock()


@cache
def _pipeline(endpoint: str):
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    class ResultKeeping(OTLPLogExporter):
        """The exporter, keeping the result of its last export (the processor drops it)."""

        last = None

        def export(self, batch):
            self.last = super().export(batch)
            return self.last

    exporter = ResultKeeping(endpoint=f"{endpoint.rstrip('/')}/v1/logs", timeout=EXPORT_TIMEOUT_SECONDS)
    provider = LoggerProvider(resource=Resource.create({"service.name": "relmon"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider.get_logger("relmon.evaluations"), exporter


def export_evaluations(endpoint: str, trace_id: str, events: list[dict]) -> bool:
    """Export each event (its attributes) on the trace `trace_id` (32 hex); True when every export succeeded."""
    from opentelemetry._logs import LogRecord
    from opentelemetry.trace import TraceFlags

    logger, exporter = _pipeline(endpoint)
    with _lock:  # one export at a time per process: `last` is the result of this one
        for attributes in events:
            exporter.last = None
            logger.emit(
                LogRecord(
                    trace_id=int(trace_id, 16),
                    span_id=0,
                    trace_flags=TraceFlags(TraceFlags.SAMPLED),
                    event_name=EVALUATION_EVENT,
                    attributes=attributes,
                )
            )
            # By name: the result's enum was renamed across SDK versions (LogExportResult, LogRecordExportResult).
            if getattr(exporter.last, "name", None) != "SUCCESS":
                return False
    return True
