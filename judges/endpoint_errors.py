"""Reading what an OpenAI-compatible endpoint said when it refused: a rejected parameter (response_format, the reply
bound) recognised by what the body says, not by the status (llama-cpp-python rejects `json_schema` with a 500,
OpenAI with a 400, FastAPI servers with a 422); and the wait a server asked for."""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Literal

import openai

# Statuses that never mean "this parameter is not supported": a key, a model, a rate limit or a timeout.
_NOT_A_REJECTION = {401, 403, 404, 408, 409, 429}
# Words a server uses when it refuses the kind of response format it was sent, not response_format itself.
_FORMAT_KIND_WORDS = ("json_schema", "json_object", "schema", "structured output", "of type")
# Words that say a parameter is refused (not merely too large: vLLM's "'max_tokens' ... is too large" is not).
_REFUSAL_WORDS = ("unsupported", "not supported", "unrecognized", "unknown", "extra", "not permitted", "not allowed")
_TOKEN_PARAMS = ("max_completion_tokens", "max_tokens")

Rejected = Literal["format_kind", "response_format", "token_param"]


def provider_message(exc: openai.APIStatusError) -> str:
    """The error's own message, as the provider wrote it."""
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(exc.message)


def rejected_parameter(exc: openai.APIStatusError, sent: Mapping) -> Rejected | None:
    """Which parameter of the request `sent` the endpoint refused, if its error names one: the reply bound it was
    sent (`token_param`), the kind of response format it was sent (`format_kind`: its words name json_schema,
    json_object or the schema), or any response_format at all (`response_format`: only the parameter is named,
    as a gateway that knows none says it). None for any other error."""
    if exc.status_code in _NOT_A_REJECTION or exc.status_code < 400:
        return None
    text = f"{provider_message(exc)} {exc.body}".lower()
    inner = exc.body.get("error") if isinstance(exc.body, dict) else None
    param = str(inner.get("param") or "").lower() if isinstance(inner, dict) else ""
    bound = next((name for name in _TOKEN_PARAMS if name in sent), None)
    if bound is not None and (param == bound or _names(text, bound)) and any(w in text for w in _REFUSAL_WORDS):
        return "token_param"
    if "response_format" not in sent:
        return None
    if any(word in text for word in _FORMAT_KIND_WORDS):
        return "format_kind"
    if param == "response_format" or "response_format" in text or "response format" in text:
        return "response_format"
    return None


def _names(text: str, parameter: str) -> bool:
    """`text` names `parameter` as a word of its own ("max_tokens" is not named by "max_completion_tokens")."""
    start = text.find(parameter)
    while start != -1:
        before = text[start - 1] if start else " "
        end = start + len(parameter)
        after = text[end] if end < len(text) else " "
        if not (before.isalnum() or before == "_") and not (after.isalnum() or after == "_"):
            return True
        start = text.find(parameter, start + 1)
    return False


def retry_after_seconds(headers: Mapping[str, str], now: datetime | None = None) -> float | None:
    """The wait a server asked for: `retry-after-ms` (OpenAI's), or `Retry-After` in seconds or as an HTTP date.
    None when absent, unreadable or negative."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            value = float(millis) / 1000
        except ValueError:
            value = -1.0
        if math.isfinite(value) and value >= 0:
            return value
    raw = headers.get("retry-after")
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        try:
            moment = parsedate_to_datetime(raw)
        except (TypeError, ValueError, IndexError):
            return None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        value = max(0.0, (moment - (now or datetime.now(UTC))).total_seconds())
    return value if math.isfinite(value) and value >= 0 else None
