"""SQL tables of the topics (`topics/`): each question's embedding, the topics with their names and anchors, each
run's topics (what App Home and the history read), each question's latest topic, and the LLM spend of topics.

Every row about a pair (its embedding, its topic) goes with the pair (ON DELETE CASCADE)."""

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
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from store.model_base import Base, CreatedAt, IdKey, IdType, UpdatedAt


class QuestionEmbedding(Base):
    """A question's embedding from the configured endpoint, stored once: float16, little-endian (half the bytes of
    float32, and clustering cannot tell the difference). `text_sha` is the question's: an edited question is
    embedded again."""

    __tablename__ = "question_embeddings"

    pair_id: Mapped[int] = mapped_column(IdType, ForeignKey("pairs.id", ondelete="CASCADE"), primary_key=True)
    model: Mapped[str] = mapped_column(String(200))
    text_sha: Mapped[str] = mapped_column(String(64))
    vector: Mapped[bytes] = mapped_column(LargeBinary)
    created_at: Mapped[CreatedAt]


class TopicRecord(Base):
    """A topic as later runs know it: its key, its name (the cache: a continuing topic is not named again) and the
    pairs closest to its centre (anchors)."""

    __tablename__ = "topics"

    key: Mapped[str] = mapped_column(String(40), primary_key=True)
    name: Mapped[str] = mapped_column(Text)
    named_by: Mapped[str] = mapped_column(String(16))  # llm | keywords | neutral
    # The private channels the name was made from ([]: public questions only; NULL: unknown, named before the
    # audience rule): where they may not all be read, the name is not shown (topics.audience).
    name_sources: Mapped[list | None] = mapped_column(JSON, nullable=True)
    anchors: Mapped[list] = mapped_column(JSON)
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]


class TopicRun(Base):
    """One stored run of the topics (the weekly digest's, App Home's daily refresh): its period and what it says."""

    __tablename__ = "topic_runs"
    __table_args__ = (UniqueConstraint("run_key", name="uq_topic_runs_run_key"),)

    id: Mapped[IdKey]
    run_key: Mapped[str] = mapped_column(String(100))
    start: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    end: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    questions: Mapped[int] = mapped_column(Integer)
    left_out: Mapped[int] = mapped_column(Integer)
    embedding: Mapped[str] = mapped_column(String(200))
    notes: Mapped[list] = mapped_column(JSON)
    created_at: Mapped[CreatedAt]


class TopicPeriod(Base):
    """A topic's figures in one run, in rank order: the history of a topic is its rows across runs."""

    __tablename__ = "topic_periods"
    __table_args__ = (
        UniqueConstraint("run_id", "topic_key", name="uq_topic_periods_run_topic"),
        Index("ix_topic_periods_topic_key", "topic_key"),
    )

    id: Mapped[IdKey]
    run_id: Mapped[int] = mapped_column(ForeignKey("topic_runs.id", ondelete="CASCADE"))
    topic_key: Mapped[str] = mapped_column(String(40))
    rank: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(Text)
    name_sources: Mapped[list | None] = mapped_column(JSON, nullable=True)  # as TopicRecord's, at this run
    questions: Mapped[int] = mapped_column(Integer)
    failed: Mapped[int] = mapped_column(Integer)
    resolved: Mapped[int] = mapped_column(Integer)
    decided: Mapped[int] = mapped_column(Integer)
    tiers: Mapped[dict | None] = mapped_column(JSON, nullable=True)  # resolution tier -> questions; NULL: before them
    mean_relevancy: Mapped[float | None] = mapped_column(Float)
    previous_questions: Mapped[int | None] = mapped_column(Integer)
    previous_failed: Mapped[int | None] = mapped_column(Integer)
    # Under sampling, the failure rates' weights (common.reports.weighted.Weights.as_json); NULL: plain shares.
    rate_weights: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    previous_rate_weights: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    channels: Mapped[list] = mapped_column(JSON)
    private_channels: Mapped[list] = mapped_column(JSON)
    only_private: Mapped[bool] = mapped_column(Boolean)
    examples: Mapped[list] = mapped_column(JSON)  # pair ids, closest first (texts are read, and quoted, when shown)


class PairTopic(Base):
    """The topic a pair's question fell in at the latest stored run (read by `store.golden.topics_of_pairs`)."""

    __tablename__ = "pair_topics"

    pair_id: Mapped[int] = mapped_column(IdType, ForeignKey("pairs.id", ondelete="CASCADE"), primary_key=True)
    topic_key: Mapped[str] = mapped_column(String(40))
    updated_at: Mapped[UpdatedAt]


class TopicSpend(Base):
    """LLM calls the topics made (embeddings, naming), for the digest's cost: they count against the daily budget
    too."""

    __tablename__ = "topic_spend"
    __table_args__ = (Index("ix_topic_spend_created_at", "created_at"),)

    id: Mapped[IdKey]
    kind: Mapped[str] = mapped_column(String(16))  # embedding | naming
    model: Mapped[str] = mapped_column(String(200))
    calls: Mapped[int] = mapped_column(Integer)
    prompt_tokens: Mapped[int] = mapped_column(Integer)
    completion_tokens: Mapped[int] = mapped_column(Integer)
    cached_tokens: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[CreatedAt]


class TopicFix(Base):
    """A topic (or a knowledge gap of it) marked fixed: when, by whom, the message its verdicts are posted under,
    and the verdict last told there (common.reports.fixes; workers.fixes follows it)."""

    __tablename__ = "topic_fixes"
    __table_args__ = (Index("ix_topic_fixes_topic_key", "topic_key"),)

    id: Mapped[IdKey]
    topic_key: Mapped[str] = mapped_column(String(40))
    marked_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    marked_by: Mapped[str] = mapped_column(String(32))  # a Slack user id, or "cli"
    channel_id: Mapped[str | None] = mapped_column(String(32), nullable=True)  # the mark's message: where the
    message_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)  # verdicts are posted, in its thread
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)  # the latest verdict (None: none yet)
    verdict_key: Mapped[str | None] = mapped_column(String(100), nullable=True)  # its post-once key
    reply_ts: Mapped[str | None] = mapped_column(String(32), nullable=True)  # its reply, once posted
    regress_run_id: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the topic's test set re-run
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]
