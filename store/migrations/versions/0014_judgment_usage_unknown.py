"""judgments: token counts the provider did not report are unknown (NULL), not 0"""

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"

_COUNTS = ("prompt_tokens", "cached_tokens", "completion_tokens")


def upgrade() -> None:
    # Rows stored before keep their 0s: whether a 0 was said or assumed cannot be told apart any more.
    with op.batch_alter_table("judgments") as batch:
        for name in _COUNTS:
            batch.alter_column(name, existing_type=sa.Integer(), nullable=True, server_default=None)


def downgrade() -> None:
    for name in _COUNTS:
        op.execute(sa.text(f"UPDATE judgments SET {name} = 0 WHERE {name} IS NULL"))
    with op.batch_alter_table("judgments") as batch:
        for name in _COUNTS:
            default = "0" if name == "cached_tokens" else None
            batch.alter_column(name, existing_type=sa.Integer(), nullable=False, server_default=default)
