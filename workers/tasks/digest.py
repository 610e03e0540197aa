"""Digest tasks: the weekly digest (exactly once per ISO week), the private `/judge digest` preview, a posted
digest redrawn after a message it may quote was forgotten, and the alert when a judge's agreement with the team fell
(checked after the weekly digest).

Thin adapters: arguments and retries here, the delivery in `workers.digest.delivery`.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from http.client import HTTPException

from slack_sdk.errors import SlackApiError

from common import task_names
from common.backoff import backoff_seconds
from common.celery_app import celery
from common.replies import response_url_of
from common.reports.period import period_for, scheduled_key
from common.runtime import get_runtime
from workers import agreement_alert
from workers.alerts.delivery import is_permanent, slack_error
from workers.digest.delivery import deliver_digest, deliver_preview
from workers.digest.redraw import redraw_digest as redraw

log = logging.getLogger("relmon.digest")

MAX_RETRIES = 5
# Worth another attempt: Slack answered with an error, or could not be reached even after the client's own
# connection retries (URLError and socket errors are OSErrors; a dropped connection is an HTTPException).
RETRYABLE = (SlackApiError, OSError, HTTPException)

RETRY_BASE_SECONDS = 30.0
RETRY_CAP_SECONDS = 600.0


@celery.task(name=task_names.SEND_DIGEST, bind=True, max_retries=MAX_RETRIES)
def send_digest(self, force: bool = False, period_key: str | None = None, scheduled: bool = False) -> str:
    runtime, now = get_runtime(), datetime.now(UTC)
    if force and period_key is None:
        period_key = period_for(now, runtime.settings.timezone, force=True).key
    elif scheduled and period_key is None:  # beat's run: the week of the slot it was sent for
        settings = runtime.settings
        period_key = scheduled_key(now, settings.digest_day, settings.digest_hour, settings.timezone)
    try:
        status = deliver_digest(runtime, now, force=force, period_key=period_key).status
    except RETRYABLE as error:
        # The claim was released: the retry finishes what this run started (the same forced key included).
        log.warning(
            "digest retrying",
            extra={"attempt": self.request.retries + 1, "error": repr(error)[:300], "slack_error": slack_error(error)},
        )
        raise self.retry(
            exc=error,
            countdown=backoff_seconds(self.request.retries, base=RETRY_BASE_SECONDS, cap=RETRY_CAP_SECONDS),
            kwargs={"force": force, "period_key": period_key},
        ) from error
    if status == "sent" and not force:  # the week's agreement with the team, once the digest showed it
        try:
            celery.send_task(task_names.CHECK_AGREEMENT)
        except Exception as error:  # the digest went out: a broker hiccup costs this week's check, not a retry
            log.warning("agreement check not queued", extra={"error": repr(error)[:300]})
    return status


@celery.task(name=task_names.CHECK_AGREEMENT, bind=True, max_retries=MAX_RETRIES)
def check_agreement(self) -> list[str]:
    """Alert when a judge's agreement with the team fell significantly since last week (posted once a week)."""
    try:
        return agreement_alert.check_agreement(get_runtime(), datetime.now(UTC))
    except RETRYABLE as error:
        raise self.retry(exc=error, countdown=_countdown(self.request.retries)) from error


@celery.task(name=task_names.SEND_DIGEST_PREVIEW, bind=True, max_retries=2)
def send_digest_preview(
    self,
    user_id: str,
    channel_id: str | None = None,
    response_url_id: str | None = None,
) -> None:
    runtime = get_runtime()
    response_url = response_url_of(runtime.redis, response_url_id)
    try:
        deliver_preview(runtime, datetime.now(UTC), user_id=user_id, channel_id=channel_id, response_url=response_url)
    except SlackApiError as error:
        raise self.retry(exc=error, countdown=backoff_seconds(self.request.retries, base=5.0, cap=5.0)) from error


GONE = frozenset({"message_not_found", "cant_update_message"})


@celery.task(name=task_names.REDRAW_DIGEST, bind=True, acks_late=True, max_retries=MAX_RETRIES)
def redraw_digest(self, digest_id: int) -> str:
    """Idempotent: a redraw again draws the same rows."""
    try:
        return redraw(get_runtime(), digest_id)
    except SlackApiError as error:
        if slack_error(error) in GONE or is_permanent(error):  # deleted in Slack, or never to be taken
            log.warning("digest not redrawn", extra={"digest_id": digest_id, "slack_error": slack_error(error)})
            return "gone"
        raise self.retry(exc=error, countdown=_countdown(self.request.retries)) from error
    except RETRYABLE as error:
        raise self.retry(exc=error, countdown=_countdown(self.request.retries)) from error


def _countdown(tries: int) -> float:
    return backoff_seconds(tries, base=RETRY_BASE_SECONDS, cap=RETRY_CAP_SECONDS)
