"""Logging and Sentry, built so that neither ever carries a question, an answer or a token.

Logs: one JSON object per line. Pass the identifiers as fields, never the texts in the message:

    log.info("judged", extra=event_fields(channel=pair.channel_id, message_ts=pair.answer_ts,
                                          judgment_id=judgment.id, judge="relevancy", score=3))
    log.debug("judged", extra={"question": question})   # texts: DEBUG only, dropped above it

Every line goes through `SecretMaskingFilter`: Slack and OpenAI-style tokens and the configured secrets are
masked anywhere in it (message, fields, traceback).

Sentry (`setup_sentry`): Celery integration, no default PII, no local variables, and `before_send` /
`before_breadcrumb` hooks that drop task arguments, request bodies, message texts and token-like strings.

Messages themselves are scrubbed too (`scrub_message`), in Sentry and in every log line above DEBUG: exception
values, tracebacks and log messages lose SQL statements and parameters, database DETAIL lines (failing rows),
model output, every line after the first, long quoted strings, and whatever is still too long to be an
identifier-and-error-name message. A Slack API error keeps Slack's error code and HTTP status, which its
message gives on the line that would be cut: "... [withheld] (slack error: channel_not_found, status: 404)".

Neither ever raises into the code that logs: a message whose arguments do not format, an exception whose str()
raises, fields that do not serialise or a Sentry event that cannot be scrubbed give a reduced line or event
("<unprintable ValueError>", "[withheld: ...]"), never the unscrubbed one.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import traceback
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
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
# Log-record fields dropped above DEBUG, at any depth: texts, and Celery task arguments (which hold IDs for
# relmon's tasks, but a text for any task that takes one).
# "traceback": Celery's task-failure record carries the formatted traceback again next to exc_info.
LOG_DROPPED_KEYS = TEXT_FIELDS | {"args", "kwargs", "traceback"}
# Sentry event keys dropped wherever they occur: Celery task arguments, frame locals, request payloads.
SENTRY_DROPPED_KEYS = TEXT_FIELDS | {
    "args", "kwargs", "vars", "data", "cookies", "query_string", "params", "traceback"
}  # fmt: skip
SECRET_SETTINGS = ("slack_bot_token", "slack_signing_secret", "slack_app_token", "openai_api_key", "sentry_dsn")

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


def _safe_str(value: object) -> str:
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


def scrub_message(text: str) -> str:
    """A message with anything that could be a question, an answer or a model output taken out; short messages
    made of identifiers and error names ("judging pair 7 failed") are kept as they are."""
    if not text:
        return text
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


def format_exception_scrubbed(exc: BaseException) -> str:
    """A traceback like `traceback.format_exception`'s (causes and contexts too), each exception's message passed
    through `scrub_message`: frames hold file names, lines and code, never data (no locals). Never raises: an
    exception whose str() raises is "<unprintable ValueError>"."""
    try:
        return _format_exception_scrubbed(exc)
    except Exception as failure:
        return f"{type(exc).__name__}: {WITHHELD} (traceback not formatted: {type(failure).__name__})"


def _format_exception_scrubbed(exc: BaseException) -> str:
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
    parts: list[str] = []
    for error, next_link in reversed(chain):
        kind = type(error)
        module = kind.__module__
        name = kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"
        message = scrub_message(_safe_str(error))
        if error.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n" + "".join(traceback.format_tb(error.__traceback__)))
        parts.append(f"{name}: {message}\n" if message else f"{name}\n")
        if next_link:
            parts.append(f"\n{next_link}\n\n")
    return "".join(parts).rstrip("\n")


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
        return _map_nested(value, lambda leaf: self(leaf) if isinstance(leaf, str) else leaf)


class SecretMaskingFilter(logging.Filter):
    """Masks secrets anywhere in a record: message, arguments, extra fields, traceback; and drops text fields
    from records above DEBUG. Attach it to handlers (handler filters also see records from child loggers)."""

    def __init__(self, masker: SecretMasker) -> None:
        super().__init__()
        self.masker = masker

    def filter(self, record: logging.LogRecord) -> bool:
        # Runs in Handler.handle, outside the handler's own error handling: what it raises reaches the caller of
        # log.info(). So it never raises; a record it cannot scrub loses its fields and traceback instead.
        message: str | None = None
        try:
            above_debug = record.levelno > logging.DEBUG
            message = self.masker(scrub_message(self._message(record)) if above_debug else self._message(record))
            record.msg, record.args = message, None
            self._scrub_rest(record, above_debug)
        except Exception as failure:
            return self._withhold(record, message, failure)
        return True

    @staticmethod
    def _message(record: logging.LogRecord) -> str:
        """record.getMessage(), or the bare format string and a note when the arguments do not format (the
        arguments are left out: they are where texts are)."""
        try:
            return record.getMessage()
        except Exception as failure:
            return f"{_safe_str(record.msg)} [message not formatted: {type(failure).__name__}]"

    @staticmethod
    def _withhold(record: logging.LogRecord, message: str | None, failure: Exception) -> bool:
        """The record reduced to what is known to be safe: its scrubbed message, or none; no fields, no traceback."""
        try:
            note = f"[fields withheld: {type(failure).__name__} while scrubbing]"
            for key in [key for key in vars(record) if key not in JsonLineFormatter.RESERVED]:
                delattr(record, key)
            error = record.exc_info[1] if isinstance(record.exc_info, tuple) and len(record.exc_info) == 3 else None
            record.exc_text = f"{type(error).__name__}: {WITHHELD}" if error is not None else None
            record.exc_info = record.stack_info = None
            record.msg, record.args = (f"{message} {note}" if message is not None else f"{WITHHELD} {note}"), None
            return True
        except Exception:
            return False  # the line is lost rather than raised into the caller

    def _scrub_rest(self, record: logging.LogRecord, above_debug: bool) -> None:
        if record.exc_info and record.exc_info[1] is not None and above_debug:
            # Formatted here, each message scrubbed: a database error's message quotes rows and statements.
            record.exc_text = format_exception_scrubbed(record.exc_info[1])
        elif record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        elif record.exc_text and above_debug:  # formatted earlier by someone else: drop the known detail lines
            record.exc_text = "\n".join(
                line for line in record.exc_text.splitlines() if not TEXT_MARKERS.match(line.lstrip())
            )
        if record.exc_text:
            record.exc_text = self.masker(record.exc_text)
        if record.stack_info:
            record.stack_info = self.masker(record.stack_info)
        for key, value in list(vars(record).items()):
            if key in JsonLineFormatter.RESERVED:
                continue
            value = _plain(value)  # objects as their str(), scrubbed below like any string
            if above_debug:
                if key in LOG_DROPPED_KEYS:
                    delattr(record, key)  # message texts: DEBUG only
                    continue
                value = _drop_keys(value, LOG_DROPPED_KEYS)  # e.g. Celery's `data={"args": ...}` on task errors
                value = _scrub_strings(value)  # e.g. Celery's `data={"exc": repr(error)}`
            setattr(record, key, self.masker.scrub(value))


def event_fields(
    *,
    channel: str | None = None,
    message_ts: str | None = None,
    judgment_id: int | None = None,
    pair_id: int | None = None,
    **fields: Any,
) -> dict[str, Any]:
    """The `extra=` of a log call: the identifiers every line should carry, without the ones not known."""
    known = {"channel": channel, "message_ts": message_ts, "judgment_id": judgment_id, "pair_id": pair_id}
    return {key: value for key, value in {**known, **fields}.items() if value is not None}


class JsonLineFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, event and any `extra={...}` fields."""

    RESERVED = set(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}

    def format(self, record: logging.LogRecord) -> str:
        """Never raises: fields that do not serialise give a line with time, level, logger, event and a note."""
        try:
            line = self._head(record)
            line["event"] = record.getMessage()
            line.update({k: v for k, v in vars(record).items() if k not in self.RESERVED})
            if record.exc_info or record.exc_text:
                line["exception"] = record.exc_text or self.formatException(record.exc_info)
            if record.stack_info:
                line["stack"] = record.stack_info
            return json.dumps(line, default=_safe_str)
        except Exception as failure:
            line = self._head(record)
            line["event"] = record.msg if isinstance(record.msg, str) and not record.args else WITHHELD
            line["note"] = f"fields withheld: {type(failure).__name__} while formatting"
            return json.dumps(line, default=_safe_str)

    @staticmethod
    def _head(record: logging.LogRecord) -> dict[str, Any]:
        return {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": _safe_str(record.levelname).lower(),
            "logger": _safe_str(record.name),
        }


