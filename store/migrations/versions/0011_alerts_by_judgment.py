"""alerts by judgment: the alerts about a pair's judgments are found on an index, not by a scan of every alert"""

from alembic import op

revision = "0011"
down_revision = "0010"


def upgrade() -> None:
    op.create_index("ix_alerts_judgment_id", "alerts", ["judgment_id"])


def downgrade() -> None:
    op.drop_index("ix_alerts_judgment_id", table_name="alerts")
