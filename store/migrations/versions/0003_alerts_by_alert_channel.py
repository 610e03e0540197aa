"""index alerts by alert channel and time, for the alert channel's hourly cap"""

from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    op.create_index("ix_alerts_alert_channel_created", "alerts", ["alert_channel_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_alerts_alert_channel_created", table_name="alerts")
