"""The pipeline's pure rules (sampling, backoff, judges in force) and its SQL primitives (budget counter, notice
claim, idempotent insert), the latter raced from many threads on SQLite and PostgreSQL."""

from __future__ import annotations

import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError
from sqlalchemy import select

from store.db import Database
from store.judgments import find_cached, insert_judgment, set_pair_status, stored_judges
from store.models import BudgetCharge, Judgment, Pair, PairStatus
from store.settings import RETRY_CAP_SECONDS, Settings, largest_retry_delay
from store.usage import calls_on, charge_judgment, claim_budget_notice, claim_llm_call, release_budget_notice
from workers import budget
from workers.sampling import is_sampled_in, sample_point
from workers.tasks.judging import MAX_FAILED_RUNS, judges_in_force, retry_countdown, retry_delay, sweep_action

# Sampling ---------------------------------------------------------------------------------------------------


def test_sampling_is_deterministic_and_close_to_the_rate() -> None:
    messages = [("C1", f"1700000000.{i:06d}") for i in range(4000)]
    first = [is_sampled_in(c, ts, 0.25, source="capture") for c, ts in messages]
    again = [is_sampled_in(c, ts, 0.25, source="capture") for c, ts in messages]
    assert first == again
    assert 0.22 < sum(first) / len(first) < 0.28


def test_raising_the_rate_only_adds_messages() -> None:
    messages = [("C9", f"1700000000.{i:06d}") for i in range(1000)]
    low = {m for m in messages if is_sampled_in(*m, 0.1, source="capture")}
    high = {m for m in messages if is_sampled_in(*m, 0.5, source="capture")}
    assert low < high


def test_sampling_edges_and_on_demand() -> None:
    assert is_sampled_in("C1", "1.0", 1.0, source="capture")
    assert not is_sampled_in("C1", "1.0", 0.0, source="capture")
    for source in ("command", "shortcut", "cli"):
        assert is_sampled_in("C1", "1.0", 0.0, source=source)
    assert sample_point("C1", "1.0") != sample_point("C2", "1.0")
    assert 0.0 <= sample_point(None, None) < 1.0


# Backoff ----------------------------------------------------------------------------------------------------


def test_retry_delay_doubles_with_jitter_and_stays_under_the_visibility_timeout() -> None:
    settings = Settings(_env_file=None)
    rng = random.Random(7)
    delays = [retry_delay(n, settings.retry_base_seconds, rng=rng) for n in range(settings.llm_max_retries)]
    for n, delay in enumerate(delays):
        expected = min(RETRY_CAP_SECONDS, settings.retry_base_seconds * 2**n)
        assert expected <= delay <= expected * 1.25
    longest = largest_retry_delay(settings.retry_base_seconds, settings.llm_max_retries)
    assert max(delays) <= longest < settings.visibility_timeout_seconds
    # Jitter: two tasks failing together do not come back together.
    assert retry_delay(3, 2.0, rng=random.Random(1)) != retry_delay(3, 2.0, rng=random.Random(2))


def test_retry_after_is_the_least_countdown_up_to_the_longest_backoff() -> None:
    rng = random.Random(3)
    assert retry_countdown(0, 2.0, 6, 30.0, rng=rng) == 30.0  # the server asked for 30 s: not 2 s
    assert 2.0 <= retry_countdown(0, 2.0, 6, 0.5, rng=rng) <= 2.5  # a shorter Retry-After: the backoff holds
    assert retry_countdown(0, 2.0, 6, 3600.0, rng=rng) == largest_retry_delay(2.0, 6) == 75.0  # capped
    assert retry_countdown(0, 0.05, 6, 30.0, rng=rng) == largest_retry_delay(0.05, 6) == 2.0  # test timings
    assert 2.0 <= retry_countdown(0, 2.0, 6, None, rng=rng) <= 2.5


def test_visibility_timeout_must_outlast_every_retry_and_settle_delay() -> None:
    with pytest.raises(ValidationError, match=r"RELMON_VISIBILITY_TIMEOUT.*RELMON_RETRY_BASE_SECONDS"):
        Settings(_env_file=None, visibility_timeout_seconds=60)  # the defaults' last retry waits up to 75 s
    with pytest.raises(ValidationError, match="RELMON_SETTLE_SECONDS"):
        Settings(_env_file=None, visibility_timeout_seconds=10, retry_base_seconds=0.05, settle_seconds=10)
    assert Settings(_env_file=None, visibility_timeout_seconds=76).visibility_timeout_seconds == 76
    # The timings the process tests use (fast retries, a short timeout) are accepted.
    fast = Settings(_env_file=None, visibility_timeout_seconds=5, retry_base_seconds=0.05, settle_seconds=0)
    assert largest_retry_delay(fast.retry_base_seconds, fast.llm_max_retries) < fast.visibility_timeout_seconds
    # The environment variable is checked too, as a worker reads it.
    with pytest.raises(ValidationError, match="RELMON_VISIBILITY_TIMEOUT"):
        Settings(_env_file=None, RELMON_VISIBILITY_TIMEOUT="30", RELMON_RETRY_BASE_SECONDS="1")


