"""The pipeline's pure rules: sampling, backoff, the judge queue's lease and queued pairs, judges in force, the
sweeper's decision, what counts as an infrastructure failure, how often abandoned messages are looked for. Its SQL
primitives, raced, are in test_pipeline_sql_races.py."""

from __future__ import annotations

import base64
import errno
import json
import random
from datetime import UTC, datetime, timedelta

import pytest
import redis
from kombu.exceptions import OperationalError as BrokerError
from sqlalchemy.exc import InterfaceError, OperationalError

from common import task_names
from common.backoff import backoff_seconds
from store.models import ON_DEMAND_SOURCES, PairStatus
from store.settings import RETRY_CAP_SECONDS, RETRY_JITTER, Settings, largest_retry_delay
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


@pytest.mark.parametrize("vt, expected", [(7200, 60), (10, 2), (3, 1)])
def test_abandoned_messages_are_looked_for_often_enough(vt: int, expected: int) -> None:
    from common.celery_app import restore_interval

    assert restore_interval(vt) == expected
