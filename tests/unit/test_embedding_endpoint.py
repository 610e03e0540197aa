"""Which endpoint and key the topics' embeddings use (RELMON_EMBEDDING_BASE_URL / RELMON_EMBEDDING_API_KEY, by
default the judge's), how texts are cut and split into calls, and that the key is a secret like the others."""

from __future__ import annotations

import pytest

from common.telemetry.scrub import SecretMasker
from store.settings import Settings
from store.settings_topics import OPENAI_URL, embedding_endpoint
from topics.embeddings import (
    REQUEST_CHARS,
    EmbeddingClient,
    EmbeddingsUnavailable,
    batches,
    client_for,
    endpoint_label,
    endpoint_of,
    prepared,
)

JUDGE = "http://judge.internal:8000/v1"
EMBED = "http://embed.internal:9000/v1"


def settings(**values: object) -> Settings:
    return Settings(_env_file=None, **values)


def test_by_default_the_judges_endpoint_and_key():
    endpoint = endpoint_of(settings(openai_base_url=JUDGE, openai_api_key="sk-judge"))
    assert (endpoint.base_url, endpoint.api_key, endpoint.key_setting, endpoint.separate) == (
        JUDGE,
        "sk-judge",
        "OPENAI_API_KEY",
        False,
    )
    openai = endpoint_of(settings(openai_api_key="sk-judge"))  # no base URL: OpenAI itself, explicitly
    assert openai.base_url == OPENAI_URL and openai.api_key == "sk-judge" and openai.is_openai


def test_an_endpoint_of_its_own_with_its_own_key():
    endpoint = endpoint_of(
        settings(
            openai_base_url=JUDGE,
            openai_api_key="sk-judge",
            embedding_base_url=EMBED + "/",
            embedding_api_key="sk-embed",
        )
    )
    assert (endpoint.base_url, endpoint.api_key, endpoint.key_setting, endpoint.separate) == (
        EMBED,
        "sk-embed",
        "RELMON_EMBEDDING_API_KEY",
        True,
    )


def test_another_server_is_never_sent_the_judges_key():
    endpoint = endpoint_of(settings(openai_base_url=JUDGE, openai_api_key="sk-judge", embedding_base_url=EMBED))
    assert endpoint.separate and endpoint.api_key is None and endpoint.key_setting is None
    # The judge's own endpoint written another way is the same endpoint: its key goes with it.
    same = embedding_endpoint(" https://api.openai.com/v1/ ", None, None, "sk-judge")
    assert not same.separate and same.api_key == "sk-judge"


def test_a_blank_setting_is_unset_and_the_environment_names_are_read(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("RELMON_EMBEDDING_BASE_URL", "  ")
    monkeypatch.setenv("RELMON_EMBEDDING_API_KEY", "")
    monkeypatch.setenv("RELMON_EMBEDDING_MAX_CHARS", "1500")
    monkeypatch.setenv("RELMON_EMBEDDING_BATCH_SIZE", "64")
    read = settings(openai_base_url=JUDGE, openai_api_key="sk-judge")
    assert read.embedding_base_url is None and read.embedding_api_key is None
    assert (read.embedding_max_chars, read.embedding_batch_size) == (1500, 64)
    assert endpoint_of(read).base_url == JUDGE
    monkeypatch.setenv("RELMON_EMBEDDING_BASE_URL", EMBED)
    monkeypatch.setenv("RELMON_EMBEDDING_API_KEY", "sk-embed-from-env")
    read = settings()
    assert read.embedding_base_url == EMBED and "sk-embed-from-env" not in repr(read)  # a SecretStr
    assert read.secret("embedding_api_key") == "sk-embed-from-env"


def test_the_embeddings_key_is_masked_like_the_others():
    masker = SecretMasker.from_settings(settings(embedding_api_key="embed-key-0123456789"))
    assert "embed-key-0123456789" not in masker("refused embed-key-0123456789")


def test_the_client_talks_to_the_chosen_endpoint_with_its_key(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-the-environment")
    monkeypatch.setenv("OPENAI_BASE_URL", JUDGE)
    own = client_for(settings(embedding_base_url=EMBED, embedding_api_key="sk-embed", embedding_max_chars=500))
    assert own.base_url == EMBED and own._openai.api_key == "sk-embed" and own.max_chars == 500
    # No key of its own: a placeholder, never the SDK's own read of OPENAI_API_KEY from the environment.
    keyless = client_for(settings(openai_api_key="sk-judge", embedding_base_url=EMBED))
    assert keyless.base_url == EMBED and keyless._openai.api_key == "unused"


def test_openai_without_a_key_is_unavailable():
    with pytest.raises(EmbeddingsUnavailable) as raised:
        EmbeddingClient("text-embedding-3-small", None, None)
    assert raised.value.kind == "no API key"


def test_texts_are_cut_to_the_models_input_limit():
    assert prepared(["a" * 10, "   ", "b" * 3], max_chars=4) == ["aaaa", "?", "bbb"]


def test_calls_respect_the_batch_size_and_the_request_size():
    assert batches([10] * 5, size=2) == [range(0, 2), range(2, 4), range(4, 5)]
    assert batches([], size=2) == []
    # Each text counts as cut: 40 texts of 20,000 characters cut to 8,000 make calls of 18 (144,000 characters).
    calls = batches([20_000] * 40, size=256, max_chars=8_000)
    assert [len(call) for call in calls] == [18, 18, 4]
    assert all(sum(min(20_000, 8_000) for _ in call) <= REQUEST_CHARS for call in calls)
    # A text longer than a whole request is a call of its own (cut, it is within the model's limit).
    assert batches([5, 10**6, 5], size=256, max_chars=10**6, request_chars=100) == [
        range(0, 1),
        range(1, 2),
        range(2, 3),
    ]


def test_the_endpoint_label_drops_credentials_and_query():
    assert endpoint_label("https://user:pw@gw.example.com:8443/v1?key=abc") == "https://gw.example.com:8443/v1"
    assert endpoint_label(EMBED) == EMBED
