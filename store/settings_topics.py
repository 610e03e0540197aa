"""The topics' settings (`topics/`), a fields class `store.settings.Settings` inherits: the embeddings endpoint
(by default the judge's), the embedding model, its input and batch limits, the embedding price, and how many
questions a period and a topic need."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from pydantic import AliasChoices, BaseModel, BeforeValidator, Field, SecretStr

DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
LOCAL_EMBEDDING = "local"  # RELMON_EMBEDDING_MODEL=local: the TF-IDF fallback only, no endpoint asked
# USD per million tokens, OpenAI's list prices; another model is priced as the default unless the setting is set.
EMBEDDING_PRICES = {"text-embedding-3-small": 0.02, "text-embedding-3-large": 0.13, "text-embedding-ada-002": 0.10}
OPENAI_URL = "https://api.openai.com/v1"  # where the openai SDK goes when no base URL is given


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name, name.lower())}


def _blank_is_unset(value: object) -> object:
    """`NAME=` in a .env file (as docker-compose passes it) means unset, as for the other optional settings."""
    return None if isinstance(value, str) and not value.strip() else value


class TopicSettings(BaseModel):
    # The embeddings endpoint (any OpenAI-compatible `/v1/embeddings`). Unset: the judge's, OPENAI_BASE_URL.
    embedding_base_url: Annotated[str | None, BeforeValidator(_blank_is_unset)] = Field(
        None, **_env("RELMON_EMBEDDING_BASE_URL")
    )
    # Its key. Unset: OPENAI_API_KEY, but only when the embeddings go to the judge's own endpoint: another server
    # is never sent the judge's key (`embedding_endpoint`).
    embedding_api_key: Annotated[SecretStr | None, BeforeValidator(_blank_is_unset)] = Field(
        None, **_env("RELMON_EMBEDDING_API_KEY")
    )
    embedding_model: str = Field(DEFAULT_EMBEDDING_MODEL, min_length=1, **_env("RELMON_EMBEDDING_MODEL"))
    # A question is cut to this many characters before it is embedded: OpenAI's models take 8,191 tokens (8,000
    # characters of English is about 2,000); a small local model (e5, 512 tokens) needs about 1,500.
    embedding_max_chars: int = Field(8_000, ge=100, le=1_000_000, **_env("RELMON_EMBEDDING_MAX_CHARS"))
    # Inputs per embeddings call (OpenAI takes 2,048; smaller batches keep one failure cheap). A call also stays
    # under `topics.embeddings.REQUEST_CHARS` characters in all, for OpenAI's 300,000 tokens per request.
    embedding_batch_size: int = Field(256, ge=1, le=2_048, **_env("RELMON_EMBEDDING_BATCH_SIZE"))
    embedding_price_setting: float | None = Field(None, ge=0, **_env("RELMON_COST_EMBEDDING_PER_MTOK"))
    topics_min_questions: int = Field(30, ge=2, **_env("RELMON_TOPICS_MIN_QUESTIONS"))
    topics_min_size: int = Field(8, ge=2, **_env("RELMON_TOPICS_MIN_SIZE"))
    # A topic marked fixed (common.reports.fixes): its failure rate after the mark is compared with these days
    # before it, and it is followed this many days after it (then its last verdict stands).
    fix_baseline_days: int = Field(28, ge=7, le=365, **_env("RELMON_FIX_BASELINE_DAYS"))
    fix_follow_days: int = Field(90, ge=7, le=730, **_env("RELMON_FIX_FOLLOW_DAYS"))

    @property
    def embedding_price(self) -> float:
        """USD per million embedding tokens: the setting, or the model's list price."""
        if self.embedding_price_setting is not None:
            return self.embedding_price_setting
        return EMBEDDING_PRICES.get(self.embedding_model, EMBEDDING_PRICES[DEFAULT_EMBEDDING_MODEL])

    @property
    def local_embedding_only(self) -> bool:
        return self.embedding_model.strip().lower() == LOCAL_EMBEDDING


@dataclass(frozen=True)
class EmbeddingEndpoint:
    """Where the topics' embeddings are asked for, and with which key."""

    base_url: str  # always explicit: the SDK must not fall back to the environment's OPENAI_BASE_URL
    api_key: str | None  # None: no key to send (a local server), or none known for OpenAI itself
    key_setting: str | None  # where the key came from (RELMON_EMBEDDING_API_KEY, OPENAI_API_KEY), for the doctor
    separate: bool  # not the judge's endpoint

    @property
    def is_openai(self) -> bool:
        return self.base_url == OPENAI_URL


def _normal(url: str) -> str:
    return url.strip().rstrip("/")


def embedding_endpoint(
    own_url: str | None, own_key: str | None, judge_url: str | None, judge_key: str | None
) -> EmbeddingEndpoint:
    """The embeddings endpoint of these settings: RELMON_EMBEDDING_BASE_URL or the judge's (OPENAI_BASE_URL, else
    OpenAI); RELMON_EMBEDDING_API_KEY, else the judge's key when it is the judge's endpoint (the same URL, however
    it is written), else none: the judge's key goes to no other server."""
    judge = _normal(judge_url or OPENAI_URL)
    url = _normal(own_url) if own_url else judge
    separate = url != judge
    if own_key:
        return EmbeddingEndpoint(url, own_key, "RELMON_EMBEDDING_API_KEY", separate)
    if judge_key and not separate:
        return EmbeddingEndpoint(url, judge_key, "OPENAI_API_KEY", separate)
    return EmbeddingEndpoint(url, None, None, separate)
