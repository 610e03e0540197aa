"""What an endpoint takes, learned by asking and remembered: OpenAI-compatible servers differ in the structured
output they accept and in the name of the reply bound.

- The response format, best first: `json_schema` (strict structured outputs: OpenAI, vLLM, llama.cpp's own
  llama-server, LM Studio, recent Ollama), `json_object_schema` (JSON mode with the schema beside it, as
  llama-cpp-python takes it), `json_object` (JSON mode alone), `plain` (no response_format: some proxies).
- The reply bound: `max_tokens` (what nearly every server reads) or `max_completion_tokens` (what OpenAI's
  reasoning models insist on).

A client starts from the best and steps down when a server rejects one (judges.client), then remembers what
worked in a `ModeMemory` for its endpoint and model: in process here (`LocalModes`), shared by every process in
Redis (common.llm). A remembered mode lasts a day, then the best is tried again: servers get upgraded.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Literal, Protocol

ResponseFormat = Literal["json_schema", "json_object_schema", "json_object", "plain"]
TokenParam = Literal["max_tokens", "max_completion_tokens"]
FORMATS: tuple[ResponseFormat, ...] = ("json_schema", "json_object_schema", "json_object", "plain")
TOKEN_PARAMS: tuple[TokenParam, ...] = ("max_tokens", "max_completion_tokens")
MODE_TTL_SECONDS = 86_400  # a day: then the endpoint is probed again from the best format


@dataclass(frozen=True)
class EndpointMode:
    """How to ask one endpoint and model: the response format it takes and the name of its reply bound.
    `served_model`: the model its replies named when this was learned (a new snapshot behind the same name is
    probed again)."""

    response_format: ResponseFormat = "json_schema"
    token_param: TokenParam = "max_tokens"
    served_model: str | None = None

    def step_down(self) -> EndpointMode | None:
        """The next, less demanding response format; None below plain completion."""
        at = FORMATS.index(self.response_format)
        return replace(self, response_format=FORMATS[at + 1]) if at + 1 < len(FORMATS) else None

    def other_token_param(self) -> EndpointMode:
        other = TOKEN_PARAMS[1 - TOKEN_PARAMS.index(self.token_param)]
        return replace(self, token_param=other)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> EndpointMode | None:
        """The mode stored as JSON; None when it is unreadable or names a format this version does not know."""
        try:
            data = json.loads(text)
            mode = cls(**data)
        except (TypeError, ValueError):
            return None
        if mode.response_format not in FORMATS or mode.token_param not in TOKEN_PARAMS:
            return None
        return mode

    def describe(self) -> str:
        """How `relmon doctor` and the logs name it."""
        formats = {
            "json_schema": "structured outputs (json_schema)",
            "json_object_schema": "JSON mode with the schema (json_object + schema)",
            "json_object": "JSON mode (json_object)",
            "plain": "plain completion, read tolerantly (no response_format)",
        }
        return f"{formats[self.response_format]}, reply bound {self.token_param}"


class ModeMemory(Protocol):
    """Where a client keeps what it learned about an endpoint and model."""

    def get(self, endpoint: str, model: str) -> EndpointMode | None: ...

    def put(self, endpoint: str, model: str, mode: EndpointMode) -> None: ...

    def forget(self, endpoint: str, model: str) -> None: ...


class LocalModes:
    """A ModeMemory in this process only, each entry kept `ttl` seconds (`clock` injectable for tests)."""

    def __init__(self, ttl: float = MODE_TTL_SECONDS, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl, self.clock = ttl, clock
        self._items: dict[tuple[str, str], tuple[float, EndpointMode]] = {}
        self._lock = threading.Lock()

    def get(self, endpoint: str, model: str) -> EndpointMode | None:
        with self._lock:
            found = self._items.get((endpoint, model))
            if found is None:
                return None
            if self.clock() >= found[0]:
                del self._items[(endpoint, model)]
                return None
            return found[1]

    def put(self, endpoint: str, model: str, mode: EndpointMode) -> None:
        with self._lock:
            self._items[(endpoint, model)] = (self.clock() + self.ttl, mode)

    def forget(self, endpoint: str, model: str) -> None:
        with self._lock:
            self._items.pop((endpoint, model), None)
