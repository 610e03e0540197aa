"""topics: each topic's questions per resolution tier (resolution, #47)"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"


def upgrade() -> None:
    # NULL: a run stored before the tiers; its topics show their single resolved share as they did.
    op.add_column("topic_periods", sa.Column("tiers", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("topic_periods") as batch:
        batch.drop_column("tiers")
