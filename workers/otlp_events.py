"""OpenTelemetry `gen_ai.evaluation.result` events, exported over OTLP/HTTP with the SDK's own exporter: one log
record per evaluation, carrying the evaluated trace's ID, so that a tracing backend shows it on that trace.

The SDK's logs API is still marked private (`opentelemetry.sdk._logs`); it is used as its documentation shows.
One provider per process and endpoint; an export is synchronous (SimpleLogRecordProcessor) so that the task
knows whether it went through and can retry."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache

from workers.traces import EVALUATION_EVENT

EXPORT_TIMEOUT_SECONDS = 5.0
# What the endpoint says no to (a wrong key or a body it refuses): sending again would be refused again. The
# exporter itself retries only 429 and 5xx (within its timeout), and so does the task after it.
REFUSED = frozenset({400, 401, 403, 404, 413, 415})
_lock = threading.Lock()


@dataclass(frozen=True)
class Exported:
    sent: bool
    status: int | None = None  # the endpoint's last HTTP answer; None when none came (out of reach)

    @property
    def refused(self) -> bool:
        return not self.sent and self.status in REFUSED


@cache
def _pipeline(endpoint: str):
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from requests import Session

    class ResultKeeping(OTLPLogExporter):
        """The exporter, keeping the result of its last export (the processor drops it) and the HTTP status the
        endpoint last answered (the exporter logs it only): a refusal is told from an outage by it."""

        last = None
        status: int | None = None

        def export(self, batch):
            self.status = None
            self.last = super().export(batch)
            return self.last

    session = Session()  # the exporter's own HTTP session (a documented argument), with a hook that sees answers
    exporter = ResultKeeping(
        endpoint=f"{endpoint.rstrip('/')}/v1/logs", timeout=EXPORT_TIMEOUT_SECONDS, session=session
    )
    session.hooks["response"].append(
        lambda response, *args, **kwargs: setattr(exporter, "status", response.status_code)
    )
    provider = LoggerProvider(resource=Resource.create({"service.name": "relmon"}))
    provider.add_log_record_processor(SimpleLogRecordProcessor(exporter))
    return provider.get_logger("relmon.evaluations"), exporter


def export_evaluations(endpoint: str, trace_id: str, events: list[dict]) -> Exported:
    """Export each event (its attributes) on the trace `trace_id` (32 hex), stopping at the first that fails."""
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
                return Exported(False, exporter.status)
    return Exported(True, exporter.status)
