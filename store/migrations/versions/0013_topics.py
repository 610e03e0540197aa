"""topics: question embeddings, topics and their runs, each pair's topic, the topics' LLM spend"""

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _created() -> sa.Column:
    return sa.Column("created_at", sa.DateTime(timezone=True), nullable=False)


def upgrade() -> None:
    op.create_table(
        "question_embeddings",
        sa.Column("pair_id", _ID, sa.ForeignKey("pairs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("text_sha", sa.String(64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        _created(),
    )
    op.create_table(
        "topics",
        sa.Column("key", sa.String(40), primary_key=True),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("named_by", sa.String(16), nullable=False),
        sa.Column("anchors", sa.JSON(), nullable=False),
        _created(),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "topic_runs",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("run_key", sa.String(100), nullable=False),
        sa.Column("start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("end", sa.DateTime(timezone=True), nullable=False),
        sa.Column("questions", sa.Integer(), nullable=False),
        sa.Column("left_out", sa.Integer(), nullable=False),
        sa.Column("embedding", sa.String(200), nullable=False),
        sa.Column("notes", sa.JSON(), nullable=False),
        _created(),
        sa.UniqueConstraint("run_key", name="uq_topic_runs_run_key"),
    )
    op.create_table(
        "topic_periods",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", _ID, sa.ForeignKey("topic_runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("topic_key", sa.String(40), nullable=False),
        sa.Column("rank", sa.Integer(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        *(sa.Column(name, sa.Integer(), nullable=False) for name in ("questions", "failed", "resolved", "decided")),
        sa.Column("mean_relevancy", sa.Float(), nullable=True),
        sa.Column("previous_questions", sa.Integer(), nullable=True),
        sa.Column("previous_failed", sa.Integer(), nullable=True),
        sa.Column("channels", sa.JSON(), nullable=False),
        sa.Column("private_channels", sa.JSON(), nullable=False),
        sa.Column("only_private", sa.Boolean(), nullable=False),
        sa.Column("examples", sa.JSON(), nullable=False),
        sa.UniqueConstraint("run_id", "topic_key", name="uq_topic_periods_run_topic"),
    )
    op.create_index("ix_topic_periods_topic_key", "topic_periods", ["topic_key"])
    op.create_table(
        "pair_topics",
        sa.Column("pair_id", _ID, sa.ForeignKey("pairs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("topic_key", sa.String(40), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_table(
        "topic_spend",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("model", sa.String(200), nullable=False),
        *(
            sa.Column(name, sa.Integer(), nullable=False)
            for name in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens")
        ),
        _created(),
    )
    op.create_index("ix_topic_spend_created_at", "topic_spend", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_topic_spend_created_at", table_name="topic_spend")
    op.drop_table("topic_spend")
    op.drop_table("pair_topics")
    op.drop_index("ix_topic_periods_topic_key", table_name="topic_periods")
    op.drop_table("topic_periods")
    op.drop_table("topic_runs")
    op.drop_table("topics")
    op.drop_table("question_embeddings")
