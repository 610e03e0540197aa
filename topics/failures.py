"""What a topics run says when the embeddings endpoint or the LLM failed: a fixed sentence and the error's kind.

A provider's error text may echo the input it was sent (the questions, a private channel's among them), and the
run's notes are shown in the digest and App Home: so the notes name only a kind ("timeout", "HTTP 500 server error"),
read from the error's type and HTTP status, never its message."""

from __future__ import annotations

import openai


def status_kind(status: int) -> str:
    """A bounded label for an HTTP status."""
    if status == 429:
        return "HTTP 429 rate limited"
    if status in (401, 403):
        return f"HTTP {status} access refused"
    if status == 404:
        return "HTTP 404 not found"
    if status >= 500:
        return f"HTTP {status} server error"
    return f"HTTP {status} request refused"


def error_kind(error: BaseException) -> str:
    """The kind of an embedding or LLM failure: from the error's type and HTTP status, never its text. An error that
    says its own kind (`EmbeddingsUnavailable.kind`) is taken at its word."""
    own = getattr(error, "kind", None)
    if isinstance(own, str) and own:
        return own
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, openai.APITimeoutError | TimeoutError):
            return "timeout"
        if isinstance(current, openai.APIConnectionError | ConnectionError):
            return "connection error"
        status = getattr(current, "status_code", None)
        if isinstance(status, int):
            return status_kind(status)
        current = current.__cause__ or current.__context__
    if isinstance(error, ValueError):
        return "unreadable reply"
    return "unexpected error"


BUDGET_SPENT = "the daily budget is spent"


def embedding_fallback_note(embedding: str, why: str) -> str:
    """The embeddings endpoint gave no vectors: the run grouped with the local `embedding`. `why`: a kind."""
    return f"Grouped with the local embedding ({embedding}): {why}."


def embeddings_error(error: BaseException) -> str:
    return f"embeddings endpoint error ({error_kind(error)})"


def naming_fallback_note(why: str) -> str:
    """The LLM could not name some topics: they are named by their keywords. `why`: a kind."""
    return f"Some topics are named by their keywords: {why}."


def unusable_names_note(topics: int) -> str:
    """The LLM's name for `topics` topics failed the check twice (`topics.naming.name_problem`)."""
    if topics == 1:
        return "1 topic is named by its keywords: the LLM's name for it failed the check twice (2 to 6 words, no IDs)."
    return (
        f"{topics} topics are named by their keywords: the LLM's names failed the check twice (2 to 6 words, no IDs)."
    )


def llm_error(error: BaseException) -> str:
    return f"LLM error ({error_kind(error)})"


def not_built_note(error: BaseException) -> str:
    """The run failed as a whole (a bug, the database): the digest goes out without its topics."""
    kind = error_kind(error)
    if kind == "unexpected error":
        kind = type(error).__name__  # a class name is no message: "OperationalError"
    return f"Topics could not be built this time ({kind})."
