"""The bot's own signals about an ingested exchange (`ingest_signal`, sent by `POST /v1/exchanges/{id}/signals`):
the thumbs of Slack's feedback buttons, a handoff to a person, how the conversation ended. They become the same
outcome signals as those read in channels, recorded by the same step (workers.outcome_watching.record_signals_in),
so the missed-failure alerts, the golden set, the reports and the evaluation labels take them as they are.

An exchange has an outcome window from its first signal (its answer's time plus RELMON_OUTCOME_WINDOW; a captured
pair it joined has its own already): a signal after the window is late, as a late reaction is. A signal for an
exchange not stored yet waits in Redis (workers.exchange_notes) and is applied once the exchange is stored
(workers.ingesting); one for a deleted exchange is dropped.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from capture.redact import redact_if
from common.exchange_signals import Feedback, Handoff, Resolution, parse_signal
from common.runtime import Runtime
from store import exchanges as exchange_store
from store import outcomes as outcome_store
from store.models import Pair, as_utc
from store.signals import ESCALATION, HUMAN_TAKEOVER, NEGATIVE_REACTION, POSITIVE_REACTION, RESOLVED
from workers import exchange_notes
from workers.outcome_watching import end_window_in, record_signals_in

log = logging.getLogger("relmon.outcomes")


@dataclass(frozen=True)
class Effect:
    """What a signal of the bot's side means in outcome signals."""

    names: frozenset[str]
    reference: str | None = None  # the person's reply: the pair's reference answer
    ends: bool = False  # the conversation ended: the window closes


def effect_of(signal: Feedback | Handoff | Resolution) -> Effect:
    """Pure. Thumbs are reactions; a handoff is an escalation, and a takeover too when the person's reply is given
    (the two together say the answer failed, as in a channel); a resolution ends the window, `resolved` saying so."""
    if isinstance(signal, Feedback):
        return Effect(frozenset({POSITIVE_REACTION if signal.value == "positive" else NEGATIVE_REACTION}))
    if isinstance(signal, Handoff):
        if signal.reply:
            return Effect(frozenset({ESCALATION, HUMAN_TAKEOVER}), reference=signal.reply)
        return Effect(frozenset({ESCALATION}))
    return Effect(frozenset({RESOLVED}) if signal.value == "resolved" else frozenset(), ends=True)


def window_bounds(answer_ts: str | None, answered_at: datetime, window_seconds: int) -> tuple[str, datetime]:
    """(the window's answer ts, its end): a Slack answer's own ts when the exchange has one, else its answer's time
    as a ts."""
    opens = float(answer_ts) if answer_ts else as_utc(answered_at).timestamp()
    return answer_ts or f"{opens:.6f}", datetime.fromtimestamp(opens, UTC) + timedelta(seconds=window_seconds)


def ingest_signal_in(runtime: Runtime, exchange_id: str, signal: dict[str, Any]) -> str:
    """The task's step: park the signal, then apply what is parked if the exchange is stored. Returns what
    happened."""
    parsed = parse_signal(signal)  # validated again: a note or the spool is trusted no further
    bot = parsed.bot
    if exchange_notes.is_forgotten(runtime.redis, bot, exchange_id):
        return "forgotten"
    exchange_notes.park_signal(runtime.redis, bot, exchange_id, signal)
    with runtime.db.reading() as session:
        stored = exchange_store.stored_exchange(session, bot, exchange_id)
    if stored is None:
        log.info("signal waits for its exchange", extra={"bot": bot, "exchange_id": exchange_id})
        return "waiting"
    return apply_parked(runtime, bot, exchange_id, stored.pair_id)


def apply_parked(runtime: Runtime, bot: str, exchange_id: str, pair_id: int) -> str:
    """Apply the signals waiting for a stored exchange, in the order they came, then drop them (a retry applies
    them again: each step is idempotent)."""
    if exchange_notes.is_forgotten(runtime.redis, bot, exchange_id):
        exchange_notes.drop_signals(runtime.redis, bot, exchange_id)
        return "forgotten"
    parked = exchange_notes.parked_signals(runtime.redis, bot, exchange_id)
    results = [apply_signal(runtime, bot, exchange_id, pair_id, json.loads(raw)) for raw in parked]
    exchange_notes.drop_signals(runtime.redis, bot, exchange_id, parked)
    return ",".join(results) or "none"


def apply_signal(runtime: Runtime, bot: str, exchange_id: str, pair_id: int, signal: dict[str, Any]) -> str:
    parsed = parse_signal(signal)
    effect = effect_of(parsed)
    at = parsed.at or datetime.now(UTC)
    window_seconds = runtime.settings.outcome_window_seconds
    if window_seconds <= 0:
        return "off"  # outcome watching is off (RELMON_OUTCOME_WINDOW=0)
    with runtime.db.session() as session:
        pair = session.get(Pair, pair_id)
        exchange = exchange_store.exchange_row(session, bot, exchange_id)
        if pair is None or exchange is None:
            return "gone"
        if outcome_store.get_window(session, pair_id) is None:
            answer_ts, closes_at = window_bounds(pair.answer_ts, exchange.answered_at, window_seconds)
            if at > closes_at:
                return "late"  # no window opened for a signal past it: the exchange says nothing either way
            outcome_store.insert_window(
                session,
                pair_id=pair_id,
                channel_id=pair.channel_id or "",
                answer_ts=answer_ts,
                thread_key=pair.thread_ts or answer_ts,
                asker=pair.question_user,
                closes_at=closes_at,
            )
    reference = redact_if(runtime.settings.redact_pii, effect.reference) if effect.reference else None
    fields = {"bot": bot, "exchange_id": exchange_id}
    new = []
    if effect.names:
        new = record_signals_in(runtime, pair_id, effect.names, at=at, reference=reference, **fields)
    if effect.ends:
        end_window_in(runtime, pair_id, at)
    log.info("bot signal", extra={**fields, "pair_id": pair_id, "signal": parsed.type, "new": ",".join(new)})
    return parsed.type
