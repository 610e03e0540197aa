"""The doctor's check of the topics' embeddings: one small embeddings call to the endpoint the topics will use
(RELMON_EMBEDDING_BASE_URL, else the judge's), and which embeddings the topics will be grouped with: that
endpoint and model, or the local keyword vectors (TF-IDF + SVD) they fall back to."""

from __future__ import annotations

from relmon.doctor.checks import Check, fail, ok, warn
from store.settings import Settings, mask
from topics import local_embeddings
from topics.embeddings import EmbeddingsUnavailable, client_for, endpoint_label, endpoint_of

NAME = "embeddings"
TIMEOUT_SECONDS = 20.0
PROBE = ["relmon doctor: can this endpoint embed a question?"]
FALLBACK = f"topics will be grouped by local keyword vectors ({local_embeddings.NAME})"
SKIP_FIX = "or set RELMON_EMBEDDING_MODEL=local to group topics locally without asking any endpoint"


def check_embeddings(settings: Settings) -> Check:
    model = settings.embedding_model
    if settings.local_embedding_only:
        return ok(NAME, f"RELMON_EMBEDDING_MODEL=local: {FALLBACK}; no endpoint is asked")
    endpoint = endpoint_of(settings)
    where = endpoint_label(endpoint.base_url)
    whose = "RELMON_EMBEDDING_BASE_URL" if endpoint.separate else "the judge's endpoint"
    key = f"key {mask(endpoint.api_key)} from {endpoint.key_setting}" if endpoint.api_key else "no key"
    try:
        vectors, _tokens = client_for(settings, timeout=TIMEOUT_SECONDS, max_retries=0).embed(PROBE)
    except EmbeddingsUnavailable as error:
        detail = f"{where} ({whose}) gave no embeddings with {model} ({error.kind}): {FALLBACK}"
        # An endpoint set for embeddings that cannot embed is a broken setting; the judge's own endpoint without
        # embeddings (a chat-only server) is a known case the fallback covers: worth a look, not a failure.
        report = fail if endpoint.separate else warn
        return report(NAME, detail, _fix(error.kind, endpoint.separate))
    return ok(NAME, f"topics embed with {model} at {where} ({whose}, {key}): {vectors.shape[1]} values a question")


def _fix(kind: str, separate: bool) -> str:
    url = "RELMON_EMBEDDING_BASE_URL" if separate else "RELMON_EMBEDDING_BASE_URL to an embeddings endpoint"
    if kind == "no API key":
        return f"set OPENAI_API_KEY, or {url} (and RELMON_EMBEDDING_API_KEY); {SKIP_FIX}"
    if "access refused" in kind:
        return f"set RELMON_EMBEDDING_API_KEY to a key this endpoint takes; {SKIP_FIX}"
    if "not found" in kind:
        return (
            "set RELMON_EMBEDDING_MODEL to an embedding model the endpoint serves, or "
            f"{url} (an OpenAI-compatible /v1/embeddings, often ending in /v1); {SKIP_FIX}"
        )
    if kind in ("connection error", "timeout"):
        return f"check the network and {url}; {SKIP_FIX}"
    return f"check {url} and RELMON_EMBEDDING_MODEL; {SKIP_FIX}"
