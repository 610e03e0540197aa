"""The steps of beat's two sweeps (the tasks in workers.tasks.sweeper). The orphan check, every half lease,
re-enqueues at once a pair that has waited a lease with no task message anywhere in Redis (lost in kombu's delivery
window, or never published), and sends again a noted task (common.task_notes: an event the bot handed on, an
alert's decision, an on-demand verdict, an outcome's follow-up, a send to a trace tool) whose message is lost the
same way, so a worker's crash costs a lease, not a sweep. The
stale sweep, every few minutes, re-enqueues pairs whose task was lost (the backstop when the queue is too long to
read) and gives up on a pair whose judging task keeps failing with a bug: after MAX_FAILED_RUNS counted failures it
stores the pair's judgments as errors with the reason. It gives up only once the last failure is a sweep interval
old, so that no run that could still store the real verdict is beaten to it by the error rows.

Each sweep loads (the pairs, the queued messages, the counted failures), decides in the pure functions below and
sends; `now` is passed in.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping
from datetime import datetime, timedelta
from typing import NamedTuple, TypeVar

from common import task_names, task_notes
from common.celery_app import QUEUE_JUDGE, QUEUES, celery
from common.runtime import Runtime
from judges.names import RELEVANCY
from store import exchanges
from store.attempts import Failures, failures_of
from store.judgments import pair_for_judging, stale_pairs, stored_judges, touch_pairs
from store.models import PairStatus
from workers.judging import outage
from workers.judging.queued import queued_notes, queued_pairs
from workers.judging.rules import failed_values, judges_in_force, sweep_action, sweep_interval
from workers.judging.run import send_follow_ups, store_judgments
from workers.pair_view import PairView

log = logging.getLogger("relmon.judging")
T = TypeVar("T")

SWEEP_LIMIT = 500
# A sweep reads past up to this many pairs waiting for the LLM (workers.judging.outage) to find lost ones; a longer
# backlog may hide a lost pair until the release has worked through it.
HELD_READ_MOST = 5_000
NO_FAILURES = Failures(0, None, None)


class Waiting(NamedTuple):
    """A pending or settling pair as a sweep found it."""

    pair_id: int
    status: str
    version: int


class Swept(NamedTuple):
    """What the stale sweep did: `stale` pairs found, `given_up` of them given up on (the rest re-enqueued)."""

    stale: int
    given_up: int


# Pure decisions --------------------------------------------------------------------------------------------


def orphans_of(waiting: list[Waiting], queued: Collection[int], failed: Collection[int]) -> list[Waiting]:
    """The waiting pairs to re-enqueue at once: no message queued or held, and no counted failure (a pair whose
    judging failed with a bug is left to the stale sweep, which counts its failures and gives up in the end)."""
    return [pair for pair in waiting if pair.pair_id not in queued and pair.pair_id not in failed]


def quiet_since(sweep_after_seconds: float, now: datetime) -> datetime:
    """A failure after this (within the last sweep interval) may have a twin run still going: not given up on."""
    return now - timedelta(seconds=sweep_interval(sweep_after_seconds))


def lost_notes(noted: Mapping[str, object], queued: Collection[str]) -> list[str]:
    """The noted tasks with no message queued or held."""
    return [key for key in noted if key not in queued]


def not_waiting_for_llm(pairs: list[Waiting], held: Collection[int]) -> list[Waiting]:
    """The pairs a sweep acts on: not those waiting for the LLM endpoint (workers.judging.outage), which the
    outage tick releases at its pace once the endpoint is back."""
    return [pair for pair in pairs if pair.pair_id not in held]


def give_up_reason(failures: int, last_error: str | None) -> str:
    return f"gave up after {failures} failed attempts (an error in relmon, not the LLM): {last_error or 'unknown'}"


def error_judges(names: list[str], stored: Collection[str]) -> list[str]:
    """The judges a given-up pair gets an error judgment from: those in force (relevancy when none is) that have
    stored none."""
    return [name for name in (names or [RELEVANCY]) if name not in stored]


# The orphan check ------------------------------------------------------------------------------------------


def check_orphans(runtime: Runtime, now: datetime) -> tuple[int, int]:
    """Re-enqueue pairs pending or settling for over a lease that have no message queued or held, and send again
    the noted tasks whose message was lost; returns how many were sent again and how many pairs re-enqueued."""
    lease = timedelta(seconds=runtime.settings.visibility_timeout_seconds)
    held = outage.waiting_ids(runtime.redis)
    with runtime.db.session() as session:
        # Read past the pairs waiting for the LLM (the oldest, in a long outage), so that they hide no lost one.
        limit = SWEEP_LIMIT + min(len(held), HELD_READ_MOST)
        waiting = [
            Waiting(pair.id, pair.status, pair.version)
            for pair in stale_pairs(session, pending_before=now - lease, settling_before=now - lease, limit=limit)
        ]
    waiting = not_waiting_for_llm(waiting, held)
    resent = requeue_lost_tasks(runtime, now.timestamp(), lease.total_seconds())
    if not waiting:
        return resent, 0
    queued = queued_pairs(runtime.redis, QUEUE_JUDGE)  # read after the pairs: a task done meanwhile costs one read
    if queued is None:
        return resent, 0  # a backlog too long to read: the stale sweep covers it
    with runtime.db.session() as session:
        failed = failures_of(session, [pair.pair_id for pair in waiting if pair.pair_id not in queued])
        orphans = orphans_of(waiting, queued, failed)
        touch_pairs(session, [pair.pair_id for pair in orphans], now)
    for pair in orphans:
        _requeue(pair, sweep_action(pair.status, 0))
    return resent, len(orphans)


def _requeue(pair: Waiting, action: str) -> None:
    """Send the pair's task again: judge it ("judge", a resumed run) or settle its version ("settle")."""
    if action == "judge":
        celery.send_task(task_names.JUDGE_PAIR, args=[pair.pair_id], kwargs={"resumed": True})
    else:
        celery.send_task(task_names.SETTLE_PAIR, args=[pair.pair_id, pair.version])


