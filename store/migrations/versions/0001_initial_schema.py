"""initial schema"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _id() -> sa.Column:
    return sa.Column("id", _ID, autoincrement=True, nullable=False)


def _create_table_with_id(name: str, *items: sa.Column | sa.Constraint) -> None:
    """A table whose primary key is an autoincrementing `id`, its first column."""
    op.create_table(name, _id(), *items, sa.PrimaryKeyConstraint("id"))


def _ref(name: str, nullable: bool = False) -> sa.Column:
    """A column holding another table's id."""
    return sa.Column(name, _ID, nullable=nullable)


def _ts(name: str, nullable: bool = False) -> sa.Column:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _str(name: str, length: int, nullable: bool = True) -> sa.Column:
    return sa.Column(name, sa.String(length=length), nullable=nullable)


def _text(name: str) -> sa.Column:
    return sa.Column(name, sa.Text(), nullable=True)


def upgrade() -> None:
    op.create_table(
        "daily_usage",
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("llm_calls", sa.Integer(), nullable=False),
        sa.Column("budget_notice_sent", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("day"),
    )
    _create_table_with_id(
        "digests",
        _str("period_key", 64, nullable=False),
        _str("channel_id", 32),
        _str("status", 20, nullable=False),
        _str("message_ts", 32),
        _ts("created_at"),
        _ts("sent_at", nullable=True),
        sa.UniqueConstraint("period_key", name="uq_digests_period_key"),
    )
    _create_table_with_id(
        "pairs",
        _str("source", 20, nullable=False),
        _str("team_id", 32),
        _str("channel_id", 32),
        sa.Column("channel_is_private", sa.Boolean(), nullable=False),
        _str("answer_ts", 32),
        _str("thread_ts", 32),
        _str("question_ts", 32),
        _str("question_user", 32),
        _str("answer_bot_id", 32),
        _text("question_text"),
        _text("answer_text"),
        _text("reference_text"),
        sa.Column("version", sa.Integer(), nullable=False),
        _str("status", 20, nullable=False),
        _str("requested_by", 32),
        _text("response_url"),
        sa.Column("judges", sa.JSON(), nullable=True),
        _ts("created_at"),
        _ts("updated_at"),
        sa.UniqueConstraint("channel_id", "answer_ts", name="uq_pairs_channel_answer"),
    )
    with op.batch_alter_table("pairs", schema=None) as batch_op:
        batch_op.create_index("ix_pairs_channel_created", ["channel_id", "created_at"], unique=False)
        batch_op.create_index("ix_pairs_created_at", ["created_at"], unique=False)

    _create_table_with_id(
        "judgments",
        _ref("pair_id"),
        _str("judge", 32, nullable=False),
        _str("status", 10, nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("max_score", sa.Float(), nullable=True),
        sa.Column("normalized_score", sa.Float(), nullable=True),
        _text("reasoning"),
        _str("model", 200),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        _text("raw_output"),
        _str("prompt_version", 64),
        _text("error"),
        _str("cache_key", 64),
        sa.Column("cached", sa.Boolean(), nullable=False),
        _ts("created_at"),
        sa.ForeignKeyConstraint(["pair_id"], ["pairs.id"], ondelete="CASCADE"),
        sa.UniqueConstraint("pair_id", "judge", name="uq_judgments_pair_judge"),
    )
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.create_index("ix_judgments_cache_key", ["cache_key"], unique=False)
        batch_op.create_index("ix_judgments_created_at", ["created_at"], unique=False)

    _create_table_with_id(
        "alerts",
        _str("dedupe_key", 200, nullable=False),
        _str("kind", 20, nullable=False),
        _ref("judgment_id", nullable=True),
        _str("source_channel_id", 32),
        _str("alert_channel_id", 32),
        _str("status", 20, nullable=False),
        _str("message_ts", 32),
        sa.Column("details", sa.JSON(), nullable=True),
        _ts("created_at"),
        _ts("posted_at", nullable=True),
        sa.ForeignKeyConstraint(["judgment_id"], ["judgments.id"], ondelete="CASCADE"),
        sa.UniqueConstraint("dedupe_key", name="uq_alerts_dedupe_key"),
    )
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.create_index("ix_alerts_channel_created", ["source_channel_id", "created_at"], unique=False)

    _create_table_with_id(
        "feedback",
        _ref("judgment_id"),
        _str("user_id", 32, nullable=False),
        _str("vote", 10, nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.ForeignKeyConstraint(["judgment_id"], ["judgments.id"], ondelete="CASCADE"),
        sa.UniqueConstraint("judgment_id", "user_id", name="uq_feedback_judgment_user"),
    )


def downgrade() -> None:
    op.drop_table("feedback")
    with op.batch_alter_table("alerts", schema=None) as batch_op:
        batch_op.drop_index("ix_alerts_channel_created")

    op.drop_table("alerts")
    with op.batch_alter_table("judgments", schema=None) as batch_op:
        batch_op.drop_index("ix_judgments_created_at")
        batch_op.drop_index("ix_judgments_cache_key")

    op.drop_table("judgments")
    with op.batch_alter_table("pairs", schema=None) as batch_op:
        batch_op.drop_index("ix_pairs_created_at")
        batch_op.drop_index("ix_pairs_channel_created")

    op.drop_table("pairs")
    op.drop_table("digests")
    op.drop_table("daily_usage")
