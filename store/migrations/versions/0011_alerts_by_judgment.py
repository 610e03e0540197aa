"""alerts by judgment and by kind: a pair's alerts and a channel's latest degradation alert are found on an index,
not by reading every alert (of the table, or of the channel)"""

from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.create_index("ix_alerts_judgment_id", "alerts", ["judgment_id"])
    op.create_index("ix_alerts_channel_kind", "alerts", ["source_channel_id", "kind", "id"])


def downgrade() -> None:
    op.drop_index("ix_alerts_channel_kind", table_name="alerts")
    op.drop_index("ix_alerts_judgment_id", table_name="alerts")
