"""Tasks that post to Slack: alerts on low scores and degradation, the hour's summary of held alerts,
vote tallies on alerts, and on-demand verdicts.

At most once: every post is first claimed as a row in `alerts` (unique `dedupe_key`). The post itself
runs under a short Redis lease per alert row, so two workers with the same judgment (a redelivery, a
duplicate enqueue) take turns: the second finds the row `posted` and does nothing. A worker that dies
after claiming leaves the row `claimed`; its redelivered task (late acks) or any retry finds it so and
posts it. Messages carry IDs only; texts are read from the database.

A post whose outcome is unknown (timed out, connection closed after sending, worker killed mid-call) may be in
the channel already. Alerts and summaries carry their dedupe key in the message metadata, and a note in Redis
says a post was attempted: a retry that finds the note (or a stale claim) but no receipt looks for the marked
message in the channel before posting again. A first attempt on a fresh claim reads no history.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import redis
from celery import current_task
from celery.exceptions import Reject
from slack_sdk.errors import SlackApiError
from sqlalchemy import select

from common import replies
from common.celery_app import celery
from common.feedback import tally
from common.messages.alerts import (
    DegradationAlert,
    LowScoreAlert,
    SummaryItem,
    degradation_alert,
    low_score_alert,
    summary_message,
)
from common.messages.verdicts import VerdictItem, verdict_message
from common.posted_marks import (
    attempted,
    find_marked,
    mark,
    note_attempt,
    outcome_unknown,
    recall_post,
    remember_post,
)
from common.privacy import may_quote_channel
from common.runtime import Runtime, get_runtime
from common.telemetry.logs import event_fields
from store import alerts as alert_store
from store.feedback import votes_for
from store.models import Alert, Judgment, Pair, PairStatus
from workers.alerts.policy import (
    DEGRADATION_JUDGE,
    WINDOW_ANSWERS,
    Action,
    DegradationState,
    DegradationWindow,
    JudgmentFacts,
    ScoredAt,
    as_utc,
    decide_degradation,
    decide_degradation_delivery,
    decide_low_score,
    degradation_key,
    hour_start,
    low_key,
    summary_key,
    window_means,
)

log = logging.getLogger("relmon.alerts")

LEASE_SECONDS = 120  # a worker posting an alert holds it this long at most (Slack calls time out sooner)
LEASE_WAIT_SECONDS = 30  # how long a twin waits for the holder before retrying later
SUMMARY_DELAY_SECONDS = 5.0  # held alerts gather this long before the summary is posted or updated
SUMMARY_LOOKBACK = timedelta(hours=2)  # a flush also finishes the previous hour's summary
MAX_RETRIES = 8
# A retry after a post whose outcome is unknown waits at least this long: a post Slack was still working on has
# had time to reach the channel's history, where the retry looks for it.
UNKNOWN_OUTCOME_RETRY_SECONDS = 15.0
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


def retry_countdown(retries: int) -> float:
    return min(60.0, 2.0 * 2**retries)


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


def _run(task, function, *args):
    """Run a task body; transient failures (Slack 5xx or connection, a busy lease, Redis or database hiccups)
    retry with backoff. Slack's 429s were already waited out by the client's RateLimitErrorRetryHandler."""
    try:
        return function(get_runtime(), *args)
    except Exception as error:
        if is_permanent(error) or task.request.retries >= MAX_RETRIES:
            raise
        countdown = retry_countdown(task.request.retries)
        if outcome_unknown(error):
            countdown = max(countdown, UNKNOWN_OUTCOME_RETRY_SECONDS)
        log.info(
            "slack task retrying",
            extra={"task": task.name, "in_s": countdown, "error": repr(error)[:300], "slack_error": slack_error(error)},
        )
        try:
            task.retry(countdown=countdown, exc=error)  # raises Retry once the retry message is published
        except Reject as dropped:
            # The broker could not take the retry (Redis restarting), and Celery would drop this message. Reject
            # it with requeue instead: it goes back to the queue, or, if Redis cannot even hear that, stays
            # unacknowledged and comes back after the visibility timeout. Judging has the stale-pair sweeper as a
            # backstop; an alert has only its message.
            raise Reject(error, requeue=True) from dropped


# Look-ups ---------------------------------------------------------------------------------------------


def permalink(runtime: Runtime, channel_id: str | None, message_ts: str | None) -> str | None:
    if not channel_id or not message_ts:
        return None
    try:
        return runtime.slack.chat_getPermalink(channel=channel_id, message_ts=message_ts).get("permalink")
    except SlackApiError as error:
        log.info("no permalink", extra={"channel": channel_id, "error": slack_error(error)})
        return None


def quote_allowed(runtime: Runtime, channel_id: str | None, channel_is_private: bool) -> bool:
    """Privacy: a private channel is quoted only where its own rule sends alerts and allows it."""
    return may_quote_channel(channel_id, channel_is_private, runtime.rules, runtime.settings)


def answered_at(pair: Pair) -> datetime:
    if pair.answer_ts:
        with suppress(ValueError):
            return datetime.fromtimestamp(float(pair.answer_ts), UTC)
    return as_utc(pair.created_at)


# consider_alert ----------------------------------------------------------------------------------------


@celery.task(name="workers.tasks.slack.consider_alert", bind=True, max_retries=MAX_RETRIES)
def consider_alert(self, judgment_id: int) -> str:
    """Apply the alert policy to one new judgment: post a low-score alert, hold it for the hour's summary,
    and check the channel's rolling mean for degradation. Idempotent."""
    return _run(self, consider, judgment_id)


