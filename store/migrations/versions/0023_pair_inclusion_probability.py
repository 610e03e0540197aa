"""pairs.inclusion_probability: the chance a judged answer had of being judged (sampling, RELMON_SAMPLE), for the
reports' weights; NULL: judged for certain (every answer before sampling was recorded, or one whose conversation
signalled a failure)"""

import sqlalchemy as sa
from alembic import op

revision = "0023"
down_revision = "0022"


def upgrade() -> None:
    op.add_column("pairs", sa.Column("inclusion_probability", sa.Float(), nullable=True))


def downgrade() -> None:
    op.drop_column("pairs", "inclusion_probability")
