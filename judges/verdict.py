"""The one result type every judge returns, and the one exception callers must handle."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Status = Literal["ok", "null", "error", "empty"]


class Verdict(BaseModel):
    """A judge's verdict on one answer.

    status: "ok" (a score on the judge's scale), "null" (the judge says the answer cannot be graded, e.g. the
    grounded judge when the answer says no document answers the question), "error" (no score: see `error`,
    and `raw_output` when the LLM replied), "empty" (nothing to judge; the LLM was not called).
    """

    model_config = ConfigDict(frozen=True)  # verdicts are shared through the cache: never mutate one

    judge: str
    status: Status
    score: float | None = None
    max_score: float
    normalized_score: float | None = Field(None, ge=0.0, le=1.0)
    reasoning: str = ""
    model: str | None = None
    prompt_tokens: int | None = None
    # Of prompt_tokens, those the provider read from its prompt cache (billed at its cached-input rate).
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    latency_ms: float | None = None
    raw_output: str | None = None
    prompt_version: str
    error: str | None = None
    cached: bool = False


class TransientLLMError(Exception):
    """The LLM could not be reached or was overloaded (429, 5xx, timeout, connection error), even after the
    client's own retries. Retrying later may succeed; nothing was judged. `retry_after`: the seconds the server
    asked us to wait (a 429's or 503's Retry-After), when it said."""

    def __init__(self, message: str, *, status_code: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after
