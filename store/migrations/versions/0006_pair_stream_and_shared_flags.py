"""pairs record whether the answer's stream errored and whether the channel is shared with another organisation"""

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"


def upgrade() -> None:
    with op.batch_alter_table("pairs") as batch:
        batch.add_column(sa.Column("channel_is_ext_shared", sa.Boolean(), nullable=False, server_default=sa.false()))
        batch.add_column(sa.Column("stream_errored", sa.Boolean(), nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("pairs") as batch:
        batch.drop_column("stream_errored")
        batch.drop_column("channel_is_ext_shared")
