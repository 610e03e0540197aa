"""Sentry (`setup_sentry`): Celery integration, no default PII, no local variables, and `before_send` /
`before_breadcrumb` hooks that drop task arguments, request bodies, message texts and token-like strings, and
scrub every message (`scrub_message`). A hook never raises (Sentry would send the event or breadcrumb as it is,
or drop the event): an event it cannot scrub is sent reduced, a breadcrumb dropped.
"""

from __future__ import annotations

import logging
from typing import Any

from common.telemetry.scrub import (
    TEXT_FIELDS,
    WITHHELD,
    SecretMasker,
    drop_keys,
    scrub_message,
    scrub_str,
    scrub_strings,
    scrub_url,
)
from store.settings import Settings

# Sentry event keys dropped wherever they occur: Celery task arguments, frame locals, request payloads.
SENTRY_DROPPED_KEYS = TEXT_FIELDS | {
    "args", "kwargs", "vars", "data", "cookies", "query_string", "params", "traceback"
}  # fmt: skip


def scrub_event(event: dict[str, Any], masker: SecretMasker) -> dict[str, Any]:
    """What may leave the process: no task arguments, frame locals, request bodies, texts or tokens. Never
    raises (Sentry would drop the event): an event it cannot scrub is sent reduced (`reduced_event`)."""
    try:
        scrubbed = dict(event)
        request = scrubbed.get("request")
        if isinstance(request, dict):
            # Keep only how the request was made; headers can carry signatures, bodies carry message texts.
            scrubbed["request"] = {k: request[k] for k in ("method", "url") if k in request}
            if isinstance(scrubbed["request"].get("url"), str):
                scrubbed["request"]["url"] = scrub_url(scrubbed["request"]["url"])
        logentry = scrubbed.get("logentry")
        if isinstance(logentry, dict):
            # The formatted line, scrubbed; the raw arguments may hold texts.
            scrubbed["logentry"] = {"message": scrub_str(logentry.get("formatted") or logentry.get("message"))}
        if isinstance(scrubbed.get("message"), str):
            scrubbed["message"] = scrub_message(scrubbed["message"])
        exceptions = scrubbed.get("exception")
        if isinstance(exceptions, dict) and isinstance(exceptions.get("values"), list):
            # Keep each exception's type, module and frames; its value (str(exception)) may quote rows and outputs.
            scrubbed["exception"] = dict(
                exceptions,
                values=[
                    dict(value, value=scrub_str(value.get("value"))) if isinstance(value, dict) else value
                    for value in exceptions["values"]
                ],
            )
        if isinstance(scrubbed.get("extra"), dict):
            scrubbed["extra"] = scrub_strings(scrubbed["extra"])  # log records' extra fields, Celery's job data
        crumbs = scrubbed.get("breadcrumbs")
        if isinstance(crumbs, dict) and isinstance(crumbs.get("values"), list):
            scrubbed["breadcrumbs"] = dict(
                crumbs, values=[scrub_breadcrumb(c, masker) for c in crumbs["values"] if isinstance(c, dict)]
            )
        scrubbed = drop_keys(scrubbed, SENTRY_DROPPED_KEYS)
        return masker.scrub(scrubbed)
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


def scrub_breadcrumb(crumb: dict[str, Any], masker: SecretMasker) -> dict[str, Any] | None:
    """A breadcrumb without texts or tokens; None (dropped) if it cannot be scrubbed: Sentry would keep it as it
    is when `before_breadcrumb` raises."""
    try:
        crumb = dict(crumb)
        data = crumb.get("data")
        if isinstance(data, dict):
            # HTTP breadcrumbs keep url, method and status; log breadcrumbs keep their identifier fields.
            crumb["data"] = {k: v for k, v in data.items() if k not in SENTRY_DROPPED_KEYS}
            for key in ("url", "http.query", "http.fragment"):
                if isinstance(crumb["data"].get(key), str):
                    crumb["data"][key] = scrub_url(crumb["data"][key]) if key == "url" else WITHHELD
        if isinstance(crumb.get("message"), str):
            crumb["message"] = scrub_message(crumb["message"])  # a log breadcrumb's message, e.g. a quoted error
        return masker.scrub(crumb)
    except Exception:
        return None


def _flushing_at_exit(pending: int, timeout: float) -> None:
    logging.getLogger("relmon.sentry").warning(
        "sending pending error reports before exit", extra={"pending": pending, "timeout_s": timeout}
    )


def setup_sentry(settings: Settings, component: str) -> bool:
    """Report errors to SENTRY_DSN (bot and worker) without ever sending texts or tokens. False when unset."""
    dsn = settings.secret("sentry_dsn")
    if not dsn:
        return False
    import sentry_sdk
    from sentry_sdk.integrations.atexit import AtexitIntegration
    from sentry_sdk.integrations.celery import CeleryIntegration

    masker = SecretMasker.from_settings(settings)
    sentry_sdk.init(
        dsn=dsn,
        # Only what we use: Celery, plus the defaults (logging, excepthook, threading, ...). Auto-enabled
        # integrations (OpenAI, HTTP clients, SQLAlchemy, Redis) would record prompts, URLs and queries.
        # At exit, the SDK's own notice of events still being sent is a log line like every other (its default
        # prints three lines of plain text to stderr, among the process's JSON lines).
        integrations=[CeleryIntegration(), AtexitIntegration(callback=_flushing_at_exit)],
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
