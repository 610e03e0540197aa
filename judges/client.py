"""The LLM client the judges share: one `openai.OpenAI` (thread-safe, pooled connections) reused for every call,
a bounded in-process cache of verdicts, and the translation of SDK errors into what a caller can act on."""

from __future__ import annotations

import functools
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import openai
from openai.lib._parsing import type_to_response_format_param  # the SDK's own pydantic → strict JSON schema
from pydantic import BaseModel

from judges.verdict import TransientLLMError, Verdict

OPENAI_API_URL = "https://api.openai.com/v1"
# Statuses worth retrying later (the SDK retries the same ones itself).
_TRANSIENT_STATUSES = {408, 409, 429}
# Words a provider's 400/422 uses when it does not support structured outputs.
_RESPONSE_FORMAT_WORDS = ("response_format", "json_schema", "structured output", "response format")


@functools.cache
def _response_format_for(model: type[BaseModel]) -> dict:
    return type_to_response_format_param(model)


class LLMRequestError(Exception):
    """A permanent failure (bad key, unknown model, rejected request): retrying will not help.
    The message says what is wrong and what to change."""


@dataclass(frozen=True)
class LLMReply:
    text: str
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    latency_ms: float
    cached_tokens: int | None = None  # of prompt_tokens, read from the provider's prompt cache


@dataclass(frozen=True)
class Sampling:
    """How one call samples: the default is the judges' own (temperature 0, no seed, the client's model). A
    second opinion asks again differently: another seed, a higher temperature, perhaps another model."""

    temperature: float = 0.0
    seed: int | None = None
    model: str | None = None  # None: the client's model

    @property
    def is_default(self) -> bool:
        return self == Sampling()


