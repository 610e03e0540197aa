"""The Celery tasks that post to Slack: alerts on low scores, degradation and a failure rate's changes, the hour's
summary of held alerts, vote tallies on alerts, on-demand verdicts, and the LLM outage notices. Thin: the work is in
`workers.alerts` (planning, delivery, summaries, verdicts, changes) and `workers.outage_notices`; here is how a task
retries.

At most once: every post is first claimed as a row in `alerts` (unique `dedupe_key`) and then made by the one
post-once protocol (`common.post_once`)."""

from __future__ import annotations

import logging
from functools import partial

from common.backoff import backoff_seconds
from common.celery_app import celery
from common.post_once import outcome_unknown
from common.runtime import get_runtime
from common.task_names import (
    CONSIDER_ALERT,
    DELIVER_VERDICT,
    FLUSH_ALERT_SUMMARIES,
    FOLLOW_UP_OUTCOME,
    POST_OUTAGE_NOTICE,
    REFRESH_ALERT_VOTES,
    WATCH_CHANGES,
)
from judges import TransientLLMError
from workers.alerts.changes import watch
from workers.alerts.delivery import Considered, consider, is_permanent, refresh_votes, slack_error
from workers.alerts.outcomes import FollowedUp, follow_up
from workers.alerts.summaries import flush_summaries
from workers.alerts.verdicts import deliver
from workers.judging.rules import retry_countdown
from workers.outage_notices import post_notice

log = logging.getLogger("relmon.alerts")

MAX_RETRIES = 8
RETRY_BASE_SECONDS = 2.0
RETRY_CAP_SECONDS = 60.0
# A retry after a post whose outcome is unknown waits at least this long: a post Slack was still working on has
# had time to reach the channel's history, where the retry looks for it.
UNKNOWN_OUTCOME_RETRY_SECONDS = 15.0


def retry_delay(retries: int, error: BaseException) -> float:
    """The wait before the next retry of a Slack task."""
    at_least = UNKNOWN_OUTCOME_RETRY_SECONDS if outcome_unknown(error) else 0.0
    return backoff_seconds(retries, base=RETRY_BASE_SECONDS, cap=RETRY_CAP_SECONDS, at_least=at_least)


def _run(task, function, *args):
    """Run a task body; transient failures (Slack 5xx or connection, a busy lease, Redis or database hiccups)
    retry with backoff. Slack's 429s were already waited out by the client's RateLimitErrorRetryHandler."""
    try:
        return function(get_runtime(), *args)
    except Exception as error:
        if is_permanent(error) or task.request.retries >= MAX_RETRIES:
            raise
        countdown = retry_delay(task.request.retries, error)
        if isinstance(error, TransientLLMError):  # the second opinion: the LLM's own retry cadence
            settings = get_runtime().settings
            countdown = retry_countdown(
                task.request.retries, settings.retry_base_seconds, settings.llm_max_retries, error.retry_after
            )
        log.info(
            "slack task retrying",
            extra={"task": task.name, "in_s": countdown, "error": repr(error)[:300], "slack_error": slack_error(error)},
        )
        # Raises Retry once the retry message is published; if the broker cannot take it, Reject with requeue
        # (common.celery_task): an alert has only its message.
        task.retry(countdown=countdown, exc=error)


@celery.task(name=CONSIDER_ALERT, bind=True, max_retries=MAX_RETRIES)
def consider_alert(self, judgment_id: int) -> Considered:
    """Apply the alert policy to one new judgment (`workers.alerts.delivery.consider`). Idempotent. A second
    opinion the LLM cannot give is retried like any transient failure, up to RELMON_LLM_MAX_RETRIES times (at
    most MAX_RETRIES): on the last attempt it is stored as unconfirmed and nobody is alerted."""
    last_attempt = self.request.retries >= min(get_runtime().settings.llm_max_retries, MAX_RETRIES)
    return _run(self, partial(consider, last_attempt=last_attempt), judgment_id)


@celery.task(name=FLUSH_ALERT_SUMMARIES, bind=True, max_retries=MAX_RETRIES)
def flush_alert_summaries(self) -> int:
    """Post or update the summary message of every alert channel-hour with held alerts."""
    return _run(self, flush_summaries)


@celery.task(name=REFRESH_ALERT_VOTES, bind=True, max_retries=MAX_RETRIES)
def refresh_alert_votes(self, alert_id: int, trailing: bool = False) -> str:
    """Show the current feedback tally on a posted alert (chat.update), coalesced (`workers.alerts.redraws`)."""
    return _run(self, partial(refresh_votes, trailing=trailing), alert_id)


@celery.task(name=DELIVER_VERDICT, bind=True, max_retries=MAX_RETRIES)
def deliver_verdict(self, pair_id: int, reply_channel: str | None = None) -> str:
    """Send an on-demand verdict privately to whoever asked (`workers.alerts.verdicts`), once."""
    return _run(self, deliver, pair_id, reply_channel)


@celery.task(name=FOLLOW_UP_OUTCOME, bind=True, max_retries=MAX_RETRIES)
def follow_up_outcome(self, pair_id: int) -> FollowedUp:
    """A pair's outcome signals changed: its missed-failure alert (once) and its alerts redrawn
    (`workers.alerts.outcomes.follow_up`)."""
    return _run(self, follow_up, pair_id)


@celery.task(name=POST_OUTAGE_NOTICE, bind=True, max_retries=MAX_RETRIES)
def post_outage_notice(self, kind: str, since: float, failure: str, waited: int = 0, at: float = 0.0) -> int:
    """Post 'judging paused' or 'judging resumed' (an LLM outage) in every alert channel, once each
    (`workers.outage_notices`)."""
    return _run(self, partial(post_notice, waited=waited, at=at), kind, since, failure)


@celery.task(name=WATCH_CHANGES, bind=True, max_retries=MAX_RETRIES)
def watch_changes(self) -> str:
    """Beat's tick: feed the judgments made since the last look to each group's change detector, and post the
    change alerts it raises (`workers.alerts.changes.watch`)."""
    return str(_run(self, watch))
