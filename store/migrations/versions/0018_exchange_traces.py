"""exchanges.trace_id, span_id: the bot's own trace of an ingested exchange, where its verdicts are sent (#45)"""

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"


def upgrade() -> None:
    with op.batch_alter_table("exchanges") as batch:
        batch.add_column(sa.Column("trace_id", sa.String(32), nullable=True))
        batch.add_column(sa.Column("span_id", sa.String(16), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("exchanges") as batch:
        batch.drop_column("span_id")
        batch.drop_column("trace_id")