def consider(runtime: Runtime, judgment_id: int, now: datetime | None = None) -> str:
    now = now or datetime.now(UTC)
    settings = runtime.settings
    with runtime.db.session() as session:
        judgment = session.get(Judgment, judgment_id)
        if judgment is None:
            return "missing"
        pair = session.get(Pair, judgment.pair_id)
        facts = JudgmentFacts(
            judgment_id=judgment.id,
            judge=judgment.judge,
            status=judgment.status,
            score=judgment.score,
            source=pair.source or "capture",
            channel_id=pair.channel_id,
        )
        answer_ts = pair.answer_ts
        existing = alert_store.by_key(session, low_key(judgment_id))
        existing = (existing.id, existing.status) if existing else None
    if not facts.channel_id:
        return "no_channel"
    rule = runtime.rules.for_channel(facts.channel_id, settings)

    outcome = _low_score(runtime, facts, rule, answer_ts, existing, now)
    degradation = _degradation(runtime, facts, rule, now)
    return f"{outcome}; degradation: {degradation}"


def _low_score(runtime: Runtime, facts: JudgmentFacts, rule, answer_ts, existing, now: datetime) -> str:
    settings = runtime.settings

    def decide(alerts_this_hour: int, alert_channel_alerts: int = 0):
        return decide_low_score(
            facts,
            rule.thresholds,
            alert_channel=rule.alert_channel,
            alerts_this_hour=alerts_this_hour,
            cap_per_hour=rule.alert_cap_per_hour,
            alert_channel_alerts_this_hour=alert_channel_alerts,
            alert_channel_cap=settings.alert_channel_cap_per_hour,
        )

    if existing is None:
        if decide(0).action is Action.NONE:  # not low (or not alerting): no lock, no Slack call
            return decide(0).reason
        link = permalink(runtime, facts.channel_id, answer_ts)  # before the transaction: no Slack call under a lock
        hour = hour_start(now)
        with runtime.db.session() as session:
            alert_store.lock_channel(session, facts.channel_id)
            alert_store.lock_alert_channel(session, rule.alert_channel)  # its cap counts every source channel
            row = alert_store.by_key(session, low_key(facts.judgment_id))
            if row is None:  # still unclaimed now that we hold the channels' locks
                until = hour + timedelta(hours=1)
                count = alert_store.count_low_alerts(session, facts.channel_id, hour, until)
                to_alert_channel = alert_store.count_alerts_to(session, rule.alert_channel, hour, until)
                decision = decide(count, to_alert_channel)
                row, _ = alert_store.claim(
                    session,
                    dedupe_key=low_key(facts.judgment_id),
                    kind=alert_store.KIND_LOW,
                    status=alert_store.STATUS_HELD if decision.action is Action.HOLD else alert_store.STATUS_CLAIMED,
                    judgment_id=facts.judgment_id,
                    source_channel_id=facts.channel_id,
                    alert_channel_id=rule.alert_channel,
                    details={"permalink": link, "reason": decision.reason},
                    now=now,
                )
            existing = (row.id, row.status)
    alert_id, status = existing
    if status == alert_store.STATUS_CLAIMED:
        return post_alert(runtime, alert_id)
    if status == alert_store.STATUS_HELD:
        schedule_summary_flush(runtime)
        return "held"
    return status


