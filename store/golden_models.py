"""SQL tables of the golden set (golden/) and of `relmon regress` runs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from store.model_base import Base, CreatedAt, IdKey, IdType, UpdatedAt


class GoldenItem(Base):
    """A question the bot failed, with the answer that worked: one row per question (store.golden_rules.dedupe_key),
    however many times it was asked (`times`)."""

    __tablename__ = "golden_items"
    __table_args__ = (
        UniqueConstraint("dedupe_key", name="uq_golden_items_dedupe_key"),
        Index("ix_golden_items_created_at", "created_at"),
    )

    id: Mapped[IdKey]
    dedupe_key: Mapped[str] = mapped_column(String(64))
    question: Mapped[str] = mapped_column(Text)
    context: Mapped[str | None] = mapped_column(Text)  # the earlier turns of the conversation
    expected: Mapped[str | None] = mapped_column(Text)  # the answer that worked (a teammate's, or written in Slack)
    bot_answer: Mapped[str | None] = mapped_column(Text)  # the bot's failed answer
    topic: Mapped[str | None] = mapped_column(String(200))
    channel_id: Mapped[str | None] = mapped_column(String(32))
    channel_is_private: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    permalink: Mapped[str | None] = mapped_column(Text)
    origin: Mapped[str] = mapped_column(String(16))  # store.golden_rules.ORIGIN_*: how it joined first
    times: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # times the question was asked
    # A person wrote or edited the expected answer in Slack: a later teammate reply does not overwrite it.
    expected_edited: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    edited_by: Mapped[str | None] = mapped_column(String(32))
    # The item's own id in the set it was imported from (Langfuse, LangSmith, ...), kept for a round trip.
    external_id: Mapped[str | None] = mapped_column(String(200))
    # Removed by a person: the row stays, texts blanked, so the same failing question does not bring it back.
    removed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    removed_by: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]


class GoldenSource(Base):
    """One time an item's question was asked and failed, with the Slack messages it quotes: a deleted message
    takes its source away, and an item with no source left leaves the set (store.golden_rules.after_deletion)."""

    __tablename__ = "golden_sources"
    __table_args__ = (
        # One source per asked question (channel and ts): a takeover and a vote on the same question are one.
        UniqueConstraint("message_key", name="uq_golden_sources_message_key"),
        Index("ix_golden_sources_item", "item_id"),
        Index("ix_golden_sources_channel", "channel_id"),
    )

    id: Mapped[IdKey]
    item_id: Mapped[int] = mapped_column(IdType, ForeignKey("golden_items.id", ondelete="CASCADE"))
    message_key: Mapped[str] = mapped_column(String(80))  # "<channel>:<question ts or answer ts>"
    channel_id: Mapped[str | None] = mapped_column(String(32))
    question_ts: Mapped[str | None] = mapped_column(String(32))
    answer_ts: Mapped[str | None] = mapped_column(String(32))
    reference_ts: Mapped[str | None] = mapped_column(String(32))
    pair_id: Mapped[int | None] = mapped_column(IdType)
    question: Mapped[str] = mapped_column(Text)
    context: Mapped[str | None] = mapped_column(Text)
    bot_answer: Mapped[str | None] = mapped_column(Text)
    expected: Mapped[str | None] = mapped_column(Text)
    permalink: Mapped[str | None] = mapped_column(Text)
    topic: Mapped[str | None] = mapped_column(String(200))
    channel_is_private: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    origin: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[CreatedAt]


class RegressRun(Base):
    """One `relmon regress` run: its progress while it runs (its checks), its report once it is done. A run of the
    same candidates file that stopped (an LLM outage) is resumed by the next run of that file."""

    __tablename__ = "regress_runs"
    __table_args__ = (Index("ix_regress_runs_input", "input_sha", "finished_at"),)

    id: Mapped[IdKey]
    input_sha: Mapped[str] = mapped_column(String(64))  # the candidates file, the judge model and the set's texts
    source_name: Mapped[str | None] = mapped_column(Text)  # the candidates file's name, for people
    items: Mapped[int] = mapped_column(Integer, default=0)
    passed: Mapped[int | None] = mapped_column(Integer)
    pass_rate: Mapped[float | None] = mapped_column(Float)
    report: Mapped[dict | None] = mapped_column(JSON)  # the run's output (golden.regress.report_json)
    created_at: Mapped[CreatedAt]
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class RegressCheck(Base):
    """One judge's verdict on one candidate answer in a run, stored as soon as it came: a resumed run judges
    nothing twice. `charged`: the daily budget paid for it (a retry after an outage pays nothing more)."""

    __tablename__ = "regress_checks"
    __table_args__ = (UniqueConstraint("run_id", "item_key", "check_name", name="uq_regress_checks_run_item_check"),)

    id: Mapped[IdKey]
    run_id: Mapped[int] = mapped_column(IdType, ForeignKey("regress_runs.id", ondelete="CASCADE"))
    item_key: Mapped[str] = mapped_column(String(64))
    check_name: Mapped[str] = mapped_column(String(32))  # relevancy | correctness | grounded | grounded_swapped
    charged: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    verdict: Mapped[dict | None] = mapped_column(JSON)  # None while charged and not answered
    created_at: Mapped[CreatedAt]