# Judges in force --------------------------------------------------------------------------------------------


def test_judges_in_force_need_a_reference_for_correctness_and_grounded() -> None:
    assert judges_in_force(None, ["relevancy", "correctness", "grounded"], False) == ["relevancy"]
    assert judges_in_force(None, ["relevancy", "correctness"], True) == ["relevancy", "correctness"]
    assert judges_in_force(["grounded", "grounded"], ["relevancy"], True) == ["grounded"]


# The sweeper's decision ------------------------------------------------------------------------------------


def test_the_sweeper_gives_up_on_a_pair_only_after_its_task_failed_repeatedly() -> None:
    assert sweep_action(PairStatus.PENDING, 0) == "judge"  # lost, never failed: judge it again
    assert sweep_action(PairStatus.PENDING, MAX_FAILED_RUNS - 1) == "judge"
    assert sweep_action(PairStatus.PENDING, MAX_FAILED_RUNS) == "give_up"
    assert sweep_action(PairStatus.SETTLING, 99) == "settle"  # failures count judging runs only


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

    with ThreadPoolExecutor(max_workers=16) as pool:
        results = list(pool.map(claim, range(80)))
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
    with ThreadPoolExecutor(max_workers=12) as pool:
        assert all(pool.map(charge, same))  # all paid for, once
    with database.session() as session:
        assert calls_on(session, day) == 1
    others = [(pair_id, judge) for pair_id in pairs[1:] for judge in ("relevancy", "grounded")] * 3
    with ThreadPoolExecutor(max_workers=12) as pool:
        results = dict(zip(others, pool.map(charge, others), strict=False))
    assert sum(results.values()) == 2  # the two units left, each to one judgment (its repeats agree)
    with database.session() as session:
        assert calls_on(session, day) == 3
        charged = set(session.execute(select(BudgetCharge.pair_id, BudgetCharge.judge)).all())
        # Refused charges leave no row behind: a later day could still pay for them.
        assert charged == {(pairs[0], "relevancy")} | {key for key, paid in results.items() if paid}
        assert charge_judgment(session, pairs[0], "relevancy", day, 3)  # a retry of a paid judgment: still paid
        assert not charge_judgment(session, pairs[5], "correctness", day, 3)


def test_budget_notice_is_claimed_once_per_day(database: Database) -> None:
    day = date(2025, 3, 1)

    def claim(_: int) -> bool:
        with database.session() as session:
            return claim_budget_notice(session, day)

    with ThreadPoolExecutor(max_workers=8) as pool:
        assert sum(pool.map(claim, range(20))) == 1
    with database.session() as session:
        release_budget_notice(session, day)  # a failed post gives the claim back
        assert claim_budget_notice(session, day)
        assert not claim_budget_notice(session, day)


def test_budget_day_is_utc() -> None:
    moment = datetime(2025, 3, 1, 23, 30, tzinfo=UTC)
    assert budget.budget_day(moment) == date(2025, 3, 1)
    assert "RELMON_DAILY_BUDGET" in budget.notice_text(100, date(2025, 3, 1))


def test_insert_judgment_is_idempotent_under_a_race(database: Database) -> None:
    pair_id = _add_pair(database)
    values = {"pair_id": pair_id, "judge": "relevancy", "status": "ok", "score": 3.0, "max_score": 4.0}

    def insert(_: int) -> tuple[int, bool]:
        with database.session() as session:
            return insert_judgment(session, {**values, "cache_key": "k1"})

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(insert, range(16)))
    assert sum(created for _, created in results) == 1
    assert len({judgment_id for judgment_id, _ in results}) == 1
    with database.session() as session:
        assert session.query(Judgment).count() == 1
        assert stored_judges(session, pair_id) == {"relevancy": results[0][0]}
        assert find_cached(session, "k1")["score"] == 3.0
        assert find_cached(session, "other") is None


def test_error_judgments_are_not_cached_and_status_moves_only_from_pending(database: Database) -> None:
    pair_id = _add_pair(database)
    with database.session() as session:
        insert_judgment(session, {"pair_id": pair_id, "judge": "relevancy", "status": "error", "cache_key": "k2"})
        assert find_cached(session, "k2") is None
        assert set_pair_status(session, pair_id, PairStatus.JUDGED, only_from=[PairStatus.PENDING])
        assert not set_pair_status(session, pair_id, PairStatus.SKIPPED_BUDGET, only_from=[PairStatus.PENDING])


@pytest.mark.parametrize("vt, expected", [(7200, 60), (10, 2), (3, 1)])
def test_abandoned_messages_are_looked_for_often_enough(vt: int, expected: int) -> None:
    from workers.celery_app import restore_interval

    assert restore_interval(vt) == expected


# Migrations from several processes at once -------------------------------------------------------------------

_MIGRATE_AFTER_GO = """
import os, sys, time
from store.db import Database
go = sys.argv[2]
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
                [sys.executable, "-c", _MIGRATE_AFTER_GO, url, str(go)],
                cwd=Path(__file__).resolve().parents[1],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
            )
            for _ in range(4)
        ]
        time.sleep(1.5)  # let every process finish importing
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
