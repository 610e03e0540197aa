"""rule_overrides: a channel's or a bot's rule as changed in Slack with `/judge config`, layered over the rules
file (store.rule_overrides)"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"


def upgrade() -> None:
    op.create_table(
        "rule_overrides",
        sa.Column("scope", sa.String(100), primary_key=True),
        sa.Column("rule_values", sa.JSON(), nullable=False),
        sa.Column("updated_by", sa.String(32), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("rule_overrides")