ALERT_METADATA_EVENT = "relmon_alert"  # alerts and summaries; the payload's `dedupe_key` is the row's
# A claim older than this was left by a worker that died, perhaps after Slack accepted its post.
STALE_CLAIM = timedelta(seconds=30)


def earlier_post(runtime: Runtime, channel: str, claimed_at: datetime, dedupe_key: str) -> str | None:
    """The ts of an earlier post of `dedupe_key` ("" when Slack gave none), or None when none is known: its
    Redis receipt, else, when an earlier attempt may have posted without hearing back (its attempt note stands,
    or the claim is stale: its worker died, perhaps before even the note), the marked message in the channel."""
    earlier = recall_post(runtime.redis, dedupe_key)  # posted, but the database missed it (it was down)
    if earlier is None and (attempted(runtime.redis, dedupe_key) or datetime.now(UTC) - claimed_at > STALE_CLAIM):
        earlier = find_marked(runtime.slack, channel, claimed_at, ALERT_METADATA_EVENT, "dedupe_key", dedupe_key)
    return earlier


def post_marked(runtime: Runtime, channel: str, dedupe_key: str, payload: dict):
    """chat.postMessage labelled with `dedupe_key`, noted as attempted before it is sent and receipted the
    moment Slack answers."""
    note_attempt(runtime.redis, dedupe_key)
    response = runtime.slack.chat_postMessage(
        channel=channel,
        unfurl_links=False,
        unfurl_media=False,
        metadata=mark(ALERT_METADATA_EVENT, "dedupe_key", dedupe_key),
        **payload,
    )
    remember_post(runtime.redis, dedupe_key, response.get("ts"))
    return response


def refused_for_good(runtime: Runtime, row_id: int, error: SlackApiError, event: str, **fields: object) -> str:
    """A post Slack refused (alert, summary): for good (the channel gone, relmon not in it, blocks refused) the
    row is marked failed, logged once and never tried again; any other refusal is raised for the task's retry."""
    if not is_permanent(error):
        raise error
    with runtime.db.session() as session:
        alert_store.mark_failed(session, row_id, slack_error(error) or "slack error")
    log.error(event, extra={**fields, "error": slack_error(error)})
    return alert_store.STATUS_FAILED


def post_alert(runtime: Runtime, alert_id: int) -> str:
    """Post a claimed alert (low score or degradation) unless it was posted already."""
    with lease(runtime, alert_id):
        with runtime.db.session() as session:
            row = session.get(Alert, alert_id)
            if row is None or row.status != alert_store.STATUS_CLAIMED:
                return row.status if row else "missing"
            channel, dedupe_key, claimed_at = row.alert_channel_id, row.dedupe_key, as_utc(row.created_at)
            payload = _render(runtime, session, row)
            # Identifiers only (never text): the judgment and the source message it is about.
            source_ts = None
            if row.judgment_id is not None:
                source_ts = session.execute(
                    select(Pair.answer_ts)
                    .join(Judgment, Judgment.pair_id == Pair.id)
                    .where(Judgment.id == row.judgment_id)
                ).scalar_one_or_none()
            fields = event_fields(
                channel=row.source_channel_id,
                message_ts=source_ts,
                judgment_id=row.judgment_id,
                alert_id=alert_id,
                alert_kind=row.kind,
                alert_channel=channel,
            )
        earlier_ts = earlier_post(runtime, channel, claimed_at, dedupe_key)
        if earlier_ts is not None:
            with runtime.db.session() as session:
                alert_store.mark_posted(session, alert_id, earlier_ts or None)
            log.info("alert found posted already", extra={"alert_id": alert_id})
            return alert_store.STATUS_POSTED
        try:
            response = post_marked(runtime, channel, dedupe_key, payload)
        except SlackApiError as error:
            return refused_for_good(runtime, alert_id, error, "alert not posted", alert_id=alert_id)
        with runtime.db.session() as session:
            alert_store.mark_posted(session, alert_id, response.get("ts"))
    log.info("alert posted", extra={**fields, "alert_ts": response.get("ts")})
    return alert_store.STATUS_POSTED


