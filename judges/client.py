"""The LLM client the judges share: one `openai.OpenAI` (thread-safe, pooled connections) reused for every call,
a bounded in-process cache of verdicts, and what makes any OpenAI-compatible endpoint work:

- the response format steps down when a server refuses it (json_schema → JSON mode with the schema → JSON mode →
  plain completion, read tolerantly), and the reply bound's name switches (max_tokens ↔ max_completion_tokens):
  what worked is remembered per endpoint and model (judges.modes);
- every call bounds its reply, and reports `finish_reason` so a reply cut at the bound is never read as a verdict;
- calls to the endpoint go through one gate (judges.gate): a bound on those in flight, backing off after a timeout;
- usage is taken as the server gives it: a count it does not give is None (unknown), never 0.
"""

from __future__ import annotations

import functools
import json
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

import openai
from openai.lib._parsing import type_to_response_format_param  # the SDK's own pydantic → strict JSON schema
from pydantic import BaseModel

from judges.endpoint_errors import provider_message, rejected_parameter, retry_after_seconds
from judges.gate import EndpointGate
from judges.modes import EndpointMode, LocalModes, ModeMemory, ResponseFormat
from judges.verdict import TransientLLMError, Verdict

# Statuses worth retrying later, besides 5xx that names no refused parameter.
_TRANSIENT_STATUSES = {408, 409, 429}
DEFAULT_REPLY_TOKENS = 1024  # the bound of a call that names none: no reply is unbounded
DEFAULT_CONCURRENCY = 32  # calls in flight through one client's own gate (common.llm sizes it per endpoint kind)
# Retry waits, as the openai SDK's: 0.5 s doubling to 8 s, less up to 25% at random; a Retry-After up to 2 minutes.
_RETRY_BASE, _RETRY_CAP, _RETRY_AFTER_CAP = 0.5, 8.0, 120.0

__all__ = ["LLMClient", "LLMReply", "LLMRequestError", "Sampling", "VerdictCache", "retry_after_seconds"]


@functools.cache
def _response_format_for(model: type[BaseModel]) -> dict:
    return type_to_response_format_param(model)


def response_format_param(kind: ResponseFormat, model: type[BaseModel]) -> dict | None:
    """The `response_format` of a request in this format (None: plain completion, no response_format)."""
    strict = _response_format_for(model)
    if kind == "json_schema":
        return strict
    if kind == "json_object_schema":  # llama-cpp-python's JSON mode constrained by the schema
        return {"type": "json_object", "schema": strict["json_schema"]["schema"]}
    if kind == "json_object":
        return {"type": "json_object"}
    return None


class LLMRequestError(Exception):
    """A permanent failure (bad key, unknown model, rejected request): retrying will not help.
    The message says what is wrong and what to change."""


