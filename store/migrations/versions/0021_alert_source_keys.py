"""alerts.source_channel_id holds a bot's key too (store.bot_groups): its degradation alerts (#45, otlpbatch)"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"


def upgrade() -> None:
    with op.batch_alter_table("alerts") as batch:
        batch.alter_column(
            "source_channel_id", type_=sa.String(100), existing_type=sa.String(32), existing_nullable=True
        )


def downgrade() -> None:
    with op.batch_alter_table("alerts") as batch:
        batch.alter_column(
            "source_channel_id", type_=sa.String(32), existing_type=sa.String(100), existing_nullable=True
        )
