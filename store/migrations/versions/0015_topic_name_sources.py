"""topics: the private channels each name was made from; run notes that quoted a provider's error rewritten"""

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"

# The notes an earlier run stored with the provider's own error text (which may echo the questions it was sent),
# and the fixed text each becomes (topics.failures): the kind is not known any more.
_REWRITTEN = (
    ("Grouped with the local embedding (", "the embeddings endpoint failed (", "embeddings endpoint error (unknown)"),
    ("Some topics are named by their keywords:", "the LLM failed (", "LLM error (unknown)"),
)


def _rewritten(note: str) -> str:
    for opening, failed, fixed in _REWRITTEN:
        if note.startswith(opening) and failed in note:
            return note[: note.index(failed)] + fixed + "."
    return note


def upgrade() -> None:
    # NULL: named before the rule, from questions nobody recorded: no place shows it until a run names it again.
    op.add_column("topics", sa.Column("name_sources", sa.JSON(), nullable=True))
    op.add_column("topic_periods", sa.Column("name_sources", sa.JSON(), nullable=True))
    runs = sa.table("topic_runs", sa.column("id", sa.Integer()), sa.column("notes", sa.JSON()))
    connection = op.get_bind()
    for run_id, notes in connection.execute(sa.select(runs.c.id, runs.c.notes)).all():
        fixed = [_rewritten(str(note)) for note in notes or []]
        if fixed != list(notes or []):
            connection.execute(sa.update(runs).where(runs.c.id == run_id).values(notes=fixed))


def downgrade() -> None:
    with op.batch_alter_table("topic_periods") as batch:
        batch.drop_column("name_sources")
    with op.batch_alter_table("topics") as batch:
        batch.drop_column("name_sources")
