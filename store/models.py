"""SQL tables. Every write that a retry could repeat has a unique key, so repeating it is harmless."""

from __future__ import annotations

from datetime import UTC, date, datetime
from enum import StrEnum

from sqlalchemy import (
    JSON,
    Boolean,
    Date,
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

from store.model_base import Base, CreatedAt, IdKey, IdType, UpdatedAt, utcnow


def as_utc(moment: datetime) -> datetime:
    """A stored time, aware: SQLite hands back naive datetimes (relmon stores UTC), PostgreSQL aware ones."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


class PairStatus:
    SETTLING = "settling"  # captured; waiting for the answer to stop changing
    PENDING = "pending"  # settled; queued for judging
    JUDGED = "judged"  # every judge has a stored judgment (ok, null or error)
    SKIPPED_SAMPLING = "skipped_sampling"
    SKIPPED_BUDGET = "skipped_budget"
    NO_QUESTION = "no_question"  # no human question could be found for the answer
    EMPTY = "empty"  # nothing to judge (empty answer)
    DELETED = "deleted"  # the answer was deleted before it was judged
    MERGED = "merged"  # absorbed into an earlier answer of the same run


class PairSource(StrEnum):
    """Where a pair came from: the one list of sources; the groups below are what sampling, the budget, the alerts
    and the reports read."""

    CAPTURE = "capture"  # captured live in a watched channel
    COMMAND = "command"  # /judge
    SHORTCUT = "shortcut"  # the message shortcut
    BACKFILL = "backfill"  # `relmon backfill`: read from Slack's history
    IMPORT = "import"  # `relmon import`: read from a workspace export
    INGEST = "ingest"  # sent by the bot's side to the ingest API (POST /v1/exchanges): alerts like a capture


# Asked for by a person: always judged (no sampling), its budget counted at the bot (bot.on_demand_limits).
ON_DEMAND_SOURCES = frozenset({PairSource.COMMAND, PairSource.SHORTCUT})
HISTORY_SOURCES = frozenset({PairSource.BACKFILL, PairSource.IMPORT})  # read from history: never alerted on
# The bot's answers, as the reports (digest, App Home, /judge stats, topics, export) count them: an ingested exchange
# without a Slack channel is reported under its bot (store.bot_groups).
ANSWER_SOURCES = HISTORY_SOURCES | {PairSource.CAPTURE, PairSource.INGEST}
# Live answers: their low scores alert (workers.alerts.policy).
ALERTING_SOURCES = frozenset({PairSource.CAPTURE, PairSource.INGEST})


class Pair(Base):
    """A bot answer and the question it answers."""

    __tablename__ = "pairs"
    __table_args__ = (
        # One pair per captured answer: a Slack retry or an edit finds the same row.
        UniqueConstraint("channel_id", "answer_ts", name="uq_pairs_channel_answer"),
        Index("ix_pairs_created_at", "created_at"),
        Index("ix_pairs_channel_created", "channel_id", "created_at"),
    )

    id: Mapped[IdKey]
    source: Mapped[str] = mapped_column(String(20), default=PairSource.CAPTURE)  # a PairSource
    team_id: Mapped[str | None] = mapped_column(String(32))
    channel_id: Mapped[str | None] = mapped_column(String(32))
    # Private, or shared with another organisation (Slack Connect): its text is quoted only where a rule allows.
    channel_is_private: Mapped[bool] = mapped_column(Boolean, default=False)
    channel_is_ext_shared: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    answer_ts: Mapped[str | None] = mapped_column(String(32))  # ts of the first message of the answer
    thread_ts: Mapped[str | None] = mapped_column(String(32))
    question_ts: Mapped[str | None] = mapped_column(String(32))
    question_user: Mapped[str | None] = mapped_column(String(32))
    answer_bot_id: Mapped[str | None] = mapped_column(String(32))
    question_text: Mapped[str | None] = mapped_column(Text)
    answer_text: Mapped[str | None] = mapped_column(Text)
    # The answer's stream ended in `errored`: judged on what was shown, and the alert says so.
    stream_errored: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    reference_text: Mapped[str | None] = mapped_column(Text)
    # The conversation's earlier turns before the question (judges.context.format_turns), or None.
    context_text: Mapped[str | None] = mapped_column(Text)
    # Bumped on every edit; a settle task only acts when its version is still the latest.
    version: Mapped[int] = mapped_column(Integer, default=1)
    # Times an edit re-opened the answer after it was judged (at most RELMON_MAX_REJUDGE).
    rejudges: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    status: Mapped[str] = mapped_column(String(20), default=PairStatus.SETTLING)
    requested_by: Mapped[str | None] = mapped_column(String(32))  # user of /judge or the shortcut
    response_url: Mapped[str | None] = mapped_column(Text)  # where an on-demand verdict goes
    judges: Mapped[list | None] = mapped_column(JSON)  # judges to run; None: the channel's rules
    # The chance this answer had of being judged (workers.sampling): the reports weigh it by 1/this. NULL: 1.
    inclusion_probability: Mapped[float | None] = mapped_column(Float)
    # Whether its hashed point fell below the day's probability (workers.sampling.sample_point): the uniform
    # subsample, signalled or not, that the change and degradation alerts read. NULL: no sampling (every answer).
    uniform_sample: Mapped[bool | None] = mapped_column(Boolean)
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]


class JudgmentStatus:
    OK = "ok"
    NULL = "null"  # the judge says it cannot be scored (grounded: "no document")
    ERROR = "error"


class Judgment(Base):
    """One judge's verdict on one version of a pair's answer. Unique per (pair, judge, pair version): judging the
    same text again cannot add a row; an edited answer judged again adds one, which supersedes the older (the
    current judgment of a pair and judge is the one of its highest version, `store.judgments.is_current`)."""

    __tablename__ = "judgments"
    __table_args__ = (
        UniqueConstraint("pair_id", "judge", "pair_version", name="uq_judgments_pair_judge_version"),
        Index("ix_judgments_cache_key", "cache_key"),
        Index("ix_judgments_created_at", "created_at"),
    )

    id: Mapped[IdKey]
    pair_id: Mapped[int] = mapped_column(ForeignKey("pairs.id", ondelete="CASCADE"))
    judge: Mapped[str] = mapped_column(String(32))
    pair_version: Mapped[int] = mapped_column(Integer, default=1, server_default="1")  # Pair.version judged
    status: Mapped[str] = mapped_column(String(10))
    score: Mapped[float | None] = mapped_column(Float)
    max_score: Mapped[float | None] = mapped_column(Float)
    normalized_score: Mapped[float | None] = mapped_column(Float)
    reasoning: Mapped[str | None] = mapped_column(Text)
    model: Mapped[str | None] = mapped_column(String(200))
    # Token counts as the provider reported them; None: it did not say (no usage, no prompt_tokens_details).
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    # Of prompt_tokens, those the provider read from its prompt cache (billed at the cached-input rate).
    cached_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    latency_ms: Mapped[float] = mapped_column(Float, default=0.0)
    raw_output: Mapped[str | None] = mapped_column(Text)
    prompt_version: Mapped[str | None] = mapped_column(String(64))
    error: Mapped[str | None] = mapped_column(Text)
    cache_key: Mapped[str | None] = mapped_column(String(64))
    cached: Mapped[bool] = mapped_column(Boolean, default=False)  # reused from an earlier identical call
    # Judged through the provider's Batch API (billed at half price).
    batch: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[CreatedAt]
    # The second opinion on a low score, stored once: confirmed | disputed | unconfirmed (None: not asked).
    confirmation_status: Mapped[str | None] = mapped_column(String(12))
    confirmation_score: Mapped[float | None] = mapped_column(Float)
    confirmation_reasoning: Mapped[str | None] = mapped_column(Text)
    confirmation_model: Mapped[str | None] = mapped_column(String(200))
    confirmation_error: Mapped[str | None] = mapped_column(Text)


class ConfirmationStatus:
    CONFIRMED = "confirmed"  # the second opinion is low too: the alert stands
    DISPUTED = "disputed"  # the second opinion is not low: no alert
    UNCONFIRMED = "unconfirmed"  # no second opinion could be had (LLM down, budget spent): no alert


class CanaryRun(Base):
    """One re-judging of the labelled canary set: how well the judge agrees with people, and which model answered."""

    __tablename__ = "canary_runs"
    __table_args__ = (Index("ix_canary_runs_created_at", "created_at"),)

    id: Mapped[IdKey]
    judge: Mapped[str] = mapped_column(String(32))
    configured_model: Mapped[str | None] = mapped_column(String(200))  # RELMON_JUDGE_MODEL
    model: Mapped[str | None] = mapped_column(String(200))  # the model the API answered with
    prompt_version: Mapped[str | None] = mapped_column(String(64))
    examples: Mapped[int] = mapped_column(Integer, default=0)
    scored: Mapped[int] = mapped_column(Integer, default=0)
    exact_agreement: Mapped[float | None] = mapped_column(Float)
    kappa: Mapped[float | None] = mapped_column(Float)
    moved: Mapped[str | None] = mapped_column(String(200))  # why the judge moved (None: it did not)
    created_at: Mapped[CreatedAt]


class Alert(Base):
    """An alert, claimed here before it is posted: the unique key makes a second post impossible."""

    __tablename__ = "alerts"
    __table_args__ = (
        UniqueConstraint("dedupe_key", name="uq_alerts_dedupe_key"),
        Index("ix_alerts_channel_created", "source_channel_id", "created_at"),
        # The alert channel's hourly cap counts its low-score alerts from every source channel.
        Index("ix_alerts_alert_channel_created", "alert_channel_id", "created_at"),
        # A pair's alerts (its outcome's follow-up, the redraws): found by judgment, and a purged judgment's
        # cascade finds its alerts without a scan.
        Index("ix_alerts_judgment_id", "judgment_id"),
        # A channel's latest degradation alert, read after every judgment: one row of this index, however many
        # low-score alerts the channel had.
        Index("ix_alerts_channel_kind", "source_channel_id", "kind", "id"),
    )

    id: Mapped[IdKey]
    dedupe_key: Mapped[str] = mapped_column(String(200))
    kind: Mapped[str] = mapped_column(String(20))  # low_score | degradation | summary | budget
    judgment_id: Mapped[int | None] = mapped_column(ForeignKey("judgments.id", ondelete="CASCADE"))
    # A Slack channel, or a bot's key (store.bot_groups: "bot:" and a name of up to 80) for its degradation alerts.
    source_channel_id: Mapped[str | None] = mapped_column(String(100))
    alert_channel_id: Mapped[str | None] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(20), default="claimed")  # claimed | posted | held | failed
    message_ts: Mapped[str | None] = mapped_column(String(32))
    details: Mapped[dict | None] = mapped_column(JSON)
    created_at: Mapped[CreatedAt]
    posted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class Feedback(Base):
    """A person's vote on a judgment: one per person, changeable."""

    __tablename__ = "feedback"
    __table_args__ = (UniqueConstraint("judgment_id", "user_id", name="uq_feedback_judgment_user"),)

    id: Mapped[IdKey]
    judgment_id: Mapped[int] = mapped_column(ForeignKey("judgments.id", ondelete="CASCADE"))
    user_id: Mapped[str] = mapped_column(String(32))
    vote: Mapped[str] = mapped_column(String(10))  # right | wrong
    created_at: Mapped[CreatedAt]
    updated_at: Mapped[UpdatedAt]


class Digest(Base):
    """One row per digest period (ISO week); forced digests get a key of their own."""

    __tablename__ = "digests"
    __table_args__ = (UniqueConstraint("period_key", name="uq_digests_period_key"),)

    id: Mapped[IdKey]
    period_key: Mapped[str] = mapped_column(String(64))  # e.g. 2026-W48, or 2026-W48+force-<ts>
    channel_id: Mapped[str | None] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(20), default="claimed")  # claimed | sent | failed
    message_ts: Mapped[str | None] = mapped_column(String(32))
    created_at: Mapped[CreatedAt]
    sent_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class DailyUsage(Base):
    """LLM calls made per UTC day, incremented atomically to enforce the daily budget."""

    __tablename__ = "daily_usage"

    day: Mapped[date] = mapped_column(Date, primary_key=True)
    llm_calls: Mapped[int] = mapped_column(Integer, default=0)
    budget_notice_sent: Mapped[bool] = mapped_column(Boolean, default=False)


