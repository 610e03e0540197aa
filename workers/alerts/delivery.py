"""Posting alerts: act on a judgment's plan (`consider`), post a claimed alert exactly once (`post_alert`), and
show the current votes on a posted one (`refresh_votes`).

The post itself runs under a short Redis lease per alert row, so two workers with the same judgment (a
redelivery, a duplicate enqueue) take turns: the second finds the row `posted` and does nothing. A worker that
dies after claiming leaves the row `claimed`; its redelivered task (late acks) or any retry finds it so and
posts it. Messages carry IDs only; texts are read from the database. A post whose outcome is unknown is found
again by the one post-once protocol (`common.post_once`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import redis
from celery import current_task
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from capture import forget_notes
from common.celery_app import celery
from common.post_once import PostOnce, Receipts
from common.runtime import Runtime
from common.task_names import FLUSH_ALERT_SUMMARIES, REFRESH_ALERT_VOTES
from common.telemetry.logs import event_fields
from store import alert_reads
from store import alerts as alert_store
from store.alert_reads import AlertRow
from store.models import Alert, Pair
from workers.alerts import confirmation, planning, redraws, views
from workers.alerts.policy import Action, low_intent, second_opinion, to_utc

log = logging.getLogger("relmon.alerts")

LEASE_SECONDS = 120  # a worker posting an alert holds it this long at most (Slack calls time out sooner)
LEASE_WAIT_SECONDS = 30  # how long a twin waits for the holder before retrying later
SUMMARY_DELAY_SECONDS = 5.0  # held alerts gather this long before the summary is posted or updated
SUMMARY_SCHEDULED_KEY = "relmon:summary-flush-scheduled"
ALERT_METADATA_EVENT = "relmon_alert"  # alerts and summaries; the payload's `dedupe_key` is the row's
# A claim older than this was left by a worker that died, perhaps after Slack accepted its post.
STALE_CLAIM = timedelta(seconds=30)
# Slack errors that no retry can fix: the alert is marked failed and logged.
PERMANENT_SLACK_ERRORS = frozenset(
    {
        "channel_not_found",
        "not_in_channel",
        "is_archived",
        "invalid_blocks",
        "invalid_blocks_format",
        "msg_too_long",
        "msg_blocks_too_long",
        "no_text",
        "invalid_auth",
        "account_inactive",
        "token_revoked",
        "missing_scope",
        "message_not_found",
        "cant_update_message",
        "restricted_action",
        "user_not_found",
    }
)


class LeaseBusy(Exception):
    """Another worker is posting this alert right now; try again later."""


def slack_error(error: Exception) -> str | None:
    if isinstance(error, SlackApiError):
        return str(error.response.get("error") or "")
    return None


def is_permanent(error: Exception) -> bool:
    return slack_error(error) in PERMANENT_SLACK_ERRORS


def _current_task_id() -> str | None:
    task = current_task
    return task.request.id if task and task.request and task.request.id else None


@contextmanager
def lease(runtime: Runtime, alert_id: int, owner: str | None = None) -> Iterator[None]:
    """One worker at a time per alert row (Redis lock with a timeout: a dead holder frees it).

    The lock's token is the Celery task's id, which a retry or a redelivery of the same task keeps. So when an
    attempt could not release it (Redis went down mid-task, or the worker died), the next attempt of that same
    task takes its own lease back at once instead of waiting out LEASE_SECONDS; a different task still waits."""
    owner = owner or _current_task_id()
    key = f"relmon:alert-lease:{alert_id}"
    lock = runtime.redis.lock(key, timeout=LEASE_SECONDS, blocking_timeout=LEASE_WAIT_SECONDS)
    token = owner.encode() if owner else None
    if token is not None and runtime.redis.get(key) == token:
        lock.local.token = token
        lock.reacquire()  # ours, left by an earlier attempt: a fresh timeout, then on with the work
    elif not lock.acquire(token=token):
        raise LeaseBusy(alert_id)
    try:
        yield
    finally:
        with suppress(redis.exceptions.LockError):
            lock.release()


def permalink(runtime: Runtime, channel_id: str | None, message_ts: str | None) -> str | None:
    if not channel_id or not message_ts:
        return None
    try:
        return runtime.slack.chat_getPermalink(channel=channel_id, message_ts=message_ts).get("permalink")
    except SlackApiError as error:
        log.info("no permalink", extra={"channel": channel_id, "error": slack_error(error)})
        return None


def alert_post_once(runtime: Runtime, dedupe_key: str) -> PostOnce:
    """The post-once protocol of alerts and summaries: marked with their dedupe key, receipts in Redis."""
    return PostOnce(runtime.slack, Receipts(runtime.redis), dedupe_key, ALERT_METADATA_EVENT)


def earlier_post(runtime: Runtime, once: PostOnce, channel: str, claimed_at: datetime) -> str | None:
    """An earlier post of a claimed row: its receipt, else, when an earlier attempt may have posted without
    hearing back (its attempt note stands, or the claim is stale: its worker died, perhaps before even the
    note), the marked message in the channel. A first attempt on a fresh claim reads no history."""
    stale = datetime.now(UTC) - claimed_at > STALE_CLAIM
    return once.earlier(channel, claimed_at, look=stale or once.attempted())


def schedule_summary_flush(runtime: Runtime) -> None:
    """At most one pending flush at a time. The marker expires a second before the flush runs, so a held
    alert recorded after the marker is gone schedules the next flush itself; one recorded while it stood was
    committed before the flush reads."""
    marker_ms = int(max(SUMMARY_DELAY_SECONDS - 1.0, 0.1) * 1000)
    if runtime.redis.set(SUMMARY_SCHEDULED_KEY, "1", nx=True, px=marker_ms):
        celery.signature(FLUSH_ALERT_SUMMARIES).apply_async(countdown=SUMMARY_DELAY_SECONDS)


@dataclass(frozen=True)
class Considered:
    """What `consider` did about one judgment: its low score (the policy's reason, or what became of the alert:
    posted, held, failed) and the channel's degradation (None: not looked at)."""

    low: str
    degradation: str | None = None

    def __str__(self) -> str:  # the task's result, in the worker's log
        return self.low if self.degradation is None else f"{self.low}; degradation: {self.degradation}"


