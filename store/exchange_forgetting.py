"""Forgetting an ingested exchange, the SQL side (workers.exchange_forgetting): the texts its deletion reaches (its
pair, the other pairs of its conversation, which may quote it as an earlier turn, and their judgments), locked for
update, and its own row's documents. The rest is store.forgetting's, as for a deleted Slack message."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from store.exchange_models import Exchange
from store.forget_plan import JUDGMENT_TEXTS, PAIR_TEXTS, StoredJudgment, StoredPair
from store.models import Judgment, Pair


@dataclass(frozen=True)
class ExchangeRows:
    exchange_id: int  # the `exchanges` row
    pair_id: int  # its pair
    channel_id: str | None  # its pair's channel (a Slack channel when it joined a captured pair)
    documents: list[str]  # the texts of the documents it came with
    pairs: list[StoredPair]  # its pair and the other pairs of its conversation
    judgments: list[StoredJudgment]


def exchange_rows(session: Session, bot: str, client_id: str) -> ExchangeRows | None:
    """The rows a deletion of (bot, id) reaches, or None when it is not stored."""
    exchange = session.execute(
        select(Exchange).where(Exchange.bot == bot, Exchange.client_id == client_id).with_for_update()
    ).scalar_one_or_none()
    if exchange is None:
        return None
    siblings = select(Exchange.pair_id).where(Exchange.bot == bot, Exchange.conversation_id == exchange.conversation_id)
    texts = (getattr(Pair, name) for name in PAIR_TEXTS)
    pairs = session.execute(
        select(Pair.id, Pair.question_ts, Pair.answer_ts, Pair.channel_id, *texts)
        .where(Pair.id.in_(siblings.union(select(Pair.id).where(Pair.id == exchange.pair_id))))
        .order_by(Pair.id)
        .with_for_update()
    ).all()
    ids = [row.id for row in pairs]
    judgments = session.execute(
        select(Judgment.id, Judgment.pair_id, *(getattr(Judgment, name) for name in JUDGMENT_TEXTS))
        .where(Judgment.pair_id.in_(ids))
        .order_by(Judgment.id)
        .with_for_update()
    ).all()
    channel = next((row.channel_id for row in pairs if row.id == exchange.pair_id), None)
    return ExchangeRows(
        exchange.id,
        exchange.pair_id,
        channel,
        [str(document.get("text") or "") for document in exchange.documents or [] if isinstance(document, dict)],
        [StoredPair(**{k: v for k, v in row._mapping.items() if k != "channel_id"}) for row in pairs],
        [StoredJudgment(**row._mapping) for row in judgments],
    )


def clear_documents(session: Session, exchange_row_id: int) -> None:
    """The exchange's row keeps its ids (so a resend of it is a duplicate, not a new exchange), not its documents."""
    session.execute(update(Exchange).where(Exchange.id == exchange_row_id).values(documents=None))
