"""OTLP/HTTP's two encodings of traces, read and answered with opentelemetry-proto's classes: binary protobuf
(`application/x-protobuf`) and OTLP JSON (`application/json`), which is protobuf's JSON mapping except that trace
and span ids are hex strings, not base64 (the specification's one exception). int64s come as strings or numbers,
enums as integers, and unknown fields are ignored: google.protobuf.json_format reads all of that."""

from __future__ import annotations

import base64
import binascii
import json
import zlib

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTracePartialSuccess,
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

PROTOBUF = "application/x-protobuf"
JSON = "application/json"
ENCODINGS = (PROTOBUF, JSON)
_ID_FIELDS = ("traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id")


class Undecodable(ValueError):
    """A body that is no ExportTraceServiceRequest in its encoding: the message says what is wrong."""


def inflated(body: bytes, content_encoding: str, max_bytes: int) -> bytes:
    """The body without its `Content-Encoding` (gzip or none), refused past `max_bytes` once inflated."""
    encoding = content_encoding.strip().lower()
    if encoding in ("", "identity"):
        return body
    if encoding != "gzip":
        raise Undecodable(f"Content-Encoding {encoding!r} is not supported: send gzip or none")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        data = inflater.decompress(body, max_bytes + 1)
    except zlib.error:
        raise Undecodable("body is not valid gzip") from None
    if len(data) > max_bytes:
        raise Undecodable(f"body over {max_bytes} bytes once inflated (RELMON_INGEST_MAX_BYTES)")
    return data


def _hex_to_base64(value: object, name: str) -> object:
    if not isinstance(value, str) or not value:
        return value
    try:
        return base64.b64encode(bytes.fromhex(value)).decode()
    except ValueError:
        raise Undecodable(f"{name} {value[:40]!r} is not hex: OTLP JSON gives ids as hex strings") from None


def _items(value: object, *names: str) -> list:
    """The list under the first of `names` in a JSON object (nothing when it is not one): json_format refuses
    the wrong types afterwards, with its own message."""
    if not isinstance(value, dict):
        return []
    found = next((value[name] for name in names if name in value), None)
    return found if isinstance(found, list) else []


def _ids_as_base64(spans_json: object) -> None:
    """Rewrite, in place, each span's and link's hex ids as the base64 protobuf's JSON mapping reads."""
    for resource_spans in _items(spans_json, "resourceSpans", "resource_spans"):
        for scope_spans in _items(resource_spans, "scopeSpans", "scope_spans"):
            for span in _items(scope_spans, "spans"):
                for item in [span, *_items(span, "links")]:
                    if isinstance(item, dict):
                        for name in _ID_FIELDS:
                            if name in item:
                                item[name] = _hex_to_base64(item[name], name)


def decode(body: bytes, content_type: str) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    if content_type == PROTOBUF:
        try:
            request.ParseFromString(body)
        except (DecodeError, RecursionError, ValueError):
            raise Undecodable("body is not a protobuf ExportTraceServiceRequest") from None
        return request
    try:
        loaded = json.loads(body)
    except (ValueError, RecursionError):
        raise Undecodable("body is not valid JSON") from None
    if not isinstance(loaded, dict):
        raise Undecodable('body is not an OTLP JSON object ({"resourceSpans": [...]})')
    _ids_as_base64(loaded)
    try:
        json_format.ParseDict(loaded, request, ignore_unknown_fields=True)
    except (json_format.ParseError, binascii.Error, RecursionError, ValueError, TypeError) as error:
        raise Undecodable(f"body is not an OTLP JSON ExportTraceServiceRequest: {str(error)[:200]}") from None
    return request


def response(rejected: int, message: str, content_type: str) -> bytes:
    """The success answer: ExportTraceServiceResponse, with partial_success when spans were rejected."""
    answer = ExportTraceServiceResponse()
    if rejected:
        answer.partial_success.CopyFrom(ExportTracePartialSuccess(rejected_spans=rejected, error_message=message))
    return encoded(answer, content_type)


def status(code: int, message: str, content_type: str) -> bytes:
    """A refusal's body as OTLP/HTTP sends one: a google.rpc.Status (code per gRPC's numbering)."""
    return encoded(Status(code=code, message=message), content_type)


def encoded(message, content_type: str) -> bytes:
    if content_type == PROTOBUF:
        return message.SerializeToString()
    return json_format.MessageToJson(message, indent=None).encode()
