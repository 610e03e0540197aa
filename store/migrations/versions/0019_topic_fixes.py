"""topic_fixes: a topic marked fixed, followed until its verdict (#47)"""

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "topic_fixes",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("topic_key", sa.String(40), nullable=False),
        sa.Column("marked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("marked_by", sa.String(32), nullable=False),
        sa.Column("channel_id", sa.String(32), nullable=True),
        sa.Column("message_ts", sa.String(32), nullable=True),
        sa.Column("verdict", sa.String(16), nullable=True),
        sa.Column("verdict_key", sa.String(100), nullable=True),
        sa.Column("reply_ts", sa.String(32), nullable=True),
        sa.Column("regress_run_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_topic_fixes_topic_key", "topic_fixes", ["topic_key"])


def downgrade() -> None:
    op.drop_index("ix_topic_fixes_topic_key", table_name="topic_fixes")
    op.drop_table("topic_fixes")