def consider(
    runtime: Runtime, judgment_id: int, now: datetime | None = None, *, last_attempt: bool = False
) -> Considered:
    """Apply the alert policy to one new judgment: post a low-score alert (once a second opinion confirms it),
    hold it for the hour's summary, and check the channel's rolling mean for degradation. Idempotent.
    `last_attempt`: the task will not retry, so a second opinion the LLM cannot give now is given up on."""
    now = now or datetime.now(UTC)
    judged = planning.load(runtime, judgment_id)
    if judged is None:
        return Considered("missing")
    if judged.policy is None:
        return Considered("no_channel")
    update_superseded(runtime, judged.earlier_alerts)
    if judged.superseded and judged.low_row is None:
        return Considered("superseded")  # the answer was edited since: the newer judgment is the one alerted on
    policy = judged.policy  # resolved once, in load: the intent, the second opinion and the claim read this one
    assert policy is not None  # a judgment with a channel has its policy
    # The low score is decided once, lock-free; planning.plan_and_claim completes that decision under the locks (the
    # hour's caps, the degradation history: only there are they read consistently with the claim).
    intent = low_intent(judged.facts, policy)
    if judged.low_row is None and intent.action is not Action.NONE:
        # Low: confirm it before any claim (an LLM call, so outside every lock); the policy decides on both.
        threshold = policy.thresholds.get(judged.facts.judge)
        status = confirmation.confirm(runtime, judged, threshold, last_attempt=last_attempt)
        intent = second_opinion(intent, status)
    settled = planning.plan_without_locks(runtime, judged, policy, intent, now)
    if settled is not None:
        return Considered(intent.reason, settled.degradation.reason)
    link = None
    if judged.low_row is None and intent.action is not Action.NONE:  # before the locks: no Slack call under one
        link = permalink(runtime, judged.facts.channel_id, judged.answer_ts)
    claimed = planning.plan_and_claim(runtime, judged, policy, intent, link, now)
    low = claimed.plan.low.reason
    if claimed.low is not None:
        low = _act_on(runtime, claimed.low, judged)
    degradation = claimed.plan.degradation.reason
    if claimed.degradation is not None and _act_on(runtime, claimed.degradation, None) == "held":
        degradation = "degradation_held"
    return Considered(low, degradation)


