"""budget charges per (pair, judge); failed judging runs per pair"""

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "budget_charges",
        sa.Column("pair_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("judge", sa.String(length=32), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.ForeignKeyConstraint(["pair_id"], ["pairs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pair_id", "judge"),
    )
    op.create_table(
        "judging_failures",
        sa.Column("pair_id", sa.BigInteger().with_variant(sa.Integer(), "sqlite"), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["pair_id"], ["pairs.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("pair_id"),
    )


def downgrade() -> None:
    op.drop_table("judging_failures")
    op.drop_table("budget_charges")