def setup_logging(settings: Settings, component: str, stream: Any = None) -> logging.Handler:
    """JSON lines on stderr (or `stream`), secrets masked, texts only at DEBUG; and Sentry when SENTRY_DSN is
    set. Returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    handler.addFilter(SecretMaskingFilter(SecretMasker.from_settings(settings)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    logging.captureWarnings(True)  # warnings.warn() as a JSON line (py.warnings), not free text on stderr
    # Every process that logs also reports errors: bot, worker and beat all start here.
    sentry_on = setup_sentry(settings, component)
    logging.getLogger("relmon").info("starting", extra={"component": component, "sentry": sentry_on})
    return handler


# Sentry -------------------------------------------------------------------------------------------------


def _map_nested(value: Any, leaf: Callable[[Any], Any]) -> Any:
    """`leaf` applied to every value nested in dicts, lists and tuples (the containers kept)."""
    if isinstance(value, dict):
        return {key: _map_nested(item, leaf) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_map_nested(item, leaf) for item in value)
    return leaf(value)


def _plain(value: Any) -> Any:
    """JSON values, dicts, lists and tuples as they are; any other object as its str(), which the scrubbing then
    sees (the formatter's default=str would write it unscrubbed)."""
    return _map_nested(
        value, lambda leaf: leaf if leaf is None or isinstance(leaf, str | int | float | bool) else _safe_str(leaf)
    )


def _drop_keys(value: Any, keys: frozenset[str]) -> Any:
    if isinstance(value, dict):
        return {k: _drop_keys(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_drop_keys(item, keys) for item in value]
    return value


def scrub_event(event: dict[str, Any], masker: SecretMasker) -> dict[str, Any]:
    """What may leave the process: no task arguments, frame locals, request bodies, texts or tokens. Never
    raises (Sentry would drop the event): an event it cannot scrub is sent reduced (`reduced_event`)."""
    try:
        return _scrub_event(event, masker)
    except Exception as failure:
        return reduced_event(event, failure)


# What a reduced event keeps: its identity and, per exception, the type, module and frames' locations.
REDUCED_EVENT_KEYS = ("event_id", "timestamp", "level", "platform", "logger", "server_name", "release", "environment")
REDUCED_FRAME_KEYS = ("filename", "module", "function", "lineno", "in_app")


def reduced_event(event: Any, failure: Exception) -> dict[str, Any]:
    """An event made only of plain identifiers taken from `event`: nothing of it that could hold a text."""

    def plain(value: Any) -> bool:
        return value is None or (isinstance(value, str | int | float | bool) and len(str(value)) <= 200)

    reduced: dict[str, Any] = {"message": f"{WITHHELD} (event not scrubbed: {type(failure).__name__})"}
    try:
        reduced.update({key: event[key] for key in REDUCED_EVENT_KEYS if key in event and plain(event[key])})
        values = []
        for value in event["exception"]["values"]:
            kept = {key: value[key] for key in ("type", "module") if key in value and plain(value[key])}
            frames = value["stacktrace"]["frames"] if isinstance(value.get("stacktrace"), dict) else []
            kept["value"] = WITHHELD
            kept["stacktrace"] = {
                "frames": [
                    {k: f[k] for k in REDUCED_FRAME_KEYS if k in f and plain(f[k])}
                    for f in frames
                    if isinstance(f, dict)
                ]
            }
            values.append(kept)
        reduced["exception"] = {"values": values}
    except Exception:
        pass  # what could be read so far, or only the message
    return reduced


def _scrub_event(event: dict[str, Any], masker: SecretMasker) -> dict[str, Any]:
    event = dict(event)
    request = event.get("request")
    if isinstance(request, dict):
        # Keep only how the request was made; headers can carry signatures, bodies carry message texts.
        event["request"] = {k: request[k] for k in ("method", "url") if k in request}
    logentry = event.get("logentry")
    if isinstance(logentry, dict):
        # The formatted line, scrubbed; the raw arguments may hold texts.
        event["logentry"] = {"message": _scrub_str(logentry.get("formatted") or logentry.get("message"))}
    if isinstance(event.get("message"), str):
        event["message"] = scrub_message(event["message"])
    exceptions = event.get("exception")
    if isinstance(exceptions, dict) and isinstance(exceptions.get("values"), list):
        # Keep each exception's type, module and frames; its value (str(exception)) may quote rows and outputs.
        event["exception"] = dict(
            exceptions,
            values=[
                dict(value, value=_scrub_str(value.get("value"))) if isinstance(value, dict) else value
                for value in exceptions["values"]
            ],
        )
    if isinstance(event.get("extra"), dict):
        event["extra"] = _scrub_strings(event["extra"])  # log records' extra fields, Celery's job data
    crumbs = event.get("breadcrumbs")
    if isinstance(crumbs, dict) and isinstance(crumbs.get("values"), list):
        event["breadcrumbs"] = dict(
            crumbs, values=[scrub_breadcrumb(c, masker) for c in crumbs["values"] if isinstance(c, dict)]
        )
    event = _drop_keys(event, SENTRY_DROPPED_KEYS)
    return masker.scrub(event)


def _scrub_str(value: Any) -> Any:
    return scrub_message(value) if isinstance(value, str) else value


def _scrub_strings(value: Any) -> Any:
    """`scrub_message` on every string nested in dicts, lists and tuples (field values are identifiers: short)."""
    return _map_nested(value, _scrub_str)


def scrub_breadcrumb(crumb: dict[str, Any], masker: SecretMasker) -> dict[str, Any] | None:
    """A breadcrumb without texts or tokens; None (dropped) if it cannot be scrubbed: Sentry would keep it as it
    is when `before_breadcrumb` raises."""
    try:
        return _scrub_breadcrumb(crumb, masker)
    except Exception:
        return None


def _scrub_breadcrumb(crumb: dict[str, Any], masker: SecretMasker) -> dict[str, Any] | None:
    crumb = dict(crumb)
    data = crumb.get("data")
    if isinstance(data, dict):
        # HTTP breadcrumbs keep url, method and status; log breadcrumbs keep their identifier fields.
        crumb["data"] = {k: v for k, v in data.items() if k not in SENTRY_DROPPED_KEYS}
    if isinstance(crumb.get("message"), str):
        crumb["message"] = scrub_message(crumb["message"])  # a log breadcrumb's message, e.g. a quoted error
    return masker.scrub(crumb)


def setup_sentry(settings: Settings, component: str) -> bool:
    """Report errors to SENTRY_DSN (bot and worker) without ever sending texts or tokens. False when unset."""
    dsn = settings.secret("sentry_dsn")
    if not dsn:
        return False
    import sentry_sdk
    from sentry_sdk.integrations.celery import CeleryIntegration

    masker = SecretMasker.from_settings(settings)
    sentry_sdk.init(
        dsn=dsn,
        # Only what we use: Celery, plus the defaults (logging, excepthook, threading, ...). Auto-enabled
        # integrations (OpenAI, HTTP clients, SQLAlchemy, Redis) would record prompts, URLs and queries.
        integrations=[CeleryIntegration()],
        auto_enabling_integrations=False,
        send_default_pii=False,  # no user data, and no LLM prompts from the OpenAI integration
        include_local_variables=False,  # frame locals hold questions and answers
        max_request_body_size="never",
        before_send=lambda event, hint: scrub_event(event, masker),
        before_breadcrumb=lambda crumb, hint: scrub_breadcrumb(crumb, masker),
        server_name=component,  # not the host name: one less identifier
    )
    sentry_sdk.set_tag("component", component)
    return True