def update_superseded(runtime: Runtime, alert_ids: tuple[int, ...]) -> None:
    """Alerts posted about an earlier version of an edited answer, redrawn in place (chat.update): they say the
    answer changed and show the newer verdict. A message gone for good is let be; other failures retry."""
    for alert_id in alert_ids:
        try:
            refresh_votes(runtime, alert_id)
        except SlackApiError as error:
            if not is_permanent(error):
                raise
            log.warning("superseded alert not updated", extra={"alert_id": alert_id, "error": slack_error(error)})
        else:
            log.info("superseded alert updated", extra={"alert_id": alert_id})


def _act_on(runtime: Runtime, claim: planning.Claim, judged: planning.Judged | None) -> str:
    if claim.status == alert_store.STATUS_CLAIMED:
        return post_alert(runtime, claim.row, judged) if claim.row is not None else "missing"
    if claim.status == alert_store.STATUS_HELD:
        schedule_summary_flush(runtime)
        return "held"
    return claim.status


def refused_for_good(runtime: Runtime, row_id: int, error: SlackApiError, event: str, **fields: object) -> str:
    """A post Slack refused (alert, summary): for good (the channel gone, relmon not in it, blocks refused) the
    row is marked failed, logged once and never tried again; any other refusal is raised for the task's retry."""
    if not is_permanent(error):
        raise error
    with runtime.db.session() as session:
        alert_store.mark_failed(session, row_id, slack_error(error) or "slack error")
    log.error(event, extra={**fields, "error": slack_error(error)})
    return alert_store.STATUS_FAILED


def post_alert(runtime: Runtime, row: AlertRow, judged: planning.Judged | None) -> str:
    """Post a claimed alert unless it was posted already: a degradation (`judged` None), or a low score or missed
    failure about `judged`, the judgment as its task loaded it (`planning.load`). `row`: as its claim wrote it."""
    alert_id = row.id
    with lease(runtime, alert_id):
        with runtime.db.reading() as session:  # reads alone: the lease and the row's status guard the post
            # One read under the lease, and the only one of the row since its claim: its status, since a twin task
            # may have posted it (or had it refused for good) between that claim and this lease; and what the
            # alert shows may have changed since the load (planning.current).
            stamp = alert_reads.before_post(session, alert_id)
            if stamp is None or stamp.status != alert_store.STATUS_CLAIMED:
                return stamp.status if stamp else "missing"
            if judged is not None:
                fresh = planning.current(session, judged, stamp)  # words deleted since the task loaded it stay out
                if fresh is None:
                    return "missing"
                if fresh is not judged:  # the deletion noted on the row too, in the same transaction: say so
                    judged, row = fresh, alert_reads.row_by_id(session, alert_id) or row
            payload = views.render_alert(runtime, session, row, judged)
            channel, claimed_at = row.alert_channel_id, to_utc(row.created_at)
            once = alert_post_once(runtime, row.dedupe_key)
            # Identifiers only (never text): the judgment and the source message it is about.
            fields = event_fields(
                channel=row.source_channel_id,
                message_ts=judged.answer_ts if judged is not None else None,
                judgment_id=row.judgment_id,
                alert_id=alert_id,
                alert_kind=row.kind,
                alert_channel=channel,
            )
        earlier_ts = earlier_post(runtime, once, channel, claimed_at)
        if earlier_ts is not None:
            with runtime.db.autocommit() as connection:
                alert_store.mark_alert_posted(connection, alert_id, earlier_ts or None)
            log.info("alert found posted already", extra={"alert_id": alert_id})
            return alert_store.STATUS_POSTED
        try:
            response = once.post(channel, unfurl_links=False, unfurl_media=False, **payload)
        except SlackApiError as error:
            return refused_for_good(runtime, alert_id, error, "alert not posted", alert_id=alert_id)
        with runtime.db.autocommit() as connection:  # one atomic UPDATE
            alert_store.mark_alert_posted(connection, alert_id, response.get("ts"))
    log.info("alert posted", extra={**fields, "alert_ts": response.get("ts")})
    return alert_store.STATUS_POSTED


