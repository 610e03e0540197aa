"""Failed judging runs per pair: a judge_pair task that raises (a bug, not an LLM error nor an outage of the
database or Redis) leaves its pair pending for the stale sweeper; counting the failures, and when the last one
happened, lets the sweeper stop after a few and store the pair as an error once no run can still be going."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import NamedTuple

from sqlalchemy import select

from store.db import dialect_insert
from store.judgments import Executor
from store.models import JudgingFailure, as_utc

ERROR_CHARS = 500  # enough to name the exception; never the texts (tasks carry IDs only)


def record_failure(session: Executor, pair_id: int, error: str, now: datetime | None = None) -> None:
    """Count one failed run of the pair's judging task (one atomic upsert: concurrent workers add up)."""
    insert = dialect_insert(session)
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


class Failures(NamedTuple):
    """A pair's failed judging runs: how many, the last error, and when it was counted (UTC)."""

    count: int
    last_error: str | None
    last_failed_at: datetime | None


def failures_of(session: Executor, pair_ids: list[int]) -> dict[int, Failures]:
    """Pair id -> its Failures, for the pairs that failed at least once."""
    if not pair_ids:
        return {}
    rows = session.execute(
        select(
            JudgingFailure.pair_id, JudgingFailure.failures, JudgingFailure.last_error, JudgingFailure.updated_at
        ).where(JudgingFailure.pair_id.in_(pair_ids))
    )
    return {
        pair_id: Failures(count, last_error, as_utc(failed_at) if failed_at else None)
        for pair_id, count, last_error, failed_at in rows
    }
