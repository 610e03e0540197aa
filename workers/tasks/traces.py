"""Verdicts and outcome signals sent to the support bot's traces (Langfuse scores, OpenTelemetry evaluation events,
Phoenix span annotations), one task per judgment (or per pair and signal) and tool: idempotent (score ids and
annotation identifiers derived from the judgment or the pair and signal: a resend upserts), retried with backoff
while the tool is out of reach, never in the way of judging or alerting (queued after the judgment or signal is
stored, failing alone), noted while on their way so that a lost message is sent again (common.task_notes). A
trace ID that is not one, or a key the tool refuses, is said once in a log line and a metric, and not retried."""

from __future__ import annotations

import logging

from common import metrics, task_names
from common.backoff import backoff_seconds
from common.celery_app import celery
from common.runtime import get_runtime
from workers.trace_answers import SendAgain
from workers.trace_forgetting import blank_on_langfuse, blank_on_phoenix
from workers.trace_sending import (
    LANGFUSE,
    OTLP,
    PHOENIX,
    send_outcome_to_langfuse,
    send_outcome_to_otlp,
    send_outcome_to_phoenix,
    send_to_langfuse,
    send_to_otlp,
    send_to_phoenix,
)

log = logging.getLogger("relmon.traces")

RETRY_BASE_SECONDS, RETRY_CAP_SECONDS = 5.0, 300.0


def attempt(task, tool: str, send, **ids: object) -> str:
    """One try of a send task: its outcome counted; an outage retried with backoff until the retries allowed are
    spent, then given up (counted as failed). Noted while on its way (common.task_notes)."""
    runtime = get_runtime()
    try:
        outcome = send(runtime, **ids)
    except SendAgain as error:
        tries = task.request.retries
        if tries >= runtime.settings.trace_send_retries:
            log.warning(f"{tool}: gave up", extra={**ids, "reason": str(error)})
            metrics.trace_send(tool, "failed")
            return "failed"
        countdown = backoff_seconds(tries, base=RETRY_BASE_SECONDS, cap=RETRY_CAP_SECONDS)
        log.info(f"{tool}: retrying", extra={**ids, "reason": str(error), "in_s": countdown})
        raise task.retry(countdown=countdown) from None
    metrics.trace_send(tool, outcome)
    return outcome


@celery.task(name=task_names.SEND_LANGFUSE_SCORES, bind=True, acks_late=True, max_retries=None)
def send_langfuse_scores(self, judgment_id: int) -> str:
    return attempt(self, LANGFUSE, send_to_langfuse, judgment_id=judgment_id)


@celery.task(name=task_names.SEND_OTLP_EVALUATIONS, bind=True, acks_late=True, max_retries=None)
def send_otlp_evaluations(self, judgment_id: int) -> str:
    return attempt(self, OTLP, send_to_otlp, judgment_id=judgment_id)


@celery.task(name=task_names.SEND_LANGFUSE_OUTCOME, bind=True, acks_late=True, max_retries=None)
def send_langfuse_outcome(self, pair_id: int, signal: str) -> str:
    return attempt(self, LANGFUSE, send_outcome_to_langfuse, pair_id=pair_id, signal=signal)


@celery.task(name=task_names.SEND_OTLP_OUTCOME, bind=True, acks_late=True, max_retries=None)
def send_otlp_outcome(self, pair_id: int, signal: str) -> str:
    return attempt(self, OTLP, send_outcome_to_otlp, pair_id=pair_id, signal=signal)


@celery.task(name=task_names.SEND_PHOENIX_ANNOTATIONS, bind=True, acks_late=True, max_retries=None)
def send_phoenix_annotations(self, judgment_id: int) -> str:
    return attempt(self, PHOENIX, send_to_phoenix, judgment_id=judgment_id)


@celery.task(name=task_names.SEND_PHOENIX_OUTCOME, bind=True, acks_late=True, max_retries=None)
def send_phoenix_outcome(self, pair_id: int, signal: str) -> str:
    return attempt(self, PHOENIX, send_outcome_to_phoenix, pair_id=pair_id, signal=signal)


# Forgetting (workers.trace_forgetting): a verdict sent again without its comment, where the tool upserts.
@celery.task(name=task_names.BLANK_LANGFUSE_COMMENTS, bind=True, acks_late=True, max_retries=None)
def blank_langfuse_comments(self, judgment_id: int) -> str:
    return attempt(self, LANGFUSE, blank_on_langfuse, judgment_id=judgment_id)


@celery.task(name=task_names.BLANK_PHOENIX_EXPLANATIONS, bind=True, acks_late=True, max_retries=None)
def blank_phoenix_explanations(self, judgment_id: int) -> str:
    return attempt(self, PHOENIX, blank_on_phoenix, judgment_id=judgment_id)