def _render(runtime: Runtime, session, row: Alert) -> dict:
    if row.kind == alert_store.KIND_DEGRADATION:
        return degradation_alert(degradation_of(row))
    return _render_low(runtime, session, row)


def degradation_of(row: Alert) -> DegradationAlert:
    """What a degradation alert's row says, for its own message or its line in the hour's summary."""
    details = row.details or {}
    return DegradationAlert(
        channel_id=row.source_channel_id,
        judge=details.get("judge", DEGRADATION_JUDGE),
        mean=float(details["mean"]),
        floor=float(details["floor"]),
        count=int(details["count"]),
        at=as_utc(row.created_at),
        # rows claimed before the time window existed name no window: theirs was the count window
        window=details.get("window", WINDOW_ANSWERS),
        window_answers=int(details.get("window_answers", details["count"])),
        window_minutes=int(details.get("window_minutes", 0)),
        min_answers=int(details.get("min_answers", 0)),
    )


def _render_low(runtime: Runtime, session, row: Alert) -> dict:
    judgment = session.get(Judgment, row.judgment_id)
    pair = session.get(Pair, judgment.pair_id)
    rule = runtime.rules.for_channel(pair.channel_id, runtime.settings)
    return low_score_alert(
        LowScoreAlert(
            judgment_id=judgment.id,
            judge=judgment.judge,
            score=judgment.score,
            max_score=judgment.max_score,
            threshold=rule.thresholds.get(judgment.judge),
            channel_id=pair.channel_id,
            answered_at=answered_at(pair),
            quote=quote_allowed(runtime, pair.channel_id, bool(pair.channel_is_private)),
            question=pair.question_text,
            answer=pair.answer_text,
            reasoning=judgment.reasoning,
            permalink=(row.details or {}).get("permalink"),
            stream_errored=bool(pair.stream_errored),
            votes=tally(votes_for(session, judgment.id)),
        )
    )


# Degradation ------------------------------------------------------------------------------------------


def degradation_window(rule) -> DegradationWindow:
    return DegradationWindow(rule.degradation_window, rule.degradation_window_minutes, rule.degradation_min_answers)


def _recent(connection, rule, channel_id: str, now: datetime) -> list[ScoredAt]:
    """The scores both windows need, in one bounded read."""
    minutes = rule.degradation_window_minutes
    since = as_utc(now) - timedelta(minutes=minutes) if minutes > 0 else None
    scores = alert_store.recent_scores(
        connection, channel_id, DEGRADATION_JUDGE, last=rule.degradation_window, since=since
    )
    return [ScoredAt(score, at) for score, at in scores]


def _degradation_state(session, rule, channel_id: str, now: datetime):
    """The channel's degradation history, a claimed-but-unposted degradation alert (its worker died), and what
    the policy decides on the channel's latest scores."""
    unposted: int | None = None
    history = alert_store.degradation_history(session, channel_id)
    if history.open_alert_id is not None:
        open_row = session.get(Alert, history.open_alert_id)
        if open_row.status == alert_store.STATUS_CLAIMED:
            unposted = open_row.id  # claimed by a worker that died before posting
    decision = decide_degradation(
        _recent(session, rule, channel_id, now),
        window=degradation_window(rule),
        floor=rule.degradation_floor,
        state=DegradationState(
            active=history.open_alert_id is not None,
            last_alert_at=history.last_alert_at,
            episodes=history.episodes,
        ),
        now=now,
    )
    return history, unposted, decision


