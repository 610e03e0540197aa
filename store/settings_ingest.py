"""The ingest API's settings (`POST /v1/exchanges`, bot.ingest), a fields class `store.settings.Settings` inherits:
who may send exchanges, how big a request may be and how many one token may send a minute."""

from __future__ import annotations

from typing import Annotated

from pydantic import AliasChoices, BaseModel, BeforeValidator, Field, SecretStr
from pydantic_settings import NoDecode


def _env(name: str) -> dict:
    return {"validation_alias": AliasChoices(name, name.lower())}


def _tokens(value: object) -> object:
    """`a,b` -> two tokens (several at once, for rotation); blanks and spaces around them dropped."""
    if isinstance(value, str):
        return [SecretStr(part.strip()) for part in value.split(",") if part.strip()]
    return value


class IngestSettings(BaseModel):
    # Bearer tokens the bot's side sends (comma-separated; several during a rotation). None set: ingest is off.
    ingest_tokens: Annotated[list[SecretStr], NoDecode, BeforeValidator(_tokens)] = Field(
        default_factory=list, **_env("RELMON_INGEST_TOKENS")
    )
    # A request's body, at most (413 past it).
    ingest_max_bytes: int = Field(1_000_000, ge=10_000, le=50_000_000, **_env("RELMON_INGEST_MAX_BYTES"))
    # Requests one token may send in a minute (429 with Retry-After past it).
    ingest_per_minute: int = Field(600, ge=1, **_env("RELMON_INGEST_PER_MINUTE"))

    def ingest_token_values(self) -> list[str]:
        return [token.get_secret_value() for token in self.ingest_tokens]
