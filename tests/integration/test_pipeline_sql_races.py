"""The pipeline's SQL primitives (budget counter, judgment charge, notice claim, idempotent insert, status move),
raced from many threads on SQLite and PostgreSQL, and migrations run by several processes at once on a fresh
SQLite file."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path

from sqlalchemy import select

from store.db import Database
from store.judgments import find_cached_many, insert_judgment, set_pair_status, stored_judges
from store.models import BudgetCharge, Judgment, Pair, PairStatus
from store.usage import (
    budget_day,
    calls_on,
    charge_judgment,
    claim_budget_notice,
    claim_llm_call,
    release_budget_notice,
)
from tests.bursts import burst
from tests.processes import wait_for
from workers import budget


def find_cached(session, cache_key: str):
    """The one cache hit for a key, as the judging run reads it (`find_cached_many`)."""
    return find_cached_many(session, [cache_key]).get(cache_key)


# SQL primitives, raced ---------------------------------------------------------------------------------------


def _add_pair(database: Database, **fields) -> int:
    with database.session() as session:
        pair = Pair(
            source="capture",
            channel_id="C1",
            answer_ts=fields.pop("answer_ts", "1.000001"),
            question_text="q",
            answer_text="a",
            status=PairStatus.PENDING,
            **fields,
        )
        session.add(pair)
        session.flush()
        return pair.id


def test_budget_counter_never_overspends_under_a_race(database: Database) -> None:
    day = date(2025, 3, 1)

    def claim(_: int) -> bool:
        with database.session() as session:
            return claim_llm_call(session, day, 25)

    results = burst(claim, range(80), workers=16)
    assert sum(results) == 25
    with database.session() as session:
        assert calls_on(session, day) == 25
        assert not claim_llm_call(session, day, 25)
        assert claim_llm_call(session, date(2025, 3, 2), 25)  # a new day, a new budget


def test_a_judgment_is_charged_once_however_many_attempts_race(database: Database) -> None:
    """The budget counts judgments: every attempt at (pair, judge) (retries, redeliveries, twins racing from
    several workers) pays one unit between them; other judgments still stop at the budget."""
    day = date(2025, 3, 1)
    pairs = [_add_pair(database, answer_ts=f"1.{n:06d}") for n in range(6)]

    def charge(attempt: tuple[int, str]) -> bool:
        with database.session() as session:
            return charge_judgment(session, attempt[0], attempt[1], day, 3)

    same = [(pairs[0], "relevancy")] * 24
    assert all(burst(charge, same, workers=12))  # all paid for, once
    with database.session() as session:
        assert calls_on(session, day) == 1
    others = [(pair_id, judge) for pair_id in pairs[1:] for judge in ("relevancy", "grounded")] * 3
    results = dict(zip(others, burst(charge, others, workers=12), strict=False))
    assert sum(results.values()) == 2  # the two units left, each to one judgment (its repeats agree)
    with database.session() as session:
        assert calls_on(session, day) == 3
        charged = set(session.execute(select(BudgetCharge.pair_id, BudgetCharge.judge)).all())
        # Refused charges leave no row behind: a later day could still pay for them.
        assert charged == {(pairs[0], "relevancy")} | {key for key, paid in results.items() if paid}
        assert charge_judgment(session, pairs[0], "relevancy", day, 3)  # a retry of a paid judgment: still paid
        assert not charge_judgment(session, pairs[5], "correctness", day, 3)


def raced_charges(database: Database) -> tuple[datetime, list[int], set[tuple[int, str]]]:
    """`workers.budget.charge`, as judging runs it, raced: six attempts at each of eight judgments against a budget
    of five. On PostgreSQL one autocommit statement (the day's counter locked first, a charge row counted only by
    the statement that inserted it); on SQLite one transaction.
    Returns (the moment charged at, the pairs, the attempts paid for)."""
    now = datetime(2025, 3, 1, 12, tzinfo=UTC)
    pairs = [_add_pair(database, answer_ts=f"2.{n:06d}") for n in range(8)]
    attempts = [(pair_id, "relevancy") for pair_id in pairs] * 6
    random.Random(7).shuffle(attempts)
    results = burst(lambda attempt: budget.charge(database, attempt[0], attempt[1], 5, now=now), attempts, workers=12)
    return now, pairs, {attempt for attempt, ok in zip(attempts, results, strict=True) if ok}


def test_the_workers_charge_pays_each_judgment_once(database: Database) -> None:
    """Repeats of one judgment, raced or retried later, pay once between them."""
    now, _, paid = raced_charges(database)
    with database.session() as session:
        assert set(session.execute(select(BudgetCharge.pair_id, BudgetCharge.judge)).all()) == paid
    for attempt in paid:  # a retry of a paid judgment is still paid, and costs nothing more
        assert budget.charge(database, *attempt, 5, now=now)
    with database.session() as session:
        # One unit a judgment paid; how many were paid is the budget's test, below.
        assert calls_on(session, now.date()) == len(paid)


def test_the_workers_charge_stops_exactly_at_the_budget(database: Database) -> None:
    """However many attempts race, the judgments paid for fill the budget, no more; the others are refused."""
    now, pairs, paid = raced_charges(database)
    assert len(paid) == 5  # five judgments paid for, each once however many of its attempts raced
    with database.session() as session:
        assert calls_on(session, now.date()) == 5
    assert not budget.charge(database, pairs[0], "grounded", 5, now=now)  # another judgment: the budget is spent
    with database.session() as session:
        assert calls_on(session, now.date()) == 5


def test_budget_notice_is_claimed_once_per_day(database: Database) -> None:
    day = date(2025, 3, 1)

    def claim(_: int) -> bool:
        with database.session() as session:
            return claim_budget_notice(session, day)

    assert sum(burst(claim, range(20), workers=8)) == 1
    with database.session() as session:
        release_budget_notice(session, day)  # a failed post gives the claim back
        assert claim_budget_notice(session, day)
        assert not claim_budget_notice(session, day)


def test_budget_day_is_utc() -> None:
    moment = datetime(2025, 3, 1, 23, 30, tzinfo=UTC)
    assert budget_day(moment) == date(2025, 3, 1)
    assert "RELMON_DAILY_BUDGET" in budget.notice_text(100, date(2025, 3, 1))


def test_insert_judgment_is_idempotent_under_a_race(database: Database) -> None:
    pair_id = _add_pair(database)
    values = {"pair_id": pair_id, "judge": "relevancy", "status": "ok", "score": 3.0, "max_score": 4.0}

    def insert(_: int) -> tuple[int, bool]:
        with database.session() as session:
            return insert_judgment(session, {**values, "cache_key": "k1"})

    results = burst(insert, range(16), workers=8)
    assert sum(created for _, created in results) == 1
    assert len({judgment_id for judgment_id, _ in results}) == 1
    with database.session() as session:
        assert session.query(Judgment).count() == 1
        assert stored_judges(session, pair_id) == {"relevancy": results[0][0]}
        assert find_cached(session, "k1")["score"] == 3.0
        assert find_cached(session, "other") is None


def test_error_judgments_are_not_cached(database: Database) -> None:
    pair_id = _add_pair(database)
    with database.session() as session:
        insert_judgment(session, {"pair_id": pair_id, "judge": "relevancy", "status": "error", "cache_key": "k2"})
        assert find_cached(session, "k2") is None


def test_status_moves_only_from_pending(database: Database) -> None:
    pair_id = _add_pair(database)
    with database.session() as session:
        assert set_pair_status(session, pair_id, PairStatus.JUDGED, only_from=[PairStatus.PENDING])
        assert not set_pair_status(session, pair_id, PairStatus.SKIPPED_BUDGET, only_from=[PairStatus.PENDING])


# Migrations from several processes at once -------------------------------------------------------------------

_MIGRATE_AFTER_GO = """
import os, sys, time
from store.db import Database
go = sys.argv[2]
open(sys.argv[3], "w").close()  # imports done
while not os.path.exists(go):  # imports done: wait for the others, then all migrate at once
    time.sleep(0.001)
