"""Sampling's other reports (RELMON_SAMPLE): topic_periods.rate_weights and previous_rate_weights, the sums a topic's
weighted failure rate needs (NULL: a plain share), and pairs.uniform_sample, whether the answer's hashed point fell
below the day's probability (the uniform subsample the change and degradation alerts read; NULL: not sampled)"""

import sqlalchemy as sa
from alembic import op

revision = "0024"
down_revision = "0023"


def upgrade() -> None:
    op.add_column("topic_periods", sa.Column("rate_weights", sa.JSON(), nullable=True))
    op.add_column("topic_periods", sa.Column("previous_rate_weights", sa.JSON(), nullable=True))
    op.add_column("pairs", sa.Column("uniform_sample", sa.Boolean(), nullable=True))


def downgrade() -> None:
    op.drop_column("pairs", "uniform_sample")
    op.drop_column("topic_periods", "previous_rate_weights")
    op.drop_column("topic_periods", "rate_weights")
