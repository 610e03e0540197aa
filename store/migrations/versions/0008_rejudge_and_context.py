"""an edited answer is judged again: judgments per pair version; pairs keep their re-judgments and earlier turns"""

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"


def upgrade() -> None:
    with op.batch_alter_table("pairs") as batch:
        batch.add_column(sa.Column("context_text", sa.Text(), nullable=True))
        batch.add_column(sa.Column("rejudges", sa.Integer(), nullable=False, server_default="0"))
    with op.batch_alter_table("judgments") as batch:
        batch.add_column(sa.Column("pair_version", sa.Integer(), nullable=False, server_default="1"))
    # The judgments stored so far are of their pair's current text.
    op.execute(
        "UPDATE judgments SET pair_version = (SELECT pairs.version FROM pairs WHERE pairs.id = judgments.pair_id)"
        " WHERE EXISTS (SELECT 1 FROM pairs WHERE pairs.id = judgments.pair_id)"
    )
    with op.batch_alter_table("judgments") as batch:
        batch.drop_constraint("uq_judgments_pair_judge", type_="unique")
        batch.create_unique_constraint("uq_judgments_pair_judge_version", ["pair_id", "judge", "pair_version"])


def downgrade() -> None:
    # Only the current judgment of each pair and judge fits the older key.
    op.execute(
        "DELETE FROM judgments WHERE EXISTS (SELECT 1 FROM judgments AS newer WHERE newer.pair_id = judgments.pair_id"
        " AND newer.judge = judgments.judge AND newer.pair_version > judgments.pair_version)"
    )
    with op.batch_alter_table("judgments") as batch:
        batch.drop_constraint("uq_judgments_pair_judge_version", type_="unique")
        batch.create_unique_constraint("uq_judgments_pair_judge", ["pair_id", "judge"])
        batch.drop_column("pair_version")
    with op.batch_alter_table("pairs") as batch:
        batch.drop_column("rejudges")
        batch.drop_column("context_text")
