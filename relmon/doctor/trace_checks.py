"""The doctor's checks of the tracing tools that are set (RELMON_LANGFUSE_*, RELMON_PHOENIX_*,
OTEL_EXPORTER_OTLP_ENDPOINT): each answers with the keys relmon has, through the same clients the sends use
(workers.trace_sending, workers.phoenix_annotations, workers.otlp_events). A tool that is not set: no line."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import httpx

from common.telemetry.scrub import mask_url
from relmon.doctor.checks import Check, fail, ok, warn
from store.settings import Settings

LANGFUSE_KEYS_FIX = (
    "set RELMON_LANGFUSE_PUBLIC_KEY and _SECRET_KEY to the keys of the bot's project (Langfuse: Settings > API Keys)"
)
PHOENIX_KEY_FIX = "set RELMON_PHOENIX_API_KEY to a Phoenix system or user API key (Settings > API Keys)"
OTLP_KEY_FIX = "put the key in OTEL_EXPORTER_OTLP_HEADERS (e.g. Authorization=Bearer%20TOKEN)"


def check_traces(settings: Settings) -> Iterator[Check]:
    if settings.langfuse_enabled:
        yield check_langfuse(settings)
    if settings.phoenix_url:
        yield check_phoenix(settings)
    if settings.otlp_endpoint:
        yield check_otlp(settings)


def check_langfuse(settings: Settings) -> Check:
    """An authenticated read: the project of the keys (GET /api/public/projects)."""
    from langfuse.api.core.api_error import ApiError

    from workers.trace_sending import langfuse_api

    host = mask_url(settings.langfuse_host)
    try:
        projects = langfuse_api(settings).projects.get(request_options={"max_retries": 0}).data
    except ApiError as error:
        if error.status_code in (401, 403):
            return fail("langfuse", f"{host} refused the keys ({error.status_code})", LANGFUSE_KEYS_FIX)
        return fail(
            "langfuse", f"{host} answered {error.status_code}", "check RELMON_LANGFUSE_HOST: Langfuse's base URL"
        )
    except httpx.HTTPError as error:
        return fail(
            "langfuse",
            f"no answer from {host} ({type(error).__name__})",
            "start Langfuse or correct RELMON_LANGFUSE_HOST",
        )
    names = ", ".join(project.name for project in projects) or "no project"
    return ok("langfuse", f"{host} takes the keys (project: {names})")


def check_phoenix(settings: Settings) -> Check:
    """An authenticated read of the project where root spans are looked up (GET /v1/projects/{project})."""
    from workers.phoenix_annotations import phoenix_http

    url, project = mask_url(settings.phoenix_url), settings.phoenix_project
    try:
        with phoenix_http(settings) as http:
            status = http.get(f"v1/projects/{project}").status_code
    except httpx.HTTPError as error:
        return fail(
            "phoenix", f"no answer from {url} ({type(error).__name__})", "start Phoenix or correct RELMON_PHOENIX_URL"
        )
    if status in (401, 403):
        return fail("phoenix", f"{url} refused the key ({status})", PHOENIX_KEY_FIX)
    if status == 404:
        return warn(
            "phoenix",
            f"{url} has no project {project!r} (yet)",
            "set RELMON_PHOENIX_PROJECT to the bot's project; it appears with the bot's first trace",
        )
    if status != 200:
        return fail("phoenix", f"{url} answered {status}", "check RELMON_PHOENIX_URL: Phoenix's base URL")
    return ok("phoenix", f"{url} takes the key (project {project!r})")


def check_otlp(settings: Settings) -> Check:
    """An empty export to the path of the events' form: reachable, and taking the key (OTEL_EXPORTER_OTLP_HEADERS)."""
    from workers.otlp_events import LOGS_PATH, TRACES_PATH, empty_export

    form = settings.otlp_events_as
    url = mask_url(settings.otlp_endpoint.rstrip("/")) + (TRACES_PATH if form == "spans" else LOGS_PATH)
    exporter_log = logging.getLogger("opentelemetry.exporter")
    level = exporter_log.level
    exporter_log.setLevel(logging.CRITICAL)  # the exporter's own lines would say again what the doctor's line says
    try:
        exported = empty_export(settings.otlp_endpoint, form)
    finally:
        exporter_log.setLevel(level)
    if exported.sent:
        return ok("otlp", f"{url} takes an export ({form})")
    if exported.status is None:
        return fail("otlp", f"no answer from {url}", "start the collector or correct OTEL_EXPORTER_OTLP_ENDPOINT")
    if exported.status in (401, 403):
        return fail("otlp", f"{url} refused the key ({exported.status})", OTLP_KEY_FIX)
    if exported.status in (404, 405) and form == "logs":
        return fail(
            "otlp",
            f"{url} answered {exported.status}: it takes no logs",
            "for a backend that takes traces only (Phoenix, Jaeger, Tempo) set RELMON_OTLP_EVENTS_AS=spans; "
            "else correct OTEL_EXPORTER_OTLP_ENDPOINT (the base URL, e.g. http://collector:4318)",
        )
    return fail(
        "otlp",
        f"{url} answered {exported.status}",
        "correct OTEL_EXPORTER_OTLP_ENDPOINT (the base URL, e.g. http://collector:4318)",
    )
