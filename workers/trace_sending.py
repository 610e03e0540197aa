"""Sending verdicts to the support bot's traces (Langfuse scores, OpenTelemetry evaluation events, Phoenix span
annotations): loading the judgment, finding its trace ID, one send per tool, and queueing the sends after a
judgment. The tasks that run a send (and retry it) are `workers.tasks.traces`; the payloads' rules are
`workers.traces`. The tools' SDKs load on the first send, not with the worker: most deployments set no tool."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from common import metrics, task_names
from common.celery_app import celery
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from store.models import Judgment, OutcomeSignal, Pair
from workers.traces import (
    BadTraceId,
    Verdict,
    checked_span_id,
    checked_trace_id,
    evaluation_events,
    langfuse_scores,
    metadata_trace_id,
    slack_trace_id,
)

log = logging.getLogger("relmon.traces")

LANGFUSE, OTLP, PHOENIX = "langfuse", "otlp", "phoenix"
TIMEOUT_SECONDS = 10.0
REFUSED = (400, 401, 403, 404, 422)  # the tool says no: sending again would say the same


class SendAgain(Exception):
    """The tool was out of reach or failed (5xx, 429): worth another try later."""


@dataclass(frozen=True)
class Subject:
    verdict: Verdict
    channel: str
    answer_ts: str
    thread_ts: str | None = None


def load_subject(runtime: Runtime, judgment_id: int) -> Subject | None:
    with runtime.db.reading() as session:
        row = session.execute(
            select(Judgment, Pair.channel_id, Pair.answer_ts, Pair.thread_ts)
            .join(Pair, Pair.id == Judgment.pair_id)
            .where(Judgment.id == judgment_id)
        ).first()
    if row is None:
        return None
    judgment, channel, answer_ts, thread_ts = row
    with runtime.db.reading() as session:
        signals = session.scalars(select(OutcomeSignal.name).where(OutcomeSignal.pair_id == judgment.pair_id)).all()
    verdict = Verdict(
        judgment.id,
        judgment.judge,
        judgment.status,
        judgment.normalized_score,
        judgment.reasoning,
        judgment.confirmation_status,
        pair_id=judgment.pair_id,
        signals=tuple(sorted(signals)),
    )
    return Subject(verdict, channel, answer_ts, thread_ts)


@dataclass(frozen=True)
class Target:
    """A judgment whose answer names a trace: what to send it to, and the fields of its log lines."""

    subject: Subject
    trace_id: str
    span_id: str | None  # as the bot gave it in its metadata (RELMON_SPAN_ID_KEY), unchecked: Phoenix's alone
    fields: dict


def trace_ids_of(runtime: Runtime, subject: Subject) -> tuple[str | None, str | None]:
    """The answer's trace ID (canonical) and the span ID the bot gave, if any: the trace derived from the message
    (slack_ts, no span), or both read from the message's metadata in one read; the trace ID None when it gave
    none; BadTraceId when what it gave is not one."""
    settings = runtime.settings
    if settings.trace_id_from == "slack_ts":
        return slack_trace_id(subject.channel, subject.answer_ts), None
    metadata = message_metadata(runtime, subject)
    given = metadata_trace_id(metadata, settings.trace_id_key)
    return (checked_trace_id(given) if given else None), metadata_trace_id(metadata, settings.span_id_key)


def message_metadata(runtime: Runtime, subject: Subject) -> dict | None:
    """The answer message's Slack metadata, read with include_all_metadata (another app's metadata is left out of
    history reads without it): one history read per send, waited out by the client when rate-limited. A read
    Slack refuses (the message deleted, the channel left) gives None; one that gets no answer is sent again."""
    window = {"latest": subject.answer_ts, "oldest": subject.answer_ts, "inclusive": True}
    try:
        if subject.thread_ts and subject.thread_ts != subject.answer_ts:
            # A thread's replies always start with its parent: two messages, the parent and the answer.
            read = runtime.slack.conversations_replies(
                channel=subject.channel, ts=subject.thread_ts, include_all_metadata=True, limit=2, **window
            )
        else:
            read = runtime.slack.conversations_history(
                channel=subject.channel, include_all_metadata=True, limit=1, **window
            )
    except SlackApiError as error:
        log.info("trace id: message not read", extra={"channel": subject.channel, "error": error.response.get("error")})
        return None
    except OSError as error:
        raise SendAgain(f"slack out of reach ({type(error).__name__})") from None
    for message in read.get("messages", []):
        if message.get("ts") == subject.answer_ts:
            return message.get("metadata")
    return None


def traced(runtime: Runtime, judgment_id: int, tool: str) -> Target | str:
    """The judgment, its trace ID and the log fields; or the outcome when there is nothing to send (skipped: the
    judgment is gone or its answer names no trace; bad_trace_id: what it names is not one)."""
    subject = load_subject(runtime, judgment_id)
    if subject is None:
        return "skipped"  # deleted since (retention, a deletion in Slack)
    fields = event_fields(channel=subject.channel, message_ts=subject.answer_ts, judgment_id=judgment_id, tool=tool)
    try:
        trace_id, span_id = trace_ids_of(runtime, subject)
    except BadTraceId as error:
        log.warning("trace id refused", extra={**fields, "reason": str(error), "key": runtime.settings.trace_id_key})
        return "bad_trace_id"
    return Target(subject, trace_id, span_id, fields) if trace_id else "skipped"


def send_to_langfuse(runtime: Runtime, judgment_id: int) -> str:
    """One judgment's scores to Langfuse; returns the outcome (sent, skipped, rejected, bad_trace_id). SendAgain:
    retry."""
    from langfuse.api.client import LangfuseAPI
    from langfuse.api.core.api_error import ApiError

    settings = runtime.settings
    found = traced(runtime, judgment_id, LANGFUSE)
    if isinstance(found, str):
        return found
    fields = found.fields
    scores = langfuse_scores(found.subject.verdict, found.trace_id)
    if not scores:
        return "skipped"
    client = LangfuseAPI(
        base_url=settings.langfuse_host.rstrip("/"),
        username=settings.langfuse_public_key,
        password=settings.secret("langfuse_secret_key"),
        timeout=TIMEOUT_SECONDS,
    )
    try:
        # Retries are Celery's (with backoff, counted); the SDK's own would hide an outage inside one attempt.
        answer = client.scores.create(request=scores, request_options={"max_retries": 0})
    except ApiError as error:
        if error.status_code in REFUSED:
            log.warning("langfuse refused the scores", extra={**fields, "status": error.status_code})
            return "rejected"
        raise SendAgain(f"langfuse answered {error.status_code}") from None
    except httpx.HTTPError as error:
        raise SendAgain(f"langfuse out of reach ({type(error).__name__})") from None
    rejected = getattr(answer, "rejected", 0)
    if rejected:  # 207: some accepted, some not (Langfuse asks not to retry such a batch)
        log.warning("langfuse rejected scores", extra={**fields, "rejected": rejected})
        return "rejected"
    log.info("scores sent", extra={**fields, "scores": len(scores)})
    return "sent"


def send_to_otlp(runtime: Runtime, judgment_id: int) -> str:
    """One judgment's `gen_ai.evaluation.result` events over OTLP (workers.otlp_events). SendAgain: retry."""
    from workers.otlp_events import export_evaluations

    found = traced(runtime, judgment_id, OTLP)
    if isinstance(found, str):
        return found
    events = evaluation_events(found.subject.verdict)
    if not events:
        return "skipped"
    if not export_evaluations(runtime.settings.otlp_endpoint, found.trace_id, events):
        raise SendAgain("the OTLP endpoint did not take the events")
    log.info("evaluation events sent", extra={**found.fields, "events": len(events)})
    return "sent"