class BudgetCharge(Base):
    """The budget unit spent on one (pair, judge): the daily budget counts judgments, so a retry or a redelivery
    of the same judgment finds its row and charges nothing more."""

    __tablename__ = "budget_charges"

    pair_id: Mapped[int] = mapped_column(IdType, ForeignKey("pairs.id", ondelete="CASCADE"), primary_key=True)
    judge: Mapped[str] = mapped_column(String(32), primary_key=True)
    day: Mapped[date] = mapped_column(Date)


class JudgingFailure(Base):
    """judge_pair runs of a pair that failed with an error other than the LLM's (a bug): after a few, the stale
    sweeper stores the pair's judgments as errors instead of re-enqueuing it forever."""

    __tablename__ = "judging_failures"

    pair_id: Mapped[int] = mapped_column(IdType, ForeignKey("pairs.id", ondelete="CASCADE"), primary_key=True)
    failures: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class BackfillCheckpoint(Base):
    """How far `relmon backfill` has read one channel's history, newest first: an interrupted run resumes at
    `resume_ts` (inclusive) within [oldest_ts, latest_ts]."""

    __tablename__ = "backfill_checkpoints"

    channel_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    oldest_ts: Mapped[str] = mapped_column(String(32))
    latest_ts: Mapped[str] = mapped_column(String(32))
    resume_ts: Mapped[str | None] = mapped_column(String(32))  # None: start at latest_ts
    done: Mapped[bool] = mapped_column(Boolean, default=False)
    messages_read: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[UpdatedAt]


