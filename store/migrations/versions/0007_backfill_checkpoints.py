"""backfill checkpoints per channel; judgments record whether they went through the Batch API"""

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"


def upgrade() -> None:
    op.create_table(
        "backfill_checkpoints",
        sa.Column("channel_id", sa.String(32), primary_key=True),
        sa.Column("oldest_ts", sa.String(32), nullable=False),
        sa.Column("latest_ts", sa.String(32), nullable=False),
        sa.Column("resume_ts", sa.String(32), nullable=True),
        sa.Column("done", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("messages_read", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )
    with op.batch_alter_table("judgments") as batch:
        batch.add_column(sa.Column("batch", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("judgments") as batch:
        batch.drop_column("batch")
    op.drop_table("backfill_checkpoints")