@dataclass(frozen=True)
class LLMReply:
    text: str
    model: str
    prompt_tokens: int | None  # None: the server did not say
    completion_tokens: int | None
    latency_ms: float
    cached_tokens: int | None = None  # of prompt_tokens, read from the provider's prompt cache; None: not said
    finish_reason: str | None = None  # "length": the reply was cut at its bound


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

    `max_retries`: retries of 408/409/429/5xx, timeouts and connection errors (0.5 s doubling, Retry-After
    honoured; after a timeout, the gate's cooldown). Use 2 in interactive tools; use 0 where another layer retries
    (the Celery pipeline), so a failing call is not retried twice over. `modes`: where what the endpoint takes is
    remembered (default: this client only; common.llm shares it in Redis). `gate`: the bound on calls in flight
    (default: one of `concurrency` for this client; common.llm shares one per endpoint in a process).
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
        *,
        modes: ModeMemory | None = None,
        gate: EndpointGate | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.max_prompt_chars = max_prompt_chars
        self.cache = VerdictCache(cache_size)
        self.max_retries = max_retries
        self.modes = modes if modes is not None else LocalModes()
        self.gate = gate if gate is not None else EndpointGate(concurrency)
        # A call waits for a slot at most this long: a queued request would have timed out by then anyway.
        self.slot_wait_seconds = 2 * timeout + self.gate.cooldown_cap
        self._sleep = sleep
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

    # What the endpoint takes ------------------------------------------------------------------------------

    def mode_for(self, model: str | None = None) -> EndpointMode:
        """What this endpoint was found to take for `model` (the client's by default): the best, until refused."""
        return self.modes.get(self.base_url, model or self.model) or EndpointMode()

    def forget_mode(self, model: str | None = None) -> None:
        """Probe the endpoint again from the best format on the next call."""
        self.modes.forget(self.base_url, model or self.model)

    # Calls ------------------------------------------------------------------------------------------------

    def complete(
        self,
        messages: Sequence[Mapping[str, str]] | str,
        response_format: type[BaseModel] | None = None,
        *,
        sampling: Sampling | None = None,
        max_tokens: int | None = None,
    ) -> LLMReply:
        """One chat completion of `messages` (a plain string is one user message), at temperature 0 with the
        client's model unless `sampling` says otherwise, its reply bounded at `max_tokens` (DEFAULT_REPLY_TOKENS
        when None). With `response_format`, the best format the endpoint takes. Raises TransientLLMError or
        LLMRequestError."""
        started = time.perf_counter()
        sampling = sampling or Sampling()
        model = sampling.model or self.model
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        messages = [dict(message) for message in messages]
        known = self.mode_for(model)
        mode, refused_bounds = known, set()
        while True:
            kind = mode.response_format if response_format is not None else "plain"
            body = self._body(messages, model, sampling, kind, response_format, mode.token_param, max_tokens)
            try:
                completion = self._post(body)
                break
            except openai.APIStatusError as exc:
                refused = rejected_parameter(exc, body)
                if refused == "token_param" and mode.other_token_param().token_param not in refused_bounds:
                    refused_bounds.add(mode.token_param)
                    mode = mode.other_token_param()
                elif refused == "format_kind" and kind != "plain":
                    mode = mode.step_down() or mode
                elif refused == "response_format" and kind != "plain":  # it takes none: plain completion
                    mode = replace(mode, response_format="plain")
                else:
                    raise self._translate(exc, refused=refused) from exc
        reply = self.reply_of(completion, (time.perf_counter() - started) * 1000, asked=model)
        self._learn(model, known, mode, response_format is not None, reply.model)
        return reply

    def _learn(self, model: str, known: EndpointMode, used: EndpointMode, formatted: bool, served: str) -> None:
        """Remember what this call found out. A plain call says nothing of the response format. A reply from
        another model than the one the mode was learned with (a new snapshot behind the same name) sends the
        next call back to the best format."""
        if known.served_model is not None and served != known.served_model:
            self.modes.forget(self.base_url, model)
            return
        learned = replace(used if formatted else replace(known, token_param=used.token_param), served_model=served)
        if learned != known:
            self.modes.put(self.base_url, model, learned)

    @property
    def sdk(self) -> openai.OpenAI:
        """The SDK client itself (its files and batches endpoints serve the Batch API)."""
        return self._openai

    def request_body(
        self,
        messages: Sequence[Mapping[str, str]],
        response_format: type[BaseModel] | None,
        max_tokens: int | None = None,
    ) -> dict:
        """The body `complete` posts first for these messages, in the format the endpoint is known to take."""
        mode = self.mode_for()
        kind = mode.response_format if response_format is not None else "plain"
        messages = [dict(m) for m in messages]
        return self._body(messages, self.model, Sampling(), kind, response_format, mode.token_param, max_tokens)

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
        finish = choices[0].get("finish_reason")
        return LLMReply(
            text=content if isinstance(content, str) else "",
            model=completion.get("model") or asked or self.model,
            prompt_tokens=token_count(usage.get("prompt_tokens")),
            completion_tokens=token_count(usage.get("completion_tokens")),
            latency_ms=latency_ms,
            cached_tokens=cached_tokens(usage),
            finish_reason=finish if isinstance(finish, str) else None,
        )

    def _body(
        self,
        messages: list[dict],
        model: str,
        sampling: Sampling,
        kind: ResponseFormat,
        response_format: type[BaseModel] | None,
        token_param: str,
        max_tokens: int | None,
    ) -> dict:
        body: dict = {"model": model, "messages": messages, "temperature": sampling.temperature}
        body[token_param] = max_tokens or DEFAULT_REPLY_TOKENS
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if response_format is not None and (param := response_format_param(kind, response_format)) is not None:
            body["response_format"] = param
        return body

    def _post(self, body: dict) -> dict:
        """The completion as the JSON the endpoint sent, through the gate, retried up to `max_retries` times when
        transient. Raises TransientLLMError, LLMRequestError, or the SDK's APIStatusError for a permanent refusal
        (the caller reads it for a refused parameter). The body goes through the SDK's documented low-level
        `post` (the SDK README's "undocumented endpoints"): its typed `chat.completions.create` costs more CPU
        than the rest of a judgment (it walks the large JSON schema through its type transforms on every call)."""
        attempt = 0
        while True:
            try:
                with self.gate.slot(self.slot_wait_seconds):
                    content = self._openai.post(
                        "/chat/completions", body=body, cast_to=bytes, options={"max_retries": 0}
                    )
            except openai.APITimeoutError as exc:
                error = self._translate(exc, retry_after=self.gate.timed_out())
            except openai.APIStatusError as exc:
                status = exc.status_code
                if rejected_parameter(exc, body) or not (status in _TRANSIENT_STATUSES or status >= 500):
                    raise
                error = self._translate(exc)
            except openai.APIError as exc:
                error = self._translate(exc)
            else:
                self.gate.succeeded()
                try:
                    return json.loads(content)
                except ValueError:
                    raise LLMRequestError("the LLM endpoint answered with something that is not JSON") from None
            if not isinstance(error, TransientLLMError) or attempt >= self.max_retries:
                raise error
            attempt += 1
            self._sleep(_retry_delay(attempt, error.retry_after))

    def _translate(
        self, exc: openai.APIError, *, retry_after: float | None = None, refused: str | None = None
    ) -> Exception:
        """The SDK's exception as TransientLLMError (try again later) or LLMRequestError (fix something), with the
        SDK's as its cause (`relmon doctor` reads it)."""
        translated = self._translated(exc, retry_after=retry_after, refused=refused)
        translated.__cause__ = exc
        return translated

    def _translated(self, exc: openai.APIError, *, retry_after: float | None, refused: str | None) -> Exception:
        where = self.base_url
        if isinstance(exc, openai.APITimeoutError):
            return TransientLLMError(
                f"the LLM endpoint {where} did not answer in time (timeout)", retry_after=retry_after
            )
        if isinstance(exc, openai.APIConnectionError):
            return TransientLLMError(f"cannot connect to the LLM endpoint {where}: {exc.__cause__ or exc}")
        if not isinstance(exc, openai.APIStatusError):
            return LLMRequestError(f"unexpected reply from the LLM endpoint {where}: {exc}")
        status = exc.status_code
        detail = provider_message(exc)
        if refused == "token_param":
            return LLMRequestError(
                f"the LLM endpoint takes neither max_tokens nor max_completion_tokens ({status}): {detail}"
            )
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


def _retry_delay(attempt: int, retry_after: float | None) -> float:
    if retry_after is not None and 0 < retry_after <= _RETRY_AFTER_CAP:
        return retry_after
    return min(_RETRY_BASE * 2 ** (attempt - 1), _RETRY_CAP) * (1 - 0.25 * random.random())


def token_count(value: object) -> int | None:
    """A usage count as the server gave it: a non-negative integer, else None (unknown, not zero)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def cached_tokens(usage: Mapping) -> int | None:
    """The prompt tokens a provider served from its prompt cache (OpenAI's `prompt_tokens_details.cached_tokens`);
    None when it does not say."""
    details = usage.get("prompt_tokens_details")
    return token_count(details.get("cached_tokens")) if isinstance(details, dict) else None
