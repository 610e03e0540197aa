"""the golden set (items and the messages they come from) and `relmon regress` runs with their stored checks"""

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    op.create_table(
        "golden_items",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("dedupe_key", sa.String(64), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=True),
        sa.Column("expected", sa.Text(), nullable=True),
        sa.Column("bot_answer", sa.Text(), nullable=True),
        sa.Column("topic", sa.String(200), nullable=True),
        sa.Column("channel_id", sa.String(32), nullable=True),
        sa.Column("channel_is_private", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("permalink", sa.Text(), nullable=True),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("times", sa.Integer(), nullable=False, server_default="1"),
        sa.Column("expected_edited", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("edited_by", sa.String(32), nullable=True),
        sa.Column("external_id", sa.String(200), nullable=True),
        sa.Column("removed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("removed_by", sa.String(32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("dedupe_key", name="uq_golden_items_dedupe_key"),
    )
    op.create_index("ix_golden_items_created_at", "golden_items", ["created_at"])
    op.create_table(
        "golden_sources",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("item_id", _ID, sa.ForeignKey("golden_items.id", ondelete="CASCADE"), nullable=False),
        sa.Column("message_key", sa.String(80), nullable=False),
        sa.Column("channel_id", sa.String(32), nullable=True),
        sa.Column("question_ts", sa.String(32), nullable=True),
        sa.Column("answer_ts", sa.String(32), nullable=True),
        sa.Column("reference_ts", sa.String(32), nullable=True),
        sa.Column("pair_id", _ID, nullable=True),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("context", sa.Text(), nullable=True),
        sa.Column("bot_answer", sa.Text(), nullable=True),
        sa.Column("expected", sa.Text(), nullable=True),
        sa.Column("permalink", sa.Text(), nullable=True),
        sa.Column("topic", sa.String(200), nullable=True),
        sa.Column("channel_is_private", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("origin", sa.String(16), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("message_key", name="uq_golden_sources_message_key"),
    )
    op.create_index("ix_golden_sources_item", "golden_sources", ["item_id"])
    op.create_index("ix_golden_sources_channel", "golden_sources", ["channel_id"])
    op.create_table(
        "regress_runs",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("input_sha", sa.String(64), nullable=False),
        sa.Column("source_name", sa.Text(), nullable=True),
        sa.Column("items", sa.Integer(), nullable=False),
        sa.Column("passed", sa.Integer(), nullable=True),
        sa.Column("pass_rate", sa.Float(), nullable=True),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
    )
    op.create_index("ix_regress_runs_input", "regress_runs", ["input_sha", "finished_at"])
    op.create_table(
        "regress_checks",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("run_id", _ID, sa.ForeignKey("regress_runs.id", ondelete="CASCADE"), nullable=False),
        sa.Column("item_key", sa.String(64), nullable=False),
        sa.Column("check_name", sa.String(32), nullable=False),
        sa.Column("charged", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("verdict", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("run_id", "item_key", "check_name", name="uq_regress_checks_run_item_check"),
    )


def downgrade() -> None:
    op.drop_table("regress_checks")
    op.drop_index("ix_regress_runs_input", table_name="regress_runs")
    op.drop_table("regress_runs")
    op.drop_index("ix_golden_sources_channel", table_name="golden_sources")
    op.drop_index("ix_golden_sources_item", table_name="golden_sources")
    op.drop_table("golden_sources")
    op.drop_index("ix_golden_items_created_at", table_name="golden_items")
    op.drop_table("golden_items")
