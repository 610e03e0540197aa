"""Outcome signals in the workers (the steps; the tasks: workers.tasks.outcomes): a window opens when an answer
settles with a question, the messages and reactions the bot hands on are turned into signals (rules in
capture.outcomes), and beat's sweep closes the window. A teammate's reply becomes the pair's reference and the
correctness judge judges the answer against it.

Every step is idempotent: a signal is unique per (pair, name), the window closes once, and the reference is
set once; a retried task or a redelivered event records nothing twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime

from sqlalchemy import Row

from capture.conversation_log import ConversationLog
from capture.directory import UserNames
from capture.outcome_watches import WatchBoard, note_helped, staff_evidence
from capture.outcomes import (
    Watch,
    closing_signals,
    concerns,
    failed,
    message_outcome,
    moved_on,
    reaction_signal,
    watching,
    window_closes_at,
)
from capture.pairing import LoggedMessage, answer_run, ts_key
from capture.redact import redact_if
from capture.teammates import Reply, StaffEvidence, helped_someone
from capture.text import message_text
from common import task_names, task_notes
from common.celery_app import celery
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from judges.names import CORRECTNESS
from store import alerts as alert_store
from store import outcomes as store
from store import pairs
from store import sampling as sampling_store
from store.models import as_utc
from store.signals import ALWAYS_JUDGED, HUMAN_TAKEOVER
from workers import golden_items
from workers.trace_sending import Send, note_sends, outcome_sends, queue_outcome_sends, queue_sends

log = logging.getLogger("relmon.outcomes")

REFERENCE_JUDGE = CORRECTNESS
DUE_BATCH = 500  # windows closed per sweep; the next sweep takes the rest


class MessageNotLogged(Exception):
    """The bot hands a message on before a worker may read it back: tried again shortly."""


def _topic(row) -> str:
    """What an answer is about: its question and answer texts (a row of a pair or of its window)."""
    return "\n".join(t for t in (getattr(row, "question_text", None), getattr(row, "answer_text", None)) if t)


def _watch_of(window) -> Watch:
    return Watch(
        pair_id=window.pair_id,
        answer_ts=window.answer_ts,
        thread_key=window.thread_key,
        asker=window.asker,
        closes_at=as_utc(window.closes_at).timestamp(),
        topic=_topic(window),
    )


def open_window(
    runtime: Runtime, pair_id: int, settled: Row | None = None, run: list[LoggedMessage] | None = None
) -> bool:
    """Start watching a settled answer's conversation (once), and read what the log already holds after it.
    `settled`: the pair's row as settling returned it (store.pairs.SETTLED_COLUMNS); the settle stored its window
    too (store.pairs.settle), so only the watch goes up. Without it, the row is read and the window stored here.
    `run`: the answer's messages as settling resolved them (capture.pairing.Resolution.parts), its parts."""
    window_seconds = runtime.settings.outcome_window_seconds
    if window_seconds <= 0:
        return False
    pair = settled
    if pair is None:
        # Autocommit: one read, then one atomic insert (a second call keeps the first window); no transaction.
        with runtime.db.autocommit() as connection:
            pair = pairs.watch_row(connection, pair_id)
            if pair is None or not store.is_watched(pair):
                return False
            closes = window_closes_at(pair.answer_ts, window_seconds)
            store.insert_window_of(connection, pair, datetime.fromtimestamp(closes, UTC))
    elif not store.is_watched(pair):
        return False
    return _watch(runtime, pair, run, window_seconds)


