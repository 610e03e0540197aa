"""Phoenix span annotations: a judgment's verdicts, or an outcome signal, on the support bot's span, through
Phoenix's official client (`arize-phoenix-client`, loaded on the first send).

Phoenix annotates spans, and the bot tells relmon a trace. Which span: the one the bot names in its message's
metadata (RELMON_SPAN_ID_KEY, e.g. the span of its answer step), else the trace's root span, looked up in the
project (RELMON_PHOENIX_PROJECT) with `GET /v1/projects/{project}/spans?trace_id=...&parent_id=null`. The root span
is what Phoenix lists in its Traces view, with its annotations as columns there: the verdict is on the whole answer,
where a developer scanning traces sees it, and the bot needs to say nothing beyond the trace ID it already gives
(or that `RELMON_TRACE_ID_FROM=slack_ts` derives).

A span Phoenix does not have yet (the bot's exporter sends in batches; its trace may come in after the judgment)
is sent again later, with the task's backoff, until the retries allowed are spent."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import httpx

from store.settings import Settings
from workers.trace_answers import REFUSED, TIMEOUT_SECONDS, SendAgain

if TYPE_CHECKING:
    from phoenix.client import Client

log = logging.getLogger("relmon.traces")


def phoenix_http(settings: Settings) -> httpx.Client:
    """Our own httpx client for Phoenix's (the timeout is relmon's, and no PHOENIX_* variable of the worker's
    environment applies), with the key where one is set."""
    key = settings.secret("phoenix_api_key")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.Client(base_url=f"{settings.phoenix_url.rstrip('/')}/", headers=headers, timeout=TIMEOUT_SECONDS)


def root_span_id(client: Client, project: str, trace_id: str) -> str | None:
    """The span ID of the trace's root span in `project`, or None when Phoenix has no such span (yet)."""
    spans = client.spans.get_spans(
        project_identifier=project, trace_ids=[trace_id], parent_id="null", limit=1, timeout=int(TIMEOUT_SECONDS)
    )
    return spans[0]["context"]["span_id"] if spans else None


def upsert_annotations(
    settings: Settings, trace_id: str, span_id: str | None, annotations_for: Callable[[str], list[dict]], fields: dict
) -> str:
    """Upsert the annotations (`annotations_for(span_id)`) on `span_id`, or the trace's root span; returns the
    outcome (sent, skipped, rejected). SendAgain: Phoenix out of reach, failing, or without the span yet."""
    from phoenix.client import Client
    from phoenix.client.exceptions import PhoenixException

    if not annotations_for(span_id or ""):
        return "skipped"  # nothing judged (an error, a null score) and no second opinion
    with phoenix_http(settings) as http:
        client = Client(http_client=http)
        try:
            span_id = span_id or root_span_id(client, settings.phoenix_project, trace_id)
            if span_id is None:
                raise SendAgain(f"phoenix has no root span of the trace in project {settings.phoenix_project!r}")
            annotations = annotations_for(span_id)
            # sync: Phoenix answers once they are stored, and 404 for a span it does not have (async drops them).
            client.spans.log_span_annotations(span_annotations=annotations, sync=True)
        except httpx.HTTPStatusError as error:
            status = error.response.status_code
            if status == 404 and error.request.method == "POST":
                raise SendAgain("phoenix has no such span (yet)") from None
            if status in REFUSED:  # a refused key, a project that is not there, a body it will not take
                log.warning("phoenix refused the annotations", extra={**fields, "status": status})
                return "rejected"
            raise SendAgain(f"phoenix answered {status}") from None
        except httpx.HTTPError as error:
            raise SendAgain(f"phoenix out of reach ({type(error).__name__})") from None
        except PhoenixException as error:  # the client's check of the server's version: not Phoenix, or too old
            log.warning("phoenix refused the annotations", extra={**fields, "reason": str(error)[:200]})
            return "rejected"
    log.info("annotations sent", extra={**fields, "annotations": len(annotations), "span_id": span_id})
    return "sent"
