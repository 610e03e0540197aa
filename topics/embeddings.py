"""Embeddings from the configured OpenAI-compatible endpoint (`POST /v1/embeddings` through the openai SDK, which
asks for base64 and decodes it), a batch of texts per call. The endpoint is the topics' own
(RELMON_EMBEDDING_BASE_URL and RELMON_EMBEDDING_API_KEY), by default the judge's: a team judging with a chat-only
server can embed elsewhere. Each text is cut to RELMON_EMBEDDING_MAX_CHARS and the texts are sent in batches
(`batches`) that respect the model's limits. Any failure that says the endpoint cannot embed (no such route or
model, a refused key, an endpoint down) is `EmbeddingsUnavailable`: the caller falls back to the local embedding
and says why."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import numpy as np
import openai

from store.settings import Settings
from store.settings_topics import OPENAI_URL, EmbeddingEndpoint, embedding_endpoint
from topics.failures import error_kind, status_kind

BATCH = 256  # inputs per call by default (RELMON_EMBEDDING_BATCH_SIZE)
MAX_CHARS = 8_000  # characters of a text by default (RELMON_EMBEDDING_MAX_CHARS): about 2,000 tokens of English
# Characters of one call's texts together. OpenAI takes at most 300,000 tokens a request, summed over its inputs;
# 150,000 characters stay under it even at one token a character (Chinese, Japanese), and a typical batch of short
# questions (256 of a few hundred characters) never reaches it.
REQUEST_CHARS = 150_000


class EmbeddingsUnavailable(Exception):
    """The endpoint gave no embeddings; the message says why, in a line, for the operator's log (it may carry the
    provider's own words, which may echo the input); `kind` says what failed in a bounded label, for what readers
    are shown (`topics.failures`)."""

    def __init__(self, message: str, kind: str = "unexpected reply") -> None:
        super().__init__(message)
        self.kind = kind


def text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def to_bytes(vector: np.ndarray) -> bytes:
    """How a vector is stored: float16, little-endian."""
    return np.asarray(vector, dtype="<f2").tobytes()


def from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype="<f2")


def endpoint_of(settings: Settings) -> EmbeddingEndpoint:
    """The embeddings endpoint and key of these settings (`store.settings_topics.embedding_endpoint`)."""
    return embedding_endpoint(
        settings.embedding_base_url,
        settings.secret("embedding_api_key"),
        settings.openai_base_url,
        settings.secret("openai_api_key"),
    )


def endpoint_label(url: str) -> str:
    """The endpoint as logs and the doctor show it: scheme, host, port and path, no credentials or query."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", "")) or url


def embedding_space(settings: Settings) -> str:
    """What stored vectors are kept under: the model's name and its endpoint. Two endpoints serving one model name
    (a local server's "text-embedding-3-small" look-alike, another provider's) need not share a space; vectors of
    two spaces in one run would be grouped as if they did. The endpoint as a short digest keeps the key within its
    column (200) and the host out of the database."""
    where = hashlib.sha256(endpoint_label(endpoint_of(settings).base_url).encode("utf-8")).hexdigest()[:12]
    return f"{settings.embedding_model[:180]}@{where}"


def client_for(settings: Settings, *, timeout: float | None = None, max_retries: int = 2) -> EmbeddingClient:
    """The topics' own client, on the embeddings endpoint of the settings, with the model's limits. The SDK's
    retries are the only ones (a topics run is not a Celery retry loop)."""
    endpoint = endpoint_of(settings)
    return EmbeddingClient(
        settings.embedding_model,
        endpoint.base_url,
        endpoint.api_key,
        timeout=timeout or settings.llm_timeout_seconds,
        max_retries=max_retries,
        max_chars=settings.embedding_max_chars,
    )


def prepared(texts: Sequence[str], max_chars: int = MAX_CHARS) -> list[str]:
    """The inputs sent for `texts`: each cut to `max_chars` (the model's input limit), none empty (refused)."""
    return [text[:max_chars] if text.strip() else "?" for text in texts]


def batches(
    lengths: Sequence[int], size: int = BATCH, max_chars: int = MAX_CHARS, request_chars: int = REQUEST_CHARS
) -> list[range]:
    """The texts (by their lengths, in order) split into calls: at most `size` a call, and at most `request_chars`
    characters a call once each is cut to `max_chars` (a text longer than that alone is a call of its own)."""
    found: list[range] = []
    first = total = 0
    for index, length in enumerate(lengths):
        cut = max(1, min(length, max_chars))
        if index > first and (index - first >= size or total + cut > request_chars):
            found.append(range(first, index))
            first, total = index, 0
        total += cut
    if first < len(lengths):
        found.append(range(first, len(lengths)))
    return found


class EmbeddingClient:
    def __init__(
        self,
        model: str,
        base_url: str | None,
        api_key: str | None,
        timeout: float = 60.0,
        max_retries: int = 2,
        max_chars: int = MAX_CHARS,
    ) -> None:
        self.model, self.max_chars = model, max_chars
        url = (base_url or "").rstrip("/")
        if not api_key and (not url or url == OPENAI_URL):
            raise EmbeddingsUnavailable("no API key for OpenAI's embeddings (OPENAI_API_KEY)", "no API key")
        # Always explicit: with None the SDK would read OPENAI_BASE_URL and OPENAI_API_KEY from the environment
        # and send the judge's key to another server. A local server needs no key; the SDK insists on one.
        self._openai = openai.OpenAI(
            base_url=url or OPENAI_URL, api_key=api_key or "unused", timeout=timeout, max_retries=max_retries
        )
        self.base_url = str(self._openai.base_url).rstrip("/")

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """One call: the texts' vectors (float32 rows, in order) and the prompt tokens it cost."""
        inputs = prepared(texts, self.max_chars)
        try:
            reply = self._openai.embeddings.create(model=self.model, input=inputs)
        except openai.APIStatusError as error:
            raise EmbeddingsUnavailable(
                f"{self.model}: HTTP {error.status_code}: {_message(error)}", status_kind(error.status_code)
            ) from error
        except openai.APIError as error:  # connection refused, timeout
            raise EmbeddingsUnavailable(f"{self.model}: {type(error).__name__}: {error}", error_kind(error)) from error
        rows = sorted(reply.data, key=lambda item: item.index)
        if len(rows) != len(inputs):
            raise EmbeddingsUnavailable(f"{self.model}: {len(rows)} embeddings for {len(inputs)} inputs")
        vectors = np.asarray([row.embedding for row in rows], dtype=np.float32)
        tokens = reply.usage.prompt_tokens if reply.usage is not None else 0
        return vectors, int(tokens or 0)


def _message(error: openai.APIStatusError) -> str:
    body = error.body
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:200]
    return str(error.message)[:200]
