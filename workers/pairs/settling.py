"""Settling a pair (the step `settle_pair` runs, and `capture_answer` for an answer that settles at once): once an
answer has been quiet for RELMON_SETTLE_SECONDS, find its question and hand it on.

A settle task is enqueued after every change to an answer; only the task carrying
the latest version acts. It re-reads the conversation log (events may have arrived out of order since
capture), resolves the question with the pure rules in `capture.pairing`, and moves the pair from
`settling` to `pending` (or `no_question`, `empty`, `deleted`, `merged`) with one conditional UPDATE,
then judges it in the same task (`settle_and_judge`). An answer still streaming is left settling: its
completion enqueues the next.
A pair found already `pending` at the same version is enqueued again:
the worker may have died between the two steps, and `judge_pair` is idempotent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from slack_sdk.errors import SlackApiError
from sqlalchemy import Row

from capture.conversation import earlier_turns, stored_turns
from capture.conversation_log import ConversationLog, HistoryFallback
from capture.directory import UserNames, own_identity
from capture.notices import is_notice
from capture.outcomes import window_closes_at
from capture.pairing import STREAMING, Author, LoggedMessage, Resolution, author_of, logged_message, resolve
from capture.redact import redact_if
from capture.text import UserResolver, message_text
from common import task_names
from common.celery_app import celery
from common.runtime import Runtime
from common.telemetry.logs import event_fields
from judges.context import Turn, format_turns
from store import pairs
from store.models import PairStatus
from workers.judging.run import judge_settled
from workers.outcome_watching import open_window

log = logging.getLogger("relmon.capture")

# Shared by every worker process (a Redis token bucket): Slack's history methods are rate-limited hard.
HISTORY_CALLS_PER_MINUTE = 20


@dataclass(frozen=True)
class PairSnapshot:
    id: int
    channel_id: str
    answer_ts: str
    thread_ts: str | None
    answer_text: str | None
    version: int
    status: str


@dataclass(frozen=True)
class Settling:
    """What settling one pair reads, loaded once: the pair as stored, and the log around its answer when the
    caller holds it already (capture, under the conversation's lock; None: read from the log)."""

    pair: PairSnapshot
    around: list[LoggedMessage] | None = None


@dataclass(frozen=True)
class Settled:
    """What settling did: `outcome` (the pair's new status, or why nothing changed) and, when the pair is to be
    judged now, `judge` set (with the pair's row as settling returned it, if it just settled)."""

    outcome: str
    judge: bool = False
    row: Row | None = None


def load_settling(runtime: Runtime, pair_id: int) -> Settling | None:
    """One read in autocommit (no transaction to open and commit): the settle path runs once per answer."""
    with runtime.db.autocommit() as connection:
        row = pairs.snapshot_row(connection, pair_id)
    return Settling(PairSnapshot(*row)) if row is not None else None


def _history(runtime: Runtime, log_: ConversationLog, channel: str, answer: LoggedMessage) -> None:
    """Fill the log from Slack history (rate-limited) when it lacks the question."""
    settings = runtime.settings
    fallback = HistoryFallback(runtime.redis, runtime.slack, calls_per_minute=HISTORY_CALLS_PER_MINUTE)
    raw = fallback.fetch(channel, answer, settings.toplevel_window_seconds)
    if not raw:
        return
    try:
        own = own_identity(runtime.redis, runtime.slack)
    except SlackApiError:
        return
    monitored = runtime.bot_users.ids()
    for message in raw:
        if not message.get("ts") or is_notice(message):
            continue
        if log_.get(channel, message["ts"]) is not None:
            continue  # the log knows better (a tombstone, a later edit)
        author = author_of(message, monitored, own)
        if author == Author.OWN:
            continue
        log_.record(channel, logged_message(message, author))


def resolve_pair(runtime: Runtime, settling: Settling) -> tuple[Resolution, str, list[LoggedMessage]]:
    """The settled resolution of a pair, its answer text (names resolved, redacted) and the logged messages around
    it."""
    settings, pair = runtime.settings, settling.pair
    conversation = ConversationLog(runtime.redis, settings.question_ttl_seconds)
    window = settings.toplevel_window_seconds
    answer = next((m for m in settling.around or () if m.ts == pair.answer_ts), None)
    if answer is not None:
        messages = settling.around
    else:
        answer, messages = conversation.get_around(pair.channel_id, pair.answer_ts, pair.thread_ts, window)
    if answer is None:
        answer = LoggedMessage(
            # Not in the log (expired, or Redis lost it): settle on what capture stored.
            ts=pair.answer_ts,
            thread_ts=pair.thread_ts,
            author=Author.MONITORED_BOT,
            content={"text": pair.answer_text or ""},
        )
        messages = conversation.around(pair.channel_id, answer, window)
    resolution = resolve(pair.answer_ts, messages, window)
    if resolution.status == PairStatus.NO_QUESTION and settings.history_fallback:
        _history(runtime, conversation, pair.channel_id, answer)
        messages = conversation.around(pair.channel_id, answer, window)
        resolution = resolve(pair.answer_ts, messages, window)
    names = UserNames(runtime.redis, runtime.slack)
    return resolution, answer_text_of(resolution.parts, settings.redact_pii, names), messages


def answer_text_of(parts: Iterable[LoggedMessage], redact_pii: bool, names: UserResolver | None = None) -> str:
    """An answer's text as relmon stores and judges it, built in this one place: its parts' texts, one per line
    (people's names resolved when `names` is given), PII redacted when RELMON_REDACT_PII is set."""
    text = "\n".join(t for t in (message_text(p.content, names) for p in parts) if t.strip())
    return redact_if(redact_pii, text)


def context_of(
    runtime: Runtime, question: LoggedMessage, messages: list[LoggedMessage], channel: str | None = None
) -> str | None:
    """The conversation's last RELMON_CONTEXT_TURNS turns before the question, formatted for the judge (names
    resolved, PII redacted where set), or None. A thread that resumes after the log forgot it (its root is gone):
    the turns are the thread's answers relmon stored, with their questions."""
    settings = runtime.settings
    if settings.context_turns <= 0:
        return None
    names = UserNames(runtime.redis, runtime.slack)
    turns = [
        Turn(speaker, redact_if(settings.redact_pii, message_text(message.content, names)))
        for speaker, message in earlier_turns(question, messages)[-settings.context_turns :]
    ]
    if not turns and channel and question.in_thread and all(m.ts != question.thread_key for m in messages):
        with runtime.db.autocommit() as connection:
            stored = pairs.thread_texts(connection, channel, question.thread_key, question.ts, settings.context_turns)
        turns = [Turn(speaker, text) for speaker, text in stored_turns(stored)]
    return format_turns(turns, settings.context_turns) or None


def settle_and_judge(runtime: Runtime, pair_id: int, version: int, *, replayed: bool = False) -> str:
    """The settle task's step: settle one pair and judge it in the same task (`judge_settled`, as the capture task
    does for an answer that settles at once): a `judge_pair` task (its message, its delivery and acknowledgement,
    its read of the pair) fewer per answer. `replayed`: the task's message came again or this is its retry; an
    earlier run may have judged the pair and stopped before its follow-ups, so `judge_pair` (resumed) finishes
    what it left."""
    settling = load_settling(runtime, pair_id)
    if settling is None:
        return "missing"
    pair = settling.pair
    if replayed and pair.version == version and pair.status == PairStatus.JUDGED:
        celery.send_task(task_names.JUDGE_PAIR, args=[pair_id], kwargs={"resumed": True})
        return "resumed"
    settled = settle_loaded(runtime, settling, version)
    if settled.row is not None:
        judge_settled(runtime, settled.row._mapping)
    elif settled.judge:
        celery.send_task(task_names.JUDGE_PAIR, args=[pair_id], kwargs={"resumed": True} if replayed else {})
    return settled.outcome


def settle_loaded(runtime: Runtime, settling: Settling, version: int) -> Settled:
    """Settle the loaded pair: find its question, store what was found, watch its outcome. Its judging is left
    to the caller (`Settled.judge`): a task for the settle task, in the same run for capture."""
    pair, pair_id = settling.pair, settling.pair.id
    if pair.version != version:
        return Settled("stale")  # a later edit enqueued its own settle
    if pair.status == PairStatus.PENDING:
        _watch_outcome(runtime, pair_id)
        return Settled("requeued", judge=True)
    if pair.status != PairStatus.SETTLING:
        return Settled(f"skipped:{pair.status}")

    resolution, answer_text, messages = resolve_pair(runtime, settling)
    status = resolution.status
    if status == STREAMING:
        return Settled(STREAMING)  # never judged half-written: the stream's completion enqueues a newer version
    question_text = context = None
    question = resolution.question
    if status == PairStatus.PENDING:
        question_text = message_text(question.content, UserNames(runtime.redis, runtime.slack)).strip()
        if not question_text:
            status = PairStatus.NO_QUESTION
        else:
            context = context_of(runtime, question, messages, pair.channel_id)
    # RELMON_REDACT_PII: the texts written here are what the LLM and the store see (the answer's: answer_text_of).
    question_text = redact_if(runtime.settings.redact_pii, question_text)
    if status in (PairStatus.PENDING, PairStatus.NO_QUESTION) and not answer_text.strip():
        status = PairStatus.EMPTY
    window = runtime.settings.outcome_window_seconds
    closes = datetime.fromtimestamp(window_closes_at(pair.answer_ts, window), UTC) if window > 0 else None
    with runtime.db.autocommit() as connection:  # one atomic UPDATE (with the window's INSERT): no transaction
        settled = pairs.settle(
            connection,
            pair_id,
            version,
            status=status,
            answer_text=answer_text if status not in (PairStatus.DELETED, PairStatus.MERGED) else None,
            question_ts=question.ts if question and status == PairStatus.PENDING else None,
            question_user=question.user if question and status == PairStatus.PENDING else None,
            question_text=question_text if status == PairStatus.PENDING else None,
            context_text=context if status == PairStatus.PENDING else None,
            window_closes_at=closes,  # a pending pair's outcome window opens with it
        )
    if settled is None:
        return Settled("lost")  # changed while we looked: the newer version's settle decides
    log.info(
        "pair settled",
        extra=event_fields(
            channel=pair.channel_id, message_ts=pair.answer_ts, pair_id=pair_id, version=version, status=status
        ),
    )
    if status != PairStatus.PENDING:
        return Settled(status)
    _watch_outcome(runtime, pair_id, settled, resolution.parts)  # its window was stored with the settle
    return Settled(status, judge=True, row=settled)


def _watch_outcome(
    runtime: Runtime, pair_id: int, settled: Row | None = None, run: list[LoggedMessage] | None = None
) -> None:
    open_window(runtime, pair_id, settled, run)
