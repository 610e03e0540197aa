"""The `exchanges` table: what the ingest API (bot.ingest, common.exchanges) received of an exchange besides the
pair it became: the client's id (unique per bot: the same id sent twice is one exchange), the conversation and
turn, who could see it, and the documents the bot retrieved (the grounded judge's source)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import JSON, DateTime, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from store.model_base import Base, CreatedAt, IdKey, IdType


class Exchange(Base):
    __tablename__ = "exchanges"
    __table_args__ = (
        UniqueConstraint("bot", "client_id", name="uq_exchanges_bot_client_id"),
        Index("ix_exchanges_pair", "pair_id", "id"),  # a pair's first exchange: one look-up (migration 0025)
    )

    id: Mapped[IdKey]
    client_id: Mapped[str] = mapped_column(String(200))
    bot: Mapped[str] = mapped_column(String(80))
    conversation_id: Mapped[str] = mapped_column(String(200))
    turn: Mapped[int] = mapped_column(Integer)
    visibility: Mapped[str] = mapped_column(String(10))  # public | private | dm (common.exchanges.Visibility)
    asker: Mapped[str | None] = mapped_column(String(32))
    documents: Mapped[list | None] = mapped_column(JSON)  # [{text, source, id?}]
    bot_version: Mapped[str | None] = mapped_column(String(100))
    asked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    answered_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    # The bot's own trace of it (lowercase hex, checked by common.exchanges): where its verdicts are sent.
    trace_id: Mapped[str | None] = mapped_column(String(32))
    span_id: Mapped[str | None] = mapped_column(String(16))
    # The pair it became (a captured pair when it happened in a channel relmon reads): forgetting the pair forgets
    # this row with it.
    pair_id: Mapped[int] = mapped_column(IdType, ForeignKey("pairs.id", ondelete="CASCADE"))
    created_at: Mapped[CreatedAt]