def follow_up_needed(runtime: Runtime, facts: JudgmentFacts, now: datetime | None = None) -> bool:
    """A cheap, lock-free look at a judgment just stored: could `consider` claim or post anything for it?
    False only when it certainly would not, so judging enqueues `consider_alert` only when it may matter
    (most answers are fine: no Celery message, no channel lock). Never a false "no": every judgment reads the
    scores after its own insert committed, so the last of concurrent judgments sees them all, and the locked
    path in `consider` stays the one that decides and dedupes."""
    settings = runtime.settings
    if not facts.channel_id:
        return False
    rule = runtime.rules.for_channel(facts.channel_id, settings)
    low = decide_low_score(
        facts,
        rule.thresholds,
        alert_channel=rule.alert_channel,
        alerts_this_hour=0,
        cap_per_hour=rule.alert_cap_per_hour,
    )
    if low.action is not Action.NONE:
        return True
    if facts.judge != DEGRADATION_JUDGE or facts.status != "ok" or facts.source != "capture" or not rule.alert_channel:
        return False
    now = now or datetime.now(UTC)
    with runtime.db.autocommit() as connection:  # two reads, no transaction needed
        recent = _recent(connection, rule, facts.channel_id, now)
        if not window_means(recent, degradation_window(rule), now):
            return False  # too early to say, whatever the history
        latest = alert_store.latest_degradation(connection, facts.channel_id)
    if latest is not None and latest.status == alert_store.STATUS_CLAIMED:
        return True  # claimed by a worker that died before posting
    decision = decide_degradation(
        recent,
        window=degradation_window(rule),
        floor=rule.degradation_floor,
        state=DegradationState(
            active=latest is not None and not latest.recovered,
            last_alert_at=latest.created_at if latest else None,
            episodes=0,  # the episode number only names the alert; the locked path counts them
        ),
        now=now,
    )
    return decision.action in (Action.ALERT, Action.REARM)


def _degradation(runtime: Runtime, facts: JudgmentFacts, rule, now: datetime) -> str:
    if facts.judge != DEGRADATION_JUDGE or facts.status != "ok" or facts.source != "capture":
        return "not_applicable"
    if not rule.alert_channel:
        return "no_alert_channel"
    held = False
    with runtime.db.session() as session:
        alert_store.lock_channel(session, facts.channel_id)
        history, unposted, decision = _degradation_state(session, rule, facts.channel_id, now)
        if decision.action is Action.ALERT:
            alert_store.lock_alert_channel(session, rule.alert_channel)  # its cap counts every source channel
            hour = hour_start(now)
            delivery = decide_degradation_delivery(
                alert_store.count_alerts_to(session, rule.alert_channel, hour, hour + timedelta(hours=1)),
                runtime.settings.alert_channel_cap_per_hour,
            )
            row, _ = alert_store.claim(
                session,
                dedupe_key=degradation_key(facts.channel_id, decision.episode),
                kind=alert_store.KIND_DEGRADATION,
                source_channel_id=facts.channel_id,
                alert_channel_id=rule.alert_channel,
                details={
                    "mean": round(decision.mean, 4),
                    "count": decision.count,
                    "floor": rule.degradation_floor,
                    "judge": DEGRADATION_JUDGE,
                    "window": decision.window,  # which window tripped: the last N answers or the last M minutes
                    "window_answers": rule.degradation_window,
                    "window_minutes": rule.degradation_window_minutes,
                    "min_answers": rule.degradation_min_answers,
                    "reason": delivery.reason,
                },
                status=alert_store.STATUS_HELD if delivery.action is Action.HOLD else alert_store.STATUS_CLAIMED,
                now=now,
            )
            unposted = row.id if row.status == alert_store.STATUS_CLAIMED else None
            held = row.status == alert_store.STATUS_HELD
        elif decision.action is Action.REARM:
            alert_store.mark_recovered(session, history.open_alert_id, now)
    if unposted is not None:
        post_alert(runtime, unposted)
    if held:
        schedule_summary_flush(runtime)
        return "degradation_held"
    return decision.reason


# Summaries ----------------------------------------------------------------------------------------------

SUMMARY_SCHEDULED_KEY = "relmon:summary-flush-scheduled"


def schedule_summary_flush(runtime: Runtime) -> None:
    """At most one pending flush at a time. The marker expires a second before the flush runs, so a held
    alert recorded after the marker is gone schedules the next flush itself; one recorded while it stood was
    committed before the flush reads."""
    marker_ms = int(max(SUMMARY_DELAY_SECONDS - 1.0, 0.1) * 1000)
    if runtime.redis.set(SUMMARY_SCHEDULED_KEY, "1", nx=True, px=marker_ms):
        flush_alert_summaries.apply_async(countdown=SUMMARY_DELAY_SECONDS)


