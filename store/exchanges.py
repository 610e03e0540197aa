"""Storing an ingested exchange (workers.ingesting): its pair and its `exchanges` row in one transaction, once.

Idempotent per bot: an exchange whose (bot, id) is stored already adds nothing; its pair is returned, so a task
run again (its worker died between the commit and judging's send) sends its judging again.

The same pair as capture's: an exchange naming `slack: {channel, ts}` (its answer's message) joins the pair stored
for that message, when capture stored one first; else it creates the pair with that channel and ts, and capture,
reading the message later, meets the same row (pairs are unique on channel and answer ts).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, Connection, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from store import bot_groups
from store.exchange_models import Exchange
from store.models import Pair, PairSource, PairStatus


@dataclass(frozen=True)
class Stored:
    pair_id: int
    created: bool  # this call stored the exchange (False: it was there already)
    joined: bool = False  # it joined a pair capture stored (that pair is judged by capture's flow)
    status: str = PairStatus.PENDING  # the pair's status


def stored_exchange(session: Session, bot: str, client_id: str) -> Stored | None:
    row = session.execute(
        select(Exchange.pair_id, Pair.status, Pair.source)
        .join(Pair, Pair.id == Exchange.pair_id)
        .where(Exchange.bot == bot, Exchange.client_id == client_id)
    ).first()
    if row is None:
        return None
    return Stored(row.pair_id, False, row.source != PairSource.INGEST, row.status)


def record(session: Session, exchange: dict[str, Any], pair: dict[str, Any]) -> Stored:
    """Store the exchange (`exchanges` columns) and its pair (`pairs` columns, status pending) unless (bot, id) is
    stored already. A race with a twin task ends on the unique key: the loser finds the winner's row."""
    found = stored_exchange(session, exchange["bot"], exchange["client_id"])
    if found is not None:
        return found
    joined = None
    if pair.get("channel_id") and pair.get("answer_ts"):
        joined = session.execute(
            select(Pair).where(Pair.channel_id == pair["channel_id"], Pair.answer_ts == pair["answer_ts"])
        ).scalar_one_or_none()
    try:
        with session.begin_nested():
            if joined is not None:
                if not joined.reference_text and pair.get("reference_text"):
                    # The documents Slack never shows: the grounded judge reads them when it judges this pair.
                    session.execute(
                        update(Pair).where(Pair.id == joined.id).values(reference_text=pair["reference_text"])
                    )
                pair_id, status = joined.id, joined.status
            else:
                row = Pair(**pair, source=PairSource.INGEST, status=PairStatus.PENDING)
                session.add(row)
                session.flush()
                pair_id, status = row.id, row.status
            session.add(Exchange(**exchange, pair_id=pair_id))
            session.flush()
    except IntegrityError:
        found = stored_exchange(session, exchange["bot"], exchange["client_id"])
        if found is None:
            raise  # not the exchange's key (capture stored the message's pair meanwhile): the task retries
        return found
    return Stored(pair_id, True, joined is not None, status)


@dataclass(frozen=True)
class Origin:
    """Where an ingested pair's exchange came from: what its alert names, and who could read it."""

    bot: str
    visibility: str

    @property
    def label(self) -> str:
        return f"bot {self.bot} ({self.visibility})"


def rule_key(executor: Connection | Session, pair_id: int, channel_id: str | None, source: str) -> str | None:
    """The key of the rule a pair is judged under (`store.rules.ChannelRules.for_channel`): its channel; an ingested
    exchange in no Slack channel: its bot's (`bot:NAME`, store.bot_groups), so that the bot's `judges` run on it."""
    if channel_id or source != PairSource.INGEST:
        return channel_id
    bot = executor.execute(
        select(Exchange.bot).where(Exchange.pair_id == pair_id).order_by(Exchange.id).limit(1)
    ).scalar_one_or_none()
    return bot_groups.key_of(bot) if bot else None


def origin(session: Session, pair_id: int) -> Origin | None:
    """The (first) exchange of a pair, or None when none was ingested for it."""
    row = session.execute(
        select(Exchange.bot, Exchange.visibility).where(Exchange.pair_id == pair_id).order_by(Exchange.id).limit(1)
    ).first()
    return Origin(row.bot, row.visibility) if row is not None else None


@dataclass(frozen=True)
class StoredTrace:
    """The bot's own trace an ingested exchange named: its verdicts and signals are sent there."""

    trace_id: str
    span_id: str | None


def stored_trace(session: Session, pair_id: int) -> StoredTrace | None:
    """The trace the pair's (first) exchange that named one named, or None."""
    row = session.execute(
        select(Exchange.trace_id, Exchange.span_id)
        .where(Exchange.pair_id == pair_id, Exchange.trace_id.is_not(None))
        .order_by(Exchange.id)
        .limit(1)
    ).first()
    return StoredTrace(row.trace_id, row.span_id) if row is not None else None


def exchange_row(session: Session, bot: str, client_id: str) -> Exchange | None:
    """The exchange stored for (bot, id), or None."""
    return session.execute(
        select(Exchange).where(Exchange.bot == bot, Exchange.client_id == client_id)
    ).scalar_one_or_none()


def in_report_channel(key: str) -> ColumnElement[bool]:
    """The pairs a report's channel holds (`store.stats_queries.report_channel`): a Slack channel's, or, for a bot's
    key (`bot:helpdesk`), the exchanges of that bot that happened in no Slack channel."""
    bot = bot_groups.bot_of(key)
    if bot is None:
        return Pair.channel_id == key
    return Pair.channel_id.is_(None) & Pair.id.in_(select(Exchange.pair_id).where(Exchange.bot == bot))