class VerdictCache:
    """A thread-safe LRU of verdicts keyed by `Judge.cache_key`."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._items: OrderedDict[str, Verdict] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> Verdict | None:
        with self._lock:
            verdict = self._items.get(key)
            if verdict is not None:
                self._items.move_to_end(key)
            return verdict

    def put(self, key: str, verdict: Verdict) -> None:
        if self.size <= 0:
            return
        with self._lock:
            self._items[key] = verdict
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)


class LLMClient:
    """Reaches any OpenAI-compatible chat completions endpoint.

    `max_retries` is the SDK's own retry count for 408/409/429/5xx, timeouts and connection errors (exponential
    backoff, honouring Retry-After). Use 2 in interactive tools; use 0 where another layer retries (the Celery
    pipeline), so a failing call is not retried twice over.
    """

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        max_prompt_chars: int = 100_000,
        cache_size: int = 1024,
    ) -> None:
        self.model = model
        self.max_prompt_chars = max_prompt_chars
        self.cache = VerdictCache(cache_size)
        # Flipped once a provider rejects response_format: later calls go straight to plain completion.
        self.structured_outputs = True
        try:
            self._openai = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)
        except openai.OpenAIError:
            if base_url is None:
                raise ValueError(
                    "no API key for OpenAI: set OPENAI_API_KEY (or OPENAI_BASE_URL for another provider)"
                ) from None
            # Local endpoints (Ollama, vLLM) often need no key, but the SDK insists on one.
            self._openai = openai.OpenAI(base_url=base_url, api_key="unused", timeout=timeout, max_retries=max_retries)
        self.base_url = str(self._openai.base_url).rstrip("/")

    def complete(
        self,
        messages: Sequence[Mapping[str, str]] | str,
        response_format: type[BaseModel] | None = None,
        *,
        sampling: Sampling | None = None,
    ) -> LLMReply:
        """One chat completion of `messages` (a plain string is one user message), at temperature 0 with the
        client's model unless `sampling` says otherwise: structured output with `response_format` when the
        provider accepts it, plain text otherwise. Raises TransientLLMError or LLMRequestError."""
        started = time.perf_counter()
        sampling = sampling or Sampling()
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        messages = [dict(message) for message in messages]
        completion = None
        if response_format is not None and self.structured_outputs:
            try:
                completion = self._call(messages, _response_format_for(response_format), sampling)
            except openai.APIStatusError as exc:
                if not _rejects_response_format(exc):
                    raise self._translate(exc) from exc
                self.structured_outputs = False
            except openai.APIError as exc:
                raise self._translate(exc) from exc
        if completion is None:
            try:
                completion = self._call(messages, None, sampling)
            except openai.APIError as exc:
                raise self._translate(exc) from exc
        return self.reply_of(completion, (time.perf_counter() - started) * 1000, asked=sampling.model)

    @property
    def sdk(self) -> openai.OpenAI:
        """The SDK client itself (its files and batches endpoints serve the Batch API)."""
        return self._openai

    def request_body(self, messages: Sequence[Mapping[str, str]], response_format: type[BaseModel] | None) -> dict:
        """The body `complete` posts first for these messages (structured output when the provider takes it)."""
        body: dict = {"model": self.model, "messages": [dict(m) for m in messages], "temperature": 0}
        if response_format is not None and self.structured_outputs:
            body["response_format"] = _response_format_for(response_format)
        return body

    def reply_of(self, completion: object, latency_ms: float, *, asked: str | None = None) -> LLMReply:
        """A chat completion's JSON as a reply (raises LLMRequestError when it holds no usable choice). A reply
        that names no model is credited to the model `asked` (the client's by default)."""
        choices = completion.get("choices") if isinstance(completion, dict) else None
        if not choices or not isinstance(choices[0], dict) or not isinstance(choices[0].get("message"), dict):
            raise LLMRequestError("the LLM endpoint answered without any choice")
        message = choices[0]["message"]
        if message.get("refusal"):
            raise LLMRequestError(f"the model refused to judge: {message['refusal']}")
        usage = completion.get("usage") if isinstance(completion.get("usage"), dict) else {}
        content = message.get("content")
        return LLMReply(
            text=content if isinstance(content, str) else "",
            model=completion.get("model") or asked or self.model,
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            latency_ms=latency_ms,
            cached_tokens=cached_tokens(usage),
        )

    def _call(self, messages: list[dict], response_format: dict | None, sampling: Sampling) -> dict:
        """The completion as the JSON the endpoint sent. The SDK still sends the request (auth, base URL,
        timeout), retries when asked and raises its errors; we post the body through its documented low-level
        `post` (the SDK README's "undocumented endpoints") because its typed `chat.completions.create` costs
        more CPU than the rest of a judgment: it walks the request, the large JSON schema included, through its
        type transforms on every call, then builds response objects we read three fields of."""
        body: dict = {"model": sampling.model or self.model, "messages": messages, "temperature": sampling.temperature}
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if response_format is not None:
            body["response_format"] = response_format
        content = self._openai.post("/chat/completions", body=body, cast_to=bytes)
        try:
            return json.loads(content)
        except ValueError:
            raise LLMRequestError("the LLM endpoint answered with something that is not JSON") from None

    def _translate(self, exc: openai.APIError) -> Exception:
        """The SDK's exception as TransientLLMError (try again later) or LLMRequestError (fix something)."""
        where = self.base_url
        if isinstance(exc, openai.APITimeoutError):
            return TransientLLMError(f"the LLM endpoint {where} did not answer in time (timeout)")
        if isinstance(exc, openai.APIConnectionError):
            return TransientLLMError(f"cannot connect to the LLM endpoint {where}: {exc.__cause__ or exc}")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = _provider_message(exc)
            if status in _TRANSIENT_STATUSES or status >= 500:
                what = "rate-limited the request" if status == 429 else "failed"
                return TransientLLMError(
                    f"the LLM endpoint {what} ({status}): {detail}",
                    status_code=status,
                    retry_after=retry_after_seconds(exc.response.headers),
                )
            if status == 401:
                return LLMRequestError(f"the LLM endpoint rejected the API key (401): check OPENAI_API_KEY ({detail})")
            if status == 403:
                return LLMRequestError(
                    f"the API key may not use model {self.model!r} (403): check the key's permissions "
                    f"or RELMON_JUDGE_MODEL ({detail})"
                )
            if status == 404:
                return LLMRequestError(
                    f"model {self.model!r} or the endpoint was not found at {where} (404): check "
                    f"RELMON_JUDGE_MODEL and OPENAI_BASE_URL ({detail})"
                )
            return LLMRequestError(f"the LLM endpoint rejected the request ({status}): {detail}")
        return LLMRequestError(f"unexpected reply from the LLM endpoint {where}: {exc}")


def cached_tokens(usage: Mapping) -> int | None:
    """The prompt tokens a provider served from its prompt cache (OpenAI's `prompt_tokens_details.cached_tokens`);
    None when it does not say."""
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


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


def _provider_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])
        if isinstance(inner, str):
            return inner
    return str(exc.message)


def _rejects_response_format(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 422):
        return False
    text = f"{_provider_message(exc)} {exc.body}".lower()
    return any(word in text for word in _RESPONSE_FORMAT_WORDS)