@celery.task(name="workers.tasks.slack.flush_alert_summaries", bind=True, max_retries=MAX_RETRIES)
def flush_alert_summaries(self) -> int:
    """Post or update the summary message of every alert channel-hour with held low scores."""
    return _run(self, flush_summaries)


def flush_summaries(runtime: Runtime, now: datetime | None = None) -> int:
    now = now or datetime.now(UTC)
    with runtime.db.session() as session:
        held = alert_store.held_channel_hours(session, now - SUMMARY_LOOKBACK)
    buckets = sorted({(alert_channel, hour_start(created)) for alert_channel, created in held})
    first_error: Exception | None = None
    for alert_channel, hour in buckets:
        try:
            flush_summary(runtime, alert_channel, hour)
        except Exception as error:  # one alert channel's trouble must not hold back the others' summaries
            log.warning(
                "alert summary not flushed",
                extra={"alert_channel": alert_channel, "error": repr(error)[:300], "slack_error": slack_error(error)},
            )
            first_error = first_error or error
    if first_error is not None:
        raise first_error  # the task's retry flushes again (what was done is not done twice)
    return len(buckets)


def flush_summary(runtime: Runtime, alert_channel: str, hour: datetime) -> str:
    """Post or update the hour's summary in `alert_channel`: one message for the low scores held there from every
    source channel (a burst across many channels must not become one summary per channel)."""
    dedupe_key = summary_key(alert_channel, hour)  # also the key of its post receipt and its metadata mark
    with runtime.db.session() as session:
        row, _ = alert_store.claim(
            session,
            dedupe_key=dedupe_key,
            kind=alert_store.KIND_SUMMARY,
            source_channel_id=None,
            alert_channel_id=alert_channel,
            details={"hour": hour.isoformat(), "count": 0},
        )
        summary_id = row.id
    with lease(runtime, summary_id):
        with runtime.db.session() as session:
            row = session.get(Alert, summary_id)
            items = alert_store.held_in_hour(session, alert_channel, hour, hour + timedelta(hours=1))
            degradations = [
                degradation_of(held)
                for held in alert_store.held_degradations(session, alert_channel, hour, hour + timedelta(hours=1))
            ]
            shown = int((row.details or {}).get("count", 0))
            state = (row.status, row.message_ts)
            claimed_at = as_utc(row.created_at)
        status, message_ts = state
        if not message_ts:  # posted already, but the database missed it (down, or the post's answer never came)?
            message_ts = earlier_post(runtime, alert_channel, claimed_at, dedupe_key) or None
            if not message_ts:
                with runtime.db.session() as session:
                    message_ts = alert_store.legacy_summary_ts(session, alert_channel, hour)
            if message_ts:
                with runtime.db.session() as session:
                    alert_store.mark_posted(session, summary_id, message_ts)
        total = len(items) + len(degradations)
        if not total or status == alert_store.STATUS_FAILED or (status == alert_store.STATUS_POSTED and shown == total):
            return "unchanged"
        sources = {i.source_channel_id for i in items}
        caps = {source: runtime.rules.for_channel(source, runtime.settings).alert_cap_per_hour for source in sources}
        payload = summary_message(
            hour,
            [
                SummaryItem(
                    i.judgment_id,
                    i.judge,
                    i.score,
                    i.max_score,
                    as_utc(i.created_at),
                    i.permalink,
                    i.reasoning,
                    channel_id=i.source_channel_id,
                    quote=quote_allowed(runtime, i.source_channel_id, i.channel_is_private),
                    held_by=i.held_by,
                )
                for i in items
            ],
            caps=caps,
            alert_channel_cap=runtime.settings.alert_channel_cap_per_hour,
            degradations=degradations,
        )
        try:
            if message_ts:
                runtime.slack.chat_update(channel=alert_channel, ts=message_ts, **payload)
            else:
                message_ts = post_marked(runtime, alert_channel, dedupe_key, payload).get("ts")
                with runtime.db.session() as session:
                    alert_store.mark_posted(session, summary_id, message_ts)
        except SlackApiError as error:
            return refused_for_good(runtime, summary_id, error, "alert summary not posted", alert_channel=alert_channel)
        with runtime.db.session() as session:
            alert_store.merge_details(session, summary_id, count=total)
    log.info(
        "alert summary sent",
        extra={
            "alert_channel": alert_channel,
            "sources": len(sources),
            "count": len(items),
            "degraded": len(degradations),
        },
    )
    return "updated" if state[1] else "posted"