Database(sys.argv[1]).migrate()
"""


def test_several_processes_migrate_one_fresh_sqlite_file_at_once(tmp_path: Path) -> None:
    """Bot and workers start together and each migrates: on a fresh SQLite file, without a lock, two of them
    both saw no alembic_version and both created the tables ("table daily_usage already exists")."""
    from sqlalchemy import inspect

    from store.db import pending_migrations

    for round_ in range(8):
        url = f"sqlite:///{tmp_path / f'fresh-{round_}.sqlite3'}"
        go = tmp_path / f"go-{round_}"
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", _MIGRATE_AFTER_GO, url, str(go), str(tmp_path / f"ready-{round_}-{n}")],
                cwd=Path(__file__).resolve().parents[2],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for n in range(4)
        ]
        wait_for(  # every process has finished importing (or failed: its output says why below)
            lambda round_=round_, processes=processes: (
                len(list(tmp_path.glob(f"ready-{round_}-*"))) == 4
                or any(process.poll() is not None for process in processes)
            ),
            timeout=60,
            what="every process's imports",
        )
        go.touch()
        outputs = [process.communicate(timeout=60)[0].decode(errors="replace") for process in processes]
        failed = [out for process, out in zip(processes, outputs, strict=True) if process.returncode != 0]
        assert not failed, f"round {round_}: {len(failed)} of 4 migrations failed:\n{failed[0][-1500:]}"
        database = Database(url)
        try:
            assert pending_migrations(database.engine) == []
            assert {"pairs", "judgments", "daily_usage"} <= set(inspect(database.engine).get_table_names())
        finally:
            database.dispose()