def _watch(runtime: Runtime, pair: Row, run: list[LoggedMessage] | None, window_seconds: float) -> bool:
    """Put up the watch of a pair whose window is stored, and catch up on what the log holds after its answer."""
    closes = window_closes_at(pair.answer_ts, window_seconds)
    watch = Watch(
        pair.id, pair.answer_ts, pair.thread_ts or pair.answer_ts, pair.question_user, closes, topic=_topic(pair)
    )
    channel = pair.channel_id
    conversation = ConversationLog(runtime.redis, runtime.settings.question_ttl_seconds)
    answer = run[0] if run else conversation.get(channel, watch.answer_ts)
    if answer is not None:  # a reaction on any message of a multi-message answer counts
        run = run or answer_run(answer, conversation.around(channel, answer, window_seconds))
        watch = replace(watch, parts=tuple(m.ts for m in run if m.ts != watch.answer_ts))
    board = WatchBoard(runtime.redis)
    # The watch goes up (beat's close_due_windows closes the window when its time is up), then messages that came
    # between the answer and now are read: the bot handed them on to nobody (it saw no watch). In this order, in
    # one transaction, none falls between this read and the bot's look at the board (it logs a message and reads
    # the board in one transaction too). Only the answer's thread and the asker's top-level messages can concern
    # it (capture.outcomes.concerns): their indexes are read, not the channel's, whose read grew with its traffic.
    # By the bot's rule, a top-level message of the asker is news only for their latest answer, which the board
    # knows.
    pipe = runtime.redis.pipeline(transaction=True)
    board.queue_add(pipe, channel, watch)
    count = conversation.queue_since(pipe, channel, answer, until=closes, asker=watch.asker) if answer else 0
    replies = pipe.execute()
    later = conversation.since_from(channel, replies[-count:]) if count else []
    later = sorted((message for message in later if concerns(watch, message)), key=ts_key)
    if any(not message.in_thread for message in later):
        known = {w.pair_id: w for w in board.of_asker(channel, watch.asker)} | {watch.pair_id: watch}
    else:
        known = {watch.pair_id: watch}
    for message in later:  # as the bot would have seen it then (the window may have closed since)
        if watch.pair_id in watching(known.values(), message, message.seconds):
            _observe(runtime, channel, message, [watch])
    return True


def observe_message_in(
    runtime: Runtime, pair_ids: Iterable[int], channel: str, ts: str, *, required: bool = True
) -> dict[int, list[str]]:
    """Record the signals one person's message gives each pair it concerns: one read of the message, one of the
    pairs' windows. Returns the new signals per pair (pairs that got any)."""
    message = ConversationLog(runtime.redis, runtime.settings.question_ttl_seconds).get(channel, ts)
    if message is None:
        if required:
            raise MessageNotLogged(f"{channel}:{ts}")
        return {}
    with runtime.db.autocommit() as connection:
        watches = [_watch_of(window) for window in store.open_windows(connection, set(pair_ids))]
    return _observe(runtime, channel, message, watches)


def _observe(runtime: Runtime, channel: str, message: LoggedMessage, watches: list[Watch]) -> dict[int, list[str]]:
    """The signals a message gives the watched answers it concerns, recorded (for the task and a window's catch-up:
    one support-team read and one reference text for all of them)."""
    if not watches:
        return {}
    settings = runtime.settings
    evidence = _evidence(runtime, channel, message, watches)
    mentions = (evidence.team or set()) | set(settings.support_team)
    text, raw_text = message_text(message.content), str(message.content.get("text") or "")
    since = _thread_since(runtime, channel, message, watches)
    outcomes = {}
    for watch in watches:
        if moved_on(watch, [(m, t) for m, t in since if float(m.ts) > watch.opens_at], settings.escalation_phrases):
            continue  # the asker asked something new since: this message is about the answer to that
        outcome = message_outcome(
            watch,
            message,
            text,
            phrases=settings.escalation_phrases,
            evidence=evidence,
            team_mentions=mentions,
            raw_text=raw_text,
        )
        if outcome.signals:
            outcomes[watch.pair_id] = outcome
    if message.in_thread and helped_someone(Reply(message.user, text, message.external), watches[0].asker):
        note_helped(runtime.redis, channel, message.user, message.thread_key, message.seconds)
    if not outcomes:
        return {}
    reference = None
    if any(outcome.reference for outcome in outcomes.values()):
        names = UserNames(runtime.redis, runtime.slack)
        reference = redact_if(settings.redact_pii, message_text(message.content, names)).strip() or None
    at = datetime.fromtimestamp(message.seconds, UTC)
    recorded: dict[int, list[str]] = {}
    # One short transaction per pair, in ID order: each holds its window's lock only while its signals are written,
    # and a retry after a worker loss finds what was written (a signal is unique per pair and name). On a Core
    # connection: on this hot path an ORM session cost more than the writes.
    for pair_id, outcome in sorted(outcomes.items()):
        noted = note_sends(runtime, outcome_sends(runtime, pair_id, outcome.signals))
        with runtime.db.engine.begin() as connection:
            new = store.record_signals(connection, pair_id, outcome.signals, at=at)
        if reference and outcome.reference:
            _take_reference(runtime, pair_id, reference)
            golden_items.collect_takeover(runtime, pair_id, message.ts)  # the question joins the golden set
        _announce(runtime, pair_id, new, noted, channel=channel, message_ts=message.ts)
        if new:
            recorded[pair_id] = new
    _follow_up(runtime, sorted(outcomes))
    return recorded


