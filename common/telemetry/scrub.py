"""Scrubbing: what keeps a question, an answer or a token out of every log line and Sentry event.

`SecretMasker` masks Slack and OpenAI-style tokens, URL passwords and the configured secrets anywhere in a text.
`scrub_message` takes out of a message (an exception value, a log or breadcrumb message) SQL statements and
parameters, database DETAIL lines (failing rows), model output, every line after the first, long quoted strings,
and whatever is still too long to be an identifier-and-error-name message. A Slack API error keeps Slack's error
code and HTTP status, which its message gives on the line that would be cut: "... [withheld] (slack error:
channel_not_found, status: 404)". Nothing here raises on a value whose str() raises ("<unprintable ValueError>").
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

from store.settings import Settings, mask

# Log-record fields and event keys that hold message texts. They appear in logs at DEBUG only and never in Sentry.
TEXT_FIELDS = frozenset(
    {
        "text",
        "question",
        "answer",
        "reference",
        "prompt",
        "messages",
        "raw_output",
        "reasoning",
        "message_text",
        "blocks",
        "body",
    }
)
SECRET_SETTINGS = (
    "slack_bot_token",
    "slack_signing_secret",
    "slack_app_token",
    "openai_api_key",
    "embedding_api_key",
    "sentry_dsn",
    "langfuse_secret_key",
    "phoenix_api_key",
    "metrics_token",
)

# Tokens recognisable by shape: Slack (xoxb-, xoxp-, xoxa-, xoxe-, xapp-), OpenAI-style keys (sk-, sk-proj-),
# and passwords in URLs (scheme://user:password@host).
TOKEN_PATTERN = re.compile(r"\b(?:xox[abpoers]|xapp)-[A-Za-z0-9-]{6,}|\bsk-[A-Za-z0-9_-]{8,}")
# A URL's password runs from the ":" after the user name to the next "@", whatever it holds ("/", "#", "?"
# included), as SQLAlchemy reads a database URL: urllib's netloc would stop at the first of those and miss it.
URL_PASSWORD_PATTERN = re.compile(
    r"(?P<head>[a-z][a-z0-9+.-]*://[^:/@\s]*:)(?!\*\*\*\*)(?P<password>[^@\s]+)(?=@)",  # not if already masked
    re.I,
)
URL_CREDENTIALS = re.compile(r"^[a-z][a-z0-9+.-]*://[^:/@]*:(?P<password>[^@]*)@", re.I)


def url_password(url: str | None) -> str | None:
    """The password in a URL, read as SQLAlchemy reads one (see URL_PASSWORD_PATTERN); None when it has none."""
    match = URL_CREDENTIALS.match(url or "")
    return match.group("password") or None if match else None


# Messages (exception values, log and breadcrumb messages) can carry texts however carefully relmon logs: a
# database error quotes the failing statement, its parameters or the whole failing row; an LLM error quotes the
# model. Defence in depth, applied to every message above DEBUG and to everything sent to Sentry:
#  - from the first of these markers on, the rest is dropped: SQLAlchemy's statement and parameters, PostgreSQL's
#    DETAIL ("Failing row contains (...)", "Key (...)=(...)"), psycopg's CONTEXT/LINE, the judge client's refusal;
TEXT_MARKERS = re.compile(
    r"\[SQL: |\[parameters: |\(Background on this error|\bDETAIL: |\bCONTEXT: |\bLINE \d+: |\bHINT: |"
    r"(?<=refused to judge:)",
)
#  - only the first line is kept (a message's next lines are its details: statement, row, output);
FIRST_LINE = re.compile(r"\r?\n|\\n")  # a real newline, or an escaped one inside a repr()
#  - quoted strings longer than a short identifier are replaced (an exception's repr quoting a text);
MAX_QUOTED_CHARS = 40
_QUOTES = (("'", "'"), ('"', '"'), ("“", "”"))
LONG_QUOTED = re.compile("|".join(f"{left}[^{right}\\n]{{{MAX_QUOTED_CHARS},}}{right}" for left, right in _QUOTES))
#  - what is still longer than MAX_MESSAGE_CHARS is withheld, but for a short "context:" prefix.
MAX_MESSAGE_CHARS = 160
MAX_PREFIX_CHARS = 120
WITHHELD = "[withheld]"
# str(SlackApiError): "The request to the Slack API failed. (url: ..., status: 404)\nThe server responded with:
# {'ok': False, 'error': 'channel_not_found', ...}". The code is an identifier; the rest of the answer is not kept.
SLACK_STATUS = re.compile(r"The request to the Slack API failed\. \(url: [^,\s]*, status: (\d{3})\)")
SLACK_ERROR_CODE = re.compile(
    r"The server responded with: \{.*?\\?['\"]error\\?['\"]: \\?['\"]([a-z0-9_.]{1,64})\\?['\"]", re.S
)


def safe_str(value: object) -> str:
    """str(value), or "<unprintable ValueError>" when its __str__ raises."""
    try:
        return str(value)
    except Exception:
        return f"<unprintable {type(value).__name__}>"


def slack_error_suffix(text: str, kept: str = "") -> str:
    """The suffix that keeps a SlackApiError's code and HTTP status, e.g. ` (slack error: channel_not_found,
    status: 404)`, for a message quoting one (its str() or repr(), alone or inside another message); "" for any
    other message. What `kept` (the scrubbed message) already says is not repeated."""
    code = SLACK_ERROR_CODE.search(text)
    if code is None or f"slack error: {code.group(1)}" in kept:
        return ""
    status = SLACK_STATUS.search(text)
    if status is None or f"status: {status.group(1)})" in kept:
        return f" (slack error: {code.group(1)})"
    return f" (slack error: {code.group(1)}, status: {status.group(1)})"


# A URL inside a message or a breadcrumb: its query and fragment can carry tokens, cursors or texts, and a
# response_url (https://hooks.slack.com/commands/T…/…/secret, or /actions/…) is itself a credential to post.
URL = re.compile(r"\bhttps?://[^\s'\"<>()\[\]{}]+")
RESPONSE_URL_PATH = re.compile(r"/(commands|actions)/.*$")


def scrub_url(url: str) -> str:
    """A URL with its query and fragment withheld, and a response_url's secret path too."""
    head, _, _ = url.partition("#")
    head, question, _ = head.partition("?")
    scheme, slashes, rest = head.partition("://")
    host, slash, path = rest.partition("/")
    path = RESPONSE_URL_PATH.sub(lambda m: f"/{m.group(1)}/{WITHHELD}", slash + path)
    return f"{scheme}{slashes}{host}{path}" + (f"?{WITHHELD}" if question else "")


def scrub_urls(text: str) -> str:
    return URL.sub(lambda m: scrub_url(m.group(0)), text)


def scrub_message(text: str) -> str:
    """A message with anything that could be a question, an answer or a model output taken out; short messages
    made of identifiers and error names ("judging pair 7 failed") are kept as they are; URLs lose their query and
    a response_url its path."""
    if not text:
        return text
    text = scrub_urls(text)
    original = text
    marker = TEXT_MARKERS.search(text)
    cut = marker is not None
    if marker:
        text = text[: marker.start()].rstrip()
    first = FIRST_LINE.split(text, maxsplit=1)
    cut = cut or len(first) > 1
    text = LONG_QUOTED.sub(lambda m: f"{m.group(0)[0]}{WITHHELD}{m.group(0)[-1]}", first[0]).rstrip()
    if len(text) > MAX_MESSAGE_CHARS:
        head, colon, _ = text.partition(": ")
        text = f"{head}:" if colon and len(head) <= MAX_PREFIX_CHARS else ""
        text = f"{text} {WITHHELD} ({len(first[0])} characters)".strip()
    elif cut:
        text = f"{text} {WITHHELD}" if text else WITHHELD
    return text + slack_error_suffix(original, text)


def _exception_chain(exc: BaseException) -> list[tuple[BaseException, str]]:
    """`exc` and its causes and contexts, each with the line `traceback` prints before the next one."""
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, traceback._cause_message.strip()  # type: ignore[attr-defined]
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, traceback._context_message.strip()  # type: ignore[attr-defined]
        else:
            current = None
    return chain


def format_exception_scrubbed(exc: BaseException) -> str:
    """A traceback like `traceback.format_exception`'s (causes and contexts too), each exception's message passed
    through `scrub_message`: frames hold file names, lines and code, never data (no locals). Never raises: an
    exception whose str() raises is "<unprintable ValueError>", and a chain that cannot be formatted gives a
    one-line note instead."""
    try:
        chain = _exception_chain(exc)
        parts: list[str] = []
        for error, next_link in reversed(chain):
            kind = type(error)
            module = kind.__module__
            name = kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"
            message = scrub_message(safe_str(error))
            if error.__traceback__ is not None:
                parts.append("Traceback (most recent call last):\n" + "".join(traceback.format_tb(error.__traceback__)))
            parts.append(f"{name}: {message}\n" if message else f"{name}\n")
            if next_link:
                parts.append(f"\n{next_link}\n\n")
        return "".join(parts).rstrip("\n")

    except Exception as failure:
        return f"{type(exc).__name__}: {WITHHELD} (traceback not formatted: {type(failure).__name__})"


SQLALCHEMY_BACKGROUND = re.compile(r"\(Background on this error at: [^)]*\)")


def problem_text(error: BaseException) -> str:
    """An exception as one short sentence: SQLAlchemy's "Background on this error" link and line breaks gone."""
    problem = " ".join(SQLALCHEMY_BACKGROUND.sub("", str(error)).split()).rstrip(". ")[:500] or type(error).__name__
    return problem + ("" if problem.endswith(("?", "!")) else ".")


def mask_url(url: str | None) -> str:
    """A URL with its password masked (redis://:****word@host:6379/0), for doctor and logs."""
    if not url:
        return "(unset)"
    match = URL_CREDENTIALS.match(url)
    if not match or not match.group("password"):
        return url
    return url[: match.start("password")] + mask(match.group("password")) + url[match.end("password") :]


class SecretMasker:
    """Replaces token-shaped strings and the given secret values with their masked form."""

    def __init__(self, secrets: Iterable[str | None] = ()) -> None:
        # Longest first, so a secret containing another is masked whole.
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    @classmethod
    def from_settings(cls, settings: Settings) -> SecretMasker:
        secrets = [settings.secret(name) for name in SECRET_SETTINGS]
        for url in (settings.redis_url, settings.database_url):
            secrets.append(url_password(url))
        dsn = settings.secret("sentry_dsn")
        if dsn:
            secrets.append(urlsplit(dsn).username)  # the DSN's public key
        return cls(secrets)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, mask(secret))
        text = TOKEN_PATTERN.sub(lambda m: mask(m.group(0)), text)
        return URL_PASSWORD_PATTERN.sub(lambda m: m.group("head") + mask(m.group("password")), text)

    def scrub(self, value: Any) -> Any:
        """Mask secrets in strings nested anywhere in dicts, lists and tuples."""
        return map_nested(value, lambda leaf: self(leaf) if isinstance(leaf, str) else leaf)


def map_nested(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """`leaf` applied to every value nested in dicts, lists and tuples (the containers kept)."""
    if isinstance(value, dict):
        return {key: map_nested(item, leaf) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(map_nested(item, leaf) for item in value)
    return leaf(value)


def drop_keys(value: Any, keys: frozenset[str]) -> Any:
    """`value` without the dict entries named in `keys`, at any depth of dicts and lists."""
    if isinstance(value, dict):
        return {k: drop_keys(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [drop_keys(item, keys) for item in value]
    return value


def scrub_str(value: Any) -> Any:
    """`scrub_message` on a string; any other value as it is."""
    return scrub_message(value) if isinstance(value, str) else value


def scrub_strings(value: Any) -> Any:
    """`scrub_message` on every string nested in dicts, lists and tuples (field values are identifiers: short)."""
    return map_nested(value, scrub_str)