def send_to_phoenix(runtime: Runtime, judgment_id: int) -> str:
    """One judgment's span annotations to Phoenix (workers.phoenix_annotations: which span, and why). SendAgain:
    retry."""
    from workers.phoenix_annotations import annotate

    found = traced(runtime, judgment_id, PHOENIX)
    if isinstance(found, str):
        return found
    try:
        span_id = checked_span_id(found.span_id) if found.span_id else None
    except BadTraceId as error:
        key = runtime.settings.span_id_key
        log.warning("span id refused", extra={**found.fields, "reason": str(error), "key": key})
        return "bad_trace_id"
    return annotate(runtime.settings, found.subject.verdict, found.trace_id, span_id, found.fields)


def queue_trace_sends(runtime: Runtime, judgment_ids: list[int]) -> None:
    """After judgments (or a second opinion) are stored: one send per judgment to each tool configured. A broker
    that fails here is logged and counted; the judgment and its alert go on regardless."""
    settings = runtime.settings
    tools = [(LANGFUSE, task_names.SEND_LANGFUSE_SCORES)] if settings.langfuse_enabled else []
    tools += [(OTLP, task_names.SEND_OTLP_EVALUATIONS)] if settings.otlp_endpoint else []
    tools += [(PHOENIX, task_names.SEND_PHOENIX_ANNOTATIONS)] if settings.phoenix_url else []
    for judgment_id in judgment_ids:
        for tool, task in tools:
            try:
                celery.send_task(task, args=[judgment_id])
            except Exception as error:  # the broker: this send is lost, the pipeline is not
                log.warning("trace send not queued", extra={"judgment_id": judgment_id, "error": type(error).__name__})
                metrics.trace_send(tool, "not_queued")