def _evidence(runtime: Runtime, channel: str, message: LoggedMessage, watches: list[Watch]) -> StaffEvidence:
    """Who is staff for this message's writer (capture.teammates): the support team (also for the asker's
    mentions of it), else the evidence, read only for someone's reply in a thread to another person's answer."""
    settings = runtime.settings
    if not settings.support_team and not (message.in_thread and any(w.asker != message.user for w in watches)):
        return StaffEvidence()  # the asker's own message, or at top level: no one's standing matters
    return staff_evidence(
        runtime.redis,
        runtime.slack,
        team=settings.support_team,
        alert_channel=runtime.rules.for_channel(channel, settings).alert_channel,
        channel=channel,
        user=message.user if message.in_thread else None,
        thread_key=message.thread_key,
        now=message.seconds,
    )


def _thread_since(
    runtime: Runtime, channel: str, message: LoggedMessage, watches: list[Watch]
) -> list[tuple[LoggedMessage, str]]:
    """The thread's messages between the earliest watched answer and `message`, with their texts: whether the asker
    moved on to a new question meanwhile (capture.outcomes.moved_on). Nothing to read for a top-level message."""
    if not message.in_thread:
        return []
    first = min(watches, key=lambda w: w.opens_at).answer_ts
    log_ = ConversationLog(runtime.redis, runtime.settings.question_ttl_seconds)
    return [(m, message_text(m.content)) for m in log_.thread_between(channel, message.thread_key, first, message.ts)]


def _take_reference(runtime: Runtime, pair_id: int, reference: str) -> None:
    """Once a teammate took over, their reply is the pair's reference (the first one only), judged by the
    correctness judge: the pair goes back to pending. A retry finds the reference set."""
    with runtime.db.session() as session:
        if HUMAN_TAKEOVER not in store.signal_names(session, pair_id):
            return
        judges = judges_with_reference(runtime, session, pair_id)
        judge_again = store.set_teammate_reference(session, pair_id, reference, judges)
    if judge_again:  # the pair is pending: if this send is lost, the stale sweeper enqueues it
        celery.send_task(task_names.JUDGE_PAIR, args=[pair_id])


def judges_with_reference(runtime: Runtime, session, pair_id: int) -> list[str]:
    pair = pairs.get_pair(session, pair_id)
    base = list(pair.judges or runtime.rules.for_channel(pair.channel_id, runtime.settings).judges)
    return base if REFERENCE_JUDGE in base else [*base, REFERENCE_JUDGE]


def observe_reaction_in(runtime: Runtime, pair_id: int, user: str, emoji: str, added: bool, at: float) -> list[str]:
    """A reaction given or taken back on a watched answer: the first giving of each person's counts, once."""
    settings = runtime.settings
    name = reaction_signal(emoji, settings.negative_reactions, settings.positive_reactions)
    if name is None:
        return []
    board = WatchBoard(runtime.redis)
    if not board.react(pair_id, name, user, added):
        return []  # taken back or given again: a person's reaction changes the outcome once (docs/capture.md)
    try:
        return record_signals_in(runtime, pair_id, [name], at=datetime.fromtimestamp(at, UTC))
    except Exception:
        board.unreact(pair_id, name, user)  # perhaps not recorded: the task's retry counts it (once)
        raise


def record_signals_in(
    runtime: Runtime, pair_id: int, names: Iterable[str], *, at: datetime, reference: str | None = None, **fields
) -> list[str]:
    """Record signals that came at `at` about one pair, as a reaction's are, and what follows them: the trace
    sends, a teammate's `reference` (taken once a takeover is recorded; the question joins the golden set), the
    alerts' follow-up. Reactions and the bot's own signals (workers.bot_signals) are recorded here. Returns the
    new ones."""
    names = sorted(set(names))
    noted = note_sends(runtime, outcome_sends(runtime, pair_id, names))
    with runtime.db.session() as session:
        new = store.record_signals(session, pair_id, names, at=at)
    if reference:
        _take_reference(runtime, pair_id, reference)
        golden_items.collect_takeover(runtime, pair_id, None)
    _follow_up(runtime, [pair_id])
    _announce(runtime, pair_id, new, noted, **fields)
    return new