def requeue_lost_tasks(runtime: Runtime, now: float, lease_seconds: float) -> int:
    """Send again, with the same task ID, each task noted over a lease ago whose message is nowhere in Redis: not
    queued, not held by a worker (read after the notes, so that a message in flight is seen in one place or the
    other). A note dropped meanwhile (its task ended while the messages were read) is not sent; a queue too long to
    read is left to the next round."""
    client = runtime.redis
    noted = task_notes.overdue(client, noted_before=now - lease_seconds, now=now, limit=SWEEP_LIMIT)
    if not noted:
        return 0
    queued = queued_notes(client, *QUEUES)  # a deletion's capture_event waits on the forget queue
    if queued is None:
        return 0
    lost = task_notes.still_noted(client, lost_notes(noted, queued))
    for task_id in lost:
        # The headers name the note, never the call's texts (an event's words).
        task_notes.send(client, noted[task_id], now, argsrepr="()", kwargsrepr=repr({"note": task_id}))
    if lost:
        log.warning("re-sent noted tasks whose message was lost", extra={"count": len(lost)})
    return len(lost)


# The stale sweep -------------------------------------------------------------------------------------------


def sweep_stale(runtime: Runtime, now: datetime) -> Swept:
    """Re-enqueue the pairs whose task was lost (broker data lost, a bug raised before the pair moved on), and give
    up on those whose judging kept failing. Duplicates are harmless: judging is idempotent and settle acts only on
    the latest version."""
    settings = runtime.settings
    stale_after = timedelta(seconds=settings.sweep_after_seconds)
    settle_grace = timedelta(seconds=settings.settle_seconds) + stale_after
    quiet = quiet_since(settings.sweep_after_seconds, now)
    held = outage.waiting_ids(runtime.redis)
    with runtime.db.session() as session:
        stale = [
            Waiting(pair.id, pair.status, pair.version)
            for pair in stale_pairs(
                session,
                pending_before=now - stale_after,
                settling_before=now - settle_grace,
                limit=SWEEP_LIMIT + min(len(held), HELD_READ_MOST),
            )
        ]
        stale = not_waiting_for_llm(stale, held)
        touch_pairs(session, [pair.pair_id for pair in stale], now)
        failures = failures_of(session, [pair.pair_id for pair in stale if pair.status == PairStatus.PENDING])
    given_up = 0
    for pair in stale:
        failed = failures.get(pair.pair_id, NO_FAILURES)
        action = sweep_action(pair.status, failed.count, failed.last_failed_at, quiet_since=quiet)
        if action != "give_up":
            _requeue(pair, action)
            continue
        try:
            _give_up(runtime, pair.pair_id, failed.count, failed.last_error)
            given_up += 1
        except Exception:  # one broken pair must not stop the sweep; it is tried again next time
            log.exception("could not give up on a failing pair", extra={"pair_id": pair.pair_id})
    return Swept(len(stale), given_up)


def _give_up(runtime: Runtime, pair_id: int, failures: int, last_error: str | None) -> None:
    """The end state of a pair whose judging task kept failing: an error judgment, with the reason, for every
    judge in force that has none, and the pair judged (so it is counted, alerted on and never swept again)."""
    settings = runtime.settings
    with runtime.db.autocommit() as connection:
        fields = pair_for_judging(connection, pair_id)
        if fields is None:
            return
        pair = PairView.of(fields)
        if pair.status != PairStatus.PENDING:
            return
        stored = stored_judges(connection, pair_id, pair.version)
        key = exchanges.rule_key(connection, pair_id, pair.channel_id, pair.source)
    try:
        rule = runtime.rules.for_channel(key, settings)
        names = judges_in_force(pair.judges, rule.judges, pair.reference is not None, runtime.judges)
    except Exception:  # the bug may be right here (an unknown judge's name): name the judges that were asked for
        names = list(pair.judges or settings.default_judges)
    reason = give_up_reason(failures, last_error)
    ready = [
        failed_values(name, pair_id=pair_id, model=settings.judge_model, reason=reason, catalog=runtime.judges)
        for name in error_judges(names, stored)
    ]
    created = store_judgments(runtime.db.engine, pair, ready, mark_judged=True)
    log.error("gave up judging a pair", extra=pair.log_fields(failures=failures))
    send_follow_ups(runtime, pair, created, complete=True)
