"""Embeddings from the configured OpenAI-compatible endpoint (`POST /v1/embeddings` through the openai SDK, which
asks for base64 and decodes it), a batch of texts per call. Any failure that says the endpoint cannot embed (no such
route or model, a refused key, an endpoint down) is `EmbeddingsUnavailable`: the caller falls back to the local
embedding and says why."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import openai

from topics.failures import error_kind, status_kind

BATCH = 256  # inputs per call (OpenAI takes 2,048; smaller batches keep one failure cheap)
MAX_CHARS = 8_000  # about 2,000 tokens: well under the models' 8,191-token input limit


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


class EmbeddingClient:
    def __init__(
        self, model: str, base_url: str | None, api_key: str | None, timeout: float = 60.0, max_retries: int = 2
    ) -> None:
        self.model = model
        try:
            self._openai = openai.OpenAI(base_url=base_url, api_key=api_key, timeout=timeout, max_retries=max_retries)
        except openai.OpenAIError:
            if base_url is None:
                raise EmbeddingsUnavailable(
                    "no API key (OPENAI_API_KEY) and no OPENAI_BASE_URL", "no API key"
                ) from None
            self._openai = openai.OpenAI(base_url=base_url, api_key="unused", timeout=timeout, max_retries=max_retries)

    def embed(self, texts: Sequence[str]) -> tuple[np.ndarray, int]:
        """One call: the texts' vectors (float32 rows, in order) and the prompt tokens it cost."""
        inputs = [text[:MAX_CHARS] if text.strip() else "?" for text in texts]
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
