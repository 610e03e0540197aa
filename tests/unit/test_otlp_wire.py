"""common.otlp_wire: OTLP's protobuf and JSON encodings read into the same request (OTLP JSON's hex ids, int64s
as strings, enums as integers, unknown fields ignored), gzip within the size limit, answers in each encoding, and
every malformed body refused as Undecodable (a 400), never raised otherwise."""

from __future__ import annotations

import base64
import gzip
import json

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceResponse

from common import otlp_wire
from common.otlp_exchanges import convert
from tests.otlp_spans import TRACE, chat_request


def otlp_json(request) -> dict:
    """A request as an OTLP exporter writes JSON: hex ids (protobuf's mapping would give base64)."""
    data = json_format.MessageToDict(request)
    for resource_spans in data["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for name in ("traceId", "spanId"):
                    span[name] = base64.b64decode(span[name]).hex()
    return data


def test_protobuf_and_otlp_json_read_the_same_request() -> None:
    request = chat_request()
    body = otlp_json(request)
    span = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["traceId"] == TRACE.hex()
    assert isinstance(span["startTimeUnixNano"], str)  # int64 as a string, as OTLP JSON sends it
    span["kind"] = 3  # enums as integers, as OTLP JSON requires
    span["someFutureField"] = {"x": 1}  # unknown fields are ignored
    from_json = otlp_wire.decode(json.dumps(body).encode(), otlp_wire.JSON)
    from_protobuf = otlp_wire.decode(request.SerializeToString(), otlp_wire.PROTOBUF)
    assert from_json == from_protobuf == request


def test_int64_as_json_numbers_too() -> None:
    body = otlp_json(chat_request())
    span = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    span["startTimeUnixNano"] = int(span["startTimeUnixNano"])
    decoded = otlp_wire.decode(json.dumps(body).encode(), otlp_wire.JSON)
    assert decoded.resource_spans[0].scope_spans[0].spans[0].start_time_unix_nano == span["startTimeUnixNano"]


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b"\x0a\xff\xff\xff", otlp_wire.PROTOBUF),
        (b"\xff" * 10, otlp_wire.PROTOBUF),
        (b"{not json", otlp_wire.JSON),
        (b"[1, 2]", otlp_wire.JSON),
        (b'{"resourceSpans": 5}', otlp_wire.JSON),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz", "spanId": "01"}]}]}]}', otlp_wire.JSON),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"startTimeUnixNano": "soon"}]}]}]}', otlp_wire.JSON),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"attributes": "many"}]}]}]}', otlp_wire.JSON),
        (b"[" * 100_000 + b"]" * 100_000, otlp_wire.JSON),
    ],
)
def test_malformed_bodies_are_undecodable(body: bytes, content_type: str) -> None:
    with pytest.raises(otlp_wire.Undecodable):
        otlp_wire.decode(body, content_type)


def test_gzip_is_inflated_within_the_limit() -> None:
    data = chat_request().SerializeToString()
    assert otlp_wire.inflated(gzip.compress(data), "gzip", 10_000) == data
    assert otlp_wire.inflated(data, "", 10_000) == data
    with pytest.raises(otlp_wire.Undecodable, match="once inflated"):
        otlp_wire.inflated(gzip.compress(b"\x00" * 1_000_000), "gzip", 10_000)  # a zip bomb stops at the limit
    with pytest.raises(otlp_wire.Undecodable, match="gzip"):
        otlp_wire.inflated(b"not gzip", "gzip", 10_000)
    with pytest.raises(otlp_wire.Undecodable, match="br"):
        otlp_wire.inflated(data, "br", 10_000)


def test_answers_in_each_encoding() -> None:
    full = ExportTraceServiceResponse.FromString(otlp_wire.response(0, "", otlp_wire.PROTOBUF))
    assert not full.HasField("partial_success")
    assert json.loads(otlp_wire.response(0, "", otlp_wire.JSON)) == {}
    partial = json.loads(otlp_wire.response(2, "span 01: no answer", otlp_wire.JSON))
    assert partial == {"partialSuccess": {"rejectedSpans": "2", "errorMessage": "span 01: no answer"}}
    refusal = json.loads(otlp_wire.status(3, "body is not valid JSON", otlp_wire.JSON))
    assert refusal == {"code": 3, "message": "body is not valid JSON"}


@settings(max_examples=200, deadline=None)
@given(
    body=st.binary(max_size=300)
    | st.builds(lambda r: r.SerializeToString(), st.just(chat_request())).map(lambda b: b[: len(b) // 2])
)
def test_any_bytes_decode_or_are_undecodable(body: bytes) -> None:
    for content_type in otlp_wire.ENCODINGS:
        try:
            decoded = otlp_wire.decode(body, content_type)
        except otlp_wire.Undecodable:
            continue
        convert(decoded)  # whatever decoded converts without raising
