"""`forget_message`: the one path by which a deletion (or an edit that takes words out) reaches every copy relmon
keeps of a message. The bot logs the deletion or edit in the conversation log and leaves what the message said in
a note (capture.forget_notes); this task reads the note and the thread's stored pairs and judgments, lets the pure
`capture.forgetting.plan_forget` decide what changes, and writes it in one transaction, with the copies made from
them elsewhere (`relmon regress` runs' checks and reports, the golden set, topic names). Then: pairs that waited for
their judge look for their question again, the alerts about the changed pairs are redrawn in place (the vote
tally's redraw path, saying the message was deleted) and the summaries that list them are redrawn, the note is
dropped, and Redis is asked to rewrite its append-only file (common.redis_persistence).

Idempotent: run again, it finds nothing left to change (and redraws the same alerts again).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from functools import partial

import redis
from sqlalchemy.exc import OperationalError

from capture import forget_notes
from capture.forgetting import (
    plan_forget,
    plan_regress_forget,
    removal_of_deletion,
    removal_of_words,
    scrub_copies,
)
from capture.redact import redact_if
from common import task_names
from common.celery_app import celery
from common.redis_persistence import RewriteBusy, rewrite_append_only_file, rewrite_soon
from common.reports.view_cache import forget_views
from common.runtime import Runtime, get_runtime
from common.telemetry.logs import event_fields
from store import forgetting, golden
from workers.alerts.forgotten import redraw_forgotten
from workers.alerts.policy import summary_key
from workers.exchange_forgetting import forget_exchange_in
from workers.forgotten_elsewhere import found_elsewhere, reach_elsewhere

log = logging.getLogger("relmon.forget")


@dataclass(frozen=True)
class Forgotten:
    """What one forgetting run changed: the pairs and judgments scrubbed and the posted alerts redrawn."""

    pairs: int = 0
    judgments: int = 0
    alerts: int = 0

    def __str__(self) -> str:  # the task's result, in the worker's log
        return f"pairs: {self.pairs}; judgments: {self.judgments}; alerts: {self.alerts}"


def forget_message_in(
    runtime: Runtime, channel: str, ts: str, *, thread_ts: str | None = None, edited: bool = False
) -> Forgotten:
    """Scrub the message `ts` (deleted, or edited when `edited`) from every stored copy; returns what changed."""
    settings = runtime.settings
    said = forget_notes.read(runtime.redis, channel, ts, edited=edited)
    if edited and not said:
        return Forgotten()  # nothing noted: another run of this edit's task scrubbed it already
    thread_key = thread_ts or ts
    with runtime.db.session() as session:
        pairs, judgments = forgetting.thread_rows(session, channel, ts, thread_key)
        stored = [p.question_text for p in pairs if p.question_ts == ts]
        stored += [p.answer_text for p in pairs if p.answer_ts == ts]
        before = [*said, *(redact_if(settings.redact_pii, text) for text in said), *stored]
        removal = removal_of_words(said) if edited else removal_of_deletion(before)
        plan = plan_forget(ts, removal, pairs, judgments)
        forgetting.apply_plan(session, plan)
        regress = None
        if removal:  # the copies outside the thread's pairs: regress runs', the golden set's, the topics' names
            pair_ids = [p.id for p in pairs]
            # Read through the golden sources, before the deletion below takes them away.
            blanked, checks, reports = forgetting.regress_rows(session, channel, ts, pair_ids, deleted=not edited)
            regress = plan_regress_forget(removal, blanked, checks, reports)
            forgetting.apply_regress_plan(session, regress)
            scrub = partial(scrub_copies, removal=removal)
            forgetting.scrub_other_copies(session, channel, pair_ids, scrub)
        reopened = [] if edited else forgetting.reopen_waiting(session, channel, ts)
        if not edited:
            # A question or a teammate's reply the golden set quoted.
            golden.forget_sources_quoting(session, channel, ts)
        redraw = forgetting.note_on_alerts(session, plan.about)
        forgetting.force_summary_redraw(session, {summary_key(alert_channel, at) for alert_channel, at in redraw.held})
        elsewhere = found_elsewhere(runtime, session, plan, [p.id for p in pairs])  # trace tools, posted digests
    for pair_id, version in reopened:
        celery.send_task(task_names.SETTLE_PAIR, args=[pair_id, version])
    forget_notes.drop(runtime.redis, channel, ts, len(said), edited=edited)
    forget_views(runtime.redis)  # a cached digest preview may quote the message
    redraw_forgotten(runtime, redraw, plan.about)
    reach_elsewhere(runtime, elsewhere)
    rewrite_soon(runtime.redis)
    log.info(
        "message forgotten" if not edited else "edit's removed words forgotten",
        extra=event_fields(
            channel=channel,
            message_ts=ts,
            pairs=len(plan.pairs),
            judgments=len(plan.judgments),
            regress_checks=len(regress.checks) if regress else 0,
            regress_reports=len(regress.reports) if regress else 0,
            alerts=len(redraw.posted),
        ),
    )
    return Forgotten(len(plan.pairs), len(plan.judgments), len(redraw.posted))


_RETRIED = {
    "acks_late": True,
    "autoretry_for": (redis.RedisError, OperationalError),
    "retry_backoff": 1,
    "retry_backoff_max": 30,
    "max_retries": 60,
}


@celery.task(name=task_names.FORGET_MESSAGE, **_RETRIED)
def forget_message(channel: str, ts: str, thread_ts: str | None = None, edited: bool = False) -> Forgotten:
    return forget_message_in(get_runtime(), channel, ts, thread_ts=thread_ts, edited=edited)


@celery.task(name=task_names.FORGET_EXCHANGE, **_RETRIED)
def forget_exchange(bot: str, exchange_id: str) -> str:
    """An exchange deleted by the bot's side (DELETE /v1/exchanges/{id}): workers.exchange_forgetting."""
    return forget_exchange_in(get_runtime(), bot, exchange_id)


@celery.task(name=task_names.REWRITE_REDIS_AOF, bind=True, max_retries=30)
def rewrite_redis_aof(self) -> str:
    """Rewrite Redis's append-only file (common.redis_persistence); after a running rewrite, not during it."""
    try:
        return rewrite_append_only_file(get_runtime().redis)
    except (RewriteBusy, redis.RedisError) as error:
        raise self.retry(countdown=2, exc=error) from error
