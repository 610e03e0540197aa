"""Recognising a refused parameter by what the error body says, as servers word it."""

from __future__ import annotations

import httpx
import openai
import pytest

from judges.endpoint_errors import rejected_parameter

STRUCTURED = {"model": "m", "messages": [], "max_tokens": 300, "response_format": {"type": "json_schema"}}


def error(status: int, message: str, param: str | None = None) -> openai.APIStatusError:
    request = httpx.Request("POST", "http://llm/v1/chat/completions")
    body = {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
    response = httpx.Response(status, json=body, request=request)
    return openai.APIStatusError(message, response=response, body=body)


@pytest.mark.parametrize(
    ("status", "message", "param", "expected"),
    [
        # llama-cpp-python: pydantic's message, wrapped as a 500
        (
            500,
            "1 validation error:\n  {'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be "
            "'text' or 'json_object'\"}",
            None,
            "format_kind",
        ),
        (
            400,
            "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
            "response_format",
            "format_kind",
        ),
        (422, "response_format.schema: Extra inputs are not permitted", None, "format_kind"),
        (400, "Unrecognized request argument supplied: response_format", None, "response_format"),
        (
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' "
            "instead.",
            "max_tokens",
            "token_param",
        ),
        # vLLM: too large is not refused, and it is no response_format problem either
        (
            400,
            "'max_tokens' or 'max_completion_tokens' is too large: 300. This model's maximum context length is "
            "2048 tokens",
            None,
            None,
        ),
        (500, "The server had an error while processing your request.", None, None),  # transient: retried
        (429, "Rate limit reached for requests: response_format json_schema", None, None),
        (401, "Incorrect API key provided.", None, None),
    ],
)
def test_what_a_server_refused(status: int, message: str, param: str | None, expected: str | None) -> None:
    assert rejected_parameter(error(status, message, param), STRUCTURED) == expected


def test_a_request_without_response_format_cannot_have_it_refused() -> None:
    plain = {"model": "m", "messages": [], "max_completion_tokens": 300}
    assert rejected_parameter(error(500, "response_format.type: Input should be 'text'"), plain) is None
    refused = error(400, "Extra inputs are not permitted: max_completion_tokens")
    assert rejected_parameter(refused, plain) == "token_param"
    assert rejected_parameter(refused, {"model": "m", "messages": [], "max_tokens": 300}) is None  # not this one
