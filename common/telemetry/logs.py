"""Logging: one JSON object per line, secrets masked, texts only at DEBUG. Pass the identifiers as fields, never
the texts in the message:

    log.info("judged", extra=event_fields(channel=pair.channel_id, message_ts=pair.answer_ts,
                                          judgment_id=judgment.id, judge="relevancy", score=3))
    log.debug("judged", extra={"question": question})   # texts: DEBUG only, dropped above it

Every line goes through `SecretMaskingFilter`: tokens and the configured secrets are masked anywhere in it
(message, fields, traceback), and above DEBUG its message and traceback are scrubbed (`scrub_message`).

Neither ever raises into the code that logs: a message whose arguments do not format, an exception whose str()
raises or fields that do not serialise give a reduced line ("<unprintable ValueError>", "[withheld: ...]"), never
the unscrubbed one.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from common.telemetry.scrub import (
    TEXT_FIELDS,
    TEXT_MARKERS,
    WITHHELD,
    SecretMasker,
    drop_keys,
    format_exception_scrubbed,
    map_nested,
    safe_str,
    scrub_message,
    scrub_strings,
)
from common.telemetry.sentry import setup_sentry
from store.settings import Settings

# Log-record fields dropped above DEBUG, at any depth: texts, and Celery task arguments (which hold IDs for
# relmon's tasks, but a text for any task that takes one).
# "traceback": Celery's task-failure record carries the formatted traceback again next to exc_info.
LOG_DROPPED_KEYS = TEXT_FIELDS | {"args", "kwargs", "traceback"}
# A field value that scrub_message returns as it is (no space, colon, quote, bracket or backslash, and short):
# channel and message IDs, statuses, judge names. Only the secret masking applies to it.
PLAIN_WORD = re.compile(r"[\w.\-]{0,160}")


class SecretMaskingFilter(logging.Filter):
    """Masks secrets anywhere in a record: message, arguments, extra fields, traceback; and drops text fields
    from records above DEBUG. Attach it to handlers (handler filters also see records from child loggers)."""

    def __init__(self, masker: SecretMasker) -> None:
        super().__init__()
        self.masker = masker
        # A message with no arguments is a constant of the code ("pair settled"): scrubbed once, not per line.
        self._constant = lru_cache(maxsize=1024)(lambda message: self.masker(scrub_message(message)))

    def filter(self, record: logging.LogRecord) -> bool:
        # Runs in Handler.handle, outside the handler's own error handling: what it raises reaches the caller of
        # log.info(). So it never raises; a record it cannot scrub loses its fields and traceback instead.
        message: str | None = None
        try:
            above_debug = record.levelno > logging.DEBUG
            if above_debug and not record.args and isinstance(record.msg, str):
                message = self._constant(record.msg)
            else:
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
            return f"{safe_str(record.msg)} [message not formatted: {type(failure).__name__}]"

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
            if above_debug and key in LOG_DROPPED_KEYS:
                delattr(record, key)  # message texts: DEBUG only
                continue
            if value is None or isinstance(value, int | float):  # most fields: IDs and counts, nothing to mask
                continue
            if isinstance(value, str) and PLAIN_WORD.fullmatch(value):  # an identifier: scrub_message keeps it
                setattr(record, key, self.masker(value))
                continue
            value = _plain(value)  # objects as their str(), scrubbed below like any string
            if above_debug:
                value = drop_keys(value, LOG_DROPPED_KEYS)  # e.g. Celery's `data={"args": ...}` on task errors
                value = scrub_strings(value)  # e.g. Celery's `data={"exc": repr(error)}`
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
            return json.dumps(line, default=safe_str)
        except Exception as failure:
            line = self._head(record)
            line["event"] = record.msg if isinstance(record.msg, str) and not record.args else WITHHELD
            line["note"] = f"fields withheld: {type(failure).__name__} while formatting"
            return json.dumps(line, default=safe_str)

    @staticmethod
    def _head(record: logging.LogRecord) -> dict[str, Any]:
        return {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": safe_str(record.levelname).lower(),
            "logger": safe_str(record.name),
        }


class ScheduleTicksAtDebug(logging.Filter):
    """Celery beat says "Scheduler: Sending due task ..." at INFO for every tick of every schedule entry (the
    sweeps tick every few seconds): routine, so logged at DEBUG, and left out unless the level is DEBUG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if (
            record.name == "celery.beat"
            and record.levelno == logging.INFO
            and str(record.msg).startswith("Scheduler: Sending due task")
        ):
            record.levelno, record.levelname = logging.DEBUG, "DEBUG"
            return logging.getLogger().isEnabledFor(logging.DEBUG)
        return True


def setup_logging(settings: Settings, component: str, stream: Any = None) -> logging.Handler:
    """JSON lines on stderr (or `stream`), secrets masked, texts only at DEBUG; and Sentry when SENTRY_DSN is
    set. Returns the handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonLineFormatter())
    handler.addFilter(ScheduleTicksAtDebug())
    handler.addFilter(SecretMaskingFilter(SecretMasker.from_settings(settings)))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    logging.captureWarnings(True)  # warnings.warn() as a JSON line (py.warnings), not free text on stderr
    # Every process that logs also reports errors: bot, worker and beat all start here.
    sentry_on = setup_sentry(settings, component)
    logging.getLogger("relmon").info("starting", extra={"component": component, "sentry": sentry_on})
    return handler


def _plain(value: Any) -> Any:
    """JSON values, dicts, lists and tuples as they are; any other object as its str(), which the scrubbing then
    sees (the formatter's default=str would write it unscrubbed)."""
    return map_nested(
        value, lambda leaf: leaf if leaf is None or isinstance(leaf, str | int | float | bool) else safe_str(leaf)
    )
