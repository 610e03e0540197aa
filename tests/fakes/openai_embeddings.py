"""`POST /v1/embeddings` of the fake LLM, answering as OpenAI does: `input` a string or a list of strings (at most
2,048, none empty), `model` one of the embedding models (else 404 `model_not_found`), optional `dimensions` (only
the text-embedding-3 models), `encoding_format` "float" or "base64" (little-endian float32, what the openai SDK
asks for by default); `usage` with `prompt_tokens` and `total_tokens`.

The vectors are deterministic and mean something, so that clustering them is honest: a hashed bag of words (each
word lower-cased, function words dropped, a plural or -ing/-ed ending cut) with signed feature hashing into the
model's dimensions, unit length. Texts that share words point the same way; paraphrases with other words do not
(a real model does better)."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

import numpy as np

MODELS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072, "text-embedding-ada-002": 1536}
MAX_INPUTS = 2048
CHARS_PER_TOKEN = 4
_WORD = re.compile(r"[a-z0-9]+")
_FUNCTION_WORDS = frozenset(
    [
        "a",
        "an",
        "the",
        "i",
        "me",
        "my",
        "we",
        "our",
        "you",
        "your",
        "it",
        "its",
        "is",
        "are",
        "was",
        "be",
        "been",
        "do",
        "does",
        "did",
        "can",
        "could",
        "would",
        "should",
        "will",
        "how",
        "what",
        "when",
        "where",
        "why",
        "who",
        "which",
        "to",
        "of",
        "in",
        "on",
        "for",
        "from",
        "with",
        "at",
        "by",
        "and",
        "or",
        "but",
        "not",
        "no",
        "this",
        "that",
        "these",
        "those",
        "there",
        "any",
        "please",
        "help",
        "hi",
        "hello",
        "hey",
        "thanks",
        "need",
        "want",
        "way",
        "tell",
        "idea",
        "possible",
    ]
)
# The name the fake judge gives a topic: how the naming prompt opens (topics.naming.INSTRUCTIONS).
NAMING_OPENING = "You name topics of customer-support questions."

Answer = tuple[int, Any]


def _stem(word: str) -> str:
    for ending in ("ing", "ed", "es", "s"):
        if len(word) > len(ending) + 3 and word.endswith(ending):
            return word[: -len(ending)]
    return word


def words(text: str) -> list[str]:
    return [_stem(w) for w in _WORD.findall(text.lower()) if w not in _FUNCTION_WORDS]


def vector(text: str, dimensions: int) -> np.ndarray:
    out = np.zeros(dimensions, dtype=np.float32)
    for word in words(text):
        digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        out[value % dimensions] += 1.0 if value >> 63 else -1.0
    norm = float(np.linalg.norm(out))
    if norm == 0:  # no word of substance: a fixed direction, as a model still answers something
        out[0] = 1.0
        return out
    return out / norm


def _error(status: int, message: str, code: str | None, param: str | None = None) -> Answer:
    return status, {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


def embeddings_answer(body: dict) -> Answer:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        return _error(400, "you must provide a model parameter", None, "model")
    if model not in MODELS:
        return _error(404, f"The model `{model}` does not exist or you do not have access to it.", "model_not_found")
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or len(texts) > MAX_INPUTS:
        return _error(400, f"'$.input' is invalid: give a string or 1 to {MAX_INPUTS} strings.", None, "input")
    if not all(isinstance(text, str) and text for text in texts):
        return _error(400, "'$.input' is invalid: an input is empty or not a string.", None, "input")
    dimensions = body.get("dimensions")
    if dimensions is not None and (
        not model.startswith("text-embedding-3") or not 1 <= int(dimensions) <= MODELS[model]
    ):
        return _error(400, f"This model does not support dimensions={dimensions}.", None, "dimensions")
    size = int(dimensions or MODELS[model])
    encoding = body.get("encoding_format") or "float"
    if encoding not in ("float", "base64"):
        return _error(
            400, f"'{encoding}' is not one of ['float', 'base64'] - 'encoding_format'", None, "encoding_format"
        )
    data = []
    for index, text in enumerate(texts):
        row = vector(text, size)
        embedding: Any = (
            base64.b64encode(row.astype("<f4").tobytes()).decode("ascii")
            if encoding == "base64"
            else [float(x) for x in row]
        )
        data.append({"object": "embedding", "index": index, "embedding": embedding})
    used = sum(max(1, len(text) // CHARS_PER_TOKEN) for text in texts)
    return 200, {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": used, "total_tokens": used}}


def topic_name(prompt: str) -> str | None:
    """The fake judge's name for a topic (None when the prompt is not the naming prompt): its questions' two most
    common words of substance, as a person might put them."""
    if NAMING_OPENING not in prompt:
        return None
    # The listed questions only: a prompt asking again also holds the rejected name and what was wrong with it.
    listed = prompt.split("Questions:", 1)[-1].split("\n\nName of the topic", 1)[0]
    counts: dict[str, int] = {}
    for word in words(listed):
        counts[word] = counts.get(word, 0) + 1
    top = sorted(counts, key=lambda w: (-counts[w], w))[:2]
    return " and ".join(top).capitalize() + " questions" if top else "General questions"
