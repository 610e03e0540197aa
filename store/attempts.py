"""Failed judging runs per pair: a judge_pair task that raises (a bug, not an LLM error) leaves its pair pending
for the stale sweeper; counting the failures lets the sweeper stop after a few and store the pair as an error."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from store.judgments import Executor, dialect_name
from store.models import JudgingFailure

ERROR_CHARS = 500  # enough to name the exception; never the texts (tasks carry IDs only)


def record_failure(session: Executor, pair_id: int, error: str, now: datetime | None = None) -> None:
    """Count one failed run of the pair's judging task (one atomic upsert: concurrent workers add up)."""
    insert = postgresql.insert if dialect_name(session) == "postgresql" else sqlite.insert
    values = {
        "pair_id": pair_id,
        "failures": 1,
        "last_error": error[:ERROR_CHARS],
        "updated_at": now or datetime.now(UTC),
    }
    statement = insert(JudgingFailure).values(**values)
    statement = statement.on_conflict_do_update(
        index_elements=["pair_id"],
        set_={
            "failures": JudgingFailure.failures + 1,
            "last_error": statement.excluded.last_error,
            "updated_at": statement.excluded.updated_at,
        },
    )
    session.execute(statement)


def failures_of(session: Executor, pair_ids: list[int]) -> dict[int, tuple[int, str | None]]:
    """Pair id -> (failed runs, the last error), for the pairs that failed at least once."""
    if not pair_ids:
        return {}
    rows = session.execute(
        select(JudgingFailure.pair_id, JudgingFailure.failures, JudgingFailure.last_error).where(
            JudgingFailure.pair_id.in_(pair_ids)
        )
    )
    return {pair_id: (failures, last_error) for pair_id, failures, last_error in rows}
