"""The pipeline's pure rules (sampling, backoff, judges in force) and its SQL primitives (budget counter, notice
claim, idempotent insert), the latter raced from many threads on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import errno
import json
import random
import subprocess
import sys
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
import redis
from kombu.exceptions import OperationalError as BrokerError
from sqlalchemy import select
from sqlalchemy.exc import InterfaceError, OperationalError

from common import task_names
from common.backoff import backoff_seconds
from store.db import Database
from store.judgments import find_cached_many, insert_judgment, set_pair_status, stored_judges
from store.models import ON_DEMAND_SOURCES, BudgetCharge, Judgment, Pair, PairStatus
from store.settings import RETRY_CAP_SECONDS, RETRY_JITTER, Settings, largest_retry_delay
from store.usage import calls_on, charge_judgment, claim_budget_notice, claim_llm_call, release_budget_notice
from tests.bursts import burst
from tests.processes import wait_for
from workers import budget
from workers.judging.queued import pair_of, queued_pairs
from workers.judging.rules import (
    MAX_FAILED_RUNS,
    is_infrastructure,
    judges_in_force,
    retry_countdown,
    sweep_action,
)
from workers.lease import renew
from workers.sampling import is_sampled_in, sample_point


def find_cached(session, cache_key: str):
    """The one cache hit for a key, as the judging run reads it (`find_cached_many`)."""
    return find_cached_many(session, [cache_key]).get(cache_key)


# Sampling ---------------------------------------------------------------------------------------------------


SAMPLED_MESSAGES = [("C1", f"1700000000.{i:06d}") for i in range(4000)]


def test_sampling_is_deterministic() -> None:
    first = [is_sampled_in(c, ts, 0.25, source="capture") for c, ts in SAMPLED_MESSAGES]
    again = [is_sampled_in(c, ts, 0.25, source="capture") for c, ts in SAMPLED_MESSAGES]
    assert first == again


def test_sampling_is_close_to_the_rate() -> None:
    first = [is_sampled_in(c, ts, 0.25, source="capture") for c, ts in SAMPLED_MESSAGES]
    assert 0.22 < sum(first) / len(first) < 0.28


def test_raising_the_rate_only_adds_messages() -> None:
    messages = [("C9", f"1700000000.{i:06d}") for i in range(1000)]
    low = {m for m in messages if is_sampled_in(*m, 0.1, source="capture")}
    high = {m for m in messages if is_sampled_in(*m, 0.5, source="capture")}
    assert low < high


def test_on_demand_pairs_are_always_sampled_in() -> None:
    for source in ON_DEMAND_SOURCES:  # /judge and the shortcut ("cli" was never a pair's source)
        assert is_sampled_in("C1", "1.0", 0.0, source=source)


def test_sampling_edges() -> None:
    assert is_sampled_in("C1", "1.0", 1.0, source="capture")
    assert not is_sampled_in("C1", "1.0", 0.0, source="capture")
    assert sample_point("C1", "1.0") != sample_point("C2", "1.0")
    assert 0.0 <= sample_point(None, None) < 1.0


# Backoff ----------------------------------------------------------------------------------------------------


def test_retry_delay_doubles_with_jitter() -> None:
    settings = Settings(_env_file=None)
    rng = random.Random(7)
    delays = [
        retry_countdown(n, settings.retry_base_seconds, settings.llm_max_retries, rng=rng)
        for n in range(settings.llm_max_retries)
    ]
    for n, delay in enumerate(delays):
        expected = min(RETRY_CAP_SECONDS, settings.retry_base_seconds * 2**n)
        assert expected <= delay <= expected * 1.25
    longest = largest_retry_delay(settings.retry_base_seconds, settings.llm_max_retries)
    assert max(delays) <= longest
    # Jitter: two tasks failing together do not come back together.
    assert retry_countdown(3, 2.0, 6, rng=random.Random(1)) != retry_countdown(3, 2.0, 6, rng=random.Random(2))


def test_retry_after_is_the_least_countdown_up_to_the_longest_backoff() -> None:
    rng = random.Random(3)
    assert retry_countdown(0, 2.0, 6, 30.0, rng=rng) == 30.0  # the server asked for 30 s: not 2 s
    assert 2.0 <= retry_countdown(0, 2.0, 6, 0.5, rng=rng) <= 2.5  # a shorter Retry-After: the backoff holds
    assert retry_countdown(0, 2.0, 6, 3600.0, rng=rng) == largest_retry_delay(2.0, 6) == 75.0  # capped
    assert retry_countdown(0, 0.05, 6, 30.0, rng=rng) == largest_retry_delay(0.05, 6) == 2.0  # test timings
    assert 2.0 <= retry_countdown(0, 2.0, 6, None, rng=rng) <= 2.5


class Highest(random.Random):
    def random(self) -> float:
        return 1.0  # the full jitter (random() never quite reaches it: an upper bound)


def test_the_largest_retry_delay_is_the_longest_wait_the_backoff_gives_the_last_llm_retry() -> None:
    for base, retries in ((2.0, 6), (0.05, 6), (1.0, 1), (10.0, 10)):
        longest = backoff_seconds(retries - 1, base=base, cap=RETRY_CAP_SECONDS, jitter=RETRY_JITTER, rng=Highest())
        assert (
            longest == largest_retry_delay(base, retries) == retry_countdown(retries - 1, base, retries, rng=Highest())
        )


def _held(client: redis.Redis, tag: str, envelope: dict, delivered_at: float) -> None:
    """A message as kombu records one a worker took: in the unacked hash, scored by its delivery time."""
    client.zadd("unacked_index", {tag: delivered_at})
    client.hset("unacked", tag, json.dumps([envelope, "relmon.judge", "relmon.judge"]))


def _envelope(task: str, args: list) -> dict:
    body = base64.b64encode(json.dumps([args, {}, {}]).encode()).decode()
    return {"body": body, "headers": {"task": task}, "properties": {"body_encoding": "base64"}}


def test_renewing_a_lease_moves_only_messages_still_held(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    _held(client, "held", _envelope(task_names.JUDGE_PAIR, [1]), delivered_at=100.0)
    assert renew(client, "unacked_index", ["held", "acked-meanwhile"], now=5000.0) == 2
    assert client.zscore("unacked_index", "held") == 5000.0
    assert client.zscore("unacked_index", "acked-meanwhile") is None  # XX: an acknowledged message stays gone
    assert renew(client, "unacked_index", [], now=6000.0) == 0


def test_queued_pairs_are_read_from_waiting_as_well_as_held_messages(redis_url: str) -> None:
    client = redis.Redis.from_url(redis_url)
    client.flushall()
    client.rpush("relmon.judge", json.dumps(_envelope(task_names.SETTLE_PAIR, [7, 2])))
    client.rpush("relmon.judge", json.dumps(_envelope(task_names.REQUEUE_STALE, [])))
    client.rpush("relmon.judge", "not json")
    _held(client, "t1", _envelope(task_names.JUDGE_PAIR, [9]), delivered_at=1.0)
    _held(client, "t2", _envelope(task_names.CONSIDER_ALERT, [11]), delivered_at=1.0)
    assert queued_pairs(client, "relmon.judge") == {7, 9}


def test_a_message_whose_body_cannot_be_read_names_no_pair() -> None:
    assert pair_of({"headers": {"task": task_names.JUDGE_PAIR}, "body": "garbage"}) is None


# Judges in force --------------------------------------------------------------------------------------------


def test_judges_that_compare_with_a_reference_are_in_force_only_with_one() -> None:
    assert judges_in_force(None, ["relevancy", "correctness", "grounded"], False) == ["relevancy"]
    assert judges_in_force(None, ["relevancy", "correctness"], True) == ["relevancy", "correctness"]


def test_the_judges_a_pair_names_replace_the_channels_once_each() -> None:
    assert judges_in_force(["grounded", "grounded"], ["relevancy"], True) == ["grounded"]


# The sweeper's decision ------------------------------------------------------------------------------------


def test_the_sweeper_gives_up_on_a_pair_only_after_its_task_failed_repeatedly() -> None:
    assert sweep_action(PairStatus.PENDING, 0) == "judge"  # lost, never failed: judge it again
    assert sweep_action(PairStatus.PENDING, MAX_FAILED_RUNS - 1) == "judge"
    assert sweep_action(PairStatus.PENDING, MAX_FAILED_RUNS) == "give_up"
    assert sweep_action(PairStatus.SETTLING, 99) == "settle"  # failures count judging runs only


def test_the_sweeper_gives_up_only_once_the_last_failure_is_a_sweep_interval_old() -> None:
    quiet_since = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    old, recent = quiet_since - timedelta(seconds=1), quiet_since + timedelta(seconds=1)
    assert sweep_action(PairStatus.PENDING, MAX_FAILED_RUNS, old, quiet_since=quiet_since) == "give_up"
    # A twin run (a redelivery, a duplicate) may still be going: its verdict must not lose to error rows.
    assert sweep_action(PairStatus.PENDING, MAX_FAILED_RUNS, recent, quiet_since=quiet_since) == "judge"
    assert sweep_action(PairStatus.PENDING, MAX_FAILED_RUNS + 5, quiet_since, quiet_since=quiet_since) == "judge"
    assert sweep_action(PairStatus.PENDING, MAX_FAILED_RUNS - 1, old, quiet_since=quiet_since) == "judge"


def _raised(error: BaseException, cause: BaseException | None = None) -> BaseException:
    try:
        raise error from cause
    except BaseException as raised:
        return raised


def test_only_failures_of_relmon_not_of_its_infrastructure_count_towards_giving_up() -> None:
    from urllib.error import URLError

    outages = [
        OperationalError("SELECT 1", {}, Exception("server closed the connection unexpectedly")),
        InterfaceError("SELECT 1", {}, Exception("connection already closed")),
        BrokerError("Error 111 connecting to localhost:6379. Connection refused."),
        redis.exceptions.ConnectionError("Connection refused"),
        redis.exceptions.TimeoutError("Timeout reading from socket"),
        ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"),
        TimeoutError("timed out"),
        OSError(errno.ENETUNREACH, "Network is unreachable"),
        URLError(ConnectionResetError(errno.ECONNRESET, "reset")),
        _raised(RuntimeError("could not hand on"), BrokerError("Redis gone")),  # raised from an outage
    ]
    for error in outages:
        assert is_infrastructure(error), error
    bugs = [
        ValueError("unknown judge: no_such_judge"),
        KeyError("score"),
        FileNotFoundError(errno.ENOENT, "rules.yaml"),
        redis.exceptions.ResponseError("WRONGTYPE"),
        None,
    ]
    for error in bugs:
        assert not is_infrastructure(error), error
    # A bug raised while an outage was being handled (implicit context, not `from`) is still a bug.
    try:
        try:
            raise OperationalError("SELECT 1", {}, Exception("gone"))
        except OperationalError:
            raise KeyError("score")  # noqa: B904
    except KeyError as bug:
        assert not is_infrastructure(bug)


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
    assert budget.budget_day(moment) == date(2025, 3, 1)
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


@pytest.mark.parametrize("vt, expected", [(7200, 60), (10, 2), (3, 1)])
def test_abandoned_messages_are_looked_for_often_enough(vt: int, expected: int) -> None:
    from common.celery_app import restore_interval

    assert restore_interval(vt) == expected


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
