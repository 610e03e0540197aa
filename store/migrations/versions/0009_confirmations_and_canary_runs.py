"""judgments keep the second opinion that confirms a low score; canary runs of the labelled set"""

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"


def upgrade() -> None:
    with op.batch_alter_table("judgments") as batch:
        batch.add_column(sa.Column("confirmation_status", sa.String(12), nullable=True))
        batch.add_column(sa.Column("confirmation_score", sa.Float(), nullable=True))
        batch.add_column(sa.Column("confirmation_reasoning", sa.Text(), nullable=True))
        batch.add_column(sa.Column("confirmation_model", sa.String(200), nullable=True))
        batch.add_column(sa.Column("confirmation_error", sa.Text(), nullable=True))
    id_type = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
    op.create_table(
        "canary_runs",
        sa.Column("id", id_type, primary_key=True, autoincrement=True),
        sa.Column("judge", sa.String(32), nullable=False),
        sa.Column("configured_model", sa.String(200), nullable=True),
        sa.Column("model", sa.String(200), nullable=True),
        sa.Column("prompt_version", sa.String(64), nullable=True),
        sa.Column("examples", sa.Integer(), nullable=False),
        sa.Column("scored", sa.Integer(), nullable=False),
        sa.Column("exact_agreement", sa.Float(), nullable=True),
        sa.Column("kappa", sa.Float(), nullable=True),
        sa.Column("moved", sa.String(200), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    )
    op.create_index("ix_canary_runs_created_at", "canary_runs", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_canary_runs_created_at", table_name="canary_runs")
    op.drop_table("canary_runs")
    with op.batch_alter_table("judgments") as batch:
        for column in (
            "confirmation_error",
            "confirmation_model",
            "confirmation_reasoning",
            "confirmation_score",
            "confirmation_status",
        ):
            batch.drop_column(column)
