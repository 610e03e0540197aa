"""outcome signals: the watch over each answer's conversation and the signals it gave"""

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "outcome_windows",
        sa.Column("pair_id", _ID, sa.ForeignKey("pairs.id", ondelete="CASCADE"), primary_key=True),
        sa.Column("channel_id", sa.String(32), nullable=False),
        sa.Column("answer_ts", sa.String(32), nullable=False),
        sa.Column("thread_key", sa.String(32), nullable=False),
        sa.Column("asker", sa.String(32), nullable=True),
        sa.Column("closes_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_outcome_windows_open", "outcome_windows", ["closed_at", "closes_at"])
    op.create_table(
        "outcome_signals",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("pair_id", _ID, sa.ForeignKey("pairs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("name", sa.String(32), nullable=False),
        sa.Column("after_seconds", sa.Float(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("pair_id", "name", name="uq_outcome_signals_pair_name"),
    )


def downgrade() -> None:
    op.drop_table("outcome_signals")
    op.drop_index("ix_outcome_windows_open", table_name="outcome_windows")
    op.drop_table("outcome_windows")
