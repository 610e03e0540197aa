"""judgments: the prompt tokens the provider read from its prompt cache"""

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"


def upgrade() -> None:
    # Judgments stored before it was recorded count as uncached.
    op.add_column("judgments", sa.Column("cached_tokens", sa.Integer(), nullable=False, server_default="0"))


def downgrade() -> None:
    with op.batch_alter_table("judgments") as batch:
        batch.drop_column("cached_tokens")