def close_window_in(runtime: Runtime, pair_id: int, now: datetime | None = None) -> str:
    """Close a window whose time is up (a task that came early waits again); returns what happened."""
    now = now or datetime.now(UTC)
    with runtime.db.session() as session:
        window = store.get_window(session, pair_id)
        if window is None:
            return "missing"
        if window.closed_at is not None:
            return "closed"
        channel, remaining = window.channel_id, (as_utc(window.closes_at) - now).total_seconds()
        watched = {"thread_key": window.thread_key, "asker": window.asker, "answer_ts": window.answer_ts}
    if remaining > 0:
        return "waiting"  # not over yet (the sweep read it due on a clock ahead of this one): the next sweep closes it
    with runtime.db.session() as session:
        closing = closing_signals(store.signal_names(session, pair_id))
        noted = note_sends(runtime, outcome_sends(runtime, pair_id, sorted(closing)))
        if not store.close_window(session, pair_id, now=now, closing=closing):
            queue_sends(runtime, [], noted)  # closed by another run, which sent what its close recorded
            return "closed"
    WatchBoard(runtime.redis).remove(channel, pair_id, **watched)
    _follow_up(runtime, [pair_id])
    _announce(runtime, pair_id, sorted(closing), noted, channel=channel)
    return "resolved" if closing else "unresolved"


def end_window_in(runtime: Runtime, pair_id: int, now: datetime) -> bool:
    """The bot's side said how the conversation ended (workers.bot_signals): the window closes now and its end adds
    nothing (a `resolved` it said was recorded before). False when there is no open window."""
    with runtime.db.session() as session:
        window = store.get_window(session, pair_id)
        if window is None or window.closed_at is not None:
            return False
        channel = window.channel_id
        watched = {"thread_key": window.thread_key, "asker": window.asker, "answer_ts": window.answer_ts}
        if not store.close_window(session, pair_id, now=now, closing=()):
            return False
    WatchBoard(runtime.redis).remove(channel, pair_id, **watched)
    _follow_up(runtime, [pair_id])
    return True


def close_due_windows_in(runtime: Runtime, now: datetime, limit: int = DUE_BATCH) -> int:
    """Close every window whose time is up (beat, every few seconds). One periodic sweep rather than a countdown
    task per answer: a worker would hold one message per answer for the whole window (30 minutes of answers)."""
    with runtime.db.session() as session:
        due = store.open_windows_due(session, now, limit=limit)
    for pair_id in due:
        close_window_in(runtime, pair_id, now)
    return len(due)


def _follow_up(runtime: Runtime, pair_ids: list[int]) -> None:
    """The pairs' alerts follow their signals (workers.alerts.outcomes), where there is something to follow: the
    signals say the answer failed (a missed-failure alert may be due), or an alert about the pair exists (to be
    redrawn). Most signals need neither, and cost no task. Read after the signals were committed, so an alert
    claimed after this read shows them when it is drawn. Checked again on a retry: a retry after a lost send
    still hands it on, and the follow-up is idempotent. Noted, since only its message says it is still to do
    (common.task_notes)."""
    with runtime.db.autocommit() as connection:
        signals = store.signals_of(connection, pair_ids)
        alerted = alert_store.pairs_with_alerts(connection, pair_ids)
    _judge_signalled(runtime, [p for p in pair_ids if ALWAYS_JUDGED & set(signals.get(p, ()))])
    for pair_id in pair_ids:
        if pair_id in alerted or failed(signals.get(pair_id, ())):
            task_notes.send(runtime.redis, task_notes.Call(task_names.FOLLOW_UP_OUTCOME, (pair_id,)), time.time())


def _judge_signalled(runtime: Runtime, pair_ids: list[int]) -> None:
    """A failure signal makes an answer certain to be judged (workers.sampling): one sampling skipped is judged now,
    a judged one's inclusion probability becomes 1. Idempotent; a lost send leaves the pair pending, for the stale
    sweeper."""
    if not pair_ids:
        return
    with runtime.db.engine.begin() as connection:
        to_judge = sampling_store.now_certain(connection, pair_ids)
    for pair_id in to_judge:
        celery.send_task(task_names.JUDGE_PAIR, args=[pair_id])


def _announce(runtime: Runtime, pair_id: int, new: list[str], noted: list[Send], **fields) -> None:
    """Every path that records signals ends here with the new ones (a message's, a reaction's, a window's close):
    they are logged, and each goes to the bot's trace (workers.trace_sending: queued, never raising). Their sends
    were noted before the signals were committed (`noted`, those this run noted): a run that dies before this point
    leaves them to the orphan check (a replay finds the signals recorded, not new); the notes of signals recorded
    before are dropped here."""
    if new:
        log.info("outcome signals", extra=event_fields(pair_id=pair_id, signals=",".join(new), **fields))
    queue_outcome_sends(runtime, pair_id, new, noted)
