"""A local OTLP/HTTP logs and traces receiver for tests: `POST /v1/logs` with an ExportLogsServiceRequest, `POST
/v1/traces` with an ExportTraceServiceRequest (protobuf, plain or gzip), decoded with opentelemetry-proto, answered
as the OTLP specification says (200 with the Export*ServiceResponse; 400 for a body that does not decode;
`fail_next(n, status)` for an outage). With a
`token`, a request without `Authorization: Bearer <token>` is answered 401, as the collector's bearertokenauth
extension answers it.

    with FakeOtlpReceiver() as otlp:
        env["OTEL_EXPORTER_OTLP_ENDPOINT"] = otlp.url
        ...
        records = otlp.log_records()   # [(trace_id hex, span_id hex, event_name, {attribute: value})]
        spans = otlp.spans()           # [Received(trace_id, span_id, parent_span_id, name, attributes, events)]
"""

from __future__ import annotations

import gzip
from typing import NamedTuple

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest, ExportLogsServiceResponse
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tests.fakes.background import OutageFake, QuietHandler

PROTOBUF = "application/x-protobuf"
SERVICES = {
    "/v1/logs": (ExportLogsServiceRequest, ExportLogsServiceResponse),
    "/v1/traces": (ExportTraceServiceRequest, ExportTraceServiceResponse),
}


def plain(value: AnyValue) -> object:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


def attributes(record: object) -> dict:
    return {attribute.key: plain(attribute.value) for attribute in record.attributes}


class Received(NamedTuple):
    trace_id: str
    span_id: str
    parent_span_id: str
    name: str
    attributes: dict
    events: list[tuple[str, dict]]


class FakeOtlpReceiver(OutageFake):
    thread_name = "fake-otlp"

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.requests: list[ExportLogsServiceRequest] = []
        self.trace_requests: list[ExportTraceServiceRequest] = []
        self.posts = 0
        self._serve()

    def log_records(self) -> list[tuple[str, str, str, dict]]:
        with self._lock:
            requests = list(self.requests)
        return [
            (
                record.trace_id.hex(),
                record.span_id.hex(),
                record.event_name,
                attributes(record),
            )
            for request in requests
            for resource_logs in request.resource_logs
            for scope_logs in resource_logs.scope_logs
            for record in scope_logs.log_records
        ]

    def spans(self) -> list[Received]:
        with self._lock:
            requests = list(self.trace_requests)
        return [
            Received(
                span.trace_id.hex(),
                span.span_id.hex(),
                span.parent_span_id.hex(),
                span.name,
                attributes(span),
                [(event.name, attributes(event)) for event in span.events],
            )
            for request in requests
            for resource_spans in request.resource_spans
            for scope_spans in resource_spans.scope_spans
            for span in scope_spans.spans
        ]

    def _handler_class(self) -> type:
        fake = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = self.read_body()
                failure = fake.next_failure()
                with fake._lock:
                    fake.posts += 1
                if self.path not in SERVICES:
                    return self.send_body(404, b"", "text/plain")
                request_class, response_class = SERVICES[self.path]
                if failure:
                    return self.send_body(failure, b"", PROTOBUF)
                if fake.token and self.headers.get("Authorization") != f"Bearer {fake.token}":
                    return self.send_body(401, b"", PROTOBUF)
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = request_class()
                try:
                    request.ParseFromString(body)
                except Exception:  # DecodeError: the spec's answer is 400
                    return self.send_body(400, b"", PROTOBUF)
                with fake._lock:
                    received = fake.requests if request_class is ExportLogsServiceRequest else fake.trace_requests
                    received.append(request)
                self.send_body(200, response_class().SerializeToString(), PROTOBUF)

        return Handler