# Votes ------------------------------------------------------------------------------------------------


@celery.task(name="workers.tasks.slack.refresh_alert_votes", bind=True, max_retries=MAX_RETRIES)
def refresh_alert_votes(self, alert_id: int) -> str:
    """Show the current feedback tally on a posted alert (chat.update)."""
    return _run(self, refresh_votes, alert_id)


def refresh_votes(runtime: Runtime, alert_id: int) -> str:
    # Under the alert's lease, so the last update to run reads the latest votes.
    with lease(runtime, alert_id):
        with runtime.db.session() as session:
            row = session.get(Alert, alert_id)
            if row is None or row.kind != alert_store.KIND_LOW:
                return "not_an_alert"
            if row.status != alert_store.STATUS_POSTED or not row.message_ts:
                return "not_posted"  # the post, when it happens, renders the votes itself
            channel, ts = row.alert_channel_id, row.message_ts
            payload = _render_low(runtime, session, row)
        runtime.slack.chat_update(channel=channel, ts=ts, **payload)
    return "updated"


# On-demand verdicts -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _VerdictJob:
    alert_id: int
    status: str
    requested_by: str | None
    response_url: str | None
    reply_channel: str | None  # where the person asked (else the answer's channel): the ephemeral fallback
    payload: dict


@celery.task(name="workers.tasks.slack.deliver_verdict", bind=True, max_retries=MAX_RETRIES)
def deliver_verdict(self, pair_id: int, reply_channel: str | None = None) -> str:
    """Send an on-demand verdict to whoever asked: on the response_url (its Retry-After waited out), else as an
    ephemeral message in the channel where they asked, else (not in that channel) as a direct message. Once:
    a post the response_url took without answering (timeout, connection closed) is not sent again anywhere
    (`response_url_unconfirmed`)."""
    return _run(self, deliver, pair_id, reply_channel)


def deliver(runtime: Runtime, pair_id: int, reply_channel: str | None = None) -> str:
    dedupe_key = f"verdict:{pair_id}"  # also the key of its post receipt
    with runtime.db.session() as session:
        pair = session.get(Pair, pair_id)
        if pair is None:
            return "missing"
        row, _ = alert_store.claim(
            session,
            dedupe_key=dedupe_key,
            kind=alert_store.KIND_VERDICT,
            source_channel_id=pair.channel_id,
            alert_channel_id=pair.requested_by,
        )
        alert_id = row.id
    with lease(runtime, alert_id):
        with runtime.db.session() as session:
            row = session.get(Alert, alert_id)
            if row.status != alert_store.STATUS_CLAIMED:
                return row.status
            pair = session.get(Pair, pair_id)
            judgments = session.execute(select(Judgment).where(Judgment.pair_id == pair_id).order_by(Judgment.id))
            items = [VerdictItem(j.judge, j.status, j.score, j.max_score, j.reasoning) for j in judgments.scalars()]
            payload = verdict_message(
                items,
                question=pair.question_text,
                answer=pair.answer_text,
                channel_id=pair.channel_id,
                budget_spent=pair.status == PairStatus.SKIPPED_BUDGET,
            )
            # The person is a member of the answer's channel (checked before judging): a fair second choice.
            where_asked = reply_channel or replies.reply_channel(runtime.redis, pair_id) or pair.channel_id
            job = _VerdictJob(alert_id, row.status, pair.requested_by, pair.response_url, where_asked, payload)
        where = recall_post(runtime.redis, dedupe_key)  # sent, but the database missed it (it was down)
        if not where:
            where = _send_privately(runtime, job)
            remember_post(runtime.redis, dedupe_key, where)
        with runtime.db.session() as session:
            alert_store.mark_posted(session, alert_id, None)
            alert_store.merge_details(session, alert_id, delivered_via=where)
    return where


def _send_privately(runtime: Runtime, job: _VerdictJob) -> str:
    if not job.requested_by and not job.response_url:
        return "nobody"
    asker = replies.Asker(job.requested_by, job.reply_channel, job.response_url)
    return replies.reply_privately(runtime.slack, asker, job.payload, direct_message_last=True)