class OutcomeWindow(Base):
    """The watch over one answer's conversation (capture.outcomes): open until `closes_at`, closed once."""

    __tablename__ = "outcome_windows"
    __table_args__ = (Index("ix_outcome_windows_open", "closed_at", "closes_at"),)

    pair_id: Mapped[int] = mapped_column(IdType, ForeignKey("pairs.id", ondelete="CASCADE"), primary_key=True)
    channel_id: Mapped[str] = mapped_column(String(32))
    answer_ts: Mapped[str] = mapped_column(String(32))
    thread_key: Mapped[str] = mapped_column(String(32))
    asker: Mapped[str | None] = mapped_column(String(32))
    closes_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    closed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class OutcomeSignal(Base):
    """One outcome signal of a pair, named as in `capture.outcomes` (reask, human_takeover, thanked, ...), recorded
    once: a redelivered event or a retried task finds the row."""

    __tablename__ = "outcome_signals"
    __table_args__ = (UniqueConstraint("pair_id", "name", name="uq_outcome_signals_pair_name"),)

    id: Mapped[IdKey]
    pair_id: Mapped[int] = mapped_column(ForeignKey("pairs.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(32))
    # Seconds after the answer the signal came (the message's or reaction's time), for "asked again 2 min later".
    after_seconds: Mapped[float | None] = mapped_column(Float)
    created_at: Mapped[CreatedAt]


class ChannelName(Base):
    """A channel's name as relmon last learnt it (an export's channels.json, Slack's conversations.info): what
    the reports for people show instead of its ID (`store.channel_names`)."""

    __tablename__ = "channel_names"

    channel_id: Mapped[str] = mapped_column(String(32), primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    source: Mapped[str] = mapped_column(String(16))  # export | slack: where the name was read
    updated_at: Mapped[UpdatedAt]


# The golden set's, regress runs' and topics' tables live in modules of their own (on `store.model_base`); imported
# here, after this module's tables (their order in Base.metadata is kept), so that Base.metadata (Alembic's target,
# the tests' clean-up) always holds every table.
from store import exchange_models, golden_models, rule_override_models, topic_models  # noqa: E402, F401
