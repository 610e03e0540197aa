"""An exchange from the ingest API (the step `ingest_exchanges` runs for each exchange of its call, in order):
validated again (what a spool or a note kept is trusted no further than common.exchanges says), turned into a pair
as capture would store it (question, answer, the earlier turns formatted as judges.context does, PII redacted where
set, the documents as the grounded judge's source text), stored once with its `exchanges` row (store.exchanges),
then judged by the normal path (`judge_pair`, whose alerts follow: an ingested pair alerts like a captured one, a
`dm` or `private` one without its words). An exchange deleted first is not stored (workers.exchange_notes); the
signals that came first are applied once it is (workers.bot_signals).

A call's exchanges are stored one by one, each as if it came alone: an outage (or a race with capture) raises, and
the task's retry runs them all again (those stored already are found, not stored twice); a bug in one exchange is
logged and the others are stored all the same."""

from __future__ import annotations

import logging
import time
from collections import Counter
from typing import Any

import redis
from sqlalchemy.exc import IntegrityError, OperationalError

from capture.redact import redact_if
from common import task_names, task_notes
from common.celery_app import celery
from common.exchanges import Document, EarlierTurn, Exchange
from common.runtime import Runtime
from judges.context import BOT, CUSTOMER, DOCUMENTS_HEADING, Turn, format_turns
from store import exchanges as exchange_store
from store.models import PairStatus
from store.settings import Settings
from workers import exchange_notes
from workers.bot_signals import apply_parked
from workers.judging.rules import is_infrastructure

log = logging.getLogger("relmon.ingest")

_SPEAKERS = {"user": CUSTOMER, "assistant": BOT}
# What the ingest tasks retry on (workers.tasks.ingest): Redis or the database down for a while; IntegrityError,
# capture storing the same Slack message's pair meanwhile (the retry joins it).
RETRIED: tuple[type[Exception], ...] = (redis.RedisError, OperationalError, IntegrityError)
SOURCE_HEADING = DOCUMENTS_HEADING  # a custom judge reads them as {documents} (judges.context)


def context_text(turns: list[EarlierTurn], max_turns: int) -> str | None:
    """The earlier turns as the judge reads them (judges.context), or None."""
    return format_turns([Turn(_SPEAKERS[turn.role], turn.text) for turn in turns], max_turns) or None


def documents_text(documents: list[Document]) -> str | None:
    """The retrieved passages as the grounded judge's source text (its reference), each headed by its source."""
    if not documents:
        return None
    parts = [f"[{number}] {document.source}\n{document.text}" for number, document in enumerate(documents, 1)]
    return SOURCE_HEADING + "\n\n" + "\n\n".join(parts)


def rows_of(exchange: Exchange, settings: Settings) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the `exchanges` row, the `pairs` row) of one exchange: plain data."""
    redact = settings.redact_pii
    slack = exchange.slack
    pair = {
        "channel_id": slack.channel if slack else None,
        "answer_ts": slack.ts if slack else None,
        "channel_is_private": exchange.private,  # never quoted in a shared channel (common.privacy)
        "question_user": exchange.asker,
        "question_text": redact_if(redact, exchange.question),
        "answer_text": redact_if(redact, exchange.answer),
        "context_text": redact_if(redact, context_text(exchange.earlier_turns, settings.context_turns)),
        "reference_text": redact_if(redact, documents_text(exchange.documents)),
    }
    row = {
        "client_id": exchange.id,
        "bot": exchange.bot,
        "conversation_id": exchange.conversation_id,
        "turn": exchange.turn,
        "visibility": exchange.visibility.value,
        "asker": exchange.asker,
        "documents": [document.model_dump(exclude_none=True) for document in exchange.documents] or None,
        "bot_version": exchange.bot_version,
        "asked_at": exchange.asked_at,
        "answered_at": exchange.answered_at,
        "trace_id": exchange.trace.trace_id if exchange.trace else None,
        "span_id": exchange.trace.span_id if exchange.trace else None,
    }
    return row, pair


def forget_call(bot: str, exchange_id: str) -> task_notes.Call:
    """`forget_exchange`'s call, as the bot's DELETE sends it."""
    return task_notes.Call(task_names.FORGET_EXCHANGE, kwargs={"bot": bot, "exchange_id": exchange_id})


def ingest(runtime: Runtime, raw: dict[str, Any]) -> str:
    """Store one exchange once and hand its pair to judging; returns what happened. Run again, it stores nothing
    more and sends judging again while the pair is still pending (judge_pair judges each version once)."""
    exchange = Exchange.model_validate(raw)
    fields = {"bot": exchange.bot, "exchange_id": exchange.id}
    if exchange_notes.is_forgotten(runtime.redis, exchange.bot, exchange.id):
        log.info("exchange deleted before it was stored: not stored", extra=fields)
        return "forgotten"
    row, pair = rows_of(exchange, runtime.settings)
    with runtime.db.session() as session:
        stored = exchange_store.record(session, row, pair)
    fields["pair_id"] = stored.pair_id
    if exchange_notes.is_forgotten(runtime.redis, exchange.bot, exchange.id):
        # Deleted while it was being stored (the deletion's scrub found nothing yet): scrubbed again, now.
        task_notes.send(runtime.redis, forget_call(exchange.bot, exchange.id), time.time())
        log.info("exchange deleted while stored: scrubbed again", extra=fields)
        return "forgotten"
    apply_parked(runtime, exchange.bot, exchange.id, stored.pair_id)  # its signals that came first
    if stored.joined:
        log.info("exchange joined a captured pair", extra=fields)
        return "joined"  # capture's flow settles and judges that pair
    if stored.status == PairStatus.PENDING:
        celery.send_task(task_names.JUDGE_PAIR, args=[stored.pair_id])
    log.info("exchange stored" if stored.created else "exchange already stored", extra=fields)
    return "stored" if stored.created else "duplicate"


def ingest_all(runtime: Runtime, exchanges: list[dict[str, Any]]) -> str:
    """Store each exchange of a call as `ingest` stores one; returns how many of each outcome ("stored: 3, ...")."""
    outcomes: Counter[str] = Counter()
    for raw in exchanges:
        try:
            outcomes[ingest(runtime, raw)] += 1
        except Exception as error:
            if isinstance(error, RETRIED) or is_infrastructure(error):
                raise  # the whole call again, later: what is stored is found, not stored twice
            # A bug with this one exchange: sent again it would fail the same way, and the rest are not at fault.
            log.exception("exchange not stored", extra={"bot": raw.get("bot"), "exchange_id": raw.get("id")})
            outcomes["failed"] += 1
    return ", ".join(f"{outcome}: {count}" for outcome, count in sorted(outcomes.items()))
