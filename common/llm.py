"""The judges' LLM client as relmon builds it from its settings, for every caller alike (the pipeline, the second
opinion, `relmon judge`/`eval`, backfill online and through the Batch API, the canary, `relmon doctor`), so all
of them share what was learned about the endpoint and one bound on the calls in flight:

- what the endpoint takes (judges.modes) is kept in Redis, shared by every process, for a day;
- one gate per endpoint in a process (judges.gate), of RELMON_LLM_CONCURRENCY calls, or as many as the
  endpoint's kind serves at once when that is unset.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import redis

from judges import LLMClient
from judges.gate import EndpointGate
from judges.modes import MODE_TTL_SECONDS, EndpointMode, LocalModes
from store.settings import Settings

log = logging.getLogger("relmon.llm")

LOCAL_CONCURRENCY = 1  # a local server on one machine: most serve one request at a time by default
# The default ports of local servers: Ollama, LM Studio, llama.cpp's llama-server, llama-cpp-python (and vLLM).
_LOCAL_PORTS = (11434, 1234, 8080, 8000)
_LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1", "0.0.0.0", "host.docker.internal")
REMEMBERED_LOCALLY_SECONDS = 60.0  # a process rereads Redis this often: another's discovery reaches it soon
REDIS_PAUSE_SECONDS = 60.0  # after Redis failed, the modes are kept in process this long before it is tried again


def default_concurrency(base_url: str | None, threads: int) -> int:
    """Calls in flight for an endpoint whose bound is not set, by the endpoint's kind as its URL tells it: one for
    a local server on its default port (on this machine, or a single-label host such as a compose service);
    otherwise (a hosted API, whose rate limits answer 429, which is retried; a gateway) the caller's `threads`."""
    if not base_url:
        return threads  # OpenAI itself
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if port in _LOCAL_PORTS and (host in _LOCAL_HOSTS or "." not in host):
        return LOCAL_CONCURRENCY
    return threads


class RedisModes:
    """A ModeMemory in Redis (`relmon:llm-mode:<endpoint digest>:<model>`, expiring after a day), shared by every
    process, read through a short local copy. When Redis cannot be reached the process keeps what it learned
    itself: the endpoint still works, it is only probed once more."""

    def __init__(self, client: redis.Redis, ttl: int = MODE_TTL_SECONDS, clock=time.monotonic) -> None:
        self.client, self.ttl, self.clock = client, ttl, clock
        self.local = LocalModes(ttl=REMEMBERED_LOCALLY_SECONDS)
        self.fallback = LocalModes(ttl=ttl)
        self.paused_until = 0.0  # Redis failed: not asked again before then (no LLM call waits on a dead Redis)

    def _redis(self, operation: Callable[[redis.Redis], object]) -> object | None:
        if self.clock() < self.paused_until:
            return None
        try:
            return operation(self.client)
        except redis.RedisError as error:
            self.paused_until = self.clock() + REDIS_PAUSE_SECONDS
            log.warning("LLM endpoint modes: Redis unreachable, kept in this process", extra={"error": repr(error)})
            return None

    @staticmethod
    def key(endpoint: str, model: str) -> str:
        return f"relmon:llm-mode:{hashlib.sha256(endpoint.encode()).hexdigest()[:16]}:{model}"

    def get(self, endpoint: str, model: str) -> EndpointMode | None:
        known = self.local.get(endpoint, model)
        if known is not None:
            return known
        if self.clock() < self.paused_until:
            return self.fallback.get(endpoint, model)
        raw = self._redis(lambda client: client.get(self.key(endpoint, model)))
        if self.clock() < self.paused_until:  # it failed just now
            return self.fallback.get(endpoint, model)
        mode = EndpointMode.from_json(raw) if isinstance(raw, bytes | str) else None
        if mode is not None:
            self.local.put(endpoint, model, mode)
        return mode

    def put(self, endpoint: str, model: str, mode: EndpointMode) -> None:
        self.local.put(endpoint, model, mode)
        self.fallback.put(endpoint, model, mode)
        self._redis(lambda client: client.set(self.key(endpoint, model), mode.to_json(), ex=self.ttl))

    def forget(self, endpoint: str, model: str) -> None:
        self.local.forget(endpoint, model)
        self.fallback.forget(endpoint, model)
        self._redis(lambda client: client.delete(self.key(endpoint, model)))


_gates: dict[tuple[str, int], EndpointGate] = {}
_gates_lock = threading.Lock()


def gate_for(endpoint: str, limit: int) -> EndpointGate:
    """The one gate of this process for `endpoint`: every client of it, in every thread, passes the same."""
    with _gates_lock:
        gate = _gates.get((endpoint, limit))
        if gate is None:
            gate = _gates[(endpoint, limit)] = EndpointGate(limit)
        return gate


def concurrency_for(settings: Settings) -> int:
    return settings.llm_concurrency or default_concurrency(settings.openai_base_url, settings.worker_concurrency)


def llm_client_for(
    settings: Settings,
    *,
    redis_client: redis.Redis | None,
    max_retries: int,
    cache_size: int = 1024,
    timeout: float | None = None,
) -> LLMClient:
    """The judges' client for these settings. `redis_client`: where endpoint modes are shared (None: this
    process only). `max_retries`: 0 where Celery retries (the pipeline), the SDK-like retries elsewhere."""
    base_url = settings.openai_base_url
    endpoint = (base_url or "https://api.openai.com/v1").rstrip("/")
    return LLMClient(
        model=settings.judge_model,
        base_url=base_url,
        api_key=settings.secret("openai_api_key"),
        timeout=timeout or settings.llm_timeout_seconds,
        max_retries=max_retries,
        max_prompt_chars=settings.max_prompt_chars,
        cache_size=cache_size,
        modes=RedisModes(redis_client) if redis_client is not None else None,
        gate=gate_for(endpoint, concurrency_for(settings)),
    )
