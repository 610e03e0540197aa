"""The LLM outage in this process (judge_pair and the outage tick `.apply()`-ed on a worker's runtime, a real
Redis, SQLite and PostgreSQL, the fake OpenAI server): a task whose retries ran out declares the endpoint down and
its answer waits; the next answer makes no call; the tick probes with the oldest; a probe that gets an answer ends
the outage (once) and the tick releases the rest at the pace. And `relmon rejudge --errors`: a garbled reply's
error verdict is judged again. The same with real worker processes: tests/system/test_llm_outage_processes.py."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest
from sqlalchemy import select

from common import task_names
from common.celery_app import QUEUE_JUDGE, QUEUE_SLACK
from relmon.cli import main
from store.db import Database
from store.models import Judgment, JudgmentStatus, PairStatus
from tests import pipeline_helpers
from tests.builders import installed_runtime
from tests.fakes.openai_server import FakeOpenAI
from tests.pipeline_helpers import add_pairs, count_judgments, statuses
from workers.judging import outage
from workers.judging.outage_tick import tick

pytestmark = pytest.mark.slow

fake_openai = pipeline_helpers.fake_openai


def _messages(client, queue: str) -> list[tuple[str, list, dict]]:
    """The task messages waiting on `queue`, in the order they were sent (kombu pushes on the left): (task, args,
    kwargs)."""
    found = []
    for raw in reversed(client.lrange(queue, 0, -1)):
        envelope = json.loads(raw)
        from workers.judging.queued import _body

        args, kwargs = _body(envelope)[:2]
        found.append((envelope["headers"]["task"], args, kwargs))
    return found


def test_an_outage_holds_answers_then_probes_and_releases_them_oldest_first(
    settings_for, database: Database, fake_openai: FakeOpenAI
) -> None:
    from workers.tasks.judging import judge_pair

    settings = settings_for(
        openai_base_url=fake_openai.base_url,
        openai_api_key="sk-test-key",
        llm_max_retries=1,
        retry_base_seconds=0.01,
        llm_probe_seconds=1,
        llm_resume_per_minute=60,
        alert_channel="C_ALERTS",
    )
    with installed_runtime(settings) as runtime:
        client = runtime.redis
        fake_openai.set_behavior(always_status=503, retry_after_seconds=0)
        first, second, third = add_pairs(database, 3)
        assert judge_pair.apply(args=[first]).get() == "waiting"  # the retry ran out: down
        calls = len(fake_openai.requests)
        assert calls == 2
        assert judge_pair.apply(args=[third]).get() == "waiting"
        assert judge_pair.apply(args=[second]).get() == "waiting"
        assert len(fake_openai.requests) == calls  # known down: no call
        assert count_judgments(database) == 0
        assert statuses(database, [first, second, third]) == Counter({PairStatus.PENDING: 3})
        notices = [m for m in _messages(client, QUEUE_SLACK) if m[0] == task_names.POST_OUTAGE_NOTICE]
        assert [(m[1][0], m[1][2]) for m in notices] == [("paused", "503")]  # one notice

        down = outage.current(client)
        assert tick(runtime, down.next_probe_at - 0.5) == "down"
        client.delete(QUEUE_JUDGE)
        assert tick(runtime, down.next_probe_at) == "probe"
        assert _messages(client, QUEUE_JUDGE) == [(task_names.JUDGE_PAIR, [first], {"probe": True})]
        assert tick(runtime, down.next_probe_at + 1) == "down"  # no second probe while one is in flight

        assert judge_pair.apply(args=[first], kwargs={"probe": True}).get() == "waiting"  # still down
        assert outage.current(client).probes == 1

        fake_openai.set_behavior()  # back
        assert judge_pair.apply(args=[first], kwargs={"probe": True}).get() == PairStatus.JUDGED
        assert outage.current(client) is None
        notices = [m for m in _messages(client, QUEUE_SLACK) if m[0] == task_names.POST_OUTAGE_NOTICE]
        assert [(m[1][0], m[2]["waited"]) for m in notices] == [("paused", 0), ("resumed", 3)]

        client.delete(QUEUE_JUDGE)
        now = 2_000_000_000.0
        assert tick(runtime, now) == "released 1"
        assert tick(runtime, now + 0.5) == "released 0"  # paced: one a second
        assert tick(runtime, now + 1.0) == "released 1"
        assert tick(runtime, now + 2.0) == "idle"
        released = [m[1][0] for m in _messages(client, QUEUE_JUDGE) if m[0] == task_names.JUDGE_PAIR]
        assert released == [second, third]  # oldest first
        for pair_id in released:
            assert judge_pair.apply(args=[pair_id], kwargs={"resumed": True}).get() == PairStatus.JUDGED
    with database.session() as session:
        assert Counter(session.scalars(select(Judgment.status))) == Counter({JudgmentStatus.OK: 3})


def test_rejudge_errors_reopens_error_verdicts_for_the_workers(
    settings_for, database: Database, fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    from workers.tasks.judging import judge_pair

    settings = settings_for(openai_base_url=fake_openai.base_url, openai_api_key="sk-test-key", llm_max_retries=0)
    for name, value in {"REDIS_URL": settings.redis_url, "DATABASE_URL": settings.database_url}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    with installed_runtime(settings) as runtime:
        fake_openai.set_behavior(fault_first=1, faults=["garbage"])  # an answer relmon cannot read
        (pair_id,) = add_pairs(database, 1)
        assert judge_pair.apply(args=[pair_id]).get() == PairStatus.JUDGED
        with database.session() as session:
            assert session.scalars(select(Judgment.status)).all() == [JudgmentStatus.ERROR]

        assert main(["rejudge", "--errors", "--since", "yesterday"]) == 2
        assert "--since 'yesterday'" in capsys.readouterr().err
        assert main(["rejudge"]) == 2
        assert main(["rejudge", "--errors", "--since", "7d"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("1 error verdict since ") and "(1 answer) will be judged again, oldest first" in out
        assert statuses(database, [pair_id]) == Counter({PairStatus.PENDING: 1})
        assert count_judgments(database) == 0
        assert outage.waiting_ids(runtime.redis) == {pair_id}
        assert main(["rejudge", "--errors"]) == 0
        assert capsys.readouterr().out == "No error verdicts to judge again.\n"

        assert tick(runtime, 2_000_000_000.0) == "released 1"
        assert judge_pair.apply(args=[pair_id], kwargs={"resumed": True}).get() == PairStatus.JUDGED
    with database.session() as session:
        assert session.scalars(select(Judgment.status)).all() == [JudgmentStatus.OK]


def test_each_outage_notice_is_posted_once_in_every_alert_channel(settings_for, fake, tmp_path) -> None:
    """The notice task run twice (a redelivery), and a second alert channel named by a channel's rule: one post
    of each notice per channel, marked so that a post made without hearing back is found, not made again."""
    from tests.alert_helpers import ALERTS
    from workers.outage_notices import post_notice

    fake.add_channel("C_OTHER_ALERTS", "other-alerts", members=["U_RELMON"])
    rules = tmp_path / "rules.yml"
    rules.write_text("channels:\n  C_BILLING:\n    alert_channel: C_OTHER_ALERTS\n", encoding="utf-8")
    since = datetime(2026, 12, 6, 14, 2, tzinfo=UTC).timestamp()
    settings = settings_for(slack_api_url=fake.api_url, alert_channel=ALERTS, channel_rules_file=rules)
    with installed_runtime(settings) as runtime:
        assert post_notice(runtime, "paused", since, "503") == 2
        assert post_notice(runtime, "paused", since, "503") == 0
        assert post_notice(runtime, "resumed", since, "503", waited=12, at=since + 29 * 60) == 2
        assert post_notice(runtime, "resumed", since, "503", waited=12, at=since + 29 * 60) == 0
    for channel in (ALERTS, "C_OTHER_ALERTS"):
        texts = [post["text"] for post in fake.posted(channel)]
        assert texts == [
            ":double_vertical_bar: Judging paused since 14:02 UTC: the LLM endpoint answers 503. "
            "Answers wait and are judged when it is back.",
            ":arrow_forward: Judging resumed at 14:31 UTC: the LLM endpoint answers again after 29 min. "
            "12 answers waited; they are judged now, oldest first (up to 60 a minute).",
        ]


def test_a_probe_with_nothing_to_call_about_hands_the_probe_to_the_next_answer(
    settings_for, database: Database, fake_openai: FakeOpenAI
) -> None:
    """The oldest waiting pair was deleted meanwhile (forgotten, purged): its probe calls nothing, leaves the
    waiting set, and the next tick probes with the next answer at once."""
    from workers.tasks.judging import judge_pair

    settings = settings_for(openai_base_url=fake_openai.base_url, openai_api_key="sk-test-key", llm_probe_seconds=60)
    with installed_runtime(settings) as runtime:
        client = runtime.redis
        (pair_id,) = add_pairs(database, 1)
        now = 2_000_000_000.0
        outage.declare(client, outage.Outage(since=now - 600, failure="503", next_probe_at=now))
        outage.hold(client, 999_999, 1.0)  # no such pair, and the oldest
        outage.hold(client, pair_id, 2.0)
        assert tick(runtime, now) == "probe"
        assert judge_pair.apply(args=[999_999], kwargs={"probe": True}).get() == "missing"
        assert outage.waiting_ids(client) == {pair_id}
        client.delete(QUEUE_JUDGE)
        assert tick(runtime, now + 1) == "probe"  # at once, not after the probe wait
        assert _messages(client, QUEUE_JUDGE) == [(task_names.JUDGE_PAIR, [pair_id], {"probe": True})]
        assert judge_pair.apply(args=[pair_id], kwargs={"probe": True}).get() == PairStatus.JUDGED
        assert outage.current(client) is None and outage.waiting_count(client) == 0


def test_the_sweeps_leave_the_answers_waiting_for_the_llm_to_the_outage_tick(settings_for, database: Database) -> None:
    """A waiting pair has no task message on purpose: neither the orphan check nor the stale sweep re-enqueues
    it (each would only meet the endpoint down again, or break the release's pace); a lost pair beside it is."""
    from datetime import timedelta

    from workers.sweeps import check_orphans, sweep_stale

    with installed_runtime(settings_for()) as runtime:
        client = runtime.redis
        waiting, lost = add_pairs(database, 2)
        outage.hold(client, waiting, 1.0)
        later = datetime.now(UTC) + timedelta(hours=1)
        assert check_orphans(runtime, later) == (0, 1)
        assert [m[1] for m in _messages(client, QUEUE_JUDGE)] == [[lost]]
        client.delete(QUEUE_JUDGE)
        assert sweep_stale(runtime, later + timedelta(hours=1)).stale == 1
        assert [m[1] for m in _messages(client, QUEUE_JUDGE)] == [[lost]]
        assert outage.waiting_ids(client) == {waiting}


def test_an_endpoint_that_refuses_connections_is_down_and_the_notice_says_so(settings_for, database: Database) -> None:
    import socket

    from workers.judging.outage import paused_text
    from workers.tasks.judging import judge_pair

    with socket.socket() as sock:  # a port nothing listens on: connection refused
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    settings = settings_for(openai_base_url=f"http://127.0.0.1:{port}/v1", llm_max_retries=0)
    with installed_runtime(settings) as runtime:
        (pair_id,) = add_pairs(database, 1)
        assert judge_pair.apply(args=[pair_id]).get() == "waiting"
        down = outage.current(runtime.redis)
    assert down.failure == "connection"
    assert "the LLM endpoint cannot be reached. Answers wait" in paused_text(down)
    assert count_judgments(database) == 0


def test_an_answer_held_while_another_worker_declares_the_outage_counts_as_waiting(settings_for) -> None:
    """Two workers' retries run out together: one holds its answer just before the other records the outage.
    The 'resumed' notice counts both (a reset at the declaration had lost the first: '7 answers waited' of 8)."""
    with installed_runtime(settings_for()) as runtime:
        client = runtime.redis
        now = 2_000_000_000.0
        outage.hold(client, 1, 1.0)  # worker B, whose failure is as old as A's
        assert outage.declare(client, outage.Outage(since=now, failure="503", next_probe_at=now))  # worker A
        outage.hold(client, 2, 2.0)
        assert not outage.declare(client, outage.Outage(since=now, failure="503", next_probe_at=now))
        ended = outage.resume(client)
        assert ended is not None and ended[1] == 2
        assert outage.resume(client) is None  # ended once
