"""exchanges: what the ingest API received of each exchange besides its pair (#45)"""

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "exchanges",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("client_id", sa.String(200), nullable=False),
        sa.Column("bot", sa.String(80), nullable=False),
        sa.Column("conversation_id", sa.String(200), nullable=False),
        sa.Column("turn", sa.Integer(), nullable=False),
        sa.Column("visibility", sa.String(10), nullable=False),
        sa.Column("asker", sa.String(32), nullable=True),
        sa.Column("documents", sa.JSON(), nullable=True),
        sa.Column("bot_version", sa.String(100), nullable=True),
        sa.Column("asked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("answered_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pair_id", _ID, sa.ForeignKey("pairs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("bot", "client_id", name="uq_exchanges_bot_client_id"),
    )
    op.create_index("ix_exchanges_pair", "exchanges", ["pair_id"])


def downgrade() -> None:
    op.drop_index("ix_exchanges_pair", table_name="exchanges")
    op.drop_table("exchanges")
