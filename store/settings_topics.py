"""The topics' settings (`topics/`), a fields class `store.settings.Settings` inherits: the embedding model, the
embedding price, and how many questions a period and a topic need."""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, Field

DEFAULT_EMBEDDING_MODEL = "text-embedding-3-small"
LOCAL_EMBEDDING = "local"  # RELMON_EMBEDDING_MODEL=local: the TF-IDF fallback only, no endpoint asked
# USD per million tokens, OpenAI's list prices; another model is priced as the default unless the setting is set.
EMBEDDING_PRICES = {"text-embedding-3-small": 0.02, "text-embedding-3-large": 0.13, "text-embedding-ada-002": 0.10}


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name, name.lower())}


class TopicSettings(BaseModel):
    embedding_model: str = Field(DEFAULT_EMBEDDING_MODEL, min_length=1, **_env("RELMON_EMBEDDING_MODEL"))
    embedding_price_setting: float | None = Field(None, ge=0, **_env("RELMON_COST_EMBEDDING_PER_MTOK"))
    topics_min_questions: int = Field(30, ge=2, **_env("RELMON_TOPICS_MIN_QUESTIONS"))
    topics_min_size: int = Field(8, ge=2, **_env("RELMON_TOPICS_MIN_SIZE"))

    @property
    def embedding_price(self) -> float:
        """USD per million embedding tokens: the setting, or the model's list price."""
        if self.embedding_price_setting is not None:
            return self.embedding_price_setting
        return EMBEDDING_PRICES.get(self.embedding_model, EMBEDDING_PRICES[DEFAULT_EMBEDDING_MODEL])

    @property
    def local_embedding_only(self) -> bool:
        return self.embedding_model.strip().lower() == LOCAL_EMBEDDING
