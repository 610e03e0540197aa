"""hour summaries keyed by alert channel: rows under the per-source key take the per-alert-channel key

A summary was once one per source channel and hour (`summary:<source channel>:<hour>`); it is one per alert
channel and hour (`summary:<alert channel>:<hour>`, `workers.alerts.policy.summary_key`). For each alert
channel-hour without a row under the new key, the newest posted old-style row takes it (and no source channel),
so the hour's summary updates that message instead of posting a second one that repeats its scores.
"""

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"

alerts = sa.table(
    "alerts",
    sa.column("id", sa.Integer),
    sa.column("dedupe_key", sa.String),
    sa.column("kind", sa.String),
    sa.column("source_channel_id", sa.String),
    sa.column("alert_channel_id", sa.String),
    sa.column("status", sa.String),
    sa.column("message_ts", sa.String),
)


def upgrade() -> None:
    connection = op.get_bind()
    old_style = connection.execute(
        sa.select(alerts.c.id, alerts.c.dedupe_key, alerts.c.alert_channel_id)
        .where(
            alerts.c.kind == "summary",
            alerts.c.source_channel_id.is_not(None),
            alerts.c.alert_channel_id.is_not(None),
            alerts.c.status == "posted",
            alerts.c.message_ts.is_not(None),
        )
        .order_by(alerts.c.id.desc())  # the newest first: it takes the key
    ).all()
    taken = set(
        connection.execute(
            sa.select(alerts.c.dedupe_key).where(alerts.c.kind == "summary", alerts.c.source_channel_id.is_(None))
        ).scalars()
    )
    for row_id, dedupe_key, alert_channel in old_style:
        hour = dedupe_key.rsplit(":", 1)[-1]  # the UTC hour, 2026112714
        key = f"summary:{alert_channel}:{hour}"
        if key in taken:
            continue
        taken.add(key)
        connection.execute(
            sa.update(alerts).where(alerts.c.id == row_id).values(dedupe_key=key, source_channel_id=None)
        )


def downgrade() -> None:
    # The old keys named the source channel, which a per-alert-channel summary does not keep: the rows stay.
    pass