def refresh_votes(runtime: Runtime, alert_id: int, *, trailing: bool = False) -> str:
    """Show the current feedback tally and outcome signals on a posted alert (chat.update), at most once per
    RELMON_ALERT_REDRAW_SECONDS (`workers.alerts.redraws`): an ask within the window is drawn once at its end."""
    decision = redraws.decide(runtime.redis, alert_id, runtime.settings.alert_redraw_seconds, trailing=trailing)
    if not decision.now:
        if decision.trailing_in is None:
            return "coalesced"  # the trailing redraw already scheduled will show this change too
        celery.send_task(
            REFRESH_ALERT_VOTES, args=[alert_id], kwargs={"trailing": True}, countdown=decision.trailing_in
        )
        return "deferred"
    with lease(runtime, alert_id):  # so the last update to run reads the latest votes
        update = _votes_update(runtime, alert_id)
        if isinstance(update, str):
            return update
        if _forgotten_since(runtime, alert_id, update.pop("forgotten_seen")):
            # A scrub committed while this was drawn: these words must not go out again; the scrub's own redraw
            # (queued behind this one) shows the scrubbed rows.
            return "scrub_pending"
        runtime.slack.chat_update(**update)
    return "updated"


def _forgotten_since(runtime: Runtime, alert_id: int, seen: str | None) -> bool:
    with runtime.db.reading() as session:
        details = session.scalar(select(Alert.details).where(Alert.id == alert_id))
    return (details or {}).get("forgotten") != seen


def _votes_update(runtime: Runtime, alert_id: int) -> dict | str:
    """The chat.update that shows the current votes on the alert, or why there is none."""
    with runtime.db.reading() as session:
        row = session.get(Alert, alert_id)
        if row is None or row.kind not in (alert_store.KIND_LOW, alert_store.KIND_MISSED):
            return "not_an_alert"
        if row.status != alert_store.STATUS_POSTED or not row.message_ts:
            return "not_posted"  # the post, when it happens, renders the votes itself
        judged = planning.load_in(session, runtime, row.judgment_id)
        if judged is None:
            return "missing"
        if _scrub_pending(runtime, session, judged):
            # Its words would go out once more: the scrub, when it has committed, redraws this alert itself
            # (workers.alerts.forgotten), from the rows it scrubbed.
            return "scrub_pending"
        message = views.render_low(runtime, session, row, judged)
        seen = (row.details or {}).get("forgotten")
        return {"channel": row.alert_channel_id, "ts": row.message_ts, **message, "forgotten_seen": seen}


def _scrub_pending(runtime: Runtime, session, judged: planning.Judged) -> bool:
    """Whether the question or the answer of the alert's pair was deleted or edited and is not scrubbed yet (a
    redraw another message's deletion set off can run while this one's scrub is still on its way)."""
    found = session.execute(select(Pair.question_ts, Pair.answer_ts).where(Pair.id == judged.pair.id)).one_or_none()
    if found is None or judged.pair.channel_id is None:
        return False
    return forget_notes.pending(runtime.redis, judged.pair.channel_id, [ts for ts in found if ts])
